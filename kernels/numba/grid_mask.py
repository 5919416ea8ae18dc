"""Numba twin of grid_mask: the decision for pixel (y, x), in float32 with the operations of
kernels/grid_mask.cu (explicit fma, correctly rounded division), so both agree exactly.

p = [cos a, sin a, shift_y, shift_x, tile, ratio * tile]; masked pixels map to (-1, -1)
(the fill value 0).
"""
import math

import numpy as np

from ._dual import dual
from ._philox import fma32

F32 = np.float32


@dual
def mod_tile(u, tile):
    return fma32(-F32(math.floor(u / tile)), tile, u)


@dual
def grid_mask_map(y, x, sh, sw, p):
    ca, sa, sy, sx = F32(p[0]), F32(p[1]), F32(p[2]), F32(p[3])
    tile, thr = F32(p[4]), F32(p[5])
    fy, fx = F32(y), F32(x)
    u = fma32(fx, ca, fma32(-fy, sa, -sx))
    v = fma32(fx, sa, fma32(fy, ca, -sy))
    if mod_tile(u, tile) < thr and mod_tile(v, tile) < thr:
        return -1, -1
    return y, x
