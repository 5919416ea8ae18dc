"""Loops over pixels for the Numba twins, written once for both targets.

Each driver takes 4-D NHWC arrays (any strides) ``src`` (N, h, w, C) and ``dst``
(N, H, W, C) and a per-sample parameter matrix ``params`` (N, P). The per-op maths comes
in through a bound global (see :mod:`._dual`):

- copy drivers bind ``MAP(y, x, sh, sw, p) -> (sy, sx)``: the source pixel of output
  pixel (y, x), or ``sy < 0`` for "write the fill value" ``fills[n, c]`` (given in the
  destination's element type, so copies are exact for every dtype);
- value drivers bind ``VALUE(src, n, y, x, c, p) -> float``, stored as
  ``store(v, lo, hi, rnd)``: rounded half up and clamped to [lo, hi] when ``rnd``
  (uint8), as is otherwise.

CPU kernels loop over samples with ``prange`` (threads unless GPUAUG_CPU_PARALLEL=0, see
``_dual.cpu_parallel``); CUDA kernels use one thread per
output pixel with ``cuda.grid(3)`` = (x, y, sample).
"""
from __future__ import annotations

import math

from numba import cuda, prange

from ._dual import dual, specialize


@dual
def store(v, lo, hi, rnd):
    if rnd:
        v = math.floor(v + 0.5)
        if v < lo:
            v = lo
        if v > hi:
            v = hi
    return v


def _copy_cpu(src, dst, params, fills):
    n_, dh, dw, nc = dst.shape
    sh, sw = src.shape[1], src.shape[2]
    for n in prange(n_):
        p = params[n]
        for y in range(dh):
            for x in range(dw):
                sy, sx = MAP(y, x, sh, sw, p)  # noqa: F821 (bound by specialize)
                if sy >= 0:
                    for c in range(nc):
                        dst[n, y, x, c] = src[n, sy, sx, c]
                else:
                    for c in range(nc):
                        dst[n, y, x, c] = fills[n, c]


def _copy_cuda(src, dst, params, fills):
    x, y, n = cuda.grid(3)
    if n >= dst.shape[0] or y >= dst.shape[1] or x >= dst.shape[2]:
        return
    sy, sx = MAP(y, x, src.shape[1], src.shape[2], params[n])  # noqa: F821
    if sy >= 0:
        for c in range(dst.shape[3]):
            dst[n, y, x, c] = src[n, sy, sx, c]
    else:
        for c in range(dst.shape[3]):
            dst[n, y, x, c] = fills[n, c]


def _value_cpu(src, dst, params, lo, hi, rnd):
    n_, dh, dw, nc = dst.shape
    for n in prange(n_):
        p = params[n]
        for y in range(dh):
            for x in range(dw):
                for c in range(nc):
                    dst[n, y, x, c] = store(VALUE(src, n, y, x, c, p), lo, hi, rnd)  # noqa: F821


def _value_cuda(src, dst, params, lo, hi, rnd):
    x, y, n = cuda.grid(3)
    if n >= dst.shape[0] or y >= dst.shape[1] or x >= dst.shape[2]:
        return
    p = params[n]
    for c in range(dst.shape[3]):
        dst[n, y, x, c] = store(VALUE(src, n, y, x, c, p), lo, hi, rnd)  # noqa: F821


_DRIVERS = {("copy", "cpu"): _copy_cpu, ("copy", "cuda"): _copy_cuda,
            ("value", "cpu"): _value_cpu, ("value", "cuda"): _value_cuda}


def copy_kernel(map_fn, target):
    """The copy-driver kernel for ``map_fn`` on ``target`` ('cpu' or 'cuda')."""
    return specialize(_DRIVERS["copy", target], target, "kernel", MAP=map_fn)


def value_kernel(value_fn, target):
    """The value-driver kernel for ``value_fn`` on ``target`` ('cpu' or 'cuda')."""
    return specialize(_DRIVERS["value", target], target, "kernel", VALUE=value_fn)


def cpu_loop(kind, fn):
    """The CPU driver of ``kind`` ('copy' or 'value') bound to ``fn`` (its MAP or VALUE), as a
    plain njit function: ``prange`` runs as ``range`` (no thread pool), for callers that run
    samples on threads of their own and call it from their own njit code (DALI's
    numba_function). Arguments as the kernels': copy ``(src, dst, params, fills)``, value
    ``(src, dst, params, lo, hi, rnd)``."""
    return specialize(_DRIVERS[kind, "cpu"], "cpu", "device", **{"MAP" if kind == "copy" else "VALUE": fn})
