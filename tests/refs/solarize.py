"""solarize: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np

import ref_intensity as RI
from refs._common import Case, edgy, per_sample_or_scalar


def case(draw, g):
    m = RI.top(g.dtype)
    # thresholds at pixel values +- a hair: x >= t must be decided exactly
    grid = 1.0 if m > 1 else 2.0 ** -11
    t, tt = per_sample_or_scalar(draw, edgy(draw, g.n, 0.0, m, grid))

    def plant(s, i):  # the pixel values nearest the threshold, in the image's dtype
        near = np.array([np.floor(tt[i] / grid), np.ceil(tt[i] / grid)]) * grid
        s[0, 0, :] = near[0].astype(s.dtype) if s.dtype != np.uint8 else near[0]
        s[-1, -1, :] = near[1].astype(s.dtype) if s.dtype != np.uint8 else min(near[1], 255)
    return Case({"threshold": t}, lambda s, i: RI.solarize(s, tt[i], m), {"atol_u8": 0}, plant=plant)

# the registry example's threshold is in uint8 units: / 255 for float images (test_determinism)
FLOAT_UNITS = ("threshold",)
