import numpy as np
import pytest

import gpuaug
import ref_filters as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images


def _sigmas(rng, n):
    s = rng.uniform(0.4, 3.0, n)
    s[0] = 1.5
    return s


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_gaussian_blur_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    u8 = dtype == "uint8"
    sig = _sigmas(rng, 5)
    check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, sig[i], uint8=u8), x, {"sigma": sig},
             layout=layout)
    ks = np.array([1, 3, 5, 9, 15])
    check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, 2.0, ks[i]), x,
             {"sigma": 2.0, "kernel_size": ks}, layout=layout)
    check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, 0.8, 7), x,
             {"sigma": 0.8, "kernel_size": 7}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gaussian_blur_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (2, 2)]]
    sig = [1.0, 2.5, 1.5, 0.7]
    u8 = dtype == "uint8"
    check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, sig[i], uint8=u8), xs, {"sigma": sig},
             varshape=True)


def test_default_kernel_size_is_opencvs():
    from gpuaug.ops.gaussian_blur import gaussian_kernel_size

    for s in (0.1, 0.25, 0.5, 1.0, 1.5, 2.2, 3.0, 7.3):
        assert int(gaussian_kernel_size(s, np.uint8)) == R.opencv_gaussian_ksize(s, True)
        assert int(gaussian_kernel_size(s, np.float32)) == R.opencv_gaussian_ksize(s, False)
    assert int(gaussian_kernel_size(1.5, np.uint8)) == 11 and int(gaussian_kernel_size(1.5, np.float32)) == 13


def test_matches_scipy_gaussian_filter():
    from scipy import ndimage

    rng = np.random.default_rng(3)
    x = rng.random((2, 30, 41, 3)).astype(np.float32)
    y = gpuaug.gaussian_blur(x, 1.5, kernel_size=13)
    for i in range(2):  # scipy: radius = int(truncate * sigma + 0.5) = 6, "mirror" = reflect-101
        ref = ndimage.gaussian_filter(x[i].astype(np.float64), (1.5, 1.5, 0), mode="mirror", truncate=4.0)
        np.testing.assert_allclose(y[i], ref, rtol=1e-5, atol=1e-6)


def test_matches_opencv():
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (3, 37, 53, 3), dtype=np.uint8)
    sig = [0.8, 1.5, 2.6]
    y = gpuaug.gaussian_blur(x, sig)
    for i in range(3):
        ref = cv2.GaussianBlur(x[i], (0, 0), sig[i], borderType=cv2.BORDER_REFLECT_101)
        assert np.abs(y[i].astype(int) - ref).max() <= 1
    xf = x.astype(np.float32) / 255
    yf = gpuaug.gaussian_blur(xf, sig)
    for i in range(3):
        ref = cv2.GaussianBlur(xf[i], (0, 0), sig[i], borderType=cv2.BORDER_REFLECT_101)
        np.testing.assert_allclose(yf[i], ref, atol=1e-5)


def test_large_sigma_and_single_pixel_images():
    rng = np.random.default_rng(5)
    x = random_images(rng, 2, 6, 9, 4, "float32")
    check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, 30.0, 201), x,
             {"sigma": 30.0, "kernel_size": 201})
    one = random_images(rng, 2, 1, 1, 3, "float32")
    np.testing.assert_allclose(gpuaug.gaussian_blur(one, 2.0), one, rtol=1e-6)


@pytest.mark.parametrize("bad, match", [
    ({"sigma": 0.0}, "sigma: got 0.0; expected values > 0"),
    ({"sigma": -1.0}, "sigma: .*expected values > 0"),
    ({"sigma": [1.0, np.nan, 1.0]}, "sigma: .*finite"),
    ({"sigma": [1.0, 2.0]}, "sigma: got shape"),
    ({"sigma": 1.0, "kernel_size": 4}, "kernel_size: got 4; expected odd sizes"),
    ({"sigma": 1.0, "kernel_size": 0}, "kernel_size: got 0; expected odd sizes"),
    ({"sigma": 1.0, "kernel_size": 257}, "kernel_size: got 257"),
    ({"sigma": 1.0, "kernel_size": 3.5}, "kernel_size: .*expected integers"),
    ({"sigma": 1.0, "kernel_size": [3, 5]}, "kernel_size: got shape"),
    ({"sigma": 60.0}, "sigma: got 60.0, whose default kernel size"),
])
def test_gaussian_blur_bad_parameters(bad, match):
    x = np.zeros((3, 8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match=match):
        gpuaug.gaussian_blur(x, **bad)


def test_gaussian_blur_simulator():
    """The Numba CUDA twin in the simulator (the GPU tests cover it on a GPU)."""
    if not SIM:
        pytest.skip("a GPU is present: the Numba CUDA twin is tested by test_gaussian_blur_gpu")
    rng = np.random.default_rng(6)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, [0.7, 1.2][i], 3), x,
                 {"sigma": [0.7, 1.2], "kernel_size": 3}, backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gaussian_blur_gpu(backend, dtype, layout):
    rng = np.random.default_rng(7)
    u8 = dtype == "uint8"
    for c in (1, 3, 4):
        x = random_images(rng, 5, 37, 53, c, dtype)
        sig = _sigmas(rng, 5)
        check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, sig[i], uint8=u8), x, {"sigma": sig},
                 layout=layout, backend=backend)
    x = random_images(rng, 3, 70, 97, 4, dtype)  # the unrolled kernel (float32: 53 KiB of shared memory)
    check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, 1.5, uint8=u8), x, {"sigma": 1.5},
             layout=layout, backend=backend)
    x = random_images(rng, 2, 70, 97, 4, dtype)  # several tiles; k = 161 needs the one-channel variant
    check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, [1.5, 20.0][i], [11, 161][i]), x,
             {"sigma": [1.5, 20.0], "kernel_size": [11, 161]}, layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (40, 33)]]
    sig = [1.0, 2.5, 1.5, 0.7]
    check_op(gpuaug.gaussian_blur, lambda s, i: R.gaussian_blur(s, sig[i], uint8=u8), xs, {"sigma": sig},
             varshape=True, backend=backend)
