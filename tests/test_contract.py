"""The contract every registered op follows: bad input is refused with a clear message and
nothing written; kernels compile; parameters broadcast; import is cheap."""
import subprocess
import sys

import numpy as np
import pytest

import gpuaug
from gpuaug._registry import OP_MODULES

OPS = sorted(gpuaug.registry)


def _args(name, n=3, h=12, w=10, seed=0):
    spec = gpuaug.registry[name]
    return spec.example(np.random.default_rng(seed), n, h, w) if spec.example else {}


def _x(n=3, h=12, w=10, c=3, dtype=np.uint8):
    return np.random.default_rng(0).integers(0, 256, (n, h, w, c)).astype(dtype)


def test_import_is_cheap_and_gpu_free():
    code = ("import sys, time; t = time.time(); import gpuaug; dt = time.time() - t; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('cupy', 'numba', 'nvidia', 'torch')]; "
            "print(dt); assert not bad, bad; assert dt < 1.0, dt")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_registry_lists_every_module():
    assert len(OPS) >= len(OP_MODULES)
    for name in OPS:
        spec = gpuaug.registry[name]
        assert spec.func.__doc__ and "Example" in spec.func.__doc__, f"{name}: docstring lacks an example"
        assert getattr(gpuaug, name) is spec.func
    with pytest.raises(KeyError, match="no op named"):
        gpuaug.registry["no_such_op"]


@pytest.mark.parametrize("name", OPS)
def test_runs_with_defaults_and_examples(name):
    spec = gpuaug.registry[name]
    kw = _args(name)
    y = spec.func(_x(), **kw)
    out_dtype = {p.name: p.default for p in spec.params}.get("dtype") or "uint8"  # ops with a dtype= choose theirs
    assert y.dtype == np.dtype(kw.get("dtype", out_dtype)) and y.shape[0] == 3


@pytest.mark.parametrize("name", OPS)
def test_bad_inputs(name):
    f = gpuaug.registry[name].func
    kw = _args(name)
    with pytest.raises(ValueError, match="x: got 2-D"):
        f(np.zeros((4, 4), np.uint8), **kw)
    with pytest.raises(ValueError, match="x: got 5-D"):
        f(np.zeros((1, 2, 4, 4, 3), np.uint8), **kw)
    with pytest.raises(TypeError, match="x: got dtype int32"):
        f(_x(dtype=np.int32), **kw)
    with pytest.raises(ValueError, match="x: got 2 channels"):
        f(_x(c=2), **kw)
    with pytest.raises(ValueError, match="x: got an empty batch"):
        f(np.zeros((0, 12, 10, 3), np.uint8), **kw)
    with pytest.raises(ValueError, match="x: got an empty list"):
        f([], **kw)
    with pytest.raises(ValueError, match="layout: got 'HWCN'"):
        f(_x(), layout="HWCN", **kw)
    with pytest.raises(ValueError, match="backend: got 'tpu'"):
        f(_x(), backend="tpu", **kw)
    with pytest.raises(TypeError, match="x: got"):
        f("not an image", **kw)


@pytest.mark.parametrize("name", OPS)
def test_bad_out_writes_nothing(name):
    f = gpuaug.registry[name].func
    kw = _args(name)
    x = _x()
    good = f(x, **kw)
    wrong_shape = np.full((good.shape[0] + 1,) + good.shape[1:], 7, good.dtype)
    with pytest.raises(ValueError, match="out: got shape"):
        f(x, out=wrong_shape, **kw)
    assert (wrong_shape == 7).all()
    bad = "float16" if good.dtype == np.float32 else "float32"
    wrong_dtype = np.full(good.shape, 7, bad)
    with pytest.raises(ValueError, match=f"out: got shape .* dtype {bad}"):
        f(x, out=wrong_dtype, **kw)
    ro = np.zeros(good.shape, good.dtype)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out: the array is read-only"):
        f(x, out=ro, **kw)
    if good.shape == x.shape and good.dtype == x.dtype:
        with pytest.raises(ValueError, match="out: overlaps the input"):
            f(x, out=x, **kw)


@pytest.mark.parametrize("name", OPS)
def test_bad_parameter_lengths(name):
    spec = gpuaug.registry[name]
    kw = _args(name, n=3)
    per = [p for p in spec.params if p.per_sample and p.name in kw]
    for p in per:
        bad = dict(kw)
        v = np.asarray(kw[p.name])
        bad[p.name] = np.concatenate([v, v[:1]]) if v.ndim > len(p.shape) else np.stack([v] * 5)
        with pytest.raises(ValueError, match=f"{p.name}: got shape"):
            spec.func(_x(n=3), **bad)
        if p.kind == "float":
            nan = np.array(v, np.float64)
            nan.reshape(-1)[0] = np.nan
            with pytest.raises(ValueError, match=f"{p.name}: .*finite"):
                spec.func(_x(n=3), **{**kw, p.name: nan})


@pytest.mark.parametrize("name", OPS)
def test_cuda_c_compiles(name):
    """NVRTC compiles every specialisation (no GPU needed; needs NVRTC from the CUDA toolkit)."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not available here ({type(e).__name__})")
    from gpuaug.kernels._cuda import check_compile, kernel_name

    spec = gpuaug.registry[name]
    k = spec.kernels
    names = [kernel_name(k.cu[1], d, c) for d in spec.dtypes for c in spec.channels]
    names += list(getattr(k, "variants", ()))
    ptx = check_compile(k.cu[0], names)
    assert ".entry" in ptx


def test_gpu_only_backends_refuse_numpy_input():
    from helpers import SIM

    with pytest.raises(ValueError, match="backend: got 'cuda' with a NumPy input"):
        gpuaug.flip(_x(), backend="cuda")
    if not SIM:
        with pytest.raises(ValueError, match="backend: got 'numba' with a NumPy input"):
            gpuaug.flip(_x(), backend="numba")
