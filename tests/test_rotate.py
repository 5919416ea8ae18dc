import numpy as np
import pytest

import gpuaug
import ref_warp as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

INTERPS = ("nearest", "bilinear")
BORDERS = ("constant", "replicate", "reflect")
SIZES = [(5, 7), (37, 53), (1, 9), (6, 1), (16, 16)]


def _case(rng, n, h, w):
    angle = rng.uniform(-180, 180, n)
    scale = rng.uniform(0.7, 1.4, n)
    center = np.stack([rng.uniform(0, w - 1, n), rng.uniform(0, h - 1, n)], axis=1)
    return angle, scale, center


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
@pytest.mark.parametrize("interpolation", INTERPS)
def test_rotate_cpu(dtype, layout, channels, interpolation):
    rng = np.random.default_rng(21)
    n = 5
    x = random_images(rng, n, 37, 53, channels, dtype)
    angle, scale, center = _case(rng, n, 37, 53)
    for border in BORDERS:
        fill = rng.uniform(0, 300 if dtype == "uint8" else 1, n)
        fr = R.fill_in_dtype(fill, dtype)
        check_op(gpuaug.rotate,
                 lambda s, i: R.rotate(s, angle[i], center[i], scale[i], interpolation, border, fr[i]), x,
                 {"angle": angle, "center": center, "scale": scale, "interpolation": interpolation,
                  "border": border, "fill": fill}, layout=layout)
    # scalars: one angle for the batch, the default centre ((w - 1) / 2, (h - 1) / 2)
    check_op(gpuaug.rotate, lambda s, i: R.rotate(s, 33.0, None, 1.0, interpolation), x,
             {"angle": 33.0, "interpolation": interpolation}, layout=layout)
    check_op(gpuaug.rotate, lambda s, i: R.rotate(s, angle[i], (10.5, 3.0), 0.9, interpolation, "reflect"), x,
             {"angle": angle, "center": (10.5, 3.0), "scale": 0.9, "interpolation": interpolation,
              "border": "reflect"}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interpolation", INTERPS)
def test_rotate_varshape_cpu(dtype, interpolation):
    """The default centre is each image's own."""
    rng = np.random.default_rng(22)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    angle = rng.uniform(-180, 180, len(SIZES))
    for border in BORDERS:
        check_op(gpuaug.rotate, lambda s, i: R.rotate(s, angle[i], None, 1.0, interpolation, border, 5), xs,
                 {"angle": angle, "interpolation": interpolation, "border": border, "fill": 5}, varshape=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotate_identities(dtype, layout):
    rng = np.random.default_rng(23)
    x = random_images(rng, 3, 13, 17, 3, dtype)
    sq = random_images(rng, 3, 15, 15, 3, dtype)
    xl, sql = (x, sq) if layout == "NHWC" else (np.ascontiguousarray(x.transpose(0, 3, 1, 2)),
                                                np.ascontiguousarray(sq.transpose(0, 3, 1, 2)))
    kw = {"layout": layout}
    for interp in INTERPS:
        for border in BORDERS:
            for a in (0, 360, -720):
                np.testing.assert_array_equal(gpuaug.rotate(xl, a, interpolation=interp, border=border, **kw), xl)
        # about the image centre: 180 degrees = both flips; 90 on a square = numpy.rot90
        np.testing.assert_array_equal(gpuaug.rotate(x, 180, interpolation=interp), x[:, ::-1, ::-1])
        np.testing.assert_array_equal(gpuaug.rotate(x, [180, -180, 540], interpolation=interp),
                                      x[:, ::-1, ::-1])
        for k in (1, 2, 3, -1):
            np.testing.assert_array_equal(gpuaug.rotate(sql, 90 * k, interpolation=interp, **kw),
                                          np.rot90(sql, k, axes=(1, 2) if layout == "NHWC" else (2, 3)))
    # rotating by a then b = rotating by a + b, for pixels far enough inside (float32)
    y = x.astype(np.float32)
    two = gpuaug.rotate(gpuaug.rotate(y, 90), -90)
    np.testing.assert_array_equal(two[:, 2:-2, 2:-2], y[:, 2:-2, 2:-2])


def test_rotate_equals_warp_affine():
    """rotate = warp_affine with OpenCV's getRotationMatrix2D matrix."""
    rng = np.random.default_rng(24)
    x = random_images(rng, 4, 37, 53, 4, "float32")
    angle, scale, center = _case(rng, 4, 37, 53)
    m = np.stack([R.rotation_matrix(center[i], angle[i], scale[i]) for i in range(4)])
    for interp in ("bilinear",):
        a = gpuaug.rotate(x, angle, center, scale, interpolation=interp, border="reflect")
        b = gpuaug.warp_affine(x, m, interpolation=interp, border="reflect")
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (optional cross-check)")
    for i in range(4):
        np.testing.assert_allclose(cv2.getRotationMatrix2D(tuple(center[i]), angle[i], scale[i]), m[i],
                                   rtol=1e-6, atol=1e-5)


def test_rotate_bad_params():
    x = np.zeros((2, 8, 9, 3), np.uint8)
    with pytest.raises(ValueError, match="angle: got .*finite"):
        gpuaug.rotate(x, np.nan)
    with pytest.raises(ValueError, match="angle: got shape"):
        gpuaug.rotate(x, [1, 2, 3])
    with pytest.raises(ValueError, match="scale: got 0"):
        gpuaug.rotate(x, 10, scale=0)
    with pytest.raises(ValueError, match="scale: got .*finite"):
        gpuaug.rotate(x, 10, scale=np.inf)
    with pytest.raises(ValueError, match="center: got shape"):
        gpuaug.rotate(x, 10, center=(1, 2, 3))
    with pytest.raises(ValueError, match="center: got .*finite"):
        gpuaug.rotate(x, 10, center=(1, np.nan))
    with pytest.raises(ValueError, match="interpolation: got 'bicubic'"):
        gpuaug.rotate(x, 10, interpolation="bicubic")
    with pytest.raises(ValueError, match="border: got 'wrap'"):
        gpuaug.rotate(x, 10, border="wrap")
    with pytest.raises(TypeError, match="angle: got None"):
        gpuaug.rotate(x, None)


def test_rotate_matches_opencv():
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (optional cross-check)")
    h, w = 37, 53
    yy, xx = np.mgrid[0:h, 0:w]
    img = (127 + 100 * np.sin(xx / 7 + yy / 11))[..., None].astype(np.uint8)
    for angle in (17.0, -123.0):
        cv = cv2.warpAffine(img, cv2.getRotationMatrix2D((w / 2, h / 2), angle, 1.2), (w, h),
                            flags=cv2.INTER_LINEAR)
        got = gpuaug.rotate(img, angle, center=(w / 2, h / 2), scale=1.2)[..., 0]
        assert np.abs(got.astype(int) - cv).max() <= 2


def test_rotate_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_rotate_gpu")
    rng = np.random.default_rng(25)
    for dtype in DTYPES:
        x = random_images(rng, 2, 4, 5, 1, dtype)
        angle, scale, center = _case(rng, 2, 4, 5)
        check_op(gpuaug.rotate, lambda s, i: R.rotate(s, angle[i], center[i], scale[i], "bilinear", "replicate"),
                 x, {"angle": angle, "center": center, "scale": scale, "border": "replicate"},
                 backend="numba-sim", rtol=1e-4)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotate_gpu(backend, dtype, layout):
    """Bilinear at random angles within 1 (uint8) / 1e-4; nearest at quarter turns (exact)."""
    rng = np.random.default_rng(26)
    n = 5
    for c in (1, 3, 4):
        x = random_images(rng, n, 37, 53, c, dtype)
        angle, scale, center = _case(rng, n, 37, 53)
        quarter = np.array([0, 90, 180, 270, -90.0])
        for border in BORDERS:
            check_op(gpuaug.rotate,
                     lambda s, i: R.rotate(s, angle[i], center[i], scale[i], "bilinear", border, 17), x,
                     {"angle": angle, "center": center, "scale": scale, "border": border, "fill": 17},
                     layout=layout, backend=backend, rtol=1e-4)
            check_op(gpuaug.rotate, lambda s, i: R.rotate(s, quarter[i], None, 1.0, "nearest", border, 17), x,
                     {"angle": quarter, "interpolation": "nearest", "border": border, "fill": 17},
                     layout=layout, backend=backend, atol_u8=0, rtol=1e-6)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    angle = rng.uniform(-180, 180, len(SIZES))
    check_op(gpuaug.rotate, lambda s, i: R.rotate(s, angle[i]), xs, {"angle": angle}, varshape=True,
             backend=backend, rtol=1e-4)


@gpu
def test_rotate_gpu_device_params():
    """angle / scale / center already on the GPU: the inverse is computed there."""
    import cupy as cp

    rng = np.random.default_rng(27)
    x = random_images(rng, 6, 45, 67, 3, "uint8")
    angle, scale, center = _case(rng, 6, 45, 67)
    want = gpuaug.rotate(x, angle, center, scale)
    got = gpuaug.rotate(cp.asarray(x), cp.asarray(angle), cp.asarray(center), cp.asarray(scale))
    assert np.abs(cp.asnumpy(got).astype(int) - want).max() <= 1
    got = gpuaug.rotate(cp.asarray(x), cp.asarray(angle), None, scale)
    assert np.abs(cp.asnumpy(got).astype(int) - gpuaug.rotate(x, angle, None, scale)).max() <= 1


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_rotate_device_rows_equal_host_parameters(dtype):
    """Device angles with one number as the fill take gpuaug_rotation_rows (the whole float32
    parameter rows in the matrices' own launch, no gather): the same output, bit for bit, as
    the same values on the host, for every channel count, border, interpolation and form of
    fill (int, float, NumPy float, out of uint8's range, negative zero); other fills (per
    sample, on the GPU, NaN) still take the general path and its checks."""
    import cupy as cp

    from gpuaug.ops import _warp

    rng = np.random.default_rng(28)
    n = 7
    for c in (1, 3, 4):
        x = cp.asarray(random_images(rng, n, 23, 31, c, dtype))
        angle, scale, center = _case(rng, n, 23, 31)
        angle[:3] = (90.0, -180.0, 0.0)  # quarter turns: exact cos/sin on both paths
        for fill in (0, 17, 300, -2.5, np.float64(0.25), -0.0):
            for interp, border in (("bilinear", "constant"), ("nearest", "reflect")):
                kw = dict(interpolation=interp, border=border, fill=fill)
                want = gpuaug.rotate(x, angle, center, scale, **kw)
                for args in ((cp.asarray(angle), center, scale), (angle, cp.asarray(center), cp.asarray(scale)),
                             (cp.asarray(angle), None, 1.0)):
                    got = gpuaug.rotate(x, *args, **kw)
                    ref = want if args[1] is not None else gpuaug.rotate(x, angle, None, 1.0, **kw)
                    assert cp.array_equal(got.view(cp.uint8), ref.view(cp.uint8)), (c, fill, interp, args[1] is None)
        b = gpuaug._batch.as_batch(x)
        rows = _warp.rotation_inverse(b, cp.asarray(angle), None, 1.0, (1, 0, 5))
        assert type(rows) is _warp.Rows and rows.matrix.dtype == cp.float32 and rows.matrix.shape == (n, 8 + c)
        per = rng.uniform(0, 9, n)
        for fill in (per, cp.asarray(per)):  # per-sample fills: the general path
            assert type(_warp.rotation_inverse(b, cp.asarray(angle), None, 1.0, (1, 0, fill))) is not _warp.Rows
            want = gpuaug.rotate(x, angle, fill=cp.asnumpy(fill) if not isinstance(fill, np.ndarray) else fill)
            assert cp.array_equal(gpuaug.rotate(x, cp.asarray(angle), fill=fill).view(cp.uint8), want.view(cp.uint8))
    with pytest.raises(ValueError, match="fill"):
        gpuaug.rotate(x, cp.asarray(angle), fill=float("nan"))
