"""Numba twin of invert: p = [M] with M = 255 (uint8) or 1 (floats); out = M - x."""
from ._dual import dual


@dual
def invert_value(src, n, y, x, c, p):
    return p[0] - src[n, y, x, c]
