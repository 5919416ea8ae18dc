"""Numba twin of sharpen (torchvision adjust_sharpness): the value of output element
(n, y, x, c). p = [factor, bound (255 or 1), round_blur (1 for uint8)]."""
import math

from ._dual import dual


@dual
def sharpen_value(src, n, y, x, c, p):
    h = src.shape[1]
    w = src.shape[2]
    xc = float(src[n, y, x, c])
    o = xc
    if y > 0 and x > 0 and y < h - 1 and x < w - 1:
        s = 4.0 * xc
        for dy in range(-1, 2):
            for dx in range(-1, 2):
                s += float(src[n, y + dy, x + dx, c])
        b = s / 13.0
        if p[2] != 0:
            b = math.floor(b + 0.5)
        o = xc + (1.0 - p[0]) * (b - xc)
    if h > 2 and w > 2:
        o = min(max(o, 0.0), p[1])
    return o


def kernel(target):
    """``kernel(src, dst, params, lo, hi, rnd)``: the value driver over :func:`sharpen_value`."""
    from ._driver import value_kernel

    return value_kernel(sharpen_value, target)
