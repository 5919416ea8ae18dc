"""sharpen: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import ref_filters as RF
from refs._common import Case, floats, per_sample_or_scalar


def case(draw, g):
    u8 = g.dtype == "uint8"
    f, ft = per_sample_or_scalar(draw, floats(draw, g.n, 0.0, 8.0))
    return Case({"factor": f}, lambda s, i: RF.sharpen(s, ft[i], u8))
