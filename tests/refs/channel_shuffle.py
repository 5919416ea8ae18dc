"""channel_shuffle: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_colour as RC
from refs._common import Case


def case(draw, g):
    p = np.array([draw(st.permutations(range(g.c))) for _ in range(g.n)])
    return Case({"permutation": p}, lambda s, i: RC.channel_shuffle(s, p[i]), {"atol_u8": 0, "rtol": 0})


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"permutation": [0, 0, 1]}, ValueError,
     r"^permutation: got \[0, 0, 1\] \(sample 0\); expected a permutation of 0..2 \(each channel index once\)$"),
    ({"permutation": [0, 1, 3]}, ValueError, r"^permutation: got \[0, 1, 3\] \(sample 0\); expected a permutation of 0..2"),
]
