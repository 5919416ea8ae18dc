"""rotate: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_warp as RW
from refs._common import Case, warp_common


def case(draw, g):
    interp, border, _, fill, fr = warp_common(draw, g)
    if draw(st.booleans()):
        # quarter turns take exact cos/sin (the reference knows); about a half-integer centre
        # they put source points exactly on nearest-neighbour ties (x.5) along the centre
        # lines, so the scale is dyadic there: the map is then exact in float32 and float64
        # alike (with a scale like 1.2 both round the tie their own way)
        angle = np.array(draw(st.lists(st.sampled_from([-270.0, -180.0, -90.0, 0.0, 90.0, 180.0, 360.0]),
                                       min_size=g.n, max_size=g.n)))
        scale = np.array(draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=g.n, max_size=g.n)))
    else:
        angle = g.rng.uniform(-180, 180, g.n)
        scale = g.rng.uniform(0.7, 1.4, g.n)
    center = None  # the default: each image's own centre
    if draw(st.booleans()):
        center = np.array([(g.rng.uniform(0, w - 1), g.rng.uniform(0, h - 1)) for h, w in g.shapes])
    return Case({"angle": angle, "center": center, "scale": scale, "interpolation": interp, "border": border,
                 "fill": fill},
                lambda s, i: RW.rotate(s, angle[i], None if center is None else center[i], scale[i], interp,
                                       border, fr[i]))

# the Numba CUDA and CUDA C twins: float32 coordinate maths (FMA-contracted on the GPU)
TWIN_RTOL = 1e-4

# test_dali: one of the numba_function paths (a value twin)
DALI_NUMBA = True
