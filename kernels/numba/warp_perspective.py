"""Numba twin of warp_perspective: channel ``c`` of output pixel (y, x).

``p = [interp, border, a00 .. a22 (9 values, row-major), fill_0 .. fill_{C-1}]`` where
``a`` is the *inverse* (destination -> source) homography: the source point is
``((a00 x + a01 y + a02) / w, (a10 x + a11 y + a12) / w)`` with
``w = a20 x + a21 y + a22``; where ``w == 0`` (a point at infinity) the source point is
taken as far outside the image (the border rule decides). interp / border as in
:mod:`.warp_affine`.
"""
from ._dual import dual
from ._interp import COORD_LIMIT, sample_bilinear, sample_nearest


@dual
def warp_perspective_value(src, n, y, x, c, p):
    w = p[8] * x + p[9] * y + p[10]
    if w == 0:
        fx = -COORD_LIMIT
        fy = -COORD_LIMIT
    else:
        fx = (p[2] * x + p[3] * y + p[4]) / w
        fy = (p[5] * x + p[6] * y + p[7]) / w
    if p[0] == 0:
        return sample_nearest(src, n, fy, fx, c, int(p[1]), p[11 + c])
    return sample_bilinear(src, n, fy, fx, c, int(p[1]), p[11 + c])
