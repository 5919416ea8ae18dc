"""autocontrast: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

from refs._common import Case


def case(draw, g):
    from test_autocontrast import _ref as autocontrast_ref

    u8 = g.dtype == "uint8"
    return Case({}, lambda s, i: autocontrast_ref(s, u8), {"rtol": 2e-3 if g.dtype == "float16" else 1e-5})
