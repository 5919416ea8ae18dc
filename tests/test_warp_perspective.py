import numpy as np
import pytest

import gpuaug
import ref_warp as R
from gpuaug import geometry as G
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

INTERPS = ("nearest", "bilinear")
BORDERS = ("constant", "replicate", "reflect")
SIZES = [(5, 7), (37, 53), (1, 9), (6, 1), (16, 16)]


def _fills(rng, n, dtype, channels=None):
    hi = 300.0 if np.dtype(dtype) == np.uint8 else 1.0
    return rng.uniform(0, hi, n if channels is None else (n, channels))


def _dyadic(rng, n):
    """Destination -> source homographies exact in float32 with no nearest ties: dyadic
    affine rows (see ref_warp.dyadic_inverse_affine) over a bottom row (0, 0, 2)."""
    m = np.zeros((n, 3, 3))
    m[:, :2] = R.dyadic_inverse_affine(rng, n) * 2
    m[:, 2, 2] = 2.0
    return m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
@pytest.mark.parametrize("interpolation", INTERPS)
def test_warp_perspective_cpu(dtype, layout, channels, interpolation):
    rng = np.random.default_rng(11)
    n = 5
    x = random_images(rng, n, 37, 53, channels, dtype)
    m = R.random_homography(rng, n, 37, 53)
    for border in BORDERS:
        fill = _fills(rng, n, dtype)
        fr = R.fill_in_dtype(fill, dtype)
        check_op(gpuaug.warp_perspective,
                 lambda s, i: R.warp_perspective(s, m[i], (29, 61), interpolation, border, fr[i]), x,
                 {"matrix": m, "size": (29, 61), "interpolation": interpolation, "border": border,
                  "fill": fill}, layout=layout)
    check_op(gpuaug.warp_perspective, lambda s, i: R.warp_perspective(s, m[1], None, interpolation), x,
             {"matrix": m[1], "interpolation": interpolation}, layout=layout)
    fill = _fills(rng, n, dtype, channels)
    fr = R.fill_in_dtype(fill, dtype)
    check_op(gpuaug.warp_perspective,
             lambda s, i: R.warp_perspective(s, m[i], (41, 47), interpolation, "constant", fr[i]), x,
             {"matrix": m, "size": (41, 47), "interpolation": interpolation, "fill": fill}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interpolation", INTERPS)
def test_warp_perspective_varshape_cpu(dtype, interpolation):
    rng = np.random.default_rng(12)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    m = np.stack([R.random_homography(rng, 1, h, w)[0] for h, w in SIZES])
    for border in BORDERS:
        check_op(gpuaug.warp_perspective,
                 lambda s, i: R.warp_perspective(s, m[i], None, interpolation, border, 3), xs,
                 {"matrix": m, "interpolation": interpolation, "border": border, "fill": 3}, varshape=True)
    check_op(gpuaug.warp_perspective, lambda s, i: R.warp_perspective(s, m[i], (9, 4), interpolation), xs,
             {"matrix": m, "interpolation": interpolation, "size": (9, 4)}, varshape=True)


def test_warp_perspective_inverse_map_and_affine_agree():
    rng = np.random.default_rng(13)
    x = random_images(rng, 4, 37, 53, 3, "uint8")
    m = R.random_homography(rng, 4, 37, 53)
    inv = np.linalg.inv(m)
    for interp in INTERPS:
        a = gpuaug.warp_perspective(x, inv * 3.0, interpolation=interp, inverse_map=True)  # scale-free
        b = gpuaug.warp_perspective(x, m, interpolation=interp)
        assert np.abs(a.astype(int) - b).max() <= 1
    # with a bottom row (0, 0, 1) it is warp_affine
    aff = R.random_affine(rng, 4, 37, 53)
    full = np.concatenate([aff, np.broadcast_to([[[0.0, 0.0, 1.0]]], (4, 1, 3))], axis=1)
    for border in BORDERS:
        a = gpuaug.warp_perspective(x, full, border=border, fill=50)
        b = gpuaug.warp_affine(x, aff, border=border, fill=50)
        assert np.abs(a.astype(int) - b).max() <= 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_warp_perspective_identities(layout):
    rng = np.random.default_rng(14)
    x = random_images(rng, 3, 13, 17, 3, "float16")
    xl = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    for interp in INTERPS:
        for border in BORDERS:
            np.testing.assert_array_equal(
                gpuaug.warp_perspective(xl, np.eye(3) * 5, interpolation=interp, border=border,
                                        layout=layout), xl)
        fl = G.flip(False, True, size=(13, 17))
        np.testing.assert_array_equal(gpuaug.warp_perspective(x, fl, interpolation=interp),
                                      gpuaug.flip(x, False, True))


def test_warp_perspective_horizon():
    """Output pixels whose source is at infinity (w = 0) or beyond it read the border."""
    x = np.full((1, 8, 8, 1), 200, np.uint8)
    # inverse map with w = x - 3: w = 0 on column 3, negative left of it
    a = np.array([[1.0, 0, 0], [0, 1.0, 0], [1.0, 0, -3.0]])
    y = gpuaug.warp_perspective(x, a, inverse_map=True, fill=10, interpolation="nearest")[0, :, :, 0]
    ref = R.warp_perspective(x[0].astype(float), a, None, "nearest", "constant", 10, inverse_map=True)
    np.testing.assert_array_equal(y, ref[:, :, 0])
    assert (y[:, 3] == 10).all()


def test_warp_perspective_bad_params():
    x = np.zeros((2, 8, 9, 3), np.uint8)
    with pytest.raises(ValueError, match="matrix: got .*finite"):
        gpuaug.warp_perspective(x, np.where(np.eye(3) == 1, np.nan, 0))
    with pytest.raises(ValueError, match="matrix: sample 0 is singular"):
        gpuaug.warp_perspective(x, [[1, 2, 3], [2, 4, 6], [0, 0, 1]])
    with pytest.raises(ValueError, match="matrix: sample 1 is singular"):
        gpuaug.warp_perspective(x, np.stack([np.eye(3), np.diag([1.0, 1.0, 0.0])]))
    with pytest.raises(ValueError, match="matrix: got shape"):
        gpuaug.warp_perspective(x, np.eye(3)[:2])
    with pytest.raises(ValueError, match="matrix: got shape"):
        gpuaug.warp_perspective(x, np.stack([np.eye(3)] * 3))
    with pytest.raises(ValueError, match="interpolation: got 'area'"):
        gpuaug.warp_perspective(x, np.eye(3), interpolation="area")
    with pytest.raises(ValueError, match="border: got 'reflect101'"):
        gpuaug.warp_perspective(x, np.eye(3), border="reflect101")
    with pytest.raises(TypeError, match="inverse_map: got"):
        gpuaug.warp_perspective(x, np.eye(3), inverse_map=1)
    with pytest.raises(ValueError, match="fill: got shape"):
        gpuaug.warp_perspective(x, np.eye(3), fill=[0, 0, 0])


def test_warp_perspective_matches_opencv():
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (optional cross-check)")
    rng = np.random.default_rng(15)
    h, w = 37, 53
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([127 + 100 * np.sin(xx / 7 + yy / 11), 127 + 100 * np.cos(xx / 5 - yy / 9)], -1)
    img = np.concatenate([img, img[..., :1]], -1).astype(np.uint8)
    m = R.random_homography(rng, 3, h, w)
    modes = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE,
             "reflect": cv2.BORDER_REFLECT_101}
    flags = {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR}
    for interp, fl in flags.items():
        for border, bm in modes.items():
            got = gpuaug.warp_perspective(np.stack([img] * 3), m, size=(31, 59), interpolation=interp,
                                          border=border, fill=40)
            for i in range(3):
                cv = cv2.warpPerspective(img, m[i], (59, 31), flags=fl, borderMode=bm, borderValue=(40, 40, 40))
                d = np.abs(got[i].astype(int) - cv)
                if interp == "bilinear":
                    assert d.max() <= 2, (interp, border, d.max())
                else:  # OpenCV rounds coordinates half to even (cvRound)
                    assert (d > 2).mean() < 0.01, (interp, border, (d > 2).mean())


def test_warp_perspective_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_warp_perspective_gpu")
    rng = np.random.default_rng(16)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        m = R.random_homography(rng, 2, 3, 5)
        for interp, border in (("bilinear", "reflect"), ("nearest", "constant")):
            check_op(gpuaug.warp_perspective,
                     lambda s, i: R.warp_perspective(s, m[i], (4, 6), interp, border, 9), x,
                     {"matrix": m, "size": (4, 6), "interpolation": interp, "border": border, "fill": 9},
                     backend="numba-sim", rtol=1e-4)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_warp_perspective_gpu(backend, dtype, layout):
    """Bilinear within 1 (uint8) / 1e-4 on random homographies; nearest exactly, on
    homographies exact in float32 with no ties."""
    rng = np.random.default_rng(17)
    n = 5
    for c in (1, 3, 4):
        x = random_images(rng, n, 37, 53, c, dtype)
        m = R.random_homography(rng, n, 37, 53)
        d = _dyadic(rng, n)
        for border in BORDERS:
            fill = _fills(rng, n, dtype)
            fr = R.fill_in_dtype(fill, dtype)
            check_op(gpuaug.warp_perspective,
                     lambda s, i: R.warp_perspective(s, m[i], (29, 61), "bilinear", border, fr[i]), x,
                     {"matrix": m, "size": (29, 61), "border": border, "fill": fill},
                     layout=layout, backend=backend, rtol=1e-4)
            check_op(gpuaug.warp_perspective,
                     lambda s, i: R.warp_perspective(s, d[i], (29, 61), "nearest", border, fr[i],
                                                     inverse_map=True),
                     x, {"matrix": d, "size": (29, 61), "interpolation": "nearest", "border": border,
                         "fill": fill, "inverse_map": True},
                     layout=layout, backend=backend, atol_u8=0, rtol=1e-6)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    m = np.stack([R.random_homography(rng, 1, h, w)[0] for h, w in SIZES])
    check_op(gpuaug.warp_perspective, lambda s, i: R.warp_perspective(s, m[i], None, "bilinear", "replicate"),
             xs, {"matrix": m, "border": "replicate"}, varshape=True, backend=backend, rtol=1e-4)


@gpu
def test_warp_perspective_gpu_device_matrices():
    """Matrices on the device are inverted there (no synchronisation) and match host ones."""
    import cupy as cp

    rng = np.random.default_rng(18)
    x = random_images(rng, 6, 45, 67, 4, "uint8")
    m = R.random_homography(rng, 6, 45, 67)
    want = gpuaug.warp_perspective(x, m)
    got = cp.asnumpy(gpuaug.warp_perspective(cp.asarray(x), cp.asarray(m)))
    assert np.abs(got.astype(int) - want).max() <= 1
    got = cp.asnumpy(gpuaug.warp_perspective(cp.asarray(x), cp.asarray(np.linalg.inv(m)), inverse_map=True))
    assert np.abs(got.astype(int) - want).max() <= 1
