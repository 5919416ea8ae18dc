"""color_jitter: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import ref_colour as RC
from refs._common import Case, floats


def case(draw, g):
    m, i8 = RC.top(g.dtype), RC.is_int(g.dtype)
    b, c, s_, h = (floats(draw, g.n, 0.0, 2.5), floats(draw, g.n, 0.0, 2.0), floats(draw, g.n, 0.0, 2.0),
                   floats(draw, g.n, -0.5, 0.5))
    return Case({"brightness": b, "contrast": c, "saturation": s_, "hue": h},
                lambda a, i: RC.color_jitter(a, b[i], c[i], s_[i], h[i], m, i8))
