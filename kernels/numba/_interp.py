"""Interpolation helpers for the Numba twins (the twin of ``kernels/interp.cuh``).

Coordinates are in source pixel units with pixel centres at integers (OpenCV's warp /
remap convention): ``(0, 0)`` is the centre of the top-left pixel. ``src`` is a 4-D NHWC
array and ``n`` the sample; results are floats for one channel ``c``. Border rules use
OpenCV's numbers (common.cuh): 0 constant (``fill`` for every tap outside the image),
1 replicate, 2 reflect (``...ba|abcd|dc...``), 3 reflect-101 (``...cb|abcd|cb...``,
numpy.pad's "reflect").
"""
from __future__ import annotations

import math

from ._dual import dual

BORDER_CONSTANT, BORDER_REPLICATE, BORDER_REFLECT, BORDER_REFLECT101 = 0, 1, 2, 3
#: Coordinates are clamped to +-COORD_LIMIT before flooring (as in interp.cuh).
COORD_LIMIT = 16777216.0


@dual
def border_index(i, n, mode):
    """Index into [0, n) for index ``i`` under border rule ``mode``; -1 means "fill"."""
    if i >= 0 and i < n:
        return i
    if mode == 0:
        return -1
    if mode == 1:
        return 0 if i < 0 else n - 1
    if n == 1:
        return 0
    if mode == 3:
        period = 2 * (n - 1)
        i = i % period  # Python modulo: already non-negative
        return i if i < n else period - i
    period = 2 * n
    i = i % period
    return i if i < n else period - 1 - i


@dual
def clamp_index(i, n):
    """``i`` clamped into [0, n) (replicate border)."""
    if i < 0:
        return 0
    if i >= n:
        return n - 1
    return i


@dual
def clamp_coord(f):
    if not (f > -16777216.0):  # also NaN
        return -16777216.0
    if f > 16777216.0:
        return 16777216.0
    return f


@dual
def tap(src, n, y, x, c, border, fill):
    """Channel ``c`` of pixel (y, x) under ``border``, or ``fill`` outside the image."""
    yy = border_index(y, src.shape[1], border)
    xx = border_index(x, src.shape[2], border)
    if yy < 0 or xx < 0:
        return fill
    return float(src[n, yy, xx, c])


@dual
def sample_nearest(src, n, fy, fx, c, border, fill):
    """The pixel whose centre is nearest (ties round up: floor(f + 0.5))."""
    y = int(math.floor(clamp_coord(fy) + 0.5))
    x = int(math.floor(clamp_coord(fx) + 0.5))
    return tap(src, n, y, x, c, border, fill)


@dual
def sample_bilinear(src, n, fy, fx, c, border, fill):
    """Bilinear blend of the four pixels around (fy, fx); each tap follows ``border``."""
    fy = clamp_coord(fy)
    fx = clamp_coord(fx)
    y0 = math.floor(fy)
    x0 = math.floor(fx)
    wy = fy - y0
    wx = fx - x0
    y0 = int(y0)
    x0 = int(x0)
    a = tap(src, n, y0, x0, c, border, fill)
    b = tap(src, n, y0, x0 + 1, c, border, fill)
    cc = tap(src, n, y0 + 1, x0, c, border, fill)
    d = tap(src, n, y0 + 1, x0 + 1, c, border, fill)
    top = a + wx * (b - a)
    bot = cc + wx * (d - cc)
    return top + wy * (bot - top)


@dual
def sample_bilinear_clamped(src, n, fy, fx, c):
    """Replicate-border bilinear (taps clamped into the image)."""
    fy = clamp_coord(fy)
    fx = clamp_coord(fx)
    y0 = math.floor(fy)
    x0 = math.floor(fx)
    wy = fy - y0
    wx = fx - x0
    y0 = int(y0)
    x0 = int(x0)
    h = src.shape[1]
    w = src.shape[2]
    ya = clamp_index(y0, h)
    yb = clamp_index(y0 + 1, h)
    xa = clamp_index(x0, w)
    xb = clamp_index(x0 + 1, w)
    a = float(src[n, ya, xa, c])
    b = float(src[n, ya, xb, c])
    cc = float(src[n, yb, xa, c])
    d = float(src[n, yb, xb, c])
    top = a + wx * (b - a)
    bot = cc + wx * (d - cc)
    return top + wy * (bot - top)
