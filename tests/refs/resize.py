"""resize: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

from hypothesis import strategies as st

import ref_resize as RR
from refs._common import Case


def case(draw, g):
    interp = draw(st.sampled_from(("nearest", "bilinear", "area")))
    size = (draw(st.integers(1, 12)), draw(st.integers(1, 12)))
    return Case({"size": size, "interpolation": interp}, lambda s, i: RR.resize(s, size, interp))


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"size": (0, 4)}, ValueError, r"^size: got \[0, 4\]; expected positive sizes$"),
    ({"size": (10 ** 5, 10 ** 5)}, ValueError, r"^out: an output image would hold 30000000000 elements"),
]

# 3x4 images (the twin comparison in the simulator, test_determinism)
SMALL = {"size": (3, 5)}
