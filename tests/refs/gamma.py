"""gamma: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import ref_intensity as RI
from refs._common import Case, floats, per_sample_or_scalar


def case(draw, g):
    m = RI.top(g.dtype)
    gm, gt = per_sample_or_scalar(draw, floats(draw, g.n, 0.0, 3.0))
    k, kt = per_sample_or_scalar(draw, floats(draw, g.n, 0.5, 1.5))
    return Case({"gamma": gm, "gain": k}, lambda s, i: RI.gamma(s, gt[i], kt[i], m))
