"""grayscale: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

from hypothesis import strategies as st

import ref_colour as RC
from refs._common import Case


def case(draw, g):
    co = draw(st.sampled_from((1, 3)))
    i8 = RC.is_int(g.dtype)
    return Case({"num_output_channels": co}, lambda s, i: RC.grayscale(s, co, i8))


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"num_output_channels": 2}, ValueError, r"^num_output_channels: got 2; expected 1 or 3$"),
]
