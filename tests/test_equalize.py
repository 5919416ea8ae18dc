import numpy as np
import pytest

import gpuaug
import ref_intensity as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


def _images(rng, n, h, w, c, dtype):
    """Random images with uneven histograms: a few levels, skewed, and one flat image
    (step == 0: left as it is)."""
    x = random_images(rng, n, h, w, c, dtype)
    if np.dtype(dtype) == np.uint8:
        x[0] = (x[0] // 64) * 40 + 30          # four levels
        if n > 1:
            x[1] = (x[1].astype(np.float64) ** 2 / 255).astype(np.uint8)  # skewed dark
        if n > 2:
            x[2] = 77                            # one level: unchanged
    else:
        x[0] = np.floor(x[0] * 4) / 5 + 0.1
        if n > 1:
            x[1] = x[1] ** 2
        if n > 2:
            x[2] = 0.3
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_equalize_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = _images(rng, 5, 37, 53, channels, dtype)
    u8 = dtype == "uint8"
    check_op(gpuaug.equalize, lambda s, i: R.equalize(s, u8), x, {}, layout=layout, atol_u8=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_equalize_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES + [(40, 30)]]
    u8 = dtype == "uint8"
    check_op(gpuaug.equalize, lambda s, i: R.equalize(s, u8), xs, {}, varshape=True, atol_u8=0)


def test_equalize_small_images_unchanged_and_views():
    rng = np.random.default_rng(3)
    x = random_images(rng, 2, 4, 4, 3, "uint8")  # 16 pixels: step == 0, nothing changes
    np.testing.assert_array_equal(gpuaug.equalize(x), x)
    big = _images(rng, 4, 40, 60, 3, "uint8")
    view = big[::2, 5:, ::2]
    ref = np.stack([R.equalize(v.astype(np.float64), True) for v in view])
    np.testing.assert_array_equal(gpuaug.equalize(view), ref)
    np.testing.assert_array_equal(gpuaug.equalize(big[1]), R.equalize(big[1].astype(np.float64), True))


def test_equalize_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    x = _images(rng, 4, 30, 41, 3, "uint8")
    tv = F.equalize(torch.from_numpy(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
    np.testing.assert_array_equal(gpuaug.equalize(x), tv)
    xf = (x.astype(np.float32) / 255)
    tv = F.equalize(torch.from_numpy(xf).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
    np.testing.assert_allclose(gpuaug.equalize(xf), tv, rtol=1e-6, atol=1e-6)


def test_equalize_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_equalize_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        # 16 x 17 pixels: more than 255 non-top pixels, so the tables are not the identity
        x = _images(rng, 2, 16, 17, 3, dtype)
        u8 = dtype == "uint8"
        check_op(gpuaug.equalize, lambda s, i: R.equalize(s, u8), x, {}, backend="numba-sim", layout="NCHW",
                 atol_u8=0)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_equalize_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    u8 = dtype == "uint8"
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:
            x = _images(rng, 5, h, w, c, dtype)
            check_op(gpuaug.equalize, lambda s, i: R.equalize(s, u8), x, {}, layout=layout, backend=backend,
                     atol_u8=0)
    xs = [_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES + [(40, 30)]]
    check_op(gpuaug.equalize, lambda s, i: R.equalize(s, u8), xs, {}, varshape=True, backend=backend, atol_u8=0)


@gpu
def test_equalize_on_a_stream_gpu():
    """All three passes run on the given stream (checked by waiting on that stream only)."""
    import cupy

    rng = np.random.default_rng(7)
    x = _images(rng, 6, 64, 48, 3, "uint8")
    ref = np.stack([R.equalize(s.astype(np.float64), True) for s in x])
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        xd = cupy.asarray(x)
    s.synchronize()
    for backend in ("cuda", "numba"):
        y = gpuaug.equalize(xd, stream=s, backend=backend)
        s.synchronize()
        np.testing.assert_array_equal(cupy.asnumpy(y), ref)
