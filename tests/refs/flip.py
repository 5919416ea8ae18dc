"""flip: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import reference as R0
from refs._common import Case, EXACT


def case(draw, g):
    hf = np.array(draw(st.lists(st.booleans(), min_size=g.n, max_size=g.n)))
    vf = np.array(draw(st.lists(st.booleans(), min_size=g.n, max_size=g.n)))
    return Case({"horizontal": hf, "vertical": vf}, lambda s, i: R0.flip(s, hf[i], vf[i]), EXACT)


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"vertical": [0, 2, 1]}, ValueError, r"^vertical: got \[0, 2, 1\]; expected True/False or 0/1"),
]

# test_dali: one of the numba_function paths (a copy twin)
DALI_NUMBA = True
