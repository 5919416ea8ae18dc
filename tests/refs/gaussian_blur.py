"""gaussian_blur: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_filters as RF
from refs._common import Case, floats, per_sample_or_scalar


def case(draw, g):
    u8 = g.dtype == "uint8"
    sig, st_ = per_sample_or_scalar(draw, floats(draw, g.n, 0.3, 0.8 if g.tiny else 3.0))
    if draw(st.booleans()):
        return Case({"sigma": sig}, lambda s, i: RF.gaussian_blur(s, st_[i], uint8=u8))
    kmax = 3 if g.tiny else 10
    ks = np.array(draw(st.lists(st.integers(0, kmax), min_size=g.n, max_size=g.n))) * 2 + 1
    return Case({"sigma": sig, "kernel_size": ks}, lambda s, i: RF.gaussian_blur(s, st_[i], ks[i]))


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"sigma": 1e30}, ValueError, r"^sigma: got 1e\+30, whose default kernel size exceeds 255; pass a smaller sigma or a kernel_size$"),
    ({"kernel_size": 4}, ValueError, r"^kernel_size: got 4; expected odd sizes from 1 to 255$"),
    ({"kernel_size": -3}, ValueError, r"^kernel_size: got -3; expected odd sizes from 1 to 255$"),
]
