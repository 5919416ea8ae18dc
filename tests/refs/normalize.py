"""normalize: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

from hypothesis import strategies as st

import ref_intensity as RI
from helpers import LAYOUTS
from refs._common import Case, stats


def case(draw, g):
    mean, std, ms = stats(draw, g)
    odt = draw(st.sampled_from(("float32", "float16")))
    out_layout = draw(st.sampled_from(LAYOUTS))
    return Case({"mean": mean, "std": std, "dtype": odt, "output_layout": out_layout},
                lambda s, i: RI.normalize(s, *ms(i)), kind="layout", odt=odt, out_layout=out_layout)


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"std": 0}, ValueError, r"^std: got 0; expected non-zero values$"),
]
