import numpy as np
import pytest

import gpuaug
import ref_colour as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_saturation_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    m, i8 = R.top(dtype), R.is_int(dtype)
    f = np.array([0.0, 0.5, 1.0, 1.7, 3.0])
    check_op(gpuaug.saturation, lambda s, i: R.saturation(s, f[i], m, i8), x, {"factor": f}, layout=layout)
    check_op(gpuaug.saturation, lambda s, i: R.saturation(s, 1.4, m, i8), x, {"factor": 1.4}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_saturation_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    f, m, i8 = [0.5, 1.0, 2.0], R.top(dtype), R.is_int(dtype)
    check_op(gpuaug.saturation, lambda s, i: R.saturation(s, f[i], m, i8), xs, {"factor": f}, varshape=True)


def test_saturation_zero_is_grayscale_floored():
    rng = np.random.default_rng(3)
    x = random_images(rng, 3, 8, 9, 3, "uint8")
    y = gpuaug.saturation(x, 0.0)
    k = x.astype(np.int64) @ np.array([2989, 5870, 1140])
    np.testing.assert_array_equal(y, np.repeat((k // 10000)[..., None], 3, -1))


def test_saturation_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="factor: .*>= 0"):
        gpuaug.saturation(x, -1)
    with pytest.raises(ValueError, match="factor: .*finite"):
        gpuaug.saturation(x, [np.nan, 1])
    with pytest.raises(ValueError, match="factor: got shape"):
        gpuaug.saturation(x, [1, 1, 1])


def test_saturation_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    x = random_images(rng, 2, 9, 11, 3, "uint8")
    for f in (0.0, 0.3, 1.0, 1.8):
        tv = F.adjust_saturation(torch.from_numpy(x).permute(0, 3, 1, 2), f).permute(0, 2, 3, 1).numpy()
        assert np.abs(gpuaug.saturation(x, f).astype(int) - tv.astype(int)).max() <= 1  # tv truncates
        xf = x.astype(np.float32) / 255
        tv = F.adjust_saturation(torch.from_numpy(xf).permute(0, 3, 1, 2), f).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(gpuaug.saturation(xf, f), tv, rtol=1e-5, atol=1e-6)


def test_saturation_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_saturation_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        f, m, i8 = [0.5, 2.0], R.top(dtype), R.is_int(dtype)
        check_op(gpuaug.saturation, lambda s, i: R.saturation(s, f[i], m, i8), x, {"factor": f},
                 backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_saturation_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    m, i8 = R.top(dtype), R.is_int(dtype)
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:
            x = random_images(rng, 5, h, w, c, dtype)
            f = rng.uniform(0.0, 2.0, 5)
            check_op(gpuaug.saturation, lambda s, i: R.saturation(s, f[i], m, i8), x, {"factor": f},
                     layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.saturation, lambda s, i: R.saturation(s, 1.5, m, i8), xs, {"factor": 1.5}, varshape=True,
             backend=backend)
