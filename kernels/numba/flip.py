"""Numba twin of flip: the source pixel of output pixel (y, x); p = [horizontal, vertical]."""
from ._dual import dual


@dual
def flip_map(y, x, sh, sw, p):
    sx = sw - 1 - x if p[0] != 0 else x
    sy = sh - 1 - y if p[1] != 0 else y
    return sy, sx
