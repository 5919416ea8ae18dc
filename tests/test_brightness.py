import numpy as np
import pytest

import gpuaug
import ref_colour as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_brightness_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    m = R.top(dtype)
    f = np.array([0.0, 0.5, 1.0, 1.7, 3.0])
    check_op(gpuaug.brightness, lambda s, i: R.brightness(s, f[i], m), x, {"factor": f}, layout=layout)
    check_op(gpuaug.brightness, lambda s, i: R.brightness(s, 1.3, m), x, {"factor": 1.3}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_brightness_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    f, m = [0.5, 1.0, 2.0], R.top(dtype)
    check_op(gpuaug.brightness, lambda s, i: R.brightness(s, f[i], m), xs, {"factor": f}, varshape=True)


def test_brightness_alpha_single_image_noncontiguous():
    rng = np.random.default_rng(3)
    x = random_images(rng, 2, 6, 7, 4, "uint8")
    y = gpuaug.brightness(x, 2.0)
    np.testing.assert_array_equal(y[..., 3], x[..., 3])  # alpha passes through
    big = random_images(rng, 4, 20, 30, 3, "float32")
    view = big[::2, 3:17, ::3]
    np.testing.assert_allclose(gpuaug.brightness(view, 0.5), view * 0.5, rtol=1e-6)
    np.testing.assert_array_equal(gpuaug.brightness(big[0], 1.0), big[0])


def test_brightness_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="factor: .*>= 0"):
        gpuaug.brightness(x, -0.5)
    with pytest.raises(ValueError, match="factor: .*finite"):
        gpuaug.brightness(x, [1.0, np.nan])
    with pytest.raises(ValueError, match="factor: got shape"):
        gpuaug.brightness(x, [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="factor: got None"):
        gpuaug.brightness(x, None)


def test_brightness_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    x = random_images(rng, 2, 9, 11, 3, "uint8")
    for f in (0.3, 1.0, 1.8):
        tv = F.adjust_brightness(torch.from_numpy(x).permute(0, 3, 1, 2), f).permute(0, 2, 3, 1).numpy()
        assert np.abs(gpuaug.brightness(x, f).astype(int) - tv.astype(int)).max() <= 1  # tv truncates
        xf = x.astype(np.float32) / 255
        tv = F.adjust_brightness(torch.from_numpy(xf).permute(0, 3, 1, 2), f).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(gpuaug.brightness(xf, f), tv, rtol=1e-5, atol=1e-6)


def test_brightness_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_brightness_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        f, m = [0.5, 2.0], R.top(dtype)
        check_op(gpuaug.brightness, lambda s, i: R.brightness(s, f[i], m), x, {"factor": f},
                 backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_brightness_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    m = R.top(dtype)
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:  # tails, and exact 16-pixel groups (packed path)
            x = random_images(rng, 5, h, w, c, dtype)
            f = rng.uniform(0.0, 3.0, 5)
            check_op(gpuaug.brightness, lambda s, i: R.brightness(s, f[i], m), x, {"factor": f},
                     layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.brightness, lambda s, i: R.brightness(s, 1.5, m), xs, {"factor": 1.5}, varshape=True,
             backend=backend)
