"""Numba twin of crop_mirror_normalize (and normalize: no crop, no mirror).

p = [pos_y, pos_x, mirror, crop_h, crop_w, mean[C], std[C]]; out = (x - mean) / std;
output channel c >= C (the pad channel) is 0. The window corner is
DALI's: roundf(pos * (in - crop)) with the product in float32, rounded half away from zero.
"""
import math

import numpy as np

from ._dual import dual


@dual
def cmn_anchor(pos, size, crop):
    v = np.float32(pos) * np.float32(size - crop)
    return int(math.floor(np.float64(v) + 0.5))


@dual
def cmn_value(src, n, y, x, c, p):
    nc = src.shape[3]
    if c >= nc:
        return 0.0
    ch = int(p[3])
    cw = int(p[4])
    ay = cmn_anchor(p[0], src.shape[1], ch)
    ax = cmn_anchor(p[1], src.shape[2], cw)
    if p[2] != 0:
        sx = ax + cw - 1 - x
    else:
        sx = ax + x
    return (src[n, ay + y, sx, c] - p[5 + c]) / p[5 + nc + c]
