"""Numba twin of rot90: the source pixel of output pixel (y, x); p = [k].

Counter-clockwise quarter turns as numpy.rot90: ``k % 4`` = 1 reads ``src[x, w-1-y]``,
2 reads ``src[h-1-y, w-1-x]``, 3 reads ``src[h-1-x, y]``.
"""
from ._dual import dual


@dual
def rot90_map(y, x, sh, sw, p):
    k = int(p[0]) % 4
    if k < 0:  # k from the GPU is not normalised on the host
        k += 4
    if k == 1:
        return x, sw - 1 - y
    if k == 2:
        return sh - 1 - y, sw - 1 - x
    if k == 3:
        return sh - 1 - x, y
    return y, x
