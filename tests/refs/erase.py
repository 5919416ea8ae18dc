"""erase: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_filters as RF
from test_erase import _fill as erase_fill
from refs._common import Case, edgy, EXACT


def case(draw, g):
    k = draw(st.integers(0, 3))
    boxes = np.array([[(draw(st.integers(-4, h)), draw(st.integers(-4, w)), draw(st.integers(0, h + 2)),
                        draw(st.integers(0, w + 2))) for _ in range(k)] for h, w in g.shapes],
                     np.int64).reshape(g.n, k, 4)
    hi = 300.0 if g.dtype == "uint8" else 2.0
    if draw(st.booleans()):
        value = g.rng.uniform(-hi / 10, hi, (g.n, g.c))
        vt = value
    else:
        v = float(edgy(draw, 1, -hi / 10, hi, 0.5 if g.dtype == "uint8" else 2.0 ** -12)[0])
        value, vt = v, np.full(g.n, v)
    return Case({"boxes": boxes, "value": value},
                lambda s, i: RF.erase(s, boxes[i], erase_fill(vt[i], g.dtype)), EXACT)


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"boxes": [[0, 0, -1, 4]]}, ValueError, r"^boxes: got a negative height or width \(-1\); expected sizes >= 0$"),
    ({"boxes": [[0, 0, 2 ** 25, 4]]}, ValueError, r"^boxes: got coordinates beyond 2\*\*24; expected pixel coordinates$"),
    ({"boxes": [0, 0, 4]}, ValueError, r"^boxes: got shape \(3,\); expected \(K, 4\) boxes"),
]
