"""Host copies for the staging ring: NumPy's (glibc memcpy) or non-temporal stores.

A staging copy reads the source and writes the pinned slot, which the GPU's DMA then reads
again. glibc's memcpy writes through the cache below its non-temporal threshold (about 3/4
of the shared cache, tens of MiB - larger than any worker's chunk), so every destination
line is first read for ownership: 3 bytes of memory traffic per byte staged, plus the
DMA's read. Non-temporal (streaming) stores skip that read: 2 + 1. Where the staging copy
and the H2D share a saturated memory bus, that is up to a third more throughput.

:func:`copy_into` is the worker's copy. ``GPUAUG_STAGING_COPY=nontemporal`` selects the
streaming copy (x86-64 only; compiled with Numba at first use, GIL released); the default
``memcpy`` is ``np.copyto``. An experiment knob until measured on the GPU machines
(tests/gpu/sched_e2e.py compares both).
"""
from __future__ import annotations

import os
import platform

import numpy as np

_KERNEL = None


def _build():
    import numba
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def nt_copy32(typingctx, dst, src):
        """Copy 32 bytes from address ``src`` to the 32-byte aligned ``dst`` with a streaming store."""
        sig = types.void(types.uint64, types.uint64)

        def codegen(context, builder, signature, args):
            d, s = args
            vec = ir.VectorType(ir.IntType(8), 32)
            v = builder.load(builder.inttoptr(s, vec.as_pointer()), align=1)
            st = builder.store(v, builder.inttoptr(d, vec.as_pointer()), align=32)
            st.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def sfence(typingctx):
        """Order the streaming stores before whatever follows (the DMA is queued after the
        worker hands the slot over)."""
        sig = types.void()

        def codegen(context, builder, signature, args):
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse.sfence")
            builder.call(fn, [])
            return context.get_dummy_value()

        return sig, codegen

    @numba.njit(nogil=True)
    def kernel(dst, src):
        n = dst.size
        d0 = dst.ctypes.data
        s0 = src.ctypes.data
        head = (32 - d0 % 32) % 32
        if head > n:
            head = n
        for i in range(head):
            dst[i] = src[i]
        i = head
        end = head + (n - head) // 128 * 128
        while i < end:
            nt_copy32(numba.uint64(d0 + i), numba.uint64(s0 + i))
            nt_copy32(numba.uint64(d0 + i + 32), numba.uint64(s0 + i + 32))
            nt_copy32(numba.uint64(d0 + i + 64), numba.uint64(s0 + i + 64))
            nt_copy32(numba.uint64(d0 + i + 96), numba.uint64(s0 + i + 96))
            i += 128
        for j in range(i, n):
            dst[j] = src[j]
        sfence()

    return kernel


def nontemporal_available():
    return platform.machine().lower() in ("x86_64", "amd64")


def nontemporal_copy(dst: np.ndarray, src: np.ndarray):
    """``dst[...] = src`` for C-contiguous arrays of the same shape and dtype, with streaming stores."""
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _build()
    d = dst.reshape(-1).view(np.uint8)
    s = src.reshape(-1).view(np.uint8)
    _KERNEL(d, s)


def copy_into(dst: np.ndarray, src: np.ndarray):
    """The staging copy (see the module docstring for the choice)."""
    if (os.environ.get("GPUAUG_STAGING_COPY") == "nontemporal" and nontemporal_available()
            and dst.flags.c_contiguous and src.flags.c_contiguous and dst.dtype == src.dtype
            and dst.shape == src.shape and dst.nbytes >= 1 << 16):
        nontemporal_copy(dst, src)
    else:
        np.copyto(dst, src)
