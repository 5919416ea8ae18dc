"""hue: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import ref_colour as RC
from refs._common import Case, floats, per_sample_or_scalar


def case(draw, g):
    m = RC.top(g.dtype)
    sh, stt = per_sample_or_scalar(draw, floats(draw, g.n, -0.5, 0.5))
    return Case({"shift": sh}, lambda s, i: RC.hue(s, stt[i], m))
