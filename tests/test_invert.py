import numpy as np
import pytest

import gpuaug
import ref_intensity as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_invert_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    m = R.top(dtype)
    check_op(gpuaug.invert, lambda s, i: R.invert(s, m), x, {}, layout=layout, atol_u8=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_invert_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    m = R.top(dtype)
    check_op(gpuaug.invert, lambda s, i: R.invert(s, m), xs, {}, varshape=True, atol_u8=0)


def test_invert_twice_is_identity_and_views():
    rng = np.random.default_rng(3)
    x = random_images(rng, 3, 13, 17, 4, "uint8")
    np.testing.assert_array_equal(gpuaug.invert(gpuaug.invert(x)), x)
    view = x[:, ::2, 1:]
    np.testing.assert_array_equal(gpuaug.invert(view), 255 - view)
    np.testing.assert_array_equal(gpuaug.invert(x[0]), 255 - x[0])


def test_invert_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    for dtype in ("uint8", "float32"):
        x = random_images(rng, 2, 9, 11, 3, dtype)
        tv = F.invert(torch.from_numpy(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(gpuaug.invert(x), tv, rtol=1e-6)


def test_invert_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_invert_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        m = R.top(dtype)
        check_op(gpuaug.invert, lambda s, i: R.invert(s, m), x, {}, backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_invert_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    m = R.top(dtype)
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:
            x = random_images(rng, 5, h, w, c, dtype)
            check_op(gpuaug.invert, lambda s, i: R.invert(s, m), x, {}, layout=layout, backend=backend, atol_u8=0)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.invert, lambda s, i: R.invert(s, m), xs, {}, varshape=True, backend=backend, atol_u8=0)
