"""rot90: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_copyops as RCP
from refs._common import Case, EXACT


def case(draw, g):
    k = np.array(draw(st.lists(st.integers(-3, 3), min_size=g.n, max_size=g.n)))
    if g.uniform and g.hw[0] != g.hw[1]:
        k = np.where(k % 2 == k[0] % 2, k, np.where(k < 3, k + 1, k - 1))  # one parity for a non-square uniform batch
    return Case({"k": k}, lambda s, i: RCP.rot90(s, k[i]), EXACT)


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"k": 1.5}, ValueError, r"^k: got 1.5; expected integers$"),
]

# k decides the output shape of non-square images: a host value there (test_bad_input)
HOST_ONLY = ("k",)

# one of the DALI numba_function paths (test_dali): a copy twin whose shape changes per sample
DALI_NUMBA = True
