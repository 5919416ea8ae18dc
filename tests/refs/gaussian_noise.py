"""gaussian_noise: its property case (and, where they apply, its twin tolerance and bad-input rows)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import ref_filters as RF
from refs._common import Case, floats


def case(draw, g):
    scale = 255.0 if g.dtype == "uint8" else 1.0
    mean = floats(draw, g.n, -0.05 * scale, 0.05 * scale)
    std = floats(draw, g.n, 0.0, 0.2 * scale)
    seed = draw(st.integers(0, 2 ** 64 - 1))
    return Case({"mean": mean, "std": std, "seed": seed},
                lambda s, i: RF.gaussian_noise(s, i, mean[i], std[i], seed))


# Out-of-range rows the Param ranges do not imply (test_bad_input): (overrides of the registry
# example, exception, message regex).
BAD = [
    ({"seed": 1.5}, TypeError, r"^seed: got 1.5; expected an int in \[0, 2\*\*64\)"),
    ({"seed": None}, TypeError, r"^seed: got None; expected an int in \[0, 2\*\*64\)"),
]

# the registry example's mean and std are in uint8 units: / 255 for float images (test_determinism)
FLOAT_UNITS = ("mean", "std")


def noise_kw(rng, n, dtype, seed):
    """Per-sample parameters for the determinism tests (in the dtype's units)."""
    m = 255.0 if np.dtype(dtype) == np.uint8 else 1.0
    return {"mean": rng.uniform(-0.05, 0.05, n) * m, "std": rng.uniform(0.05, 0.2, n) * m, "seed": seed}
