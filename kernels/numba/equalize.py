"""Numba twin of equalize, in the same three steps as kernels/equalize.cu:

1. histograms (N, C, 256) of the bins b(x) (uint8: x; floats: clamp(floor(x *f32 255.999), 0, 255)
   computed in float32 as torchvision converts floats to uint8);
2. PIL's equalisation table per histogram, written as the parameter rows
   ``[lut (C*256), is_float]`` of step 3;
3. ``equalize_value``: out = lut[c][b(x)] (divided by 255 for floats), through the value driver.

Steps 1 and 2 have their own loops here (``hist_kernel``, ``lut_kernel``); step 3 uses the
shared value driver.
"""
import math

import numpy as np
from numba import cuda, prange

from ._dual import dual, specialize


@dual
def equalize_bin(v, is_float):
    if is_float != 0:
        b = math.floor(np.float32(v) * np.float32(255.999))
    else:
        b = int(v)  # a uint8 value (math.floor of an integer is not lowered on every target)
    if b < 0:
        b = 0
    if b > 255:
        b = 255
    return int(b)


@dual
def equalize_value(src, n, y, x, c, p):
    is_float = p[p.shape[0] - 1]
    t = p[c * 256 + equalize_bin(src[n, y, x, c], is_float)]
    if is_float != 0:
        return t / 255.0
    return t + 0.0


@dual
def equalize_table(hist, n, c, lut, is_float):
    """PIL's table for histogram hist[n, c] into lut[n, c*256:(c+1)*256]."""
    total = 0
    last = 0
    for k in range(256):
        total += hist[n, c, k]
        if hist[n, c, k] > 0:
            last = k
    step = (total - hist[n, c, last]) // 255
    cum = 0
    for k in range(256):
        if step == 0:
            lut[n, c * 256 + k] = k
        elif k == 0:
            lut[n, c * 256] = 0
        else:
            v = (cum + step // 2) // step
            lut[n, c * 256 + k] = v if v < 255 else 255
        cum += hist[n, c, k]
    if c == 0:
        lut[n, lut.shape[1] - 1] = is_float


def _hist_cpu(src, hist, is_float):
    n_, h, w, nc = src.shape
    for n in prange(n_):
        for y in range(h):
            for x in range(w):
                for c in range(nc):
                    hist[n, c, equalize_bin(src[n, y, x, c], is_float)] += 1


def _hist_cuda(src, hist, is_float):
    x, y, n = cuda.grid(3)
    if n >= src.shape[0] or y >= src.shape[1] or x >= src.shape[2]:
        return
    for c in range(src.shape[3]):
        cuda.atomic.add(hist, (n, c, equalize_bin(src[n, y, x, c], is_float)), 1)


def _lut_cpu(hist, lut, is_float):
    for n in prange(hist.shape[0]):
        for c in range(hist.shape[1]):
            equalize_table(hist, n, c, lut, is_float)


def _lut_cuda(hist, lut, is_float):
    x, c, n = cuda.grid(3)  # launched over (N, C, 1) "pixels"
    if n >= hist.shape[0] or c >= hist.shape[1] or x >= 1:
        return
    equalize_table(hist, n, c, lut, is_float)


def hist_kernel(target):
    return specialize(_hist_cpu if target == "cpu" else _hist_cuda, target, "kernel")


def lut_kernel(target):
    return specialize(_lut_cpu if target == "cpu" else _lut_cuda, target, "kernel")
