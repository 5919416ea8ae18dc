"""Running the filter and noise ops, whose kernels choose their own launch shape, and
their shared argument checks (seeds, odd kernel sizes, separable-filter parameters).

The contract is :func:`gpuaug._run.run`'s (output allocation and ``out=`` checks,
streams, descriptor tables, float16 handled as float32 on the Numba twins), but:

- CUDA C: the op gives ``plan(dst, src) -> CudaPlan`` (kernel name and extra template
  arguments, grid, block, dynamic shared memory), e.g. one block per 32x32 output tile;
  the kernel ``name<T, C, ...>`` gets ``(src_table, dst_table, params, P, n) + extra``, or,
  for a plan with ``arrays`` (dense batches only), ``name<...>`` gets the input's and the
  output's first elements in place of the tables;
- Numba: the op's module under ``kernels/numba`` gives ``kernel(target)``, a compiled
  kernel called as ``kernel(src, dst, params, *numba_extra)`` on 4-D NHWC arrays (one
  call per sample for a varshape batch); CUDA kernels are launched with one thread per
  output pixel (x, y, sample), as :func:`gpuaug._run.launch_twin` does, and may map threads
  to work as they like.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

import numpy as np

import gpuaug._plan as _plan
from gpuaug._batch import Batch, max_over, max_size, table_item
from gpuaug._compiled import compiled
from gpuaug._params import count_nonzero, per_sample
from gpuaug._run import device_params, launch_twin
from gpuaug._stream import check_stream, on_device
from gpuaug._util import cupy_module, kept_array


@dataclass(frozen=True)
class CudaPlan:
    """How to launch a CUDA C kernel: ``name<T, C, *template>`` on ``grid`` x ``block`` threads."""

    name: str
    grid: tuple
    block: tuple
    shared_mem: int = 0
    extra: tuple = ()
    template: tuple = ()  # template arguments after T and C (all of them, with ``arrays``)
    #: the kernel reads the dense input and output themselves (their first elements), not
    #: their descriptor tables
    arrays: bool = False


def tile_grid(dst: Batch, tile_w: int, tile_h: int, block) -> tuple:
    """Grid with one block per ``tile_w`` x ``tile_h`` output tile; z walks the samples."""
    hmax, wmax = max_size(dst.shapes)
    return ((wmax + tile_w - 1) // tile_w, (hmax + tile_h - 1) // tile_h, min(dst.n, 65535)), tuple(block)


def vector_rows(src: Batch, dst: Batch):
    """``(planes, planes_per_sample, vectors_per_row, H, bytes_per_pixel)`` when ``src`` and
    ``dst`` are dense batches of one layout (:func:`gpuaug._run.contiguous_rows`), 16-byte
    aligned, whose rows are whole 16-byte vectors (fewer than 2**31 a plane); else None. What the
    kernels that move each plane as consecutive 16-byte vectors need (erase_packed, and the
    stencils of :func:`packed_u8_plan`)."""
    from gpuaug._run import contiguous_rows

    geo = contiguous_rows(src, dst)
    if geo is None:
        return None
    planes, pps, h, w, pb = geo
    vpr, tail = divmod(w * pb, 16)
    if tail or vpr * h >= 2 ** 31 or src.arrays[0].data.ptr % 16 or dst.arrays[0].data.ptr % 16:
        return None
    return planes, pps, vpr, h, pb


def packed_u8_plan(name: str, src: Batch, dst: Batch, min_side=1):
    """The plan of the one-vector-per-thread stencil kernel ``name<PB>`` (median_blur_3_packed,
    sharpen_packed, box_blur_packed: arguments ``(src, dst, params, P, n, planes,
    planes_per_sample, vectors_per_row, H)``) for uint8 :func:`vector_rows` batches whose pixels
    are 1 to 4 bytes (NHWC: the channels; NCHW: its planes, one byte) with at least ``min_side``
    rows and pixels a row; else None. Grid: x over a plane's vectors, 256 a block, y over the
    planes."""
    geo = vector_rows(src, dst) if src.dtype == np.uint8 else None
    if geo is None:
        return None
    planes, pps, vpr, h, pb = geo
    if pb > 4 or h < min_side or 16 * vpr < min_side * pb:
        return None
    return CudaPlan(name, (-(-vpr * h // 256), min(planes, 65535), 1), (256, 1, 1), template=(pb,), arrays=True,
                    extra=(np.int32(planes), np.int32(pps), np.int32(vpr), np.int32(h)))


def run_custom(batch: Batch, params, *, out, backend, stream, cu_file, plan, numba_module,
               numba_extra=()):
    """Allocate the output (same shape and dtype as the input) and run the op.

    ``params``: (N, P) per-sample parameters (NumPy, or CuPy when they came from the
    GPU). ``plan(dst, src) -> CudaPlan`` for the CUDA C kernel in ``kernels/<cu_file>``.
    ``numba_module``: module under ``gpuaug.kernels.numba`` with ``kernel(target)``.
    """
    check_stream(stream)
    if batch.device:
        if backend == "cuda" and stream is None and not batch.varshape:
            # run()'s launch plans (gpuaug._plan); ``plan`` (one object per kernel choice) keys them
            got = _plan.launch(batch, plan, params, (), ("custom", cu_file), lambda: _alloc_run_cuda(
                batch, params, cu_file, plan, out), out)
            if got is not None:
                return got
        with on_device(batch.device_id(), stream):
            result, dst = batch.alloc(out, batch.shapes)
            if backend == "cuda":
                _run_cuda(batch, dst, params, cu_file, plan(dst, batch))
            else:
                _run_numba(batch, dst, params, numba_module, numba_extra, "cuda")
        return result
    result, dst = batch.alloc(out, batch.shapes)
    params = params if isinstance(params, np.ndarray) else cupy_module().asnumpy(params)
    _run_numba(batch, dst, params, numba_module, numba_extra, "cuda" if backend == "numba" else "cpu")
    return result


def _alloc_run_cuda(batch, params, cu_file, plan, out=None):
    with on_device(batch.device_id(), None):
        result, dst = batch.alloc(out, batch.shapes)
        _run_cuda(batch, dst, params, cu_file, plan(dst, batch))
    return result


def _run_cuda(src: Batch, dst: Batch, params, cu_file, plan: CudaPlan):
    from gpuaug.kernels._cuda import get_function, kernel_name

    n = src.n
    if plan.arrays:
        (par,) = device_params(params, n)
        head = (src.arrays[0], dst.arrays[0])
        fn = get_function(cu_file, kernel_name(plan.name, *plan.template))
    else:
        *head, par = device_params(params, n, src, dst)
        fn = get_function(cu_file, kernel_name(plan.name, src.dtype.name, src.channels, *plan.template))
    if plan.shared_mem > _SMEM_LIMIT and fn.max_dynamic_shared_size_bytes < plan.shared_mem:
        fn.max_dynamic_shared_size_bytes = plan.shared_mem  # opt in (Hopper: up to 227 KiB)
    fn(plan.grid, plan.block, (*head, par, np.int32(par.shape[1]), np.int32(n)) + tuple(plan.extra),
       shared_mem=plan.shared_mem)


@functools.lru_cache(maxsize=None)
def numba_kernel(module: str, target: str):
    kern = importlib.import_module(f"gpuaug.kernels.numba.{module}").kernel(target)
    if target == "cpu":  # the op's fast CPU kernel first, where there is one (kernels/numba/cpu_fast)
        from gpuaug.kernels.numba.cpu_fast import with_fast_path

        kern = with_fast_path(module, kern)
    return kern


def _run_numba(src: Batch, dst: Batch, params, module, extra, target):
    kern = numba_kernel(module, target)
    xp = src.xp
    params = xp.asarray(params, dtype=xp.float32) if target == "cuda" else np.asarray(params, np.float64)
    items = ([(src.nhwc, dst.nhwc, params)] if not src.varshape else
             [(src.views[i][None], dst.sample(i)[None], params[i:i + 1]) for i in range(src.n)])
    for s, d, p in items:
        if s.dtype == np.float16:  # float16 maths runs in float32; one rounding at the end
            s = s.astype(np.float32)
        tmp = d if d.dtype != np.float16 else xp.empty(d.shape, np.float32)
        launch_twin(kern, target, src, tmp.shape, (s, tmp, p) + tuple(extra))
        if tmp is not d:
            d[...] = tmp.astype(np.float16)


def host_seed(seed, name="seed") -> int:
    """A noise op's seed: an int in [0, 2**64) on the host (it keys Philox4x32-10)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name}: got {seed!r}; expected an int in [0, 2**64) (draw one per batch, "
                        "e.g. with numpy.random.Generator.integers(2**63))")
    seed = int(seed)
    if not 0 <= seed < 2 ** 64:
        raise ValueError(f"{name}: got {seed}; expected an int in [0, 2**64)")
    return seed


_ALLOWED: dict = {}  # allowed sizes -> bool table by size, read-only (odd_sizes)


def seed_chunks(seed: int) -> list:
    """The seed as four 16-bit chunks, low first (each exact in float32)."""
    return [(seed >> s) & 0xFFFF for s in (0, 16, 32, 48)]


def seed_columns(seed: int, n: int) -> np.ndarray:
    """(n, 4) float columns holding the seed as four 16-bit chunks (exact in float32)."""
    cols = np.empty((n, 4))
    cols[:] = seed_chunks(seed)  # np.tile's Python layers cost more
    return cols


def float32_exact(a):
    """Round parameters to float32 on the host, so every backend computes with the same values."""
    return a.astype(np.float32).astype(np.float64)


def as_stored(values, dtype):
    """Fill values as an output of ``dtype`` stores them (uint8: rounded half up and saturated;
    floats: rounded to the dtype), as float64 and so float32-exact: the CUDA kernels, which
    read their parameters as float32, then store exactly what the CPU twin (float64
    parameters) stores, instead of rounding a second time from the float32 rounding (2.4999999999
    -> 2.5 -> 3 for uint8, 0.8322754063453663 -> 0.83227539 -> 0.83203125 for float16).
    NumPy or CuPy in, the same out."""
    if isinstance(values, np.ndarray):
        if np.dtype(dtype) == np.uint8:  # np.clip's maximum-then-minimum, without its Python layers
            v = np.add(values, 0.5)
            np.floor(v, out=v)
            np.maximum(v, 0.0, out=v)
            return np.minimum(v, 255.0, out=v)
        return values.astype(dtype).astype(np.float64)
    xp = cupy_module()
    if np.dtype(dtype) == np.uint8:
        return xp.clip(xp.floor(values + 0.5), 0, 255)
    return values.astype(dtype).astype(np.float64)


def float32_at_least(values):
    """The smallest float32 numbers >= ``values`` (float64), NumPy or CuPy: a threshold ``t``
    that every backend reads as float32 (the CUDA kernels) or float64 (the CPU twin) compares
    the same way, since ``x >= t`` <=> ``x >= float32_at_least(t)`` for every float32 ``x``
    (so every uint8, float16 and float32 pixel)."""
    if isinstance(values, np.ndarray):  # on the host: only the values float32 rounded down move up
        v = np.asarray(values, dtype=np.float64)
        f = v.astype(np.float32)
        up = f.astype(np.float64) < v
        if count_nonzero(up):
            f[up] = np.nextafter(f[up], np.float32(np.inf))
        return f.astype(np.float64)
    xp = cupy_module()
    v = xp.asarray(values, dtype=np.float64)
    f = v.astype(np.float32)
    f = xp.where(f.astype(np.float64) < v, xp.nextafter(f, np.float32(np.inf)), f)
    return f.astype(np.float64)


# -- separable filters (gaussian_blur, box_blur) ---------------------------------------------

MAX_KERNEL_SIZE = 255
_SMEM_LIMIT = 48 * 1024  # without opting in to more


def odd_sizes(kernel_size, n, name="kernel_size", allowed=None):
    """Per-sample odd kernel sizes 1..MAX_KERNEL_SIZE (or one of ``allowed``) as int64 (N,)."""
    k = per_sample(kernel_size, n, name, integer=True)
    if allowed is not None:
        lo, hi = np.minimum.reduce(k), np.maximum.reduce(k)
        ok = lo >= 0 and hi <= max(allowed)
        if ok:  # a lookup of each size in a table of the allowed ones (np.isin sorts)
            table = kept_array(_ALLOWED, tuple(allowed), lambda: np.isin(np.arange(max(allowed) + 1), allowed))
            ok = count_nonzero(table[k]) == k.size
        if not ok:
            bad = k[~np.isin(k, allowed)][0]
            raise ValueError(f"{name}: got {int(bad)}; expected one of {', '.join(map(str, allowed))}")
        return k
    if count_nonzero(k & 1) != k.size or np.minimum.reduce(k) < 1 or np.maximum.reduce(k) > MAX_KERNEL_SIZE:
        bad = k[(k < 1) | (k % 2 == 0) | (k > MAX_KERNEL_SIZE)][0]
        raise ValueError(f"{name}: got {int(bad)}; expected odd sizes from 1 to {MAX_KERNEL_SIZE}")
    return k


def separable_rows(k, taps) -> np.ndarray:
    """(N, 1 + max k) parameter rows ``[k, w_0 .. w_{k-1}, 0 ...]`` of the separable filters,
    without a Python loop over samples. ``taps(k, kmax)`` returns the (N, kmax) unnormalised
    taps of samples of sizes ``k``; anything past a row's own k is ignored. Each row is divided
    by the sum of its own k taps, summed as NumPy sums a 1-D array of k values, in one compiled
    loop (:func:`normalized_rows`), so the rows are bit-identical to per-sample
    ``w / w.sum()``."""
    k = np.asarray(k, np.int64)
    n = k.shape[0]
    kmax = int(np.maximum.reduce(k)) if n else 1
    w = np.ascontiguousarray(taps(k, kmax), np.float64)
    return normalized_rows(w, k, np.empty((n, 1 + kmax)))


@compiled
def normalized_rows(w, k, rows):
    """``rows[r] = [k[r], w[r, :k[r]] / sum, 0 ...]`` for (N, kmax) taps ``w`` and sizes ``k`` (1 to
    MAX_KERNEL_SIZE), the sum taken as NumPy's pairwise sum of a 1-D array takes it (blocks of
    up to 128 values in 8 accumulators, longer arrays split in halves rounded down to a
    multiple of 8): ``np.add.reduce(w[r, :k[r]])`` bit for bit, as the tests check."""
    def block(a, n):  # pairwise_sum of a[:n] for n <= 128
        if n < 8:
            res = 0.0
            for i in range(n):
                res += a[i]
            return res
        r0, r1, r2, r3, r4, r5, r6, r7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
        i = 8
        m = n - n % 8
        while i < m:
            r0 += a[i]
            r1 += a[i + 1]
            r2 += a[i + 2]
            r3 += a[i + 3]
            r4 += a[i + 4]
            r5 += a[i + 5]
            r6 += a[i + 6]
            r7 += a[i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[i]
            i += 1
        return res

    def half(n):  # pairwise_sum's split point
        h = n // 2
        return h - h % 8

    for r in range(w.shape[0]):
        kk = k[r]
        a = w[r]
        if kk <= 128:
            s = block(a, kk)
        else:  # k <= 255: two levels of splits at most (the left halves are <= 128)
            h = half(kk)
            rest = kk - h
            if rest <= 128:
                s = block(a, h) + block(a[h:], rest)
            else:
                h2 = half(rest)
                s = block(a, h) + (block(a[h:], h2) + block(a[h + h2:], rest - h2))
        rows[r, 0] = kk
        for j in range(kk):
            rows[r, 1 + j] = a[j] / s
        for j in range(kk, rows.shape[1] - 1):
            rows[r, 1 + j] = 0.0
    return rows


#: largest k of the unrolled fast path (<base>_k<T, C, K>, K odd, static shared memory)
MAX_UNROLLED_K = 15


@functools.lru_cache(maxsize=None)
def separable_plan(base: str, kmax: int):
    """Plan for kernels/separable.cuh: 32x32 tiles; the unrolled kernel for K = kmax <= 15,
    else the generic one, with all channels per pass when they fit in 48 KiB."""
    r = kmax // 2
    wlen = (kmax + 6 + 3) & ~3

    def plan(dst, src=None):
        if kmax <= MAX_UNROLLED_K:  # separable_tile_k: T input tile + float hbuf, 16-byte aligned
            k = max(kmax, 3)
            side = 32 + 2 * (k // 2)
            es = dst.dtype.itemsize  # uint8 tiles hold floats, rows padded to 4 of them
            pitch, te = ((side * dst.channels + 3) & ~3, 4) if es == 1 else (side * dst.channels, es)
            tile = (side * pitch * te + 15) & ~15
            grid, block = tile_grid(dst, 32, 32, (32, 8, 1))
            return CudaPlan(base + "_k", grid, block, tile + 4 * dst.channels * side * 32, template=(k,))
        smem = 4 * (wlen + dst.channels * (32 + 2 * r) * 32)
        name = base
        if smem > _SMEM_LIMIT:
            smem, name = 4 * (wlen + (32 + 2 * r) * 32), base + "_1"
        grid, block = tile_grid(dst, 32, 32, (32, 8, 1))
        return CudaPlan(name, grid, block, smem)

    return plan


def store_range(dtype):
    """(lo, hi, rnd) for the Numba store rule: uint8 rounds and saturates, floats pass."""
    return (0.0, 255.0, True) if np.dtype(dtype) == np.uint8 else (-np.inf, np.inf, False)


# -- whole-pixel replacement over row chunks (rowvec.cuh replace_rows) ------------------------

def rows_grid(dst: Batch, block=256):
    """Grid for replace_rows: one thread per 16 bytes' worth of pixels (16 / itemsize) of a row."""
    ppt = 16 // dst.dtype.itemsize
    work = max_over(dst.shapes, lambda h, w: h * -(-w // ppt))
    return (-(-work // block), min(dst.n, 65535), 1), (block, 1, 1)


def rows_plan(name):
    """``plan(dst, src)`` for a replace_rows kernel ``name<T, C>``."""
    def plan(dst, src=None):
        return CudaPlan(name, *rows_grid(dst))

    return plan


def rows_fast(cu_file, name):
    """A ``fast`` hook for :func:`gpuaug._run.run` that launches the replace_rows kernel
    ``name<T, C>`` (any batch: it reads the descriptor tables) instead of one thread per pixel."""
    def fast(src, dst):
        from gpuaug.kernels._cuda import get_function, kernel_name, stage

        fn = get_function(cu_file, kernel_name(name, src.dtype.name, src.channels))
        src_t, dst_t = stage(table_item(src), table_item(dst))
        grid, block = rows_grid(dst)

        def launch(par):
            fn(grid, block, (src_t, dst_t, par, np.int32(par.shape[1]), np.int32(src.n)))

        return launch

    return fast
