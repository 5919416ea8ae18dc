"""box_blur: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_filters as RF
from refs._common import Case


def case(draw, g):
    kmax = 3 if g.tiny else 10
    ks = np.array(draw(st.lists(st.integers(0, kmax), min_size=g.n, max_size=g.n))) * 2 + 1
    # uint8: exact (odd k^2: the mean is never a rounding tie), as test_box_blur
    return Case({"kernel_size": ks}, lambda s, i: RF.box_blur(s, ks[i]), {"atol_u8": 0})


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"kernel_size": 257}, ValueError, r"^kernel_size: got 257; expected odd sizes from 1 to 255$"),
]

# test_dali: the numba_function path falls back to python_function (with a warning)
DALI_NUMBA = True
DALI_FALLBACK = True
