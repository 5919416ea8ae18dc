"""Numba twin of grayscale: 0.2989 r + 0.587 g + 0.114 b to every output channel. p = [max]."""
from ._colour import luma
from ._dual import dual


@dual
def grayscale_value(src, n, y, x, c, p):
    if src.shape[3] < 3:
        return float(src[n, y, x, 0])
    return luma(float(src[n, y, x, 0]), float(src[n, y, x, 1]), float(src[n, y, x, 2]), p[0] > 1.0)
