"""Numba twin of posterize: p = [bits, is_float].

uint8:  out = floor(x / 2^(8-bits)) * 2^(8-bits)   (== x & mask: the top `bits` bits)
floats: out = clamp(floor(x * 2^bits), 0, 2^bits - 1) / 2^bits
"""
import math

from ._dual import dual


@dual
def posterize_value(src, n, y, x, c, p):
    bits = p[0]
    v = src[n, y, x, c]
    if p[1] != 0:
        levels = 2.0 ** bits
        q = math.floor(v * levels)
        if q < 0:
            q = 0.0
        if q > levels - 1:
            q = levels - 1
        return q / levels
    step = 2.0 ** (8 - bits)
    return math.floor(v / step) * step
