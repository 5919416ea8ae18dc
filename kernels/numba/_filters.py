"""Shared Numba pieces of the filter twins: border index rules and the separable filter.

Separable filter (gaussian_blur, box_blur): params row ``[k, w_0 .. w_{k-1}, padding]``;
``out[y, x, c] = sum_i w_i sum_j w_j src[refl(y + i - k//2), refl(x + j - k//2), c]`` with
reflect-101 borders (OpenCV's BORDER_REFLECT_101, numpy.pad "reflect"), stored with
:func:`._driver.store`. The CPU kernel runs two passes per sample through a float64
buffer; the CUDA kernel computes each output pixel directly (k*k loads; the fast GPU
path is the CUDA C twin in kernels/separable.cuh).
"""
import numpy as np
from numba import cuda, prange

from ._driver import store
from ._dual import dual, specialize


@dual
def reflect101(i, n):
    """Index i reflected into [0, n) without repeating the edge (...cb|abcd|cb...)."""
    if n == 1:
        return 0
    period = 2 * (n - 1)
    i = i % period
    return i if i < n else period - i


@dual
def replicate(i, n):
    """Index i clamped into [0, n) (OpenCV's BORDER_REPLICATE)."""
    return 0 if i < 0 else (n - 1 if i >= n else i)


@dual
def hrow(src, n, y, x, c, p, k):
    """sum_j w_j src[n, y, refl(x + j - k//2), c]"""
    w = src.shape[2]
    r = k // 2
    acc = 0.0
    for j in range(k):
        acc += p[1 + j] * src[n, y, reflect101(x + j - r, w), c]
    return acc


def _sep_cpu(src, dst, params, lo, hi, rnd):
    n_, h, w, nc = dst.shape
    for n in prange(n_):
        p = params[n]
        k = int(p[0])
        r = k // 2
        tmp = np.empty((h, w, nc), np.float64)
        for y in range(h):
            for x in range(w):
                for c in range(nc):
                    tmp[y, x, c] = hrow(src, n, y, x, c, p, k)
        for y in range(h):
            for x in range(w):
                for c in range(nc):
                    acc = 0.0
                    for i in range(k):
                        acc += p[1 + i] * tmp[reflect101(y + i - r, h), x, c]
                    dst[n, y, x, c] = store(acc, lo, hi, rnd)


def _sep_cuda(src, dst, params, lo, hi, rnd):
    x, y, n = cuda.grid(3)
    if n >= dst.shape[0] or y >= dst.shape[1] or x >= dst.shape[2]:
        return
    p = params[n]
    k = int(p[0])
    r = k // 2
    h = dst.shape[1]
    for c in range(dst.shape[3]):
        acc = 0.0
        for i in range(k):
            acc += p[1 + i] * hrow(src, n, reflect101(y + i - r, h), x, c, p, k)
        dst[n, y, x, c] = store(acc, lo, hi, rnd)


def separable_kernel(target):
    """``kernel(src, dst, params, lo, hi, rnd)`` on NHWC arrays (see module docstring)."""
    return specialize(_sep_cpu if target == "cpu" else _sep_cuda, target, "kernel")
