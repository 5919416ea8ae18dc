"""warp_perspective: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_warp as RW
from test_warp_perspective import _dyadic as dyadic_homography
from refs._common import Case, warp_common


def case(draw, g):
    interp, border, size, fill, fr = warp_common(draw, g)
    kind = draw(st.sampled_from(("random", "random-inverse", "dyadic")))
    if kind == "dyadic":
        m, inverse = dyadic_homography(g.rng, g.n), True
    else:
        m = np.stack([RW.random_homography(g.rng, 1, h, w)[0] for h, w in g.shapes])
        inverse = kind == "random-inverse"
        if inverse:
            m = np.linalg.inv(m)
    return Case({"matrix": m, "size": size, "interpolation": interp, "border": border, "fill": fill,
                 "inverse_map": inverse},
                lambda s, i: RW.warp_perspective(s, m[i], size, interp, border, fr[i], inverse_map=inverse))


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"matrix": np.diag([1.0, 1.0, 0.0])}, ValueError, r"^matrix: sample 0 is singular or numerically so"),
]

# the Numba CUDA and CUDA C twins: float32 coordinate maths (FMA-contracted on the GPU)
TWIN_RTOL = 1e-4
