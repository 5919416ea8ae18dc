import numpy as np
import pytest

import gpuaug
import ref_filters as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_box_blur_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    ks = np.array([3, 1, 5, 7, 21])
    # uint8: the exact mean j / k^2 is never within 1 / (2 k^2) of a rounding tie, so the
    # float64 CPU twin must round exactly as the reference does
    check_op(gpuaug.box_blur, lambda s, i: R.box_blur(s, ks[i]), x, {"kernel_size": ks}, layout=layout,
             atol_u8=0)
    check_op(gpuaug.box_blur, lambda s, i: R.box_blur(s, 3), x, {"kernel_size": 3}, layout=layout, atol_u8=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_box_blur_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 4, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (2, 1)]]
    ks = [5, 3, 7, 9]
    check_op(gpuaug.box_blur, lambda s, i: R.box_blur(s, ks[i]), xs, {"kernel_size": ks}, varshape=True)


def test_box_blur_matches_scipy_and_opencv():
    from scipy import ndimage

    rng = np.random.default_rng(3)
    x = rng.random((2, 30, 41, 3)).astype(np.float32)
    y = gpuaug.box_blur(x, 5)
    for i in range(2):
        ref = ndimage.uniform_filter(x[i].astype(np.float64), (5, 5, 1), mode="mirror")
        np.testing.assert_allclose(y[i], ref, rtol=1e-5, atol=1e-6)
    try:
        import cv2
    except ImportError:
        return
    xu = (x * 255).astype(np.uint8)
    yu = gpuaug.box_blur(xu, 5)
    for i in range(2):
        assert np.abs(yu[i].astype(int) - cv2.blur(xu[i], (5, 5))).max() <= 1


@pytest.mark.parametrize("bad, match", [
    (2, "kernel_size: got 2; expected odd sizes"),
    (-3, "kernel_size: got -3; expected odd sizes"),
    ([3, 5], "kernel_size: got shape"),
    (2.5, "kernel_size: .*expected integers"),
    (float("nan"), "kernel_size: .*expected integers"),
    (511, "kernel_size: got 511"),
])
def test_box_blur_bad_parameters(bad, match):
    with pytest.raises(ValueError, match=match):
        gpuaug.box_blur(np.zeros((3, 8, 8, 3), np.uint8), bad)


def test_box_blur_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the Numba CUDA twin is tested by test_box_blur_gpu")
    rng = np.random.default_rng(4)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        check_op(gpuaug.box_blur, lambda s, i: R.box_blur(s, [3, 5][i]), x, {"kernel_size": [3, 5]},
                 backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_box_blur_gpu(backend, dtype, layout):
    rng = np.random.default_rng(5)
    ks = np.array([3, 1, 5, 7, 21])
    for c in (1, 3, 4):
        x = random_images(rng, 5, 37, 53, c, dtype)
        check_op(gpuaug.box_blur, lambda s, i: R.box_blur(s, ks[i]), x, {"kernel_size": ks}, layout=layout,
                 backend=backend)
    x = random_images(rng, 2, 70, 97, 4, dtype)  # k = 201 with 4 channels: the one-channel variant
    check_op(gpuaug.box_blur, lambda s, i: R.box_blur(s, [3, 201][i]), x, {"kernel_size": [3, 201]},
             layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9)]]
    check_op(gpuaug.box_blur, lambda s, i: R.box_blur(s, [5, 3, 7][i]), xs, {"kernel_size": [5, 3, 7]},
             varshape=True, backend=backend)


@gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_box_blur_packed_gpu(layout):
    """Dense uint8 batches whose rows are whole 16-byte vectors, every k <= 5: the packed kernel
    (one 16-byte vector per thread, integer window sums) runs, exact against the reference (and
    so against the tile kernels, which round the same); images of 3 rows and of one 4-pixel vector
    a row, where the 5 x 5 window reflects across the whole image."""
    import cupy

    from gpuaug.kernels._cuda import record

    rng = np.random.default_rng(6)
    ks = np.array([3, 1, 5, 5, 3])
    for c, h, w in ((1, 37, 64), (3, 37, 64), (4, 37, 64), (3, 3, 16), (4, 6, 4)):
        x = random_images(rng, 5, h, w, c, "uint8")
        check_op(gpuaug.box_blur, lambda s, i: R.box_blur(s, ks[i]), x, {"kernel_size": ks}, layout=layout,
                 backend="cuda", atol_u8=0)
        xin = cupy.asarray(x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
        with record() as log:
            gpuaug.box_blur(xin, ks, layout=layout)
        packed = w * (c if layout == "NHWC" else 1) % 16 == 0  # rows of whole 16-byte vectors
        assert ([e[3] for e in log if e[0] == "launch"] == [(256, 1, 1)]) == packed  # the packed kernel's block
