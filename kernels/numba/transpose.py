"""Numba twin of transpose: output pixel (y, x) reads source pixel (x, y)."""
from ._dual import dual


@dual
def transpose_map(y, x, sh, sw, p):
    return x, y
