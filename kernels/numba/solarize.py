"""Numba twin of solarize: p = [threshold, M]; out = M - x where x >= threshold, else x."""
from ._dual import dual


@dual
def solarize_value(src, n, y, x, c, p):
    v = src[n, y, x, c]
    if v >= p[0]:
        return p[1] - v
    return v + 0.0
