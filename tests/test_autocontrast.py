import numpy as np
import pytest

import gpuaug
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


def _ref(img, u8):
    """torchvision's autocontrast in float64 (before the store's rounding)."""
    bound = 255.0 if u8 else 1.0
    lo = img.min(axis=(0, 1), keepdims=True)
    hi = img.max(axis=(0, 1), keepdims=True)
    flat = hi == lo
    scale = np.where(flat, 1.0, (hi - lo) / bound)
    return np.clip((img - np.where(flat, 0.0, lo)) / scale, 0, bound)


def _images(rng, n, h, w, c, dtype):
    """Narrow-range images (stretched by autocontrast), one flat image, one flat channel."""
    x = random_images(rng, n, h, w, c, dtype)
    if np.dtype(dtype) == np.uint8:
        x[0] = x[0] // 4 + 40
        if n > 1:
            x[1] = 77
        if n > 2:
            x[2, ..., 0] = 9
    else:
        x[0] = x[0] * 0.3 + 0.2
        if n > 1:
            x[1] = 0.3
        if n > 2:
            x[2, ..., 0] = 0.9
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_autocontrast_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = _images(rng, 5, 37, 53, channels, dtype)
    u8 = dtype == "uint8"
    check_op(gpuaug.autocontrast, lambda s, i: _ref(s, u8), x, {}, layout=layout,
             rtol=2e-3 if dtype == "float16" else 1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_autocontrast_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES + [(40, 30)]]
    u8 = dtype == "uint8"
    check_op(gpuaug.autocontrast, lambda s, i: _ref(s, u8), xs, {}, varshape=True,
             rtol=2e-3 if dtype == "float16" else 1e-5)


def test_autocontrast_stretches_and_views():
    rng = np.random.default_rng(3)
    x = _images(rng, 4, 30, 20, 3, "uint8")
    y = gpuaug.autocontrast(x)
    assert (y[0].min(axis=(0, 1)) == 0).all() and (y[0].max(axis=(0, 1)) == 255).all()
    np.testing.assert_array_equal(y[1], x[1])  # flat: unchanged
    view = x[::2, 3:, ::2]
    ref = np.stack([_ref(v.astype(np.float64), True) for v in view])
    assert np.abs(gpuaug.autocontrast(view).astype(float) - np.floor(ref + 0.5)).max() <= 1


def test_autocontrast_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    x = _images(rng, 4, 30, 41, 3, "uint8")
    tv = F.autocontrast(torch.from_numpy(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
    assert np.abs(gpuaug.autocontrast(x).astype(int) - tv.astype(int)).max() <= 1  # we round, it truncates
    xf = x.astype(np.float32) / 255
    tv = F.autocontrast(torch.from_numpy(xf).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
    np.testing.assert_allclose(gpuaug.autocontrast(xf), tv, rtol=1e-5, atol=1e-6)


def test_autocontrast_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_autocontrast_gpu")
    rng = np.random.default_rng(5)
    for dtype in ("uint8", "float32"):
        x = _images(rng, 3, 6, 7, 3, dtype)
        u8 = dtype == "uint8"
        check_op(gpuaug.autocontrast, lambda s, i: _ref(s, u8), x, {}, backend="numba-sim", layout="NCHW")


def test_autocontrast_compiles_with_nvrtc():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from gpuaug.kernels._cuda import check_compile
    from gpuaug.ops.autocontrast import KERNELS

    names = [f"gpuaug_autocontrast<{t}, {c}>" for t in ("unsigned char", "gpuaug::half", "float") for c in (1, 3, 4)]
    try:
        check_compile("autocontrast.cu", names + list(KERNELS.variants))
    except (ImportError, OSError) as e:
        pytest.skip(f"NVRTC not loadable: {e}")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_autocontrast_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    u8 = dtype == "uint8"
    tol = 2e-3 if dtype == "float16" else 1e-5
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:
            x = _images(rng, 5, h, w, c, dtype)
            check_op(gpuaug.autocontrast, lambda s, i: _ref(s, u8), x, {}, layout=layout, backend=backend, rtol=tol)
    xs = [_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES + [(40, 30)]]
    check_op(gpuaug.autocontrast, lambda s, i: _ref(s, u8), xs, {}, varshape=True, backend=backend, rtol=tol)


@gpu
def test_autocontrast_u8_path_gpu():
    """Dense uint8 NHWC batches take the two uint8 launches; their bytes equal the generic
    three launches' (a strided view of the same images), and an ``out=`` the vector kernel
    cannot write (a strided view) gets step 1b's rows and the generic map from the same parts."""
    import cupy

    from gpuaug.kernels._cuda import record

    rng = np.random.default_rng(11)
    for c in (1, 3, 4):
        x = _images(rng, 6, 32, 48, c, "uint8")
        x[5] = 0
        x[5, 3, 7] = 1  # a 0/1 image: a scale of 1/255
        xd = cupy.asarray(x)
        with record() as log:
            y = gpuaug.autocontrast(xd)
        assert [e[3] for e in log if e[0] == "launch"] == [(256,), (256,)]  # parts_u8, then the u8 map
        wide = cupy.zeros((6, 32, 50, c), cupy.uint8)
        wide[:, :, :48] = xd
        with record() as log:
            generic = gpuaug.autocontrast(wide[:, :, :48])
        assert [e[3] for e in log if e[0] == "launch"][1:] == [(128,), (32, 8, 1)]  # rows, generic map
        np.testing.assert_array_equal(cupy.asnumpy(y), cupy.asnumpy(generic))
        out = cupy.full((6, 32, 50, c), 13, cupy.uint8)
        got = gpuaug.autocontrast(xd, out=out[:, :, 1:49])
        np.testing.assert_array_equal(cupy.asnumpy(got), cupy.asnumpy(y))
        assert (out[:, :, 0] == 13).all() and (out[:, :, 49] == 13).all()
        ref = np.stack([_ref(s.astype(np.float64), True) for s in x])
        assert np.abs(cupy.asnumpy(y).astype(float) - np.floor(ref + 0.5)).max() <= 1
