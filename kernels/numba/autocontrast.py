"""Numba twin of autocontrast, in the two steps of kernels/autocontrast.cu:

1. per-sample, per-channel min and max (``minmax_kernel``), turned into the parameter rows
   ``[lo (C), scale (C), bound]`` of step 2 by :func:`rows_from_minmax` (bound = 255 for
   uint8, 1 for floats; scale = (max - min) / bound; a flat channel gets lo = 0, scale = 1);
2. ``autocontrast_value``: out = clamp((x - lo[c]) / scale[c], 0, bound), through the value driver.
"""
from numba import cuda, prange

from ._dual import dual, specialize


@dual
def autocontrast_value(src, n, y, x, c, p):
    nc = (p.shape[0] - 1) // 2
    bound = p[2 * nc]
    t = (src[n, y, x, c] - p[c]) / p[nc + c]
    if t < 0:
        t = 0.0
    if t > bound:
        t = bound
    return t


def _minmax_cpu(src, lo, hi):
    n_, h, w, nc = src.shape
    for n in prange(n_):
        for c in range(nc):
            a = src[n, 0, 0, c]
            b = a
            for y in range(h):
                for x in range(w):
                    v = src[n, y, x, c]
                    if v < a:
                        a = v
                    if v > b:
                        b = v
            lo[n, c] = a
            hi[n, c] = b


def _minmax_cuda(src, lo, hi):
    x, y, n = cuda.grid(3)
    if n >= src.shape[0] or y >= src.shape[1] or x >= src.shape[2]:
        return
    for c in range(src.shape[3]):
        v = src[n, y, x, c]
        cuda.atomic.min(lo, (n, c), v)
        cuda.atomic.max(hi, (n, c), v)


def minmax_kernel(target):
    return specialize(_minmax_cpu if target == "cpu" else _minmax_cuda, target, "kernel")


def rows_from_minmax(xp, lo, hi, bound, dtype):
    """(N, 2C + 1) parameter rows from per-channel (N, C) minima and maxima."""
    n, c = lo.shape
    rows = xp.empty((n, 2 * c + 1), dtype)
    flat = lo == hi
    rows[:, :c] = xp.where(flat, 0, lo)
    # (hi - lo) * (1 / bound) in float32, as the CUDA C twin (and torchvision) compute it
    scale = (hi - lo).astype(xp.float32) * xp.float32(1.0 / bound)
    rows[:, c:2 * c] = xp.where(flat, 1, scale)
    rows[:, 2 * c] = bound
    return rows
