"""color_twist: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_colour as RC
from refs._common import Case


def case(draw, g):
    top = RC.top(g.dtype)
    mats = np.eye(3, 4)[None] + g.rng.uniform(-0.3, 0.3, (g.n, 3, 4))
    if draw(st.booleans()):
        mats[0] = np.eye(3, 4)
    return Case({"matrix": mats}, lambda s, i: RC.color_twist(s, mats[i], top))
