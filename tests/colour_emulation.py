"""Run the colour ops' CUDA C kernels on the CPU: kernels/<op>.cu compiled as host C++ against
tests/colour_host_shim.h, launched one thread at a time over the launch plan the CUDA backend
makes (gpuaug.ops._colour.plan), on NumPy arrays (uint8 and float32; float16 goes through
inline PTX). No GPU needed; checks the kernels' indexing, conversions and maths, not timing.

    with emulated("brightness") as run:   # patches the op module's CUDA launcher
        y = gpuaug.brightness(x, 1.3)      # x NumPy: runs the emulated CUDA C kernels
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(HERE), "kernels")
DTYPES = ("uint8", "float32")
_libs: dict = {}


def compiler():
    return shutil.which(os.environ.get("CXX", "g++")) or shutil.which("clang++")


def _source(spec):
    from gpuaug._registry import DTYPES as ALL

    k = spec.kernels
    from gpuaug.kernels._cuda import kernel_name

    names = [kernel_name(k.cu[1], d, c) for d in ALL for c in spec.channels] + list(k.variants)
    # (the one-launch mean-and-map kernels need the block's barrier between their two passes,
    # which this thread-after-thread emulation does not give: GPU tests check them)
    names = [n for n in names if "half" not in n and "_fused<" not in n]
    lines = ['#include "colour_host_shim.h"', f'#include "{k.cu[0]}"', "#include <cstring>",
             "using gpuaug::i64;",
             'extern "C" int run_map(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx,',
             "    unsigned by, unsigned bz, const i64* src, const i64* dst, const float* params, int P, int n,",
             "    double* partials, int nparts) {",
             "  dim3 g{gx, gy, gz}, b{bx, by, bz};"]
    sums = [n for n in names if n.startswith("gpuaug_gray_sum")]
    for n in names:
        if n in sums:
            continue
        lines.append(f'  if (!std::strcmp(name, "{n}")) {{ emulate_launch({n}, g, b, src, dst, params, P, n, '
                     '(const double*)partials, nparts); return 0; }')
    lines += ["  return 1;", "}",
              'extern "C" int run_sum(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx,',
              "    unsigned by, unsigned bz, const i64* src, const float* params, int P, int n, int bcol,",
              "    double* partials, int nparts) {",
              "  dim3 g{gx, gy, gz}, b{bx, by, bz};"]
    for n in sums:
        lines.append(f'  if (!std::strcmp(name, "{n}")) {{ emulate_launch({n}, g, b, src, params, P, n, bcol, '
                     'partials, nparts); return 0; }')
    lines += ["  return 1;", "}"]
    return "\n".join(lines) + "\n"


def library(op):
    """The compiled emulation of ``op``'s kernels (cached per process and on disk by source hash)."""
    if op in _libs:
        return _libs[op]
    import gpuaug

    spec = gpuaug.registry[op]
    src = _source(spec)
    deps = "".join(open(os.path.join(KERNELS, f)).read() for f in ("common.cuh", "colour.cuh", spec.kernels.cu[0]))
    deps += open(os.path.join(HERE, "colour_host_shim.h")).read()
    key = hashlib.sha1((src + deps).encode()).hexdigest()[:16]
    cache = os.path.join(tempfile.gettempdir(), "gpuaug-colour-emulation")
    os.makedirs(cache, exist_ok=True)
    so = os.path.join(cache, f"{op}-{key}.so")
    if not os.path.exists(so):
        cpp = os.path.join(cache, f"{op}-{key}.cpp")
        with open(cpp, "w") as f:
            f.write(src)
        tmp = so + f".{os.getpid()}"
        r = subprocess.run([compiler(), "-std=c++17", "-O1", "-shared", "-fPIC", "-w", f"-I{KERNELS}", f"-I{HERE}",
                            cpp, "-o", tmp], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"compiling the emulation of {op} failed:\n{r.stderr[-4000:]}")
        os.replace(tmp, so)
    lib = ctypes.CDLL(so)
    P = ctypes.c_void_p
    u, i = ctypes.c_uint, ctypes.c_int
    lib.run_map.argtypes = [ctypes.c_char_p] + [u] * 6 + [P, P, P, i, i, P, i]
    lib.run_sum.argtypes = [ctypes.c_char_p] + [u] * 6 + [P, P, i, i, i, P, i]
    _libs[op] = lib
    return lib


def host_table(batch):
    """descriptor_table for NumPy views (host addresses)."""
    n = batch.n
    t = np.empty((n, 6), np.int64)
    for s in range(n):
        v = batch.sample(s)
        it = v.itemsize
        t[s] = (v.__array_interface__["data"][0], v.shape[0], v.shape[1], v.strides[0] // it,
                v.strides[1] // it, v.strides[2] // it)
    return t


def _ptr(a):
    return ctypes.c_void_p(a.ctypes.data) if a is not None else None


@contextlib.contextmanager
def emulated(op, sms=132):
    """Within the block, ``gpuaug.<op>`` on NumPy input runs the emulated CUDA C kernels."""
    from gpuaug._params import column_stack
    from gpuaug.ops import _colour

    mod = importlib.import_module(f"gpuaug.ops.{op}")
    lib = library(op)
    calls = []

    def fake_apply(b, kernels, cols, *, out, backend, stream, channels=None, mean=None, skip_mean=False):
        assert b.dtype.name in DTYPES, "float16 is not emulated"
        n = b.n
        result, dst = b.alloc(out, b.shapes, channels=channels)
        src_t, dst_t = host_table(b), host_table(dst)
        par = np.ascontiguousarray(column_stack(cols, n), np.float32).reshape(n, -1)
        launches, nparts = _colour.plan(src_t, dst_t, b.dtype.name, b.channels, dst.channels, n,
                                        None if mean is None or skip_mean else mean[0], sms,
                                        channels is not None)
        partials = np.zeros((n, max(nparts, 1)), np.float64)
        for ln in launches:
            name = ln.name.format(op=kernels.cu[1]).encode()
            calls.append(ln.name.format(op=kernels.cu[1]))
            if ln.kind == "sum":
                rc = lib.run_sum(name, *ln.grid, *ln.block, _ptr(src_t), _ptr(par), par.shape[1], n, 0,
                                 _ptr(partials), nparts)
            else:
                rc = lib.run_map(name, *ln.grid, *ln.block, _ptr(src_t), _ptr(dst_t), _ptr(par), par.shape[1], n,
                                 _ptr(partials), nparts)
            assert rc == 0, f"no emulated kernel {name}"
        return result

    # the op's own name for apply (ops that call it directly), and _colour's (apply_one's)
    targets = [m for m in {mod, _colour} if hasattr(m, "apply")]
    saved = [m.apply for m in targets]
    for m in targets:
        m.apply = fake_apply
    try:
        yield calls
    finally:
        for m, f in zip(targets, saved):
            m.apply = f
