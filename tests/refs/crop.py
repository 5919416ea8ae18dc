"""crop: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_copyops as RCP
from refs._common import Case, EXACT


def case(draw, g):
    if g.uniform:
        h, w = g.hw
        ch, cw = draw(st.integers(1, h)), draw(st.integers(1, w))
        hs, ws = [ch] * g.n, [cw] * g.n
    else:
        hs = [draw(st.integers(1, h)) for h, _ in g.shapes]
        ws = [draw(st.integers(1, w)) for _, w in g.shapes]
    top = np.array([draw(st.integers(0, h - ch)) for (h, _), ch in zip(g.shapes, hs)])
    left = np.array([draw(st.integers(0, w - cw)) for (_, w), cw in zip(g.shapes, ws)])
    return Case({"top": top, "left": left, "height": np.array(hs), "width": np.array(ws)},
                lambda s, i: RCP.crop(s, top[i], left[i], hs[i], ws[i]), EXACT)


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"top": 5, "height": 10}, ValueError,
     r"^top, height: sample 0 has top=5 and height=10, which ends at 15, outside its 12x10 image; expected 0 <= top <= 12 - height$"),
    ({"height": [4, 5, 4]}, ValueError, r"^height, width: give per-sample output sizes .* that differ; a uniform batch has one output size"),
]
