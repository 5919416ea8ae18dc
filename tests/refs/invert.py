"""invert: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import ref_intensity as RI
from refs._common import Case


def case(draw, g):
    m = RI.top(g.dtype)
    return Case({}, lambda s, i: RI.invert(s, m), {"atol_u8": 0})
