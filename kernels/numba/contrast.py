"""Numba twin of contrast: clamp(f * x + (1 - f) * mean, 0, max) on RGB, alpha copied.

p = [factor, max, mean]; the mean comes from ``contrast_gray`` summed by _colour.mean_kernel.
"""
from ._colour import clampv, luma_floor
from ._dual import dual


@dual
def contrast_gray(src, n, y, x, p):
    if src.shape[3] < 3:
        return float(src[n, y, x, 0])
    return luma_floor(float(src[n, y, x, 0]), float(src[n, y, x, 1]), float(src[n, y, x, 2]), p[1] > 1.0)


@dual
def contrast_value(src, n, y, x, c, p):
    v = float(src[n, y, x, c])
    if c >= 3:
        return v
    return clampv(p[0] * v + (1.0 - p[0]) * p[2], p[1])
