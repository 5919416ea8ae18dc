"""Numba twin of median_blur: median of the k x k window (k = params[n, 0], 3 or 5) per
channel, with replicated borders (OpenCV's medianBlur). Each thread (CUDA) or sample
loop (CPU) gathers the window into a scratch buffer and selects its middle element.
"""
import numpy as np
from numba import cuda, prange

from ._dual import dual, specialize
from ._filters import replicate


@dual
def median_at(src, n, y, x, c, k, buf):
    h = src.shape[1]
    w = src.shape[2]
    r = k // 2
    m = 0
    for i in range(k):
        yy = replicate(y + i - r, h)
        for j in range(k):
            buf[m] = src[n, yy, replicate(x + j - r, w), c]
            m += 1
    half = m // 2
    for i in range(half + 1):  # selection: buf[0..half] become the smallest, in order
        best = i
        for j in range(i + 1, m):
            if buf[j] < buf[best]:
                best = j
        t = buf[i]
        buf[i] = buf[best]
        buf[best] = t
    return buf[half]


def _median_cpu(src, dst, params):
    n_, h, w, nc = dst.shape
    for n in prange(n_):
        k = int(params[n, 0])
        buf = np.empty(25, np.float64)
        for y in range(h):
            for x in range(w):
                for c in range(nc):
                    dst[n, y, x, c] = median_at(src, n, y, x, c, k, buf)


def _median_cuda(src, dst, params):
    x, y, n = cuda.grid(3)
    if n >= dst.shape[0] or y >= dst.shape[1] or x >= dst.shape[2]:
        return
    buf = cuda.local.array(25, np.float32)
    k = int(params[n, 0])
    for c in range(dst.shape[3]):
        dst[n, y, x, c] = median_at(src, n, y, x, c, k, buf)


def kernel(target):
    """``kernel(src, dst, params)`` on NHWC arrays."""
    return specialize(_median_cpu if target == "cpu" else _median_cuda, target, "kernel")
