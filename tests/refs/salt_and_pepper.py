"""salt_and_pepper: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_filters as RF
import ref_intensity as RI
from refs._common import Case, EXACT


def case(draw, g):
    prob = np.array(draw(st.lists(st.floats(0, 1), min_size=g.n, max_size=g.n)))
    svp = np.array(draw(st.lists(st.floats(0, 1), min_size=g.n, max_size=g.n)))
    seed = draw(st.integers(0, 2 ** 64 - 1))
    white = RI.top(g.dtype)
    return Case({"prob": prob, "salt_vs_pepper": svp, "seed": seed},
                lambda s, i: RF.salt_and_pepper(s, i, prob[i], svp[i], seed, white), EXACT)


def noise_kw(rng, n, dtype, seed):
    """Per-sample parameters for the determinism tests (in the dtype's units)."""
    return {"prob": rng.uniform(0.1, 0.6, n), "salt_vs_pepper": rng.uniform(0, 1, n), "seed": seed}
