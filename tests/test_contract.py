"""The contract every registered op follows: kernels compile; parameters broadcast; import is
cheap. Bad input (refused with a clear message, nothing written) is tests/test_bad_input.py,
one test per row of docs/errors.md."""
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
        got = getattr(gpuaug, name)  # the op behind its launch plans (gpuaug._plan)
        assert got is spec.func or got.unplanned is spec.func
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



@pytest.mark.parametrize("name", OPS)
def test_cuda_c_compiles_by_value(name):
    """The by-value build (kernels/common.cuh GPUAUG_BYVAL, what run() plans replay with host
    values) of every specialisation: as many entries as the pointer build, with the same numbers
    of arguments, each with at most one parameter block (16-byte aligned, PARAM_BLOCK_FLOATS
    floats) where the pointer build has the matrix's pointer. (On the GPU, Kernel.byval checks
    the compiled kernels' argument sizes before a plan uses them.)"""
    import re
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not available here ({type(e).__name__})")
    from gpuaug.kernels._cuda import BLOCK_SIZES, byval_options, check_compile, kernel_name, source

    assert f"PARAM_BLOCK_FLOATS = GPUAUG_BYVAL > 0 ? GPUAUG_BYVAL : {BLOCK_SIZES[0]};" in source("common.cuh")
    spec = gpuaug.registry[name]
    k = spec.kernels
    names = [kernel_name(k.cu[1], d, c) for d in spec.dtypes for c in spec.channels]
    names += list(getattr(k, "variants", ()))

    def signatures(ptx):  # per entry: its argument declarations, names dropped
        return [[" ".join(a.split()[:-1]) + ("[" + a.split("[")[1] if "[" in a else "")
                 for a in (q.strip() for q in sig.split(",")) if a]
                for sig in re.findall(r"\.entry\s+\S+\(([^)]*)\)", ptx)]

    plain = signatures(check_compile(k.cu[0], names))
    # every op's kernels with the small block; the large one (16 KB of arguments) for a few
    for floats in BLOCK_SIZES[:1] + (BLOCK_SIZES[1:] if name in ("flip", "erase", "normalize") else ()):
        byval = signatures(check_compile(k.cu[0], names, options=byval_options(floats)))
        assert sorted(map(len, plain)) == sorted(map(len, byval)) and plain
        block = f".param .align 16 .b8[{4 * floats}]"
        per_entry = [sig.count(block) for sig in byval]
        assert max(per_entry) <= 1 and sum(per_entry) > 0, f"{name}: blocks per entry {per_entry}"
        assert sum(sig.count(block) for sig in plain) == 0
