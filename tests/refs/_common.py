"""What the per-op test declarations share: the property case and geometry records and the
parameter-drawing helpers (hypothesis), used by tests/refs/<op>.py and tests/test_properties.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from hypothesis import strategies as st

import ref_intensity as RI
import ref_warp as RW
from helpers import random_images

INTERPS = ("nearest", "bilinear")
BORDERS = ("constant", "replicate", "reflect")
EXACT = {"atol_u8": 0, "rtol": 0.0}


def f32(v):
    """float32-exact float64 values (the library rounds its parameters to float32)."""
    return np.asarray(v, np.float64).astype(np.float32).astype(np.float64)


def floats(draw, n, lo, hi):
    """n float32-exact values in [lo, hi], hypothesis-chosen (edges included)."""
    xs = draw(st.lists(st.floats(lo, hi, allow_nan=False, allow_infinity=False), min_size=n, max_size=n))
    # rounding to float32 stays within [lo, hi] where the bound is float32-exact, as every bound
    # an op checks is (0, +-0.5, 1, 255); elsewhere it may step one float32 ulp out: harmless
    return f32(xs)


def edgy(draw, n, lo, hi, grid):
    """n float64 values in [lo, hi] that need not be float32 numbers: arbitrary ones, or points
    of ``grid`` (where pixel values or rounding ties lie) nudged by a hair either way, which
    float32 cannot tell from the grid point (the parameters the twins once read differently)."""
    def one():
        kind = draw(st.sampled_from(("above", "below", "on", "anywhere")))
        if kind == "anywhere":
            return draw(st.floats(lo, hi, allow_nan=False))
        k = draw(st.integers(int(np.ceil(lo / grid)), int(np.floor(hi / grid))))
        hair = {"above": 1e-9, "below": -1e-9, "on": 0.0}[kind] * max(1.0, abs(k * grid))
        return float(np.clip(k * grid + hair, lo, hi))
    return np.array([one() for _ in range(n)])


def per_sample_or_scalar(draw, arr):
    """The parameter as a scalar (every sample the same: arr[0]) or per sample: (value, table)."""
    if draw(st.booleans()):
        return float(arr[0]), np.full(len(arr), arr[0])
    return arr, arr


@dataclass
class Case:
    """What one example runs: ``params`` for the op, ``ref(sample_f64_hwc, i)`` the expected
    float64 HWC output of sample i, ``tol`` check_op's tolerance keywords; ``kind``
    "layout" for ops whose output dtype/layout differ (normalize, crop_mirror_normalize)."""

    params: dict
    ref: Callable
    tol: dict = field(default_factory=dict)
    kind: str = "plain"
    odt: str | None = None
    out_layout: str | None = None
    plant: Callable | None = None  # plant(sample_hwc, i): put decisive values into the input


@dataclass
class Geo:
    n: int
    shapes: list          # [(h, w)] per sample
    c: int
    dtype: str
    layout: str
    varshape: bool
    rng: np.random.Generator
    tiny: bool = False  # the simulator: small filter windows too

    @property
    def uniform(self):
        return not self.varshape

    @property
    def hw(self):
        return self.shapes[0]


def warp_common(draw, g):
    """The warps' shared choices: (interpolation, border, output size, fill, fill as stored)."""
    interp = draw(st.sampled_from(INTERPS))
    border = draw(st.sampled_from(BORDERS))
    size = None
    if g.uniform or draw(st.booleans()):
        size = None if draw(st.booleans()) else (draw(st.integers(1, 12)), draw(st.integers(1, 12)))
    hi = 300.0 if g.dtype == "uint8" else 1.0  # uint8: saturating fills too
    if draw(st.booleans()):
        fill = floats(draw, g.n, 0.0, hi)
    else:
        fill = g.rng.uniform(0, hi, (g.n, g.c))  # per sample and channel
    return interp, border, size, fill, RW.fill_in_dtype(fill, g.dtype)


def stats(draw, g):
    """normalize's mean and std in one of four forms: (mean, std, per-sample lookup)."""
    m = RI.top(g.dtype)
    form = draw(st.sampled_from(("scalar", "channel", "sample_channel", "sample")))
    mean = f32(g.rng.uniform(0, m, (g.n, g.c)))
    std = f32(g.rng.uniform(0.1 * m, m, (g.n, g.c)))
    if form == "scalar":
        return float(mean[0, 0]), float(std[0, 0]), lambda i: (mean[0, 0], std[0, 0])
    if form == "channel":
        return mean[0], std[0], lambda i: (mean[0], std[0])
    if form == "sample":
        return mean[:, :1], std[:, :1], lambda i: (mean[i, 0], std[i, 0])
    return mean, std, lambda i: (mean[i], std[i])


def images(g):
    """Random images for the geometry ``g``: a batch, or a list for a varshape one."""
    if g.varshape:
        return [random_images(g.rng, 1, h, w, g.c, g.dtype)[0] for h, w in g.shapes]
    h, w = g.hw
    return random_images(g.rng, g.n, h, w, g.c, g.dtype)
