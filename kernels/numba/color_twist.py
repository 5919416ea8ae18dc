"""Numba twin of color_twist: rgb' = M[:, :3] rgb + M[:, 3] * max; uint8 saturates (at the store).

p = [M row-major (12), max]; alpha copied; floats not clamped.
"""
from ._dual import dual


@dual
def color_twist_value(src, n, y, x, c, p):
    v = float(src[n, y, x, c])
    if c >= 3 or src.shape[3] < 3:
        return v
    k = 4 * c
    return (p[k] * float(src[n, y, x, 0]) + p[k + 1] * float(src[n, y, x, 1])
            + p[k + 2] * float(src[n, y, x, 2]) + p[k + 3] * p[12])
