"""crop_mirror_normalize: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_intensity as RI
from helpers import LAYOUTS
from refs._common import Case, stats


def case(draw, g):
    mean, std, ms = stats(draw, g)
    odt = draw(st.sampled_from(("float32", "float16")))
    out_layout = draw(st.sampled_from(LAYOUTS))
    hmin, wmin = min(h for h, _ in g.shapes), min(w for _, w in g.shapes)
    crop = None
    if g.uniform or draw(st.booleans()):
        crop = None if draw(st.booleans()) else (draw(st.integers(1, hmin)), draw(st.integers(1, wmin)))
    pos = np.array(draw(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0, 1, width=32),
                                           st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0, 1, width=32)),
                                 min_size=g.n, max_size=g.n)), np.float64)
    mirror = np.array(draw(st.lists(st.booleans(), min_size=g.n, max_size=g.n)))
    pad = draw(st.booleans())
    return Case({"crop": crop, "crop_pos": pos, "mirror": mirror, "mean": mean, "std": std, "dtype": odt,
                 "output_layout": out_layout, "pad_output": pad},
                lambda s, i: RI.crop_mirror_normalize(s, crop, pos[i], mirror[i], *ms(i), pad),
                kind="layout", odt=odt, out_layout=out_layout)


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"std": [1, 0, 1]}, ValueError, r"^std: got \[1, 0, 1\]; expected non-zero values$"),
    ({"crop": (20, 4)}, ValueError, r"^crop: got \(20, 4\); image 0 is 12x10; expected a window no larger than every image$"),
    ({"crop_pos": (1.5, 0)}, ValueError, r"^crop_pos: got \[1.5, 0.0\]; expected values <= 1$"),
]

# test_determinism compares NHWC outputs sample by sample
EXAMPLE = {"output_layout": "NHWC"}
# 3x4 images (the twin comparison in the simulator, test_determinism)
SMALL = {"crop": (2, 3)}

# test_dali: one of the numba_function paths (changes dtype, layout and size); DALI sees CHW
DALI_NUMBA = True
DALI_LAYOUT = "CHW"
