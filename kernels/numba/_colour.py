"""Numba twins' shared colour maths (the counterpart of kernels/colour.cuh) and the per-sample
grayscale-mean reduction that contrast and color_jitter run before their per-pixel kernels.

Values keep their dtype's units: ``maxv`` (a parameter column) is 255 for uint8 (integer
semantics: the grayscale is floored before blending, as torchvision does) and 1 for floats.

Reduction drivers bind ``GRAY(src, n, y, x, p) -> float`` (the grayscale contrast blends
with) and write per-sample sums into ``sums`` (N,):

- CPU: ``prange`` over samples, a plain sum per sample;
- CUDA: grid (x, y, sample), block (32, 8): a shared-memory tree per block, one atomic add
  per block (float64), so the sum's order depends on scheduling (the CUDA C reduction,
  which the GPU default uses, is in a fixed order).
"""
from __future__ import annotations

import math

from numba import cuda, float64, prange

from ._dual import dual, specialize


@dual
def clampv(v, hi):
    if v < 0.0:
        return 0.0
    if v > hi:
        return hi
    return v


@dual
def luma(r, g, b, integer):
    # torchvision's weights; for uint8 the colour.cuh form, exact for integer inputs: the
    # quotients lie on a 1e-4 grid and the 5e-5 bias makes floor/round-half-up of them exact.
    if integer:
        return (2989.0 * r + 5870.0 * g + 1140.0 * b) * 1e-4 + 5e-5
    return 0.2989 * r + 0.587 * g + 0.114 * b


@dual
def luma_floor(r, g, b, integer):
    v = luma(r, g, b, integer)
    if integer:
        return float(math.floor(v))
    return v


@dual
def hue_weight(k):
    # w(k) = clamp(min(k, 4 - k), 0, 1) on k mod 6, for k in (0, 10]: centres 2 and 8 suffice
    d = min(abs(k - 2.0), abs(k - 8.0))
    w = 2.0 - d
    if w < 0.0:
        return 0.0
    if w > 1.0:
        return 1.0
    return w


@dual
def hue_rgb(r, g, b, shift):
    """torchvision's adjust_hue in colour.cuh's closed form (max and min kept, the rest turned)."""
    mx = max(r, max(g, b))
    mn = min(r, min(g, b))
    rng = mx - mn
    div = rng if rng > 0.0 else 1.0
    s6 = 6.0 * (shift - math.floor(shift))
    if mx == r:
        h = (g - b) / div
    elif mx == g:
        h = 2.0 + (b - r) / div
    else:
        h = 4.0 + (r - g) / div
    h += s6
    if h > 5.0:
        h -= 6.0
    return (mx - rng * hue_weight(h + 5.0), mx - rng * hue_weight(h + 3.0),
            mx - rng * hue_weight(h + 1.0))


def _mean_cpu(src, sums, params):
    for n in prange(src.shape[0]):
        p = params[n]
        acc = 0.0
        for y in range(src.shape[1]):
            for x in range(src.shape[2]):
                acc += GRAY(src, n, y, x, p)  # noqa: F821 (bound by specialize)
        sums[n] = acc


@dual
def block_add(v, sums, n, count):
    """CUDA only: the sum of every thread's ``v`` over the (256-thread) block, added to
    ``sums[n]`` by thread 0 when ``n < count``. A shared buffer halved in fixed steps, so the
    block's sum has the same bits run after run. Every thread of the block must call it (its
    barriers). The contrast means' reductions (here, and kernels/numba/fused.py) share it."""
    t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    buf = cuda.shared.array(256, float64)
    buf[t] = v
    cuda.syncthreads()
    step = 128
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0 and n < count:
        cuda.atomic.add(sums, n, buf[0])


def _mean_cuda(src, sums, params):
    x, y, n = cuda.grid(3)
    v = 0.0
    if n < src.shape[0] and y < src.shape[1] and x < src.shape[2]:
        v = GRAY(src, n, y, x, params[n])  # noqa: F821
    block_add(v, sums, n, src.shape[0])


_MEAN = {"cpu": _mean_cpu, "cuda": _mean_cuda}


def mean_kernel(gray_fn, target):
    """The per-sample sum-of-``gray_fn`` kernel on ``target``: ``kern(src, sums, params)``."""
    return specialize(_MEAN[target], target, "kernel", GRAY=gray_fn)
