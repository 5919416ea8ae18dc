import numpy as np
import pytest

import gpuaug
import ref_intensity as R
from helpers import (DTYPES, LAYOUTS, SIM, assert_close, from_layout, gpu, poison_values, random_images,
                     to_layout)

SIZES = [(5, 7), (37, 53), (1, 9)]
OUT_DTYPES = ("float32", "float16")


def check_layout(fn, ref_fn, x_nhwc, kw, *, layout, out_layout, odt, backend="cpu"):
    """Like helpers.check_op, for ops whose output dtype/layout differ from the input's."""
    refs = np.stack([ref_fn(s.astype(np.float64), i) for i, s in enumerate(x_nhwc)])
    xin = to_layout(x_nhwc, layout)
    for poison in poison_values(odt):
        out = to_layout(np.full(refs.shape, poison, odt), out_layout)
        if backend in ("cuda", "numba"):
            import cupy

            out_d = cupy.asarray(out)
            got = fn(cupy.asarray(xin), out=out_d, layout=layout, backend=backend, **kw)
            assert got is out_d
            got = cupy.asnumpy(got)
        else:
            got = fn(xin, out=out, layout=layout, backend="cpu" if backend == "cpu" else "numba", **kw)
            assert got is out
        assert_close(from_layout(got, out_layout), refs, odt, what=f"{backend} {layout}->{out_layout} {poison}")


def _stats(rng, n, c, dtype):
    m = R.top(dtype)
    return rng.uniform(0, m, (n, c)), rng.uniform(0.1 * m, m, (n, c))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("odt", OUT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("out_layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_normalize_cpu(dtype, odt, layout, out_layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    mean, std = _stats(rng, 5, channels, dtype)
    kw = dict(layout=layout, out_layout=out_layout, odt=odt)
    check_layout(gpuaug.normalize, lambda s, i: R.normalize(s, mean[i], std[i]), x,
                 {"mean": mean, "std": std, "dtype": odt, "output_layout": out_layout}, **kw)
    # per channel, the same for every sample
    check_layout(gpuaug.normalize, lambda s, i: R.normalize(s, mean[0], std[0]), x,
                 {"mean": mean[0], "std": std[0], "dtype": odt, "output_layout": out_layout}, **kw)
    # one number; per sample for every channel (N, 1)
    check_layout(gpuaug.normalize, lambda s, i: R.normalize(s, 3.0, 2.0), x,
                 {"mean": 3.0, "std": 2.0, "dtype": odt, "output_layout": out_layout}, **kw)
    check_layout(gpuaug.normalize, lambda s, i: R.normalize(s, mean[i, 0], std[i, 0]), x,
                 {"mean": mean[:, :1], "std": std[:, :1], "dtype": odt, "output_layout": out_layout}, **kw)


def test_normalize_default_layout_and_dtype():
    rng = np.random.default_rng(2)
    x = random_images(rng, 2, 5, 6, 3, "uint8")
    y = gpuaug.normalize(x.transpose(0, 3, 1, 2), 100, 50, layout="NCHW")
    assert y.shape == (2, 3, 5, 6) and y.dtype == np.float32
    np.testing.assert_allclose(y, (x.transpose(0, 3, 1, 2) - 100.0) / 50, rtol=1e-6)
    img = gpuaug.normalize(x[0], (1, 2, 3), (4, 5, 6), dtype="float16", output_layout="NCHW")
    assert img.shape == (3, 5, 6) and img.dtype == np.float16


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("out_layout", LAYOUTS)
def test_normalize_varshape_cpu(dtype, out_layout):
    rng = np.random.default_rng(3)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    mean, std = _stats(rng, 3, 3, dtype)
    refs = [R.normalize(s.astype(np.float64), mean[i], std[i]) for i, s in enumerate(xs)]
    outs = [np.full(r.shape if out_layout == "NHWC" else r.shape[2:] + r.shape[:2], np.nan, np.float32)
            for r in refs]
    for out in (None, outs):
        got = gpuaug.normalize(xs, mean, std, output_layout=out_layout, out=out)
        assert isinstance(got, list) and len(got) == 3
        for g, r in zip(got, refs):
            g = g if out_layout == "NHWC" else g.transpose(1, 2, 0)
            assert_close(g, r, "float32")
        if out is not None:
            assert all(g is o for g, o in zip(got, outs))


def test_normalize_then_denormalize_is_identity():
    rng = np.random.default_rng(4)
    for dtype in ("uint8", "float32"):
        x = random_images(rng, 4, 13, 17, 3, dtype)
        mean, std = _stats(rng, 4, 3, dtype)
        y = gpuaug.normalize(x, mean, std, output_layout="NCHW")
        back = gpuaug.normalize(y, -mean / std, 1 / std, layout="NCHW", output_layout="NHWC")
        np.testing.assert_allclose(back, x.astype(np.float64), rtol=1e-5, atol=1e-4 * R.top(dtype))


def test_normalize_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="std: .*non-zero"):
        gpuaug.normalize(x, 0, [1, 0, 1])
    with pytest.raises(ValueError, match="mean: got shape"):
        gpuaug.normalize(x, [1, 2], 1)
    with pytest.raises(ValueError, match="std: got shape"):
        gpuaug.normalize(x, 0, np.ones((3, 3)))
    with pytest.raises(ValueError, match="mean: .*finite"):
        gpuaug.normalize(x, [0, np.nan, 0], 1)
    with pytest.raises(ValueError, match="std: .*finite"):
        gpuaug.normalize(x, 0, np.inf)
    with pytest.raises(ValueError, match="dtype: got 'uint8'"):
        gpuaug.normalize(x, 0, 1, dtype="uint8")
    with pytest.raises(ValueError, match="output_layout: got 'CHW'"):
        gpuaug.normalize(x, 0, 1, output_layout="CHW")
    with pytest.raises(TypeError, match="mean: got None"):
        gpuaug.normalize(x, None, 1)


def test_normalize_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(5)
    x = random_images(rng, 2, 9, 11, 3, "float32")
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    tv = F.normalize(torch.from_numpy(x).permute(0, 3, 1, 2), mean, std).numpy()
    np.testing.assert_allclose(gpuaug.normalize(x, mean, std, output_layout="NCHW"), tv, rtol=1e-5, atol=1e-6)


def test_normalize_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_normalize_gpu")
    rng = np.random.default_rng(6)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        mean, std = _stats(rng, 2, 3, dtype)
        check_layout(gpuaug.normalize, lambda s, i: R.normalize(s, mean[i], std[i]), x,
                     {"mean": mean, "std": std, "output_layout": "NCHW"}, layout="NHWC", out_layout="NCHW",
                     odt="float32", backend="numba-sim")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("odt", OUT_DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("out_layout", LAYOUTS)
def test_normalize_gpu(backend, dtype, odt, layout, out_layout):
    rng = np.random.default_rng(7)
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224), (9, 12)]:  # generic and vectorised (w % 4 == 0)
            x = random_images(rng, 5, h, w, c, dtype)
            mean, std = _stats(rng, 5, c, dtype)
            check_layout(gpuaug.normalize, lambda s, i: R.normalize(s, mean[i], std[i]), x,
                         {"mean": mean, "std": std, "dtype": odt, "output_layout": out_layout},
                         layout=layout, out_layout=out_layout, odt=odt, backend=backend)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_normalize_device_parameters_gpu(backend):
    """mean/std given as CuPy arrays (not read back: no value checks, no sync)."""
    import cupy

    rng = np.random.default_rng(8)
    x = random_images(rng, 4, 32, 32, 3, "uint8")
    mean, std = _stats(rng, 4, 3, "uint8")
    got = gpuaug.normalize(cupy.asarray(x), cupy.asarray(mean), cupy.asarray(std[:, :1]), output_layout="NCHW",
                           backend=backend)
    ref = np.stack([R.normalize(s.astype(np.float64), mean[i], std[i, 0]) for i, s in enumerate(x)])
    assert_close(cupy.asnumpy(got).transpose(0, 2, 3, 1), ref, "float32")
