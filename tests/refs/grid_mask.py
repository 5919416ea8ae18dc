"""grid_mask: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from test_grid_mask import _ref as grid_mask_ref
from refs._common import Case, EXACT


def case(draw, g):
    """Integer tiles and shifts, ratios multiple of 1/tile, quarter-turn angles: no rounding
    anywhere, so exact (as test_grid_mask_axis_aligned_cpu); rotated grids have their own property."""
    tile = np.array(draw(st.lists(st.integers(1, 8), min_size=g.n, max_size=g.n)))
    ratio = np.array([draw(st.integers(0, t)) / t for t in tile])
    shift = np.array(draw(st.lists(st.tuples(st.integers(-9, 9), st.integers(-9, 9)),
                                   min_size=g.n, max_size=g.n)), np.float64)
    angle = np.array(draw(st.lists(st.sampled_from((0.0, 90.0)), min_size=g.n, max_size=g.n)))
    return Case({"tile": tile, "ratio": ratio, "angle": angle, "shift": shift},
                lambda s, i: grid_mask_ref(s, tile[i], ratio[i], angle[i], shift[i]), EXACT)
