import numpy as np
import pytest

import gpuaug
import ref_colour as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
@pytest.mark.parametrize("co", (1, 3))
def test_grayscale_cpu(dtype, layout, channels, co):
    rng = np.random.default_rng(1)
    x = random_images(rng, 4, 37, 53, channels, dtype)
    check_op(gpuaug.grayscale, lambda s, i: R.grayscale(s, co, R.is_int(dtype)), x, {"num_output_channels": co},
             layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grayscale_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.grayscale, lambda s, i: R.grayscale(s, 3, R.is_int(dtype)), xs, {"num_output_channels": 3},
             varshape=True)


def test_grayscale_shapes_and_rounding():
    rng = np.random.default_rng(3)
    x = random_images(rng, 2, 5, 6, 4, "uint8")
    assert gpuaug.grayscale(x).shape == (2, 5, 6, 1)
    y = gpuaug.grayscale(x.transpose(0, 3, 1, 2), 3, layout="NCHW")
    assert y.shape == (2, 3, 5, 6) and (y[:, 0] == y[:, 1]).all() and (y[:, 1] == y[:, 2]).all()
    assert gpuaug.grayscale(x[0]).shape == (5, 6, 1)
    gray = np.array([[[[v, v, v] for v in range(256)]]], np.uint8)  # 0.9999 v rounds back to v
    np.testing.assert_array_equal(gpuaug.grayscale(gray)[..., 0], gray[..., 0])
    # exact: (0, 12, 4) is 7.5 exactly (rounds up), (5, 0, 0) 1.4945, (0, 0, 13) 1.482
    exact = np.array([[[[0, 12, 4], [5, 0, 0], [0, 0, 13]]]], np.uint8)
    np.testing.assert_array_equal(gpuaug.grayscale(exact)[0, 0, :, 0], [8, 1, 1])


def test_grayscale_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    for bad in (2, 0, True, "1"):
        with pytest.raises(ValueError, match="num_output_channels: got"):
            gpuaug.grayscale(x, bad)
    with pytest.raises(ValueError, match="out: got shape"):
        gpuaug.grayscale(x, 1, out=np.zeros((2, 4, 4, 3), np.uint8))


def test_grayscale_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    x = random_images(rng, 2, 9, 11, 3, "uint8")
    for co in (1, 3):
        tv = F.rgb_to_grayscale(torch.from_numpy(x).permute(0, 3, 1, 2), co).permute(0, 2, 3, 1).numpy()
        assert np.abs(gpuaug.grayscale(x, co).astype(int) - tv.astype(int)).max() <= 1  # tv truncates
        xf = x.astype(np.float32) / 255
        tv = F.rgb_to_grayscale(torch.from_numpy(xf).permute(0, 3, 1, 2), co).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(gpuaug.grayscale(xf, co), tv, rtol=1e-5, atol=1e-6)


def test_grayscale_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_grayscale_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        check_op(gpuaug.grayscale, lambda s, i: R.grayscale(s, 3, R.is_int(dtype)), x, {"num_output_channels": 3},
                 backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_grayscale_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    for c in (1, 3, 4):
        for co in (1, 3):
            for h, w in [(37, 53), (16, 16), (224, 224)]:
                x = random_images(rng, 5, h, w, c, dtype)
                check_op(gpuaug.grayscale, lambda s, i: R.grayscale(s, co, R.is_int(dtype)), x,
                         {"num_output_channels": co}, layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.grayscale, lambda s, i: R.grayscale(s, 1, R.is_int(dtype)), xs, {}, varshape=True,
             backend=backend)
