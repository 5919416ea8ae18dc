"""Numba twin of saturation: clamp(f * x + (1 - f) * gray, 0, max), gray floored for uint8.

p = [factor, max]; one channel unchanged, alpha copied.
"""
from ._colour import clampv, luma_floor
from ._dual import dual


@dual
def saturation_value(src, n, y, x, c, p):
    v = float(src[n, y, x, c])
    if c >= 3 or src.shape[3] < 3:
        return v
    g = luma_floor(float(src[n, y, x, 0]), float(src[n, y, x, 1]), float(src[n, y, x, 2]), p[1] > 1.0)
    return clampv(p[0] * v + (1.0 - p[0]) * g, p[1])
