"""Numba twin of warp_affine (and rotate): channel ``c`` of output pixel (y, x).

``p = [interp, border, a00, a01, a02, a10, a11, a12, fill_0 .. fill_{C-1}]`` where ``a``
is the *inverse* (destination -> source) affine matrix: the source point is
``(a00 x + a01 y + a02, a10 x + a11 y + a12)``. interp: 0 nearest, 1 bilinear; border:
common.cuh's numbers (0 constant, 1 replicate, 3 reflect-101). Sampling is
:mod:`._interp`'s, as in ``kernels/warp_common.cuh``.
"""
from ._dual import dual
from ._interp import sample_bilinear, sample_nearest


@dual
def warp_affine_value(src, n, y, x, c, p):
    fx = p[2] * x + p[3] * y + p[4]
    fy = p[5] * x + p[6] * y + p[7]
    if p[0] == 0:
        return sample_nearest(src, n, fy, fx, c, int(p[1]), p[8 + c])
    return sample_bilinear(src, n, fy, fx, c, int(p[1]), p[8 + c])
