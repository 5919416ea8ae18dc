"""posterize: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_intensity as RI
from refs._common import Case


def case(draw, g):
    bits = np.array(draw(st.lists(st.integers(1, 8), min_size=g.n, max_size=g.n)))
    u8 = g.dtype == "uint8"
    return Case({"bits": bits}, lambda s, i: RI.posterize(s, bits[i], u8), {"atol_u8": 0})
