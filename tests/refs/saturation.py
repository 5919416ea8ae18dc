"""saturation: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import ref_colour as RC
from refs._common import Case, floats, per_sample_or_scalar


def case(draw, g):
    m, i8 = RC.top(g.dtype), RC.is_int(g.dtype)
    f, ft = per_sample_or_scalar(draw, floats(draw, g.n, 0.0, 3.0))
    return Case({"factor": f}, lambda s, i: RC.saturation(s, ft[i], m, i8))
