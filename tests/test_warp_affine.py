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
    hi = 300.0 if np.dtype(dtype) == np.uint8 else 1.0  # uint8: also saturating fills
    return rng.uniform(0, hi, n if channels is None else (n, channels))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
@pytest.mark.parametrize("interpolation", INTERPS)
def test_warp_affine_cpu(dtype, layout, channels, interpolation):
    """Random matrices keep nearest-neighbour ties (u exactly x.5) away with probability 1."""
    rng = np.random.default_rng(1)
    n = 5
    x = random_images(rng, n, 37, 53, channels, dtype)
    m = R.random_affine(rng, n, 37, 53)
    for border in BORDERS:
        fill = _fills(rng, n, dtype)
        fr = R.fill_in_dtype(fill, dtype)
        check_op(gpuaug.warp_affine,
                 lambda s, i: R.warp_affine(s, m[i], (29, 61), interpolation, border, fr[i]), x,
                 {"matrix": m, "size": (29, 61), "interpolation": interpolation, "border": border,
                  "fill": fill}, layout=layout)
    # one matrix for the batch, default size / border / fill
    check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[2], None, interpolation), x,
             {"matrix": m[2], "interpolation": interpolation}, layout=layout)
    # per-sample, per-channel fill
    fill = _fills(rng, n, dtype, channels)
    fr = R.fill_in_dtype(fill, dtype)
    check_op(gpuaug.warp_affine,
             lambda s, i: R.warp_affine(s, m[i], (41, 47), interpolation, "constant", fr[i]), x,
             {"matrix": m, "size": [41, 47], "interpolation": interpolation, "fill": fill}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interpolation", INTERPS)
def test_warp_affine_varshape_cpu(dtype, interpolation):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    m = np.stack([R.random_affine(rng, 1, h, w)[0] for h, w in SIZES])
    for border in BORDERS:
        check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[i], None, interpolation, border, 7), xs,
                 {"matrix": m, "interpolation": interpolation, "border": border, "fill": 7}, varshape=True)
    check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[i], (8, 11), interpolation, "reflect"), xs,
             {"matrix": m, "interpolation": interpolation, "border": "reflect", "size": (8, 11)}, varshape=True)


def test_warp_affine_inverse_map():
    rng = np.random.default_rng(3)
    x = random_images(rng, 4, 37, 53, 3, "uint8")
    m = R.random_affine(rng, 4, 37, 53)
    inv = np.stack([np.linalg.inv(np.vstack([k, [0, 0, 1]]))[:2] for k in m])
    for interp in INTERPS:
        check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, inv[i], None, interp, "replicate",
                                                                inverse_map=True), x,
                 {"matrix": inv, "interpolation": interp, "border": "replicate", "inverse_map": True})
        a = gpuaug.warp_affine(x, inv, interpolation=interp, inverse_map=True)
        b = gpuaug.warp_affine(x, m, interpolation=interp)
        assert np.abs(a.astype(int) - b).max() <= 1
    # a singular destination -> source map is fine (every output pixel reads one column)
    proj = np.array([[0.0, 0.0, 3.0], [0.0, 1.0, 0.0]])
    y = gpuaug.warp_affine(x, proj, inverse_map=True)
    np.testing.assert_array_equal(y, np.broadcast_to(x[:, :, 3:4], x.shape))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_warp_affine_identities(dtype, layout):
    rng = np.random.default_rng(4)
    x = random_images(rng, 3, 13, 17, 4, dtype)
    xl = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    eye = [[1, 0, 0], [0, 1, 0]]
    for interp in INTERPS:
        for border in BORDERS:
            np.testing.assert_array_equal(
                gpuaug.warp_affine(xl, eye, interpolation=interp, border=border, fill=5, layout=layout), xl)
        # integer shifts move pixels exactly; flips through geometry equal gpuaug.flip
        shift = G.to_affine(G.translation(3, -2))
        want = np.full_like(x, 0)
        want[:, :-2, 3:] = x[:, 2:, :-3]
        np.testing.assert_array_equal(gpuaug.warp_affine(x, shift, interpolation=interp), want)
        fl = G.to_affine(G.flip([True, False, True], [False, True, True], size=(13, 17)))
        np.testing.assert_array_equal(gpuaug.warp_affine(x, fl, interpolation=interp),
                                      gpuaug.flip(x, [True, False, True], [False, True, True]))
    # a 2x upscale crop with bilinear: exact averages of neighbours
    up = gpuaug.warp_affine(x.astype(np.float32), G.to_affine(G.scale(2.0)), size=(25, 33))
    np.testing.assert_allclose(up[:, ::2, ::2], x.astype(np.float32))
    np.testing.assert_allclose(up[:, 1::2, ::2], (x[:, :-1] + x[:, 1:].astype(np.float32)) / 2, rtol=1e-6)


def test_warp_affine_single_image_and_noncontiguous():
    rng = np.random.default_rng(5)
    img = random_images(rng, 1, 19, 23, 3, "uint8")[0]
    m = R.random_affine(rng, 1, 19, 23)[0]
    y = gpuaug.warp_affine(img, m)
    assert y.shape == img.shape
    np.testing.assert_array_equal(y, gpuaug.warp_affine(img[None], m)[0])
    big = random_images(rng, 4, 40, 60, 3, "uint8")
    view = big[::2, 3:37, ::3]  # non-contiguous
    ref = [R.warp_affine(view[i].astype(float), m, (20, 30)) for i in range(2)]
    got = gpuaug.warp_affine(view, m, size=(20, 30))
    assert np.abs(got.astype(int) - np.clip(np.floor(np.stack(ref) + 0.5), 0, 255)).max() <= 1


def test_warp_affine_bad_params():
    x = np.zeros((2, 8, 9, 3), np.uint8)
    eye = np.eye(3)[:2]
    with pytest.raises(ValueError, match="matrix: got .*finite"):
        gpuaug.warp_affine(x, [[1, 0, np.nan], [0, 1, 0]])
    with pytest.raises(ValueError, match="matrix: got .*finite"):
        gpuaug.warp_affine(x, np.stack([eye, np.where(eye == 1, np.inf, 0)]))
    with pytest.raises(ValueError, match="matrix: sample 1 is singular"):
        gpuaug.warp_affine(x, np.stack([eye, [[1, 2, 0], [2, 4, 0]]]))
    with pytest.raises(ValueError, match="matrix: sample 0 is singular"):
        gpuaug.warp_affine(x, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="matrix: got shape"):
        gpuaug.warp_affine(x, np.eye(3))
    with pytest.raises(ValueError, match="matrix: got shape"):
        gpuaug.warp_affine(x, np.stack([eye] * 3))
    with pytest.raises(TypeError, match="matrix: got None"):
        gpuaug.warp_affine(x, None)
    with pytest.raises(ValueError, match="interpolation: got 'cubic'"):
        gpuaug.warp_affine(x, eye, interpolation="cubic")
    with pytest.raises(ValueError, match="border: got 'wrap'"):
        gpuaug.warp_affine(x, eye, border="wrap")
    with pytest.raises(ValueError, match="size: got"):
        gpuaug.warp_affine(x, eye, size=(0, 4))
    with pytest.raises(ValueError, match="size: got"):
        gpuaug.warp_affine(x, eye, size=(2, 3, 4))
    with pytest.raises(ValueError, match="fill: .*finite"):
        gpuaug.warp_affine(x, eye, fill=np.nan)
    with pytest.raises(ValueError, match="fill: got shape"):
        gpuaug.warp_affine(x, eye, fill=[1, 2, 3])
    with pytest.raises(ValueError, match="fill: got shape"):
        gpuaug.warp_affine(x, eye, fill=np.zeros((2, 4)))
    with pytest.raises(TypeError, match="inverse_map: got"):
        gpuaug.warp_affine(x, eye, inverse_map="yes")


def test_warp_affine_matches_opencv():
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (optional cross-check)")
    rng = np.random.default_rng(6)
    h, w = 37, 53
    yy, xx = np.mgrid[0:h, 0:w]
    # smooth content: OpenCV versions that quantise coordinates to 1/32 pixel then differ
    # from exact maths by a fraction of a level
    img = np.stack([127 + 100 * np.sin(xx / 7 + yy / 11), 127 + 100 * np.cos(xx / 5 - yy / 9),
                    127 + 120 * np.sin((xx + yy) / 13)], -1).astype(np.uint8)
    m = R.random_affine(rng, 3, h, w)
    modes = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE,
             "reflect": cv2.BORDER_REFLECT_101}
    flags = {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR}
    for interp, fl in flags.items():
        for border, bm in modes.items():
            got = gpuaug.warp_affine(np.stack([img] * 3), m, size=(31, 59), interpolation=interp,
                                     border=border, fill=40)
            for i in range(3):
                cv = cv2.warpAffine(img, m[i], (59, 31), flags=fl, borderMode=bm, borderValue=(40, 40, 40))
                d = np.abs(got[i].astype(int) - cv)
                if interp == "bilinear":
                    assert d.max() <= 2, (interp, border, d.max())
                else:  # a coordinate within OpenCV's rounding of x.5 may pick the neighbour
                    assert (d > 2).mean() < 0.01, (interp, border, (d > 2).mean())


def test_warp_affine_simulator():
    """The Numba CUDA twin (in the simulator without a GPU)."""
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_warp_affine_gpu")
    rng = np.random.default_rng(7)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        m = R.random_affine(rng, 2, 3, 5)
        for interp, border in (("bilinear", "constant"), ("nearest", "reflect")):
            check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[i], (4, 6), interp, border, 9), x,
                     {"matrix": m, "size": (4, 6), "interpolation": interp, "border": border, "fill": 9},
                     backend="numba-sim", layout="NCHW", rtol=1e-4)


def test_warp_cuda_c_compiles_every_specialisation():
    """NVRTC compiles every interpolation x border x dtype x channels instance (no GPU needed)."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not available here ({type(e).__name__})")
    from gpuaug.kernels._cuda import check_compile, kernel_name

    for op in ("warp_affine", "warp_perspective", "rotate"):
        k = gpuaug.registry[op].kernels
        names = [kernel_name(k.cu[1], d, c, i, b) for d in DTYPES for c in (1, 3, 4)
                 for i in (0, 1) for b in (0, 1, 3)]
        assert check_compile(k.cu[0], names).count(".entry") == len(names)


# -- GPU ------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_warp_affine_gpu(backend, dtype, layout):
    """float32 maths on the device: bilinear within 1 (uint8) / 1e-4; nearest on dyadic
    destination -> source maps (exact in float32, no ties), so it must match exactly."""
    rng = np.random.default_rng(8)
    n = 5
    for c in (1, 3, 4):
        x = random_images(rng, n, 37, 53, c, dtype)
        m = R.random_affine(rng, n, 37, 53)
        d = R.dyadic_inverse_affine(rng, n)
        for border in BORDERS:
            fill = _fills(rng, n, dtype)
            fr = R.fill_in_dtype(fill, dtype)
            check_op(gpuaug.warp_affine,
                     lambda s, i: R.warp_affine(s, m[i], (29, 61), "bilinear", border, fr[i]), x,
                     {"matrix": m, "size": (29, 61), "border": border, "fill": fill},
                     layout=layout, backend=backend, rtol=1e-4)
            check_op(gpuaug.warp_affine,
                     lambda s, i: R.warp_affine(s, d[i], (29, 61), "nearest", border, fr[i], inverse_map=True),
                     x, {"matrix": d, "size": (29, 61), "interpolation": "nearest", "border": border,
                         "fill": fill, "inverse_map": True},
                     layout=layout, backend=backend, atol_u8=0, rtol=1e-6)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    m = np.stack([R.random_affine(rng, 1, h, w)[0] for h, w in SIZES])
    check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[i], None, "bilinear", "reflect"), xs,
             {"matrix": m, "border": "reflect"}, varshape=True, backend=backend, rtol=1e-4)


@gpu
def test_warp_affine_gpu_device_params_stream_and_views():
    import cupy as cp

    rng = np.random.default_rng(9)
    x = random_images(rng, 6, 45, 67, 3, "uint8")
    m = R.random_affine(rng, 6, 45, 67)
    fill = rng.uniform(0, 255, 6)
    want = gpuaug.warp_affine(x, m, fill=fill)
    xd = cp.asarray(x)
    s = cp.cuda.Stream(non_blocking=True)
    out = cp.full(x.shape, 3, cp.uint8)
    got = gpuaug.warp_affine(xd, cp.asarray(m), fill=cp.asarray(fill), out=out, stream=s)
    assert got is out
    s.synchronize()
    assert np.abs(cp.asnumpy(got).astype(int) - want).max() <= 1
    # device matrices given as the inverse map, and misaligned / strided views
    inv = np.stack([np.linalg.inv(np.vstack([k, [0, 0, 1]]))[:2] for k in m])
    got = gpuaug.warp_affine(xd, cp.asarray(inv), fill=fill, inverse_map=True)
    assert np.abs(cp.asnumpy(got).astype(int) - want).max() <= 1
    # views: rows starting at odd addresses (uint8 word loads at every alignment), strided
    for sl in (np.s_[:, :, 1:], np.s_[:, 1:, :-1], np.s_[::2, :, ::2]):
        k = m[: x[sl].shape[0]]
        got = cp.asnumpy(gpuaug.warp_affine(xd[sl], k))
        assert np.abs(got.astype(int) - gpuaug.warp_affine(x[sl], k)).max() <= 1


@gpu
def test_warp_affine_gpu_large_batch():
    """The benchmark shape: 224x224x3 uint8, one bilinear matrix per sample."""
    import cupy as cp

    rng = np.random.default_rng(10)
    x = random_images(rng, 32, 224, 224, 3, "uint8")
    m = R.random_affine(rng, 32, 224, 224)
    got = cp.asnumpy(gpuaug.warp_affine(cp.asarray(x), m))
    assert np.abs(got.astype(int) - gpuaug.warp_affine(x, m)).max() <= 1
