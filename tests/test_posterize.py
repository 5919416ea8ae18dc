import numpy as np
import pytest

import gpuaug
import ref_intensity as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_posterize_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 8, 37, 53, channels, dtype)
    u8 = dtype == "uint8"
    bits = np.arange(1, 9)
    check_op(gpuaug.posterize, lambda s, i: R.posterize(s, bits[i], u8), x, {"bits": bits}, layout=layout,
             atol_u8=0)
    check_op(gpuaug.posterize, lambda s, i: R.posterize(s, 3, u8), x, {"bits": 3}, layout=layout, atol_u8=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_posterize_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    bits = [1, 4, 8]
    check_op(gpuaug.posterize, lambda s, i: R.posterize(s, bits[i], dtype == "uint8"), xs, {"bits": bits},
             varshape=True, atol_u8=0)


def test_posterize_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    for bad in (0, 9, -1):
        with pytest.raises(ValueError, match="bits: "):
            gpuaug.posterize(x, bad)
    with pytest.raises(ValueError, match="bits: .*integers"):
        gpuaug.posterize(x, 2.5)
    with pytest.raises(ValueError, match="bits: .*integers"):
        gpuaug.posterize(x, [np.nan, 2])
    with pytest.raises(ValueError, match="bits: got shape"):
        gpuaug.posterize(x, [1, 2, 3])


def test_posterize_float_matches_uint8_levels():
    rng = np.random.default_rng(3)
    x = random_images(rng, 2, 9, 11, 3, "uint8")
    for bits in range(1, 9):
        a = gpuaug.posterize(x, bits).astype(np.float64)
        b = gpuaug.posterize(x.astype(np.float32) / 256, bits) * 256
        np.testing.assert_array_equal(a, b)


def test_posterize_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    for dtype in ("uint8", "float32"):
        x = random_images(rng, 2, 9, 11, 3, dtype)
        for bits in (1, 3, 8):
            tv = F.posterize(torch.from_numpy(x).permute(0, 3, 1, 2), bits).permute(0, 2, 3, 1).numpy()
            np.testing.assert_allclose(gpuaug.posterize(x, bits), tv, rtol=1e-6)


def test_posterize_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_posterize_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        bits = [2, 7]
        check_op(gpuaug.posterize, lambda s, i: R.posterize(s, bits[i], dtype == "uint8"), x, {"bits": bits},
                 backend="numba-sim", layout="NCHW", atol_u8=0)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_posterize_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    u8 = dtype == "uint8"
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:
            x = random_images(rng, 8, h, w, c, dtype)
            bits = np.arange(1, 9)
            check_op(gpuaug.posterize, lambda s, i: R.posterize(s, bits[i], u8), x, {"bits": bits},
                     layout=layout, backend=backend, atol_u8=0)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.posterize, lambda s, i: R.posterize(s, 2, u8), xs, {"bits": 2}, varshape=True,
             backend=backend, atol_u8=0)
