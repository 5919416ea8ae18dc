"""resized_crop: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_resize as RR
from refs._common import Case


def case(draw, g):
    """Quarter-pixel boxes (float32-exact, as test_resized_crop): inside, sticking out, outside."""
    interp = draw(st.sampled_from(("nearest", "bilinear", "area")))
    size = (draw(st.integers(1, 12)), draw(st.integers(1, 12)))
    q = lambda lo, hi: draw(st.integers(int(lo * 4), int(hi * 4))) / 4  # noqa: E731
    boxes = np.array([(q(-4, h + 1), q(-4, w + 1), q(0.25, h + 2), q(0.25, w + 2)) for h, w in g.shapes])
    return Case({"boxes": boxes, "size": size, "interpolation": interp},
                lambda s, i: RR.resized_crop(s, boxes[i], size, interp))


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"boxes": [0, 0, -4, 4]}, ValueError, r"^boxes: got \[0, 0, -4, 4\]; expected rows \(top, left, height, width\) with height > 0 and width > 0$"),
]

# the Numba CUDA and CUDA C twins: float32 coordinate maths (FMA-contracted on the GPU)
TWIN_RTOL = 1e-4

# 3x4 images (the twin comparison in the simulator, test_determinism)
SMALL = {"size": (3, 5)}
