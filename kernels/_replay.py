"""Compiled replay of launch plans: the per-call work of a planned op call in one native call.

A replay of a launch plan (gpuaug._plan) in Python costs 15-20 us of host time per call on
the H200's host: the float32 conversion of the per-sample parameters into their pinned
slot, ``cudaMemcpyAsync``, packing each launch's arguments with the input's, the output's
and the parameters' addresses, ``cuLaunchKernel``, and the event that frees the slot, each
through its own Python layers. :func:`replay` does all of it in one function compiled by
Numba, calling the CUDA driver through its function pointers (so the machine code holds no
address of this process and stays in Numba's on-disk cache): 3-5 us plus the driver's own
time.

A plan is replayed here when every launch is a :class:`gpuaug.kernels._cuda.Kernel` with
packable arguments and the only per-call slots are the input, the output and the
parameters (no descriptor tables, no scratch memory): :func:`compile_plan` says which.
"""
from __future__ import annotations

import ctypes

import numpy as np

from gpuaug.kernels.numba._dual import lazy_njit

#: patch kinds: the argument takes the input's, the output's or the parameters' address
X, Y, PAR = 0, 1, 4

#: the intrinsics calling cudaMemcpyHtoDAsync, cuLaunchKernel and cuEventRecord through their
#: addresses (made by _setup, with Numba, on first use)
MEMCPY = LAUNCH = RECORD = None


def _ccall(kinds):
    """An intrinsic ``ccall(fptr, args)``: call the C function at address ``fptr`` with the
    int64 tuple ``args`` ("q": passed as 64 bits, "i": as 32 bits), returning its int32."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    i32, i64 = ir.IntType(32), ir.IntType(64)

    @intrinsic
    def ccall(typingctx, fptr, args):
        if not isinstance(args, types.UniTuple) or args.count != len(kinds):
            return None

        def codegen(context, builder, signature, llargs):
            fnty = ir.FunctionType(i32, [i64 if k == "q" else i32 for k in kinds])
            fn = builder.inttoptr(llargs[0], fnty.as_pointer())
            vals = []
            for j, k in enumerate(kinds):
                v = builder.extract_value(llargs[1], j)
                vals.append(v if k == "q" else builder.trunc(v, i32))
            return builder.call(fn, vals)

        return types.int32(fptr, args), codegen

    return ccall


def _replay_py(fns, params, host, dev, nbytes, fn_ptrs, dims, starts, templates, patches, x, y, par,
               stream, event):
    """The replay (compiled by :func:`replay`): ``params`` (N, P) converted to float32 into the
    pinned slot ``host`` and copied to ``dev`` (``nbytes`` > 0; else ``par`` is the parameters'
    address already), every launch with its template arguments and the per-call addresses
    patched in, then ``event`` recorded (when not 0). ``fns``: the driver's (cuLaunchKernel,
    cuMemcpyHtoDAsync_v2, cuEventRecord). The first CUresult other than 0, else 0."""
    launch, memcpy, record = fns[0], fns[1], fns[2]
    if nbytes:
        for i in range(params.shape[0]):
            for j in range(params.shape[1]):
                host[i, j] = params[i, j]
        r = MEMCPY(memcpy, (dev, np.int64(host.ctypes.data), nbytes, stream))
        if r:
            return r
        par = dev
    slots = templates.copy()
    for k in range(patches.shape[0]):
        kind = patches[k, 2]
        base = x if kind == 0 else y if kind == 1 else par
        slots[starts[patches[k, 0]] + patches[k, 1]] = base + patches[k, 3]
    ptrs = np.empty(slots.shape[0], np.int64)
    addr = np.int64(slots.ctypes.data)
    for j in range(slots.shape[0]):
        ptrs[j] = addr + 8 * j
    kp = np.int64(ptrs.ctypes.data)
    for n in range(fn_ptrs.shape[0]):
        d = dims[n]
        r = LAUNCH(launch, (fn_ptrs[n], d[0], d[1], d[2], d[3], d[4], d[5], d[6], stream, kp + 8 * starts[n],
                            np.int64(0)))
        if r:
            return r
    if event:
        return RECORD(record, (event, stream))
    return 0


_STATE: dict = {}


def _setup():
    """The intrinsics (as globals of _replay_py) and the compiled replay, made once."""
    if "replay" not in _STATE:
        g = globals()
        g["MEMCPY"], g["LAUNCH"], g["RECORD"] = _ccall("qqqq"), _ccall("qiiiiiiiqqq"), _ccall("qq")
        from numba import types as t

        a2 = t.Array(t.float64, 2, "A")
        sig = t.int32(t.UniTuple(t.int64, 3), a2, t.Array(t.float32, 2, "A"), t.int64, t.int64,
                      t.Array(t.int64, 1, "A"), t.Array(t.int64, 2, "A"), t.Array(t.int64, 1, "A"),
                      t.Array(t.int64, 1, "C"), t.Array(t.int64, 2, "A"), t.int64, t.int64, t.int64, t.int64,
                      t.int64)
        _STATE["replay"] = lazy_njit(_replay_py, sig)
    return _STATE["replay"]


def replay(*args):
    """:func:`_replay_py`, compiled (on the first call; Numba's disk cache keeps it)."""
    return (_STATE.get("replay") or _setup())(*args)


def driver_functions():
    """(cuLaunchKernel, cuMemcpyHtoDAsync_v2, cuEventRecord) addresses as an int64 tuple, or None
    where the driver library cannot be loaded by that name (the Python replay then runs)."""
    got = _STATE.get("driver", 0)
    if got == 0:
        got = None
        for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                continue
            got = tuple(ctypes.cast(getattr(lib, f), ctypes.c_void_p).value
                        for f in ("cuLaunchKernel", "cuMemcpyHtoDAsync_v2", "cuEventRecord"))
            break
        _STATE["driver"] = got
    return got


def enabled() -> bool:
    """Whether launch plans replay through :func:`replay`: on unless GPUAUG_COMPILED_REPLAY=0
    (the Python replay, same launches, then runs)."""
    import os

    return os.environ.get("GPUAUG_COMPILED_REPLAY", "1") not in ("", "0")


class Compiled:
    """A plan's launches as the flat arrays :func:`replay` reads (see :func:`compile_plan`)."""

    __slots__ = ("fn_ptrs", "dims", "starts", "templates", "patches")

    def __init__(self, fn_ptrs, dims, starts, templates, patches):
        self.fn_ptrs, self.dims, self.starts = fn_ptrs, dims, starts
        self.templates, self.patches = templates, patches


def compile_plan(launches, pack):
    """``launches``: per launch (kernel function handle, grid, block, shared memory, argument
    values with None at patched slots, patches as (argument index, kind, offset)); ``pack``:
    per launch a function writing its arguments into 8-byte slots (a uint64 array). A
    :class:`Compiled`, or None when a patch is of another kind (tables, scratch memory)."""
    fn_ptrs, dims, starts, slots, patches = [], [], [], [], []
    total = 0
    for n, (fptr, grid, block, smem, vals, pats) in enumerate(launches):
        for i, kind, off in pats:
            if kind not in (X, Y, PAR) or type(off) is not int:
                return None
            patches.append((n, i, kind, off))
        g = (grid, 1, 1) if isinstance(grid, int) else tuple(grid) + (1, 1)
        b = (block, 1, 1) if isinstance(block, int) else tuple(block) + (1, 1)
        fn_ptrs.append(fptr)
        dims.append((g[0], g[1], g[2], b[0], b[1], b[2], smem))
        starts.append(total)
        buf = np.zeros(max(len(vals), 1), np.uint64)
        pack[n](buf, [0 if v is None else v for v in vals])
        slots.append(buf)
        total += len(buf)
    return Compiled(np.array(fn_ptrs, np.int64), np.array(dims, np.int64).reshape(-1, 7),
                    np.array(starts, np.int64), np.concatenate(slots).view(np.int64),
                    np.array(patches, np.int64).reshape(-1, 4))


def raise_for(status):
    """Raise the CUDA driver error ``status`` (a CUresult other than 0) as CuPy does."""
    from cupy_backends.cuda.api import driver

    driver.check_status(int(status))
    raise RuntimeError(f"CUDA driver error {status}")  # pragma: no cover - check_status raised
