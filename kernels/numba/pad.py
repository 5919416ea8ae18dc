"""Numba twin of pad: p = [top, left, mode, value]; the fill value reaches the driver as
``fills`` (the driver's constant), so only the border rule lives here.

Modes use the codes of common.cuh's ``border_index``: 0 constant, 1 edge (replicate),
3 reflect (numpy.pad "reflect" = OpenCV BORDER_REFLECT_101, edge pixel not repeated,
periodic with period 2(n-1) — which is what numpy.pad's repeated reflection gives when
the padding exceeds the image).
"""
from ._dual import dual


@dual
def border_index(i, n, mode):
    if i >= 0 and i < n:
        return i
    if mode == 0:
        return -1
    if mode == 1:
        return 0 if i < 0 else n - 1
    if n == 1:
        return 0
    period = 2 * (n - 1)
    i = i % period
    if i < 0:  # C-style remainder on some targets
        i += period
    return i if i < n else period - i


@dual
def pad_map(y, x, sh, sw, p):
    mode = int(p[2])
    sy = border_index(y - int(p[0]), sh, mode)
    sx = border_index(x - int(p[1]), sw, mode)
    if sy < 0 or sx < 0:
        return -1, -1
    return sy, sx
