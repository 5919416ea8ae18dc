"""Numba twin of hue: torchvision's HSV hue shift (closed form, _colour.hue_rgb). p = [shift, max].

One channel, alpha and shift 0: unchanged.
"""
from ._colour import hue_rgb
from ._dual import dual


@dual
def hue_value(src, n, y, x, c, p):
    v = float(src[n, y, x, c])
    if c >= 3 or src.shape[3] < 3 or p[0] == 0.0:
        return v
    r, g, b = hue_rgb(float(src[n, y, x, 0]), float(src[n, y, x, 1]), float(src[n, y, x, 2]), p[0])
    if c == 0:
        return r
    if c == 1:
        return g
    return b
