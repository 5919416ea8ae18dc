"""Numba twin of resize (and resized_crop): channel ``c`` of output pixel (y, x).

p = [top, left, scale_y, scale_x, box_h, box_w, out_h, out_w, mode, ...] (see resize.cuh);
mode 0 nearest, 1 bilinear, 2 area. Taps outside the image replicate its edge.
"""
import math

from ._dual import dual
from ._interp import clamp_coord, clamp_index, sample_bilinear_clamped


@dual
def nearest_index(top, box, out, i, size):
    """floor(top + i * box / out), exactly (see resize.cuh), clamped into [0, size)."""
    num = float(top) * out + float(i) * box
    return clamp_index(int(math.floor(num / out)), size)


@dual
def footprint(a, b, size):
    """First and last source index of the footprint [a, b) (replicate border)."""
    i0 = clamp_index(int(math.floor(clamp_coord(a))), size)
    i1 = clamp_index(int(math.ceil(clamp_coord(b))) - 1, size)
    return i0, i1


@dual
def footprint_weight(a, b, i, size):
    lo = a if i == 0 else max(a, float(i))
    hi = b if i == size - 1 else min(b, float(i + 1))
    return max(hi - lo, 0.0)


@dual
def resample_value(src, n, y, x, c, p):
    h = src.shape[1]
    w = src.shape[2]
    mode = p[8]
    if mode == 0:
        sy = nearest_index(p[0], p[4], int(p[6]), y, h)
        sx = nearest_index(p[1], p[5], int(p[7]), x, w)
        return float(src[n, sy, sx, c])
    if mode == 1:
        fy = p[0] + (y + 0.5) * p[2] - 0.5
        fx = p[1] + (x + 0.5) * p[3] - 0.5
        return sample_bilinear_clamped(src, n, fy, fx, c)
    ay = p[0] + y * p[2]
    ax = p[1] + x * p[3]
    by = ay + p[2]
    bx = ax + p[3]
    y0, y1 = footprint(ay, by, h)
    x0, x1 = footprint(ax, bx, w)
    acc = 0.0
    wsum_y = 0.0
    wsum_x = 0.0
    for j in range(x0, x1 + 1):
        wsum_x += footprint_weight(ax, bx, j, w)
    for i in range(y0, y1 + 1):
        wy = footprint_weight(ay, by, i, h)
        wsum_y += wy
        r = 0.0
        for j in range(x0, x1 + 1):
            r += footprint_weight(ax, bx, j, w) * src[n, i, j, c]
        acc += wy * r
    area = wsum_y * wsum_x
    if area > 0.0:
        return acc / area
    return float(src[n, y0, x0, c])  # a footprint too thin to resolve: its first pixel
