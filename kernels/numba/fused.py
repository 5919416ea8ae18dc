"""Numba twin of kernels/fused.cu: gpuaug.Compose's fused stage, one output pixel at a time.

The maths is written once (``@dual``) and compiled for the CPU (``numba.njit``, parallel over
samples) and for CUDA (one thread per output pixel). Unlike the CUDA C kernels, which are
specialised per stage at compile time, these read the stage's shape from ``meta`` at run
time, so one compiled kernel serves every policy (Numba compile time dominates the CPU
tests):

``meta`` (int64): ``[geo, border, pre, semi, ncodes, code_0 .. code_{ncodes-1}]`` with geo 0
(none) / 1 (affine) / 2 (perspective), border 0 (constant) / 1 (replicate), pre 1 when the
colour program runs on the source taps before interpolation, semi 1 for integer (uint8)
semantics, and the colour program's step codes (fused.cuh: 1 jitter, 2 gray, 3 affine,
4 gamma, 5 solarize, 6 posterize, 7 invert).

``params`` rows are fused.cuh's (interp, -, 3x3 destination -> source map, fill, write scale,
write bias, in_scale, program parameters from column 24). ``means``: contrast's mean per
sample (0 when the program has none), from :func:`sum_kernel`.

Per-step maths is that of the single ops' Numba twins (color_jitter, grayscale, color_twist,
gamma, solarize, posterize, invert), so a geometry-free policy gives the chained ops' values;
with integer semantics every step's output is rounded to the uint8 grid, as those ops store
it. Values are floats (float64 on the CPU, float32 on CUDA).
"""
from __future__ import annotations

import functools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from numba import cuda

from ._colour import block_add, clampv, hue_rgb, luma, luma_floor
from ._driver import store
from ._dual import _fingerprint, disk_cache, dual, specialize
from ._interp import COORD_LIMIT, clamp_coord

P_INTERP, P_MAP, P_FILL, P_SCALE, P_BIAS, P_IN, P_COLOUR = 0, 2, 11, 15, 19, 23, 24
META = 5  # where the step codes start in meta


@dual
def op_params(op):
    if op == 1:
        return 4
    if op == 3:
        return 12
    if op == 4:
        return 2
    if op == 0:
        return 0
    return 1


@dual
def grid(v):
    """The uint8 grid: floor(v + 0.5), saturated to [0, 255]."""
    v = math.floor(v + 0.5)
    if v < 0.0:
        return 0.0
    if v > 255.0:
        return 255.0
    return v


@dual
def gamma_one(v, g, gain, m):
    if v < 0:
        v = 0.0
    r = gain * math.pow(v / m, g)
    if r < 0:
        r = 0.0
    if r > 1:
        r = 1.0
    return m * r


@dual
def posterize_one(v, bits, semi):
    if semi:
        step = 2.0 ** (8 - bits)
        return math.floor(v / step) * step
    levels = 2.0 ** bits
    q = math.floor(v * levels)
    if q < 0:
        q = 0.0
    if q > levels - 1:
        q = levels - 1
    return q / levels


@dual
def jitter_one(v, b, cf, mean, m):
    """Brightness then contrast on one value (color_jitter's jitter_step)."""
    return clampv(cf * clampv(b * v, m) + (1.0 - cf) * mean, m)


@dual
def program(v0, v1, v2, v3, nc, p, meta, stop, mean):
    """Steps 0 .. stop-1 of the colour program on one pixel (nc channels in v0..v3)."""
    semi = meta[3] != 0
    m = 255.0 if semi else 1.0
    off = P_COLOUR
    for k in range(stop):
        op = meta[META + k]
        o = off
        off += op_params(op)
        if semi and k == 0 and op >= 4:  # steps defined on the grid see grid values
            v0, v1, v2, v3 = grid(v0), grid(v1), grid(v2), grid(v3)
        if op == 1:
            b, cf, s, h = p[o], p[o + 1], p[o + 2], p[o + 3]
            v0 = jitter_one(v0, b, cf, mean, m)
            if nc >= 3:
                v1 = jitter_one(v1, b, cf, mean, m)
                v2 = jitter_one(v2, b, cf, mean, m)
                gray = (1.0 - s) * luma_floor(v0, v1, v2, semi)
                v0 = clampv(s * v0 + gray, m)
                v1 = clampv(s * v1 + gray, m)
                v2 = clampv(s * v2 + gray, m)
                if h != 0.0:
                    v0, v1, v2 = hue_rgb(v0, v1, v2, h)
        elif op == 2:
            if nc >= 3 and p[o] != 0.0:
                g = luma(v0, v1, v2, semi)
                v0, v1, v2 = g, g, g
        elif op == 3:
            if nc >= 3:
                r = p[o] * v0 + p[o + 1] * v1 + p[o + 2] * v2 + p[o + 3] * m
                g = p[o + 4] * v0 + p[o + 5] * v1 + p[o + 6] * v2 + p[o + 7] * m
                b = p[o + 8] * v0 + p[o + 9] * v1 + p[o + 10] * v2 + p[o + 11] * m
                v0, v1, v2 = r, g, b
        elif op == 4:
            g, gain = p[o], p[o + 1]
            v0 = gamma_one(v0, g, gain, m)
            v1 = gamma_one(v1, g, gain, m)
            v2 = gamma_one(v2, g, gain, m)
            v3 = gamma_one(v3, g, gain, m)
        elif op == 5:
            t = p[o]
            v0 = m - v0 if v0 >= t else v0
            v1 = m - v1 if v1 >= t else v1
            v2 = m - v2 if v2 >= t else v2
            v3 = m - v3 if v3 >= t else v3
        elif op == 6:
            bits = int(p[o])
            if bits > 8:
                bits = 8
            if bits >= 1:
                v0 = posterize_one(v0, bits, semi)
                v1 = posterize_one(v1, bits, semi)
                v2 = posterize_one(v2, bits, semi)
                v3 = posterize_one(v3, bits, semi)
        elif op == 7:
            if p[o] != 0.0:
                v0, v1, v2, v3 = m - v0, m - v1, m - v2, m - v3
        if semi:
            v0, v1, v2, v3 = grid(v0), grid(v1), grid(v2), grid(v3)
    return v0, v1, v2, v3


@dual
def raw(src, n, y, x, c, nc):
    if c < nc:
        return float(src[n, y, x, c])
    return 0.0


@dual
def tap(src, n, y, x, nc, border, p, k):
    """(inside, v) of tap (y, x): channel k's raw value, or (False, fill) outside the image
    with border 0 (constant); border 1 clamps into the image (replicate)."""
    h = src.shape[1]
    w = src.shape[2]
    if y < 0 or y >= h or x < 0 or x >= w:
        if border == 0:
            return False, p[P_FILL + k]
        y = min(max(y, 0), h - 1)
        x = min(max(x, 0), w - 1)
    return True, raw(src, n, y, x, k, nc)


@dual
def pixel(src, n, y, x, nc, p, meta, mean):
    """Output pixel (y, x) of sample n, before the write (v0..v3 in the semantic range).

    The source point comes from the map; its taps (1 for nearest, 4 for bilinear, each through
    the border rule) are blended. Without ``pre`` the colour program runs once on the blend;
    with it, on every tap that lies inside the image (fill taps are blended as they are)."""
    geo = meta[0]
    border = meta[1]
    pre = meta[2] != 0
    fx = float(x)
    fy = float(y)
    if geo != 0:
        fx = p[2] * x + p[3] * y + p[4]
        fy = p[5] * x + p[6] * y + p[7]
        if geo == 2:
            w = p[8] * x + p[9] * y + p[10]
            if w == 0:
                fx = -COORD_LIMIT
                fy = -COORD_LIMIT
            else:
                fx = fx / w
                fy = fy / w
    fy = clamp_coord(fy)
    fx = clamp_coord(fx)
    if geo == 0 or p[P_INTERP] == 0:  # nearest (exact for geo 0: pixel centres)
        y0 = int(math.floor(fy + 0.5))
        x0 = int(math.floor(fx + 0.5))
        wy = 0.0
        wx = 0.0
        ntaps = 1
    else:
        y0f = math.floor(fy)
        x0f = math.floor(fx)
        wy = fy - y0f
        wx = fx - x0f
        y0 = int(y0f)
        x0 = int(x0f)
        ntaps = 4
    s = p[P_IN]
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    for t in range(ntaps):
        ty = y0 + t // 2
        tx = x0 + t % 2
        wt = (wy if t // 2 else 1.0 - wy) * (wx if t % 2 else 1.0 - wx)
        in0, v0 = tap(src, n, ty, tx, nc, border, p, 0)
        in1, v1 = tap(src, n, ty, tx, nc, border, p, 1)
        in2, v2 = tap(src, n, ty, tx, nc, border, p, 2)
        in3, v3 = tap(src, n, ty, tx, nc, border, p, 3)
        v0, v1, v2, v3 = v0 * s, v1 * s, v2 * s, v3 * s
        if pre and in0:
            v0, v1, v2, v3 = program(v0, v1, v2, v3, nc, p, meta, meta[4], mean)
        if ntaps == 1:
            a0, a1, a2, a3 = v0, v1, v2, v3
        else:
            a0 += wt * v0
            a1 += wt * v1
            a2 += wt * v2
            a3 += wt * v3
    if pre:
        return a0, a1, a2, a3
    return program(a0, a1, a2, a3, nc, p, meta, meta[4], mean)


@dual
def write(dst, n, y, x, nc, p, v0, v1, v2, v3, lo, hi, rnd):
    dst[n, y, x, 0] = store(v0 * p[P_SCALE] + p[P_BIAS], lo, hi, rnd)
    if nc > 1:
        dst[n, y, x, 1] = store(v1 * p[P_SCALE + 1] + p[P_BIAS + 1], lo, hi, rnd)
    if nc > 2:
        dst[n, y, x, 2] = store(v2 * p[P_SCALE + 2] + p[P_BIAS + 2], lo, hi, rnd)
    if nc > 3:
        dst[n, y, x, 3] = store(v3 * p[P_SCALE + 3] + p[P_BIAS + 3], lo, hi, rnd)


def _fused_cpu(src, dst, params, meta, means, lo, hi, rnd, n0, n1):
    nc = dst.shape[3]
    for n in range(n0, n1):
        p = params[n]
        mean = means[n]
        for y in range(dst.shape[1]):
            for x in range(dst.shape[2]):
                v0, v1, v2, v3 = pixel(src, n, y, x, nc, p, meta, mean)
                write(dst, n, y, x, nc, p, v0, v1, v2, v3, lo, hi, rnd)


def _fused_cuda(src, dst, params, meta, means, lo, hi, rnd):
    x, y, n = cuda.grid(3)
    if n >= dst.shape[0] or y >= dst.shape[1] or x >= dst.shape[2]:
        return
    nc = dst.shape[3]
    p = params[n]
    v0, v1, v2, v3 = pixel(src, n, y, x, nc, p, meta, means[n])
    write(dst, n, y, x, nc, p, v0, v1, v2, v3, lo, hi, rnd)


@dual
def mean_gray(src, n, y, x, nc, p, meta, jidx):
    """The grayscale contrast blends with at source pixel (y, x): the program's steps before
    its JITTER (step jidx), then that JITTER's brightness (color_jitter's jitter_gray)."""
    s = p[P_IN]
    v0, v1, v2, v3 = program(raw(src, n, y, x, 0, nc) * s, raw(src, n, y, x, 1, nc) * s,
                             raw(src, n, y, x, 2, nc) * s, raw(src, n, y, x, 3, nc) * s, nc, p, meta, jidx, 0.0)
    off = P_COLOUR
    for k in range(jidx):
        off += op_params(meta[META + k])
    semi = meta[3] != 0
    m = 255.0 if semi else 1.0
    b = p[off]
    if nc < 3:
        return clampv(b * v0, m)
    return luma_floor(clampv(b * v0, m), clampv(b * v1, m), clampv(b * v2, m), semi)


def _sum_cpu(src, sums, params, meta, jidx, n0, n1):
    nc = src.shape[3]
    hh, ww = src.shape[1], src.shape[2]
    for n in range(n0, n1):
        p = params[n]
        acc = 0.0
        for y in range(hh):
            for x in range(ww):
                acc += mean_gray(src, n, y, x, nc, p, meta, jidx)
        sums[n] = acc


def _sum_cuda(src, sums, params, meta, jidx):
    x, y, n = cuda.grid(3)
    v = 0.0
    if n < src.shape[0] and y < src.shape[1] and x < src.shape[2]:
        v = mean_gray(src, n, y, x, src.shape[3], params[n], meta, jidx)
    block_add(v, sums, n, src.shape[0])


_POOL = None
_POOL_LOCK = threading.Lock()
#: Below this many source elements a call runs on the calling thread: handing slices to
#: threads costs more than the work (tens of microseconds per call).
PARALLEL_MIN_ELEMENTS = 1 << 18


def _pool():
    """One thread pool for the process (threads are made once, not per call)."""
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="cpu-twin")
    return _POOL


def _chunked(kern):
    """Run a serial (nogil) CPU kernel over the samples in parallel threads: ``run(*args)`` calls
    ``kern(*args, n0, n1)`` on slices of samples. (Numba's prange would do the same, but its
    parfor lowering doubles the compile time of a kernel this size, which the CPU tests pay.)"""
    cores = os.cpu_count() or 1

    def run(*args):
        n = args[0].shape[0]
        k = min(n, cores)
        if k <= 1 or args[0].size < PARALLEL_MIN_ELEMENTS:
            kern(*args, 0, n)
            return
        bounds = [n * i // k for i in range(k + 1)]
        list(_pool().map(lambda i: kern(*args, bounds[i], bounds[i + 1]), range(k)))
    run.serial = kern  # (a caller that knows its source has < PARALLEL_MIN_ELEMENTS calls it itself)
    return run


_CPU_BUILDS: dict = {}
_CPU_LOCK = threading.RLock()


def _cpu_build(fn):
    """``fn`` (and every ``@dual`` function it calls, recursively) compiled with ``numba.njit``
    *without Numba's reference counting* (``_nrt=False``), memoised per function.

    The fused kernels allocate nothing: they read and write the arrays they are given. With
    reference counting, every array passed to a helper that LLVM does not inline (``pixel``,
    ``program``, the taps) costs an atomic increment and decrement of the array's meminfo, about
    60 per output pixel: 75 % of an 8x4x4x3 four-op Compose's kernel time (56 us -> 9 us without,
    the contrast sums 7.8 -> 2.0 us). The maths is the same code compiled the same way otherwise
    (no fastmath), so the results are the same bits. Cache entries are named ``[cpu-nonrt-...]``
    with :func:`._dual._fingerprint`'s digest (Numba's cache key leaves the flags out)."""
    got = _CPU_BUILDS.get(fn)
    if got is not None:
        return got
    import types

    import numba

    with _CPU_LOCK:
        got = _CPU_BUILDS.get(fn)
        if got is not None:
            return got
        g = dict(fn.__globals__)
        for name in fn.__code__.co_names:
            obj = g.get(name)
            if getattr(obj, "__gpuaug_dual__", False):
                g[name] = _cpu_build(obj)
        clone = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
        clone.__qualname__ = f"{fn.__qualname__}[cpu-nonrt-{_fingerprint(fn, g)}]"
        got = _CPU_BUILDS[fn] = numba.njit(nogil=True, cache=disk_cache(), _nrt=False)(clone)
    return got


@functools.lru_cache(maxsize=None)
def kernel(target):
    """The fused kernel on ``target`` ('cpu' or 'cuda'):
    ``kern(src, dst, params, meta, means, lo, hi, rnd)`` on 4-D NHWC arrays (CUDA: grid
    (x, y, sample) over the output). The CPU kernel wants C-contiguous float32 arrays (one
    compiled signature for every dtype and layout; gpuaug/policy/_fused.py converts)."""
    if target == "cpu":
        return _chunked(_cpu_build(_fused_cpu))
    return specialize(_fused_cuda, "cuda", "kernel")


@functools.lru_cache(maxsize=None)
def sum_kernel(target):
    """Contrast's per-sample sums on ``target``: ``kern(src, sums, params, meta, jidx)``
    (CUDA: grid (x, y, sample) over the source, block (32, 8); sums must start at 0)."""
    if target == "cpu":
        return _chunked(_cpu_build(_sum_cpu))
    return specialize(_sum_cuda, "cuda", "kernel")


__all__ = ["kernel", "sum_kernel", "program", "pixel"]
