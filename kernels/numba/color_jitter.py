"""Numba twin of color_jitter: brightness, contrast, saturation, hue in one pass, rounded once.

p = [brightness, contrast, saturation, hue, max, mean]; the mean (contrast's) is that of the
brightness-adjusted image, summed from ``jitter_gray``.
"""
from ._colour import clampv, hue_rgb, luma_floor
from ._dual import dual


@dual
def jitter_gray(src, n, y, x, p):
    m = p[4]
    if src.shape[3] < 3:
        return clampv(p[0] * float(src[n, y, x, 0]), m)
    return luma_floor(clampv(p[0] * float(src[n, y, x, 0]), m), clampv(p[0] * float(src[n, y, x, 1]), m),
                      clampv(p[0] * float(src[n, y, x, 2]), m), m > 1.0)


@dual
def jitter_step(v, p):
    """Brightness then contrast on one channel value."""
    m = p[4]
    return clampv(p[1] * clampv(p[0] * v, m) + (1.0 - p[1]) * p[5], m)


@dual
def color_jitter_value(src, n, y, x, c, p):
    v = float(src[n, y, x, c])
    if c >= 3:
        return v
    if src.shape[3] < 3:
        return jitter_step(v, p)
    m = p[4]
    r = jitter_step(float(src[n, y, x, 0]), p)
    g = jitter_step(float(src[n, y, x, 1]), p)
    b = jitter_step(float(src[n, y, x, 2]), p)
    gray = (1.0 - p[2]) * luma_floor(r, g, b, m > 1.0)
    r = clampv(p[2] * r + gray, m)
    g = clampv(p[2] * g + gray, m)
    b = clampv(p[2] * b + gray, m)
    if p[3] != 0.0:
        r, g, b = hue_rgb(r, g, b, p[3])
    if c == 0:
        return r
    if c == 1:
        return g
    return b
