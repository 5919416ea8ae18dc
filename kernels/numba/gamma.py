"""Numba twin of gamma: p = [gamma, gain, M] with M = 255 (uint8) or 1 (floats).

out = M * clamp(gain * (max(x, 0) / M) ** gamma, 0, 1)
"""
import math

from ._dual import dual


@dual
def gamma_value(src, n, y, x, c, p):
    m = p[2]
    v = src[n, y, x, c]
    if v < 0:
        v = 0.0
    r = p[1] * math.pow(v / m, p[0])
    if r < 0:
        r = 0.0
    if r > 1:
        r = 1.0
    return m * r
