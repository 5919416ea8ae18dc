import numpy as np
import pytest

import gpuaug
import ref_filters as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

# the median moves one input value: exact for every dtype
EXACT = {"atol_u8": 0, "rtol": 0.0}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_median_blur_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    ks = np.array([3, 5, 5, 3, 3])
    check_op(gpuaug.median_blur, lambda s, i: R.median_blur(s, ks[i]), x, {"kernel_size": ks}, layout=layout,
             **EXACT)
    check_op(gpuaug.median_blur, lambda s, i: R.median_blur(s, 5), x, {"kernel_size": 5}, layout=layout, **EXACT)


@pytest.mark.parametrize("dtype", DTYPES)
def test_median_blur_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (2, 1)]]
    ks = [5, 3, 5, 3]
    check_op(gpuaug.median_blur, lambda s, i: R.median_blur(s, ks[i]), xs, {"kernel_size": ks}, varshape=True,
             **EXACT)


def test_median_blur_matches_scipy_and_opencv():
    from scipy import ndimage

    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2, 30, 41, 3), dtype=np.uint8)
    for k in (3, 5):
        y = gpuaug.median_blur(x, k)
        for i in range(2):
            np.testing.assert_array_equal(y[i], ndimage.median_filter(x[i], size=(k, k, 1), mode="nearest"))
    try:
        import cv2
    except ImportError:
        return
    for k in (3, 5):
        y = gpuaug.median_blur(x, k)
        for i in range(2):
            np.testing.assert_array_equal(y[i], cv2.medianBlur(x[i], k))


@pytest.mark.parametrize("bad, match", [
    (7, "kernel_size: got 7; expected one of 3, 5"),
    (4, "kernel_size: .*expected one of 3, 5"),
    ([3, 5], "kernel_size: got shape"),
    (3.5, "kernel_size: .*expected integers"),
])
def test_median_blur_bad_parameters(bad, match):
    with pytest.raises(ValueError, match=match):
        gpuaug.median_blur(np.zeros((3, 8, 8, 3), np.uint8), bad)


def test_median_blur_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the Numba CUDA twin is tested by test_median_blur_gpu")
    rng = np.random.default_rng(4)
    for dtype in DTYPES:
        x = random_images(rng, 2, 4, 5, 3, dtype)
        check_op(gpuaug.median_blur, lambda s, i: R.median_blur(s, [3, 5][i]), x, {"kernel_size": [3, 5]},
                 backend="numba-sim", layout="NCHW", **EXACT)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_median_blur_gpu(backend, dtype, layout):
    rng = np.random.default_rng(5)
    ks = np.array([3, 5, 5, 3, 3])
    for c in (1, 3, 4):
        x = random_images(rng, 5, 37, 53, c, dtype)
        check_op(gpuaug.median_blur, lambda s, i: R.median_blur(s, ks[i]), x, {"kernel_size": ks},
                 layout=layout, backend=backend, **EXACT)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (130, 3)]]
    check_op(gpuaug.median_blur, lambda s, i: R.median_blur(s, [5, 3, 5, 3][i]), xs,
             {"kernel_size": [5, 3, 5, 3]}, varshape=True, backend=backend, **EXACT)


@gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_median_blur_3_packed_gpu(layout):
    """Dense uint8 batches whose rows are whole 16-byte vectors, every k = 3: the packed kernel
    (one 16-byte vector per thread) runs, exact against the reference."""
    import cupy

    from gpuaug.kernels._cuda import record

    rng = np.random.default_rng(6)
    for c in (1, 3, 4):
        x = random_images(rng, 4, 37, 64, c, "uint8")
        check_op(gpuaug.median_blur, lambda s, i: R.median_blur(s, 3), x, {"kernel_size": 3}, layout=layout,
                 backend="cuda", **EXACT)
        xin = cupy.asarray(x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
        with record() as log:
            gpuaug.median_blur(xin, 3, layout=layout)
        assert [e[3] for e in log if e[0] == "launch"] == [(256, 1, 1)]  # the packed kernel's block
