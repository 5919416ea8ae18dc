"""center_crop: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

from hypothesis import strategies as st

import ref_copyops as RCP
from refs._common import Case, EXACT


def case(draw, g):
    ch, cw = draw(st.integers(1, 15)), draw(st.integers(1, 15))
    size = ch if draw(st.booleans()) else (ch, cw)
    return Case({"size": size}, lambda s, i: RCP.center_crop(s, size), EXACT)


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"size": (4, 5, 6)}, ValueError, r"^size: got \[4, 5, 6\]; expected an int or a pair \(height, width\) of ints$"),
    ({"size": 2.5}, ValueError, r"^size: got 2.5; expected an int or a pair \(height, width\) of ints$"),
]

# 3x4 images (the twin comparison in the simulator, test_determinism)
SMALL = {"size": (2, 5)}
