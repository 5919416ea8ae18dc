"""Numba twin of brightness: clamp(factor * x, 0, max) on RGB, alpha copied. p = [factor, max]."""
from ._colour import clampv
from ._dual import dual


@dual
def brightness_value(src, n, y, x, c, p):
    v = float(src[n, y, x, c])
    if c >= 3:
        return v
    return clampv(p[0] * v, p[1])
