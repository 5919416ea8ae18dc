"""Property tests (hypothesis): every op in ``gpuaug.registry`` on random small shapes, dtypes,
layouts, channel counts and parameters, against its NumPy reference, on the CPU twin (and a
few tiny examples on the Numba CUDA twin: the simulator without a GPU); plus identities
that must hold whatever the input.

The references, the comparison and the tolerances are the per-op tests' own
(tests/helpers.py ``check_op``, tests/ref_*.py, test_normalize.check_layout, ...): a
property here is "the per-op test's check passes for *any* shape and parameters", not a
second definition of the op. Continuous parameters are float32-exact (the library
computes in float32 and says so) except the edge values below, and the warp matrices come from the per-op tests'
random generators (continuous, so no nearest-neighbour ties).

Runtime: hypothesis settings for the file (derandomized, so CI sees the same examples every
run; no deadline, because the first example of each dtype/layout compiles a Numba
specialisation): ``PROFILE`` 25 examples for each op's reference property, ``SECONDARY``
15 for varshape lists, strided views and each identity, ``SIMULATOR`` 3 tiny ones per op on
the Numba CUDA twin. Set ``GPUAUG_HYPOTHESIS_EXAMPLES`` (default 25; the others scale with
it) to run more, and ``GPUAUG_HYPOTHESIS_RANDOM=1`` for fresh random examples.

Parameters that decide comparisons or stored values are drawn at the edges too (``edgy``:
thresholds and fill values a hair above or below a pixel value or a rounding tie, which
float32 cannot tell apart), and solarize plants the decisive pixel values into its input:
the CPU twin reads parameters as float64 and the CUDA kernels as float32, which once made
them disagree (see test_determinism's regressions).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import gpuaug  # noqa: E402
import ref_colour as RC  # noqa: E402
import ref_copyops as RCP  # noqa: E402
import ref_filters as RF  # noqa: E402
import ref_intensity as RI  # noqa: E402
import ref_resize as RR  # noqa: E402
import ref_warp as RW  # noqa: E402
import reference as R0  # noqa: E402
from helpers import (DTYPES, LAYOUTS, SIM, assert_close, check_op, from_layout, random_images,  # noqa: E402
                     to_layout)
from test_equalize import _images as equalize_images  # noqa: E402
from test_erase import _fill as erase_fill  # noqa: E402
from test_grid_mask import _ref as grid_mask_ref  # noqa: E402
from test_normalize import check_layout  # noqa: E402
from test_warp_perspective import _dyadic as dyadic_homography  # noqa: E402

EXAMPLES = int(os.environ.get("GPUAUG_HYPOTHESIS_EXAMPLES", "25"))
_COMMON = dict(deadline=None, derandomize=os.environ.get("GPUAUG_HYPOTHESIS_RANDOM", "0") in ("", "0"),
               database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings(max_examples=EXAMPLES, **_COMMON)
# varshape lists, strided views and identities: fewer examples each (the per-op reference
# property above carries the parameter space; these add layouts of memory and algebra)
SECONDARY = settings(max_examples=max(1, EXAMPLES * 3 // 5), **_COMMON)
IDENTITY = SECONDARY
# the Numba CUDA twin in the simulator runs Python per thread: a few tiny examples
SIMULATOR = settings(max_examples=max(1, EXAMPLES // 8), **_COMMON)

OPS = sorted(gpuaug.registry)
INTERPS = ("nearest", "bilinear")
BORDERS = ("constant", "replicate", "reflect")
EXACT = {"atol_u8": 0, "rtol": 0.0}
# the per-op tests' tolerance for the Numba CUDA twin (and the GPU) where it differs from the
# CPU twin's: float32 coordinate maths of the warps and resized_crop's boxes
TWIN_RTOL = {"warp_affine": 1e-4, "warp_perspective": 1e-4, "rotate": 1e-4, "resized_crop": 1e-4}


# -- drawing helpers ------------------------------------------------------------------------

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


CASES: dict[str, Callable] = {}


def case(*names):
    def deco(fn):
        for nm in names:
            CASES[nm] = fn
        return fn
    return deco


def images(g):
    if g.varshape:
        return [random_images(g.rng, 1, h, w, g.c, g.dtype)[0] for h, w in g.shapes]
    h, w = g.hw
    return random_images(g.rng, g.n, h, w, g.c, g.dtype)


# -- the ops' cases: parameters and the per-op tests' reference calls -----------------------

@case("flip")
def _flip(draw, g):
    hf = np.array(draw(st.lists(st.booleans(), min_size=g.n, max_size=g.n)))
    vf = np.array(draw(st.lists(st.booleans(), min_size=g.n, max_size=g.n)))
    return Case({"horizontal": hf, "vertical": vf}, lambda s, i: R0.flip(s, hf[i], vf[i]), EXACT)


@case("rot90")
def _rot90(draw, g):
    k = np.array(draw(st.lists(st.integers(-3, 3), min_size=g.n, max_size=g.n)))
    if g.uniform and g.hw[0] != g.hw[1]:
        k = np.where(k % 2 == k[0] % 2, k, np.where(k < 3, k + 1, k - 1))  # one parity for a non-square uniform batch
    return Case({"k": k}, lambda s, i: RCP.rot90(s, k[i]), EXACT)


@case("transpose")
def _transpose(draw, g):
    return Case({}, lambda s, i: RCP.transpose(s), EXACT)


@case("crop")
def _crop(draw, g):
    if g.uniform:
        h, w = g.hw
        ch, cw = draw(st.integers(1, h)), draw(st.integers(1, w))
        hs, ws = [ch] * g.n, [cw] * g.n
    else:
        hs = [draw(st.integers(1, h)) for h, _ in g.shapes]
        ws = [draw(st.integers(1, w)) for _, w in g.shapes]
    top = np.array([draw(st.integers(0, h - ch)) for (h, _), ch in zip(g.shapes, hs)])
    left = np.array([draw(st.integers(0, w - cw)) for (_, w), cw in zip(g.shapes, ws)])
    return Case({"top": top, "left": left, "height": np.array(hs), "width": np.array(ws)},
                lambda s, i: RCP.crop(s, top[i], left[i], hs[i], ws[i]), EXACT)


@case("center_crop")
def _center_crop(draw, g):
    ch, cw = draw(st.integers(1, 15)), draw(st.integers(1, 15))
    size = ch if draw(st.booleans()) else (ch, cw)
    return Case({"size": size}, lambda s, i: RCP.center_crop(s, size), EXACT)


@case("pad")
def _pad(draw, g):
    mode = draw(st.sampled_from(("constant", "edge", "reflect")))
    tv, th = draw(st.integers(0, 14)), draw(st.integers(0, 14))
    if g.uniform:  # per-sample sides with one output size
        top = np.array(draw(st.lists(st.integers(0, tv), min_size=g.n, max_size=g.n)))
        left = np.array(draw(st.lists(st.integers(0, th), min_size=g.n, max_size=g.n)))
        padding = np.stack([top, tv - top, left, th - left], 1)
    else:
        padding = np.array(draw(st.lists(st.lists(st.integers(0, 9), min_size=4, max_size=4),
                                         min_size=g.n, max_size=g.n)))
    hi = 300.0 if g.dtype == "uint8" else 1.5
    # stored as the dtype stores it (uint8: half up, so x.5 +- a hair are the edges)
    value = edgy(draw, g.n, -hi / 10, hi, 0.5 if g.dtype == "uint8" else 2.0 ** -12)
    return Case({"padding": padding, "mode": mode, "value": value},
                lambda s, i: RCP.pad(s, padding[i], mode, erase_fill(value[i], g.dtype)), EXACT)


def _warp_common(draw, g):
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


@case("warp_affine")
def _warp_affine(draw, g):
    interp, border, size, fill, fr = _warp_common(draw, g)
    kind = draw(st.sampled_from(("random", "random-inverse", "dyadic")))
    if kind == "dyadic":  # destination -> source maps exact in float32, never a nearest tie
        m, inverse = RW.dyadic_inverse_affine(g.rng, g.n), True
    else:
        m = np.stack([RW.random_affine(g.rng, 1, h, w)[0] for h, w in g.shapes])
        inverse = kind == "random-inverse"
        if inverse:
            m = np.stack([np.linalg.inv(np.vstack([k, [0, 0, 1]]))[:2] for k in m])
    return Case({"matrix": m, "size": size, "interpolation": interp, "border": border, "fill": fill,
                 "inverse_map": inverse},
                lambda s, i: RW.warp_affine(s, m[i], size, interp, border, fr[i], inverse_map=inverse))


@case("warp_perspective")
def _warp_perspective(draw, g):
    interp, border, size, fill, fr = _warp_common(draw, g)
    kind = draw(st.sampled_from(("random", "random-inverse", "dyadic")))
    if kind == "dyadic":
        m, inverse = dyadic_homography(g.rng, g.n), True
    else:
        m = np.stack([RW.random_homography(g.rng, 1, h, w)[0] for h, w in g.shapes])
        inverse = kind == "random-inverse"
        if inverse:
            m = np.linalg.inv(m)
    return Case({"matrix": m, "size": size, "interpolation": interp, "border": border, "fill": fill,
                 "inverse_map": inverse},
                lambda s, i: RW.warp_perspective(s, m[i], size, interp, border, fr[i], inverse_map=inverse))


@case("rotate")
def _rotate(draw, g):
    interp, border, _, fill, fr = _warp_common(draw, g)
    if draw(st.booleans()):
        # quarter turns take exact cos/sin (the reference knows); about a half-integer centre
        # they put source points exactly on nearest-neighbour ties (x.5) along the centre
        # lines, so the scale is dyadic there: the map is then exact in float32 and float64
        # alike (with a scale like 1.2 both round the tie their own way)
        angle = np.array(draw(st.lists(st.sampled_from([-270.0, -180.0, -90.0, 0.0, 90.0, 180.0, 360.0]),
                                       min_size=g.n, max_size=g.n)))
        scale = np.array(draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=g.n, max_size=g.n)))
    else:
        angle = g.rng.uniform(-180, 180, g.n)
        scale = g.rng.uniform(0.7, 1.4, g.n)
    center = None  # the default: each image's own centre
    if draw(st.booleans()):
        center = np.array([(g.rng.uniform(0, w - 1), g.rng.uniform(0, h - 1)) for h, w in g.shapes])
    return Case({"angle": angle, "center": center, "scale": scale, "interpolation": interp, "border": border,
                 "fill": fill},
                lambda s, i: RW.rotate(s, angle[i], None if center is None else center[i], scale[i], interp,
                                       border, fr[i]))


@case("resize")
def _resize(draw, g):
    interp = draw(st.sampled_from(("nearest", "bilinear", "area")))
    size = (draw(st.integers(1, 12)), draw(st.integers(1, 12)))
    return Case({"size": size, "interpolation": interp}, lambda s, i: RR.resize(s, size, interp))


@case("resized_crop")
def _resized_crop(draw, g):
    """Quarter-pixel boxes (float32-exact, as test_resized_crop): inside, sticking out, outside."""
    interp = draw(st.sampled_from(("nearest", "bilinear", "area")))
    size = (draw(st.integers(1, 12)), draw(st.integers(1, 12)))
    q = lambda lo, hi: draw(st.integers(int(lo * 4), int(hi * 4))) / 4  # noqa: E731
    boxes = np.array([(q(-4, h + 1), q(-4, w + 1), q(0.25, h + 2), q(0.25, w + 2)) for h, w in g.shapes])
    return Case({"boxes": boxes, "size": size, "interpolation": interp},
                lambda s, i: RR.resized_crop(s, boxes[i], size, interp))


@case("gamma")
def _gamma(draw, g):
    m = RI.top(g.dtype)
    gm, gt = per_sample_or_scalar(draw, floats(draw, g.n, 0.0, 3.0))
    k, kt = per_sample_or_scalar(draw, floats(draw, g.n, 0.5, 1.5))
    return Case({"gamma": gm, "gain": k}, lambda s, i: RI.gamma(s, gt[i], kt[i], m))


@case("invert")
def _invert(draw, g):
    m = RI.top(g.dtype)
    return Case({}, lambda s, i: RI.invert(s, m), {"atol_u8": 0})


@case("solarize")
def _solarize(draw, g):
    m = RI.top(g.dtype)
    # thresholds at pixel values +- a hair: x >= t must be decided exactly
    grid = 1.0 if m > 1 else 2.0 ** -11
    t, tt = per_sample_or_scalar(draw, edgy(draw, g.n, 0.0, m, grid))

    def plant(s, i):  # the pixel values nearest the threshold, in the image's dtype
        near = np.array([np.floor(tt[i] / grid), np.ceil(tt[i] / grid)]) * grid
        s[0, 0, :] = near[0].astype(s.dtype) if s.dtype != np.uint8 else near[0]
        s[-1, -1, :] = near[1].astype(s.dtype) if s.dtype != np.uint8 else min(near[1], 255)
    return Case({"threshold": t}, lambda s, i: RI.solarize(s, tt[i], m), {"atol_u8": 0}, plant=plant)


@case("posterize")
def _posterize(draw, g):
    bits = np.array(draw(st.lists(st.integers(1, 8), min_size=g.n, max_size=g.n)))
    u8 = g.dtype == "uint8"
    return Case({"bits": bits}, lambda s, i: RI.posterize(s, bits[i], u8), {"atol_u8": 0})


@case("equalize")
def _equalize(draw, g):
    u8 = g.dtype == "uint8"
    return Case({}, lambda s, i: RI.equalize(s, u8), {"atol_u8": 0})


@case("autocontrast")
def _autocontrast(draw, g):
    from test_autocontrast import _ref as autocontrast_ref

    u8 = g.dtype == "uint8"
    return Case({}, lambda s, i: autocontrast_ref(s, u8), {"rtol": 2e-3 if g.dtype == "float16" else 1e-5})


def _stats(draw, g):
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


@case("normalize")
def _normalize(draw, g):
    mean, std, ms = _stats(draw, g)
    odt = draw(st.sampled_from(("float32", "float16")))
    out_layout = draw(st.sampled_from(LAYOUTS))
    return Case({"mean": mean, "std": std, "dtype": odt, "output_layout": out_layout},
                lambda s, i: RI.normalize(s, *ms(i)), kind="layout", odt=odt, out_layout=out_layout)


@case("crop_mirror_normalize")
def _cmn(draw, g):
    mean, std, ms = _stats(draw, g)
    odt = draw(st.sampled_from(("float32", "float16")))
    out_layout = draw(st.sampled_from(LAYOUTS))
    hmin, wmin = min(h for h, _ in g.shapes), min(w for _, w in g.shapes)
    crop = None
    if g.uniform or draw(st.booleans()):
        crop = None if draw(st.booleans()) else (draw(st.integers(1, hmin)), draw(st.integers(1, wmin)))
    pos = np.array(draw(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0, 1, width=32),
                                           st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0, 1, width=32)),
                                 min_size=g.n, max_size=g.n)), np.float64)
    mirror = np.array(draw(st.lists(st.booleans(), min_size=g.n, max_size=g.n)))
    pad = draw(st.booleans())
    return Case({"crop": crop, "crop_pos": pos, "mirror": mirror, "mean": mean, "std": std, "dtype": odt,
                 "output_layout": out_layout, "pad_output": pad},
                lambda s, i: RI.crop_mirror_normalize(s, crop, pos[i], mirror[i], *ms(i), pad),
                kind="layout", odt=odt, out_layout=out_layout)


@case("gaussian_blur")
def _gaussian_blur(draw, g):
    u8 = g.dtype == "uint8"
    sig, st_ = per_sample_or_scalar(draw, floats(draw, g.n, 0.3, 0.8 if g.tiny else 3.0))
    if draw(st.booleans()):
        return Case({"sigma": sig}, lambda s, i: RF.gaussian_blur(s, st_[i], uint8=u8))
    kmax = 3 if g.tiny else 10
    ks = np.array(draw(st.lists(st.integers(0, kmax), min_size=g.n, max_size=g.n))) * 2 + 1
    return Case({"sigma": sig, "kernel_size": ks}, lambda s, i: RF.gaussian_blur(s, st_[i], ks[i]))


@case("box_blur")
def _box_blur(draw, g):
    kmax = 3 if g.tiny else 10
    ks = np.array(draw(st.lists(st.integers(0, kmax), min_size=g.n, max_size=g.n))) * 2 + 1
    # uint8: exact (odd k^2: the mean is never a rounding tie), as test_box_blur
    return Case({"kernel_size": ks}, lambda s, i: RF.box_blur(s, ks[i]), {"atol_u8": 0})


@case("sharpen")
def _sharpen(draw, g):
    u8 = g.dtype == "uint8"
    f, ft = per_sample_or_scalar(draw, floats(draw, g.n, 0.0, 8.0))
    return Case({"factor": f}, lambda s, i: RF.sharpen(s, ft[i], u8))


@case("median_blur")
def _median_blur(draw, g):
    ks = np.array(draw(st.lists(st.sampled_from((3, 5)), min_size=g.n, max_size=g.n)))
    return Case({"kernel_size": ks}, lambda s, i: RF.median_blur(s, ks[i]), EXACT)


@case("gaussian_noise")
def _gaussian_noise(draw, g):
    scale = 255.0 if g.dtype == "uint8" else 1.0
    mean = floats(draw, g.n, -0.05 * scale, 0.05 * scale)
    std = floats(draw, g.n, 0.0, 0.2 * scale)
    seed = draw(st.integers(0, 2 ** 64 - 1))
    return Case({"mean": mean, "std": std, "seed": seed},
                lambda s, i: RF.gaussian_noise(s, i, mean[i], std[i], seed))


@case("salt_and_pepper")
def _salt_and_pepper(draw, g):
    prob = np.array(draw(st.lists(st.floats(0, 1), min_size=g.n, max_size=g.n)))
    svp = np.array(draw(st.lists(st.floats(0, 1), min_size=g.n, max_size=g.n)))
    seed = draw(st.integers(0, 2 ** 64 - 1))
    white = RI.top(g.dtype)
    return Case({"prob": prob, "salt_vs_pepper": svp, "seed": seed},
                lambda s, i: RF.salt_and_pepper(s, i, prob[i], svp[i], seed, white), EXACT)


@case("erase")
def _erase(draw, g):
    k = draw(st.integers(0, 3))
    boxes = np.array([[(draw(st.integers(-4, h)), draw(st.integers(-4, w)), draw(st.integers(0, h + 2)),
                        draw(st.integers(0, w + 2))) for _ in range(k)] for h, w in g.shapes],
                     np.int64).reshape(g.n, k, 4)
    hi = 300.0 if g.dtype == "uint8" else 2.0
    if draw(st.booleans()):
        value = g.rng.uniform(-hi / 10, hi, (g.n, g.c))
        vt = value
    else:
        v = float(edgy(draw, 1, -hi / 10, hi, 0.5 if g.dtype == "uint8" else 2.0 ** -12)[0])
        value, vt = v, np.full(g.n, v)
    return Case({"boxes": boxes, "value": value},
                lambda s, i: RF.erase(s, boxes[i], erase_fill(vt[i], g.dtype)), EXACT)


@case("grid_mask")
def _grid_mask(draw, g):
    """Integer tiles and shifts, ratios multiple of 1/tile, quarter-turn angles: no rounding
    anywhere, so exact (as test_grid_mask_axis_aligned_cpu); rotated grids have their own property."""
    tile = np.array(draw(st.lists(st.integers(1, 8), min_size=g.n, max_size=g.n)))
    ratio = np.array([draw(st.integers(0, t)) / t for t in tile])
    shift = np.array(draw(st.lists(st.tuples(st.integers(-9, 9), st.integers(-9, 9)),
                                   min_size=g.n, max_size=g.n)), np.float64)
    angle = np.array(draw(st.lists(st.sampled_from((0.0, 90.0)), min_size=g.n, max_size=g.n)))
    return Case({"tile": tile, "ratio": ratio, "angle": angle, "shift": shift},
                lambda s, i: grid_mask_ref(s, tile[i], ratio[i], angle[i], shift[i]), EXACT)


@case("brightness")
def _brightness(draw, g):
    m = RC.top(g.dtype)
    f, ft = per_sample_or_scalar(draw, floats(draw, g.n, 0.0, 3.0))
    return Case({"factor": f}, lambda s, i: RC.brightness(s, ft[i], m))


@case("contrast")
def _contrast(draw, g):
    m, i8 = RC.top(g.dtype), RC.is_int(g.dtype)
    f, ft = per_sample_or_scalar(draw, floats(draw, g.n, 0.0, 3.0))
    return Case({"factor": f}, lambda s, i: RC.contrast(s, ft[i], m, i8))


@case("saturation")
def _saturation(draw, g):
    m, i8 = RC.top(g.dtype), RC.is_int(g.dtype)
    f, ft = per_sample_or_scalar(draw, floats(draw, g.n, 0.0, 3.0))
    return Case({"factor": f}, lambda s, i: RC.saturation(s, ft[i], m, i8))


@case("hue")
def _hue(draw, g):
    m = RC.top(g.dtype)
    sh, stt = per_sample_or_scalar(draw, floats(draw, g.n, -0.5, 0.5))
    return Case({"shift": sh}, lambda s, i: RC.hue(s, stt[i], m))


@case("color_jitter")
def _color_jitter(draw, g):
    m, i8 = RC.top(g.dtype), RC.is_int(g.dtype)
    b, c, s_, h = (floats(draw, g.n, 0.0, 2.5), floats(draw, g.n, 0.0, 2.0), floats(draw, g.n, 0.0, 2.0),
                   floats(draw, g.n, -0.5, 0.5))
    return Case({"brightness": b, "contrast": c, "saturation": s_, "hue": h},
                lambda a, i: RC.color_jitter(a, b[i], c[i], s_[i], h[i], m, i8))


@case("color_twist")
def _color_twist(draw, g):
    top = RC.top(g.dtype)
    mats = np.eye(3, 4)[None] + g.rng.uniform(-0.3, 0.3, (g.n, 3, 4))
    if draw(st.booleans()):
        mats[0] = np.eye(3, 4)
    return Case({"matrix": mats}, lambda s, i: RC.color_twist(s, mats[i], top))


@case("grayscale")
def _grayscale(draw, g):
    co = draw(st.sampled_from((1, 3)))
    i8 = RC.is_int(g.dtype)
    return Case({"num_output_channels": co}, lambda s, i: RC.grayscale(s, co, i8))


@case("channel_shuffle")
def _channel_shuffle(draw, g):
    p = np.array([draw(st.permutations(range(g.c))) for _ in range(g.n)])
    return Case({"permutation": p}, lambda s, i: RC.channel_shuffle(s, p[i]), {"atol_u8": 0, "rtol": 0})


def test_every_registered_op_has_a_property_case():
    assert sorted(CASES) == OPS


# -- running a case --------------------------------------------------------------------------

@st.composite
def geometries(draw, name, *, varshape=False, max_hw=12, max_n=3):
    spec = gpuaug.registry[name]
    n = draw(st.integers(1, max_n))
    if varshape:
        shapes = [(draw(st.integers(1, max_hw)), draw(st.integers(1, max_hw))) for _ in range(n)]
    else:
        shapes = [(draw(st.integers(1, max_hw)), draw(st.integers(1, max_hw)))] * n
    dtype = draw(st.sampled_from([d for d in DTYPES if d in spec.dtypes]))
    layout = "NHWC" if varshape else draw(st.sampled_from([lay for lay in LAYOUTS if lay in spec.layouts]))
    c = draw(st.sampled_from(spec.channels))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return Geo(n, shapes, c, dtype, layout, varshape, np.random.default_rng(seed), tiny=max_hw <= 6)


def _input(name, g):
    if name == "equalize" and not g.varshape:
        h, w = g.hw
        return equalize_images(g.rng, g.n, h, w, g.c, g.dtype)  # uneven histograms, a flat image
    return images(g)


def _check_layout_varshape(fn, ref_fn, xs, kw, odt, out_layout, backend):
    """normalize / crop_mirror_normalize on a list: a list of HWC or CHW images, or (with a crop)
    one uniform batch."""
    refs = [ref_fn(s.astype(np.float64), i) for i, s in enumerate(xs)]
    got = fn(xs, backend=backend, **kw)
    if isinstance(got, list):
        assert len(got) == len(refs)
        for i, (a, r) in enumerate(zip(got, refs)):
            a = a if out_layout == "NHWC" else a.transpose(1, 2, 0)
            assert a.dtype == np.dtype(odt)
            assert_close(a, r, odt, what=f"{backend} varshape sample {i}")
    else:
        assert got.dtype == np.dtype(odt)
        assert_close(from_layout(got, out_layout), np.stack(refs), odt, what=f"{backend} varshape batch")


def run_case(name, draw, g, backend="cpu"):
    c = CASES[name](draw, g)
    x = _input(name, g)
    if c.plant is not None:
        for i, s in enumerate(x):
            c.plant(s, i)
    fn = gpuaug.registry[name].func
    if c.kind == "layout":
        if g.varshape:
            _check_layout_varshape(fn, c.ref, x, c.params, c.odt, c.out_layout,
                                   "cpu" if backend == "cpu" else "numba")
        else:
            check_layout(fn, c.ref, x, c.params, layout=g.layout, out_layout=c.out_layout, odt=c.odt,
                         backend="cpu" if backend == "cpu" else "numba-sim")
        return
    tol = dict(c.tol)
    if backend != "cpu" and name in TWIN_RTOL:
        tol.setdefault("rtol", TWIN_RTOL[name])
    check_op(fn, c.ref, x, c.params, layout=g.layout, backend=backend, varshape=g.varshape, **tol)


@pytest.mark.parametrize("name", OPS)
@PROFILE
@given(data=st.data())
def test_op_matches_reference(name, data):
    """Any small shape (1..12 px, odd, 1-pixel), dtype, layout, channel count and parameters."""
    g = data.draw(geometries(name), label="geometry")
    run_case(name, data.draw, g)


@pytest.mark.parametrize("name", [n for n in OPS if gpuaug.registry[n].varshape])
@SECONDARY
@given(data=st.data())
def test_op_matches_reference_varshape(name, data):
    """A list of HWC images of different sizes, one launch, per-sample parameters."""
    g = data.draw(geometries(name, varshape=True), label="geometry")
    run_case(name, data.draw, g)


@pytest.mark.skipif(not SIM, reason="a GPU is present: the Numba CUDA twin runs in the GPU tests")
@pytest.mark.parametrize("name", OPS)
@SIMULATOR
@given(data=st.data())
def test_op_matches_reference_numba_simulator(name, data):
    """The Numba CUDA twin in the CUDA simulator: tiny inputs only (n <= 2, h, w <= 6), a
    uniform batch or a varshape list."""
    varshape = gpuaug.registry[name].varshape and data.draw(st.booleans(), label="varshape")
    g = data.draw(geometries(name, varshape=varshape, max_hw=6, max_n=2), label="geometry")
    run_case(name, data.draw, g, backend="numba-sim")


def _strided_copy(rng, x, axis_steps):
    """``x`` as a non-contiguous view into a larger random array (the same values)."""
    big_shape = tuple(s * k + 1 for s, k in zip(x.shape, axis_steps))
    big = rng.integers(0, 256, big_shape).astype(x.dtype)
    view = big[tuple(slice(1, None, k) for k in axis_steps)]
    view[...] = x
    return big, view


@pytest.mark.parametrize("name", OPS)
@SECONDARY
@given(data=st.data())
def test_op_strided_input_and_output_views(name, data):
    """The same bits from a contiguous input, a strided view of it (rows, columns and
    channels not adjacent) and a single image; ``out=`` a strided view writes exactly its
    elements (the rest of its base untouched) and returns it."""
    g = data.draw(geometries(name), label="geometry")
    c = CASES[name](data.draw, g)
    x = _input(name, g)
    if c.plant is not None:
        for i, s in enumerate(x):
            c.plant(s, i)
    x = to_layout(x, g.layout)
    fn = gpuaug.registry[name].func
    want = fn(x, layout=g.layout, **c.params)
    steps = tuple(data.draw(st.lists(st.integers(1, 3), min_size=4, max_size=4), label="strides"))
    base, view = _strided_copy(g.rng, x, steps)
    before = base.copy()
    got = fn(view, layout=g.layout, **c.params)
    assert bits(got) == bits(want), "strided input"
    np.testing.assert_array_equal(base, before)  # the input is not written
    obase, oview = _strided_copy(g.rng, np.zeros_like(want), (1, 2, 1, 2))
    obefore = obase.copy()
    res = fn(x, layout=g.layout, out=oview, **c.params)
    assert res is oview
    assert bits(np.ascontiguousarray(oview)) == bits(want), "strided out="
    untouched = np.ones(obase.shape, bool)
    untouched[(slice(1, None, 1), slice(1, None, 2), slice(1, None, 1), slice(1, None, 2))] = False
    np.testing.assert_array_equal(obase[untouched], obefore[untouched])  # nothing outside the view
    if g.n == 1 and c.kind == "plain":
        single = fn(x[0], layout=g.layout, **c.params)
        assert bits(single) == bits(want[0]), "one image = a batch of one"


def bits(a):
    a = np.asarray(a)
    return a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()


# -- identities --------------------------------------------------------------------------------

@st.composite
def batches(draw, channels=(1, 3, 4), max_hw=12, square=False):
    n = draw(st.integers(1, 3))
    h = draw(st.integers(1, max_hw))
    w = h if square else draw(st.integers(1, max_hw))
    dtype = draw(st.sampled_from(DTYPES))
    layout = draw(st.sampled_from(LAYOUTS))
    c = draw(st.sampled_from(channels))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    x = random_images(rng, n, h, w, c, dtype)
    return to_layout(x, layout), layout, rng


def same(a, b):
    """Bit-identical (NaN-free data: array_equal is the bitwise test up to -0.0)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_array_equal(a, b)


@IDENTITY
@given(b=batches(), data=st.data())
def test_flip_twice_is_identity(b, data):
    x, layout, _ = b
    n = x.shape[0]
    hf = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    vf = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    same(gpuaug.flip(gpuaug.flip(x, hf, vf, layout=layout), hf, vf, layout=layout), x)


@IDENTITY
@given(b=batches(), data=st.data())
def test_rot90_k_then_4_minus_k_is_identity(b, data):
    x, layout, _ = b
    n = x.shape[0]
    h, w = from_layout(x, layout).shape[1:3]
    k = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    if h != w:
        k = np.where(k % 2 == k[0] % 2, k, (k + 1) % 4)
    y = gpuaug.rot90(x, k, layout=layout)
    same(gpuaug.rot90(y, (4 - k) % 4, layout=layout), x)
    same(gpuaug.rot90(y, -k, layout=layout), x)


@IDENTITY
@given(b=batches())
def test_transpose_twice_is_identity(b):
    x, layout, _ = b
    same(gpuaug.transpose(gpuaug.transpose(x, layout=layout), layout=layout), x)


@IDENTITY
@given(b=batches(), interp=st.sampled_from(INTERPS), border=st.sampled_from(BORDERS),
       turns=st.integers(-2, 2), fill=st.floats(0, 255))
def test_rotate_by_zero_is_copy(b, interp, border, turns, fill):
    x, layout, _ = b
    same(gpuaug.rotate(x, 360.0 * turns, interpolation=interp, border=border, fill=fill, layout=layout), x)


@IDENTITY
@given(b=batches(), interp=st.sampled_from(INTERPS), border=st.sampled_from(BORDERS),
       inverse=st.booleans(), w22=st.sampled_from([1.0, 2.0, 0.5, 3.0]), fill=st.floats(0, 255))
def test_warps_with_identity_matrix_are_copies(b, interp, border, inverse, w22, fill):
    """warp_affine with [I | 0] and warp_perspective with any positive multiple of I."""
    x, layout, _ = b
    kw = {"interpolation": interp, "border": border, "fill": fill, "inverse_map": inverse, "layout": layout}
    same(gpuaug.warp_affine(x, np.eye(3)[:2], **kw), x)
    same(gpuaug.warp_perspective(x, np.eye(3) * w22, **kw), x)


@IDENTITY
@given(b=batches(), interp=st.sampled_from(("nearest", "bilinear")))
def test_resize_to_the_same_size_is_copy(b, interp):
    """Documented for nearest and bilinear."""
    x, layout, _ = b
    h, w = from_layout(x, layout).shape[1:3]
    same(gpuaug.resize(x, (h, w), interp, layout=layout), x)
    same(gpuaug.resized_crop(x, (0, 0, h, w), (h, w), interp, layout=layout), x)


@IDENTITY
@given(b=batches(), odt=st.sampled_from(("float32", "float16")), out_layout=st.sampled_from(LAYOUTS))
def test_normalize_then_denormalize_is_input(b, odt, out_layout):
    """y = (x - mean) / std; y * std + mean == x up to the output dtype's rounding of y."""
    x, layout, rng = b
    xn = from_layout(x, layout)
    n, c = xn.shape[0], xn.shape[3]
    m = RI.top(xn.dtype)
    mean, std = f32(rng.uniform(0, m, (n, c))), f32(rng.uniform(0.1 * m, m, (n, c)))
    y = from_layout(gpuaug.normalize(x, mean, std, dtype=odt, output_layout=out_layout, layout=layout),
                    out_layout).astype(np.float64)
    back = y * std[:, None, None] + mean[:, None, None]
    eps = np.finfo(odt).eps
    # |y| <= 10 (std >= m / 10): one rounding of y costs <= eps |y| std <= eps * 10 m, plus float32 maths
    np.testing.assert_allclose(back, xn.astype(np.float64), rtol=0, atol=eps * m * 12)
    # and the documented undo: normalize(y, -mean / std, 1 / std) in float32
    if odt == "float32":
        y32 = gpuaug.normalize(xn, mean, std)
        undo = gpuaug.normalize(y32, -mean / std, 1 / std)
        np.testing.assert_allclose(undo, xn.astype(np.float64), rtol=0, atol=eps * m * 24)


@IDENTITY
@given(b=batches(), mode=st.sampled_from(("constant", "edge", "reflect")), data=st.data())
def test_crop_of_pad_is_identity(b, mode, data):
    x, layout, _ = b
    n = x.shape[0]
    h, w = from_layout(x, layout).shape[1:3]
    tv, th = data.draw(st.integers(0, 14)), data.draw(st.integers(0, 14))
    top = np.array(data.draw(st.lists(st.integers(0, tv), min_size=n, max_size=n)))
    left = np.array(data.draw(st.lists(st.integers(0, th), min_size=n, max_size=n)))
    padding = np.stack([top, tv - top, left, th - left], 1)
    y = gpuaug.pad(x, padding, mode=mode, value=0.5, layout=layout)
    same(gpuaug.crop(y, top, left, h, w, layout=layout), x)


@IDENTITY
@given(b=batches())
def test_neutral_colour_factors_are_copies(b):
    """brightness 1, contrast 1, saturation 1, gamma 1 (gain 1), hue 0, color_jitter's defaults,
    an identity color_twist: copies (bit for bit: factor 1 multiplies exactly; gamma's
    m * (x / m) may be one float32 ulp off, which the store rounds away for uint8 and float16)."""
    x, layout, _ = b
    kw = {"layout": layout}
    same(gpuaug.brightness(x, 1.0, **kw), x)
    same(gpuaug.contrast(x, 1.0, **kw), x)
    same(gpuaug.saturation(x, 1.0, **kw), x)
    same(gpuaug.hue(x, 0.0, **kw), x)
    same(gpuaug.color_jitter(x, **kw), x)
    g = gpuaug.gamma(x, 1.0, **kw)
    if x.dtype == np.float32:
        np.testing.assert_allclose(g, x, rtol=2 * np.finfo(np.float32).eps, atol=0)
    else:
        same(g, x)
    if from_layout(x, layout).shape[3] >= 3:
        same(gpuaug.color_twist(x, np.eye(3, 4), **kw), x)


@IDENTITY
@given(b=batches())
def test_invert_twice_is_identity(b):
    """uint8 exactly; floats within one rounding of m - x (Sterbenz: exact for x >= m / 2)."""
    x, layout, _ = b
    y = gpuaug.invert(gpuaug.invert(x, layout=layout), layout=layout)
    if x.dtype == np.uint8:
        same(y, x)
    else:
        np.testing.assert_allclose(y.astype(np.float64), x.astype(np.float64), rtol=0,
                                   atol=np.finfo(x.dtype).eps)
        big = x >= 0.5
        np.testing.assert_array_equal(y[big], x[big])


@IDENTITY
@given(b=batches())
def test_channel_shuffle_identity_permutation_is_copy(b):
    x, layout, _ = b
    c = from_layout(x, layout).shape[3]
    same(gpuaug.channel_shuffle(x, list(range(c)), layout=layout), x)
    same(gpuaug.channel_shuffle(x, np.tile(np.arange(c), (x.shape[0], 1)), layout=layout), x)


@IDENTITY
@given(b=batches(), data=st.data())
def test_erase_with_zero_area_boxes_is_copy(b, data):
    """Boxes of height 0 or width 0 anywhere, and boxes wholly outside the image."""
    x, layout, _ = b
    n = x.shape[0]
    h, w = from_layout(x, layout).shape[1:3]
    k = data.draw(st.integers(0, 4))
    boxes = []
    for _ in range(n * k):
        kind = data.draw(st.sampled_from(("h0", "w0", "below", "right", "above", "left")))
        t, le = data.draw(st.integers(-5, h + 5)), data.draw(st.integers(-5, w + 5))
        bh, bw = data.draw(st.integers(0, h + 5)), data.draw(st.integers(0, w + 5))
        if kind == "h0":
            bh = 0
        elif kind == "w0":
            bw = 0
        elif kind == "below":
            t = h + data.draw(st.integers(0, 3))
        elif kind == "right":
            le = w + data.draw(st.integers(0, 3))
        elif kind == "above":
            t = -bh - data.draw(st.integers(0, 3))
        else:
            le = -bw - data.draw(st.integers(0, 3))
        boxes.append((t, le, bh, bw))
    boxes = np.array(boxes, np.int64).reshape(n, k, 4)
    same(gpuaug.erase(x, boxes, value=7, layout=layout), x)


@IDENTITY
@given(b=batches(), data=st.data())
def test_neutral_parameters_are_copies(b, data):
    """More identities: a 1-tap blur, zero noise, probability-0 salt and pepper, ratio-0 grid
    mask, 8-bit posterize of uint8, whole-image crop / center_crop, zero padding, a solarize
    threshold above every value (floats: none reach it)."""
    x, layout, _ = b
    xn = from_layout(x, layout)
    h, w = xn.shape[1:3]
    kw = {"layout": layout}
    same(gpuaug.gaussian_blur(x, data.draw(st.floats(0.1, 5.0)), kernel_size=1, **kw), x)
    same(gpuaug.box_blur(x, 1, **kw), x)
    same(gpuaug.gaussian_noise(x, 0.0, 0.0, seed=data.draw(st.integers(0, 2 ** 64 - 1)), **kw), x)
    same(gpuaug.salt_and_pepper(x, 0.0, seed=data.draw(st.integers(0, 2 ** 64 - 1)), **kw), x)
    same(gpuaug.grid_mask(x, data.draw(st.floats(0.5, 20)), 0.0, data.draw(st.floats(-180, 180)), **kw), x)
    same(gpuaug.crop(x, 0, 0, h, w, **kw), x)
    same(gpuaug.center_crop(x, (h, w), **kw), x)
    same(gpuaug.pad(x, 0, mode=data.draw(st.sampled_from(("constant", "edge", "reflect"))), **kw), x)
    if x.dtype == np.uint8:
        same(gpuaug.posterize(x, 8, **kw), x)
    elif (x < 1).all():  # (float16 may round a random value up to 1)
        same(gpuaug.solarize(x, 1.0, **kw), x)


@IDENTITY
@given(data=st.data())
def test_rotated_grid_mask_matches_definition(data):
    """Rotated grids, any tile/ratio/shift: the float64 definition except within 1e-3 px of a
    square's edge (where float32 may decide either way), as test_grid_mask_rotated_cpu."""
    n, h, w = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12))
    dtype = data.draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    x = random_images(rng, n, h, w, 3, dtype)
    x = np.maximum(x, 1) if dtype == "uint8" else (x + 0.5).astype(dtype)  # no zero: zero means masked
    tile = floats(data.draw, n, 0.5, 20.0)
    ratio = floats(data.draw, n, 0.0, 1.0)
    angle = floats(data.draw, n, -360.0, 360.0)
    shift = np.stack([floats(data.draw, n, -10, 10), floats(data.draw, n, -10, 10)], 1)
    y = gpuaug.grid_mask(x, tile, ratio, angle, shift)
    for i in range(n):
        keep, margin = RF.grid_mask_keep(h, w, tile[i], ratio[i], angle[i], shift[i])
        sure = margin > 1e-3
        np.testing.assert_array_equal((y[i] != 0).all(-1)[sure], keep[sure])
        np.testing.assert_array_equal(y[i][keep & sure], x[i][keep & sure])
