"""transpose: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import ref_copyops as RCP
from refs._common import Case, EXACT


def case(draw, g):
    return Case({}, lambda s, i: RCP.transpose(s), EXACT)
