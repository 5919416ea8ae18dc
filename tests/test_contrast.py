import numpy as np
import pytest

import gpuaug
import ref_colour as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_contrast_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    m, i8 = R.top(dtype), R.is_int(dtype)
    f = np.array([0.0, 0.5, 1.0, 1.7, 3.0])
    check_op(gpuaug.contrast, lambda s, i: R.contrast(s, f[i], m, i8), x, {"factor": f}, layout=layout)
    check_op(gpuaug.contrast, lambda s, i: R.contrast(s, 0.6, m, i8), x, {"factor": 0.6}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_contrast_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    f, m, i8 = [0.5, 1.0, 2.0], R.top(dtype), R.is_int(dtype)
    check_op(gpuaug.contrast, lambda s, i: R.contrast(s, f[i], m, i8), xs, {"factor": f}, varshape=True)


def test_contrast_mean_is_per_sample_and_floored():
    # sample 0 is dark, sample 1 bright: each blends with its own mean
    x = np.zeros((2, 2, 2, 3), np.uint8)
    x[1] = 200
    y = gpuaug.contrast(x, 0.0)
    assert (y[0] == 0).all() and (y[1] == 199).all()  # gray(200, 200, 200) = floor(199.98)
    xf = x.astype(np.float32) / 255
    np.testing.assert_allclose(gpuaug.contrast(xf, 0.0)[1], 0.9999 * 200 / 255, rtol=1e-6)


def test_contrast_alpha_is_copied_and_not_averaged():
    rng = np.random.default_rng(3)
    x = random_images(rng, 2, 6, 7, 4, "uint8")
    y = gpuaug.contrast(x, 0.3)
    np.testing.assert_array_equal(y[..., 3], x[..., 3])
    np.testing.assert_array_equal(y[..., :3], gpuaug.contrast(np.ascontiguousarray(x[..., :3]), 0.3))


def test_contrast_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="factor: .*>= 0"):
        gpuaug.contrast(x, [1.0, -0.1])
    with pytest.raises(ValueError, match="factor: .*finite"):
        gpuaug.contrast(x, np.inf)
    with pytest.raises(ValueError, match="factor: got shape"):
        gpuaug.contrast(x, np.ones((2, 1)))


def test_contrast_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    for c in (1, 3):
        x = random_images(rng, 2, 9, 11, c, "uint8")
        for f in (0.3, 1.0, 1.8):
            tv = F.adjust_contrast(torch.from_numpy(x).permute(0, 3, 1, 2), f).permute(0, 2, 3, 1).numpy()
            assert np.abs(gpuaug.contrast(x, f).astype(int) - tv.astype(int)).max() <= 1  # tv truncates
            xf = x.astype(np.float32) / 255
            tv = F.adjust_contrast(torch.from_numpy(xf).permute(0, 3, 1, 2), f).permute(0, 2, 3, 1).numpy()
            np.testing.assert_allclose(gpuaug.contrast(xf, f), tv, rtol=1e-5, atol=1e-6)


def test_contrast_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_contrast_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        f, m, i8 = [0.5, 2.0], R.top(dtype), R.is_int(dtype)
        check_op(gpuaug.contrast, lambda s, i: R.contrast(s, f[i], m, i8), x, {"factor": f},
                 backend="numba-sim", layout="NCHW")
    xs = [random_images(rng, 1, h, w, 3, "uint8")[0] for h, w in [(2, 3), (3, 2)]]
    check_op(gpuaug.contrast, lambda s, i: R.contrast(s, 0.4, 255, True), xs, {"factor": 0.4},
             backend="numba-sim", varshape=True)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_contrast_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    m, i8 = R.top(dtype), R.is_int(dtype)
    for c in (1, 3, 4):
        for n, h, w in [(5, 37, 53), (5, 16, 16), (3, 224, 224), (2, 300, 500)]:  # 2 x 300 x 500: 32 partials
            x = random_images(rng, n, h, w, c, dtype)
            f = rng.uniform(0.0, 3.0, n)
            check_op(gpuaug.contrast, lambda s, i: R.contrast(s, f[i], m, i8), x, {"factor": f},
                     layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.contrast, lambda s, i: R.contrast(s, 1.5, m, i8), xs, {"factor": 1.5}, varshape=True,
             backend=backend)
