"""equalize: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import ref_intensity as RI
from refs._common import Case
from refs._common import images as random_batch
from test_equalize import _images as equalize_images


def case(draw, g):
    u8 = g.dtype == "uint8"
    return Case({}, lambda s, i: RI.equalize(s, u8), {"atol_u8": 0})


def images(g):
    """Uneven histograms and a flat image (uniform batches; varshape lists: random images)."""
    if g.varshape:
        return random_batch(g)
    h, w = g.hw
    return equalize_images(g.rng, g.n, h, w, g.c, g.dtype)
