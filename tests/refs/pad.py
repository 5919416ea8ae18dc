"""pad: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_copyops as RCP
from test_erase import _fill as erase_fill
from refs._common import Case, edgy, EXACT


def case(draw, g):
    mode = draw(st.sampled_from(("constant", "edge", "reflect")))
    tv, th = draw(st.integers(0, 14)), draw(st.integers(0, 14))
    if g.uniform:  # per-sample sides with one output size
        top = np.array(draw(st.lists(st.integers(0, tv), min_size=g.n, max_size=g.n)))
        left = np.array(draw(st.lists(st.integers(0, th), min_size=g.n, max_size=g.n)))
        padding = np.stack([top, tv - top, left, th - left], 1)
    else:
        padding = np.array(draw(st.lists(st.lists(st.integers(0, 9), min_size=4, max_size=4),
                                         min_size=g.n, max_size=g.n)))
    hi = 300.0 if g.dtype == "uint8" else 1.5
    # stored as the dtype stores it (uint8: half up, so x.5 +- a hair are the edges)
    value = edgy(draw, g.n, -hi / 10, hi, 0.5 if g.dtype == "uint8" else 2.0 ** -12)
    return Case({"padding": padding, "mode": mode, "value": value},
                lambda s, i: RCP.pad(s, padding[i], mode, erase_fill(value[i], g.dtype)), EXACT)


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"padding": -1}, ValueError, r"^padding: got -1; expected values >= 0$"),
    ({"padding": 2 ** 20}, ValueError, r"^out: an output image would hold \d+ elements; .* at most 2147483647"),
]

# padding decides the output shape: a host value (test_bad_input)
HOST_ONLY = ("padding",)

# test_dali: one of the numba_function paths (per-sample sizes and fills)
DALI_NUMBA = True
