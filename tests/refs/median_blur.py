"""median_blur: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_filters as RF
from refs._common import Case, EXACT


def case(draw, g):
    ks = np.array(draw(st.lists(st.sampled_from((3, 5)), min_size=g.n, max_size=g.n)))
    return Case({"kernel_size": ks}, lambda s, i: RF.median_blur(s, ks[i]), EXACT)
