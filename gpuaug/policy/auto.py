"""Automatic augmentation policies: RandAugment, TrivialAugmentWide and AutoAugment, per sample.

torchvision draws one op list per call and applies it to the whole batch; here every sample
draws its own ops and magnitudes (host NumPy draws, vectorised over the batch, uploaded once
as a small (K, N, 9) float32 table) for a policy of K ops per sample (RandAugment:
``num_ops``; TrivialAugmentWide: 1; AutoAugment: 2; AugMix: width x depth). On the GPU each
step is one launch of ``gpuaug_autoaug_apply`` (kernels/auto_augment.cu; every sample its own
op), after, when some sample draws Contrast, AutoContrast or Equalize at that step, one
statistics launch over those samples only (and for Equalize the 256-bin table launch of
:func:`gpuaug.equalize`). ``STEPS_PER_LAUNCH`` (up to 4) fuses that many steps into one
``gpuaug_autoaug_fused`` pass instead: each output pixel evaluates its sample's chain (warps as
index maps, point-wise ops on the way, Sharpness and bilinear warps through nested
evaluation), so the batch is written once, but a later step's Sharpness (9 taps) or bilinear
warp (4) evaluates the earlier steps again at each tap, and the statistics of a later step
evaluate them on the fly. On the H200 the fused passes were the slower:
RandAugment(2, 9) 0.274 ms against 0.213 ms step by step, RandAugment(3, 9) 0.624 against
0.315, TrivialAugmentWide 0.124 against 0.112 (bench/results/2026-11-28-h200-s10/). All paths
give the same bits (``_run_cuda(..., fused=False)``, the first step-by-step path, is the
reference).

Host cost (the policies are host-bound at ImageNet sizes): a fresh draw indexes memoised
tables, per (policy space, H, W, interpolation), of the signed magnitudes and kernel rows of
every (op, bin, sign), so a call's parameter work is the generator's draws and a few gathers;
which steps need statistics comes from the int op ids; the kernels are looked up by tuple. A
replay of the last draw (``params=last_params``, Compose's run after its sample) reuses its
table indices; other params build their rows with :func:`step_rows` (bench/host_policies.py
times each piece).

The op sets, magnitude tables, signs and formulas are torchvision's
(``torchvision.transforms.autoaugment``: ``_augmentation_space`` and ``_apply_op``), with
its defaults: nearest-neighbour interpolation and fill 0 for the geometric ops, uint8 casts
that truncate. Input: uint8 (N, H, W, C) with C = 3 (or 1), a CuPy array (CUDA kernels) or a
NumPy array (a vectorised NumPy twin that computes the same float32 operations, so both give
the same bits).

Op ids (``AutoParams.ops``): 0 Identity, 1 ShearX, 2 ShearY, 3 TranslateX, 4 TranslateY,
5 Rotate, 6 Brightness, 7 Color, 8 Contrast, 9 Sharpness, 10 Posterize, 11 Solarize,
12 AutoContrast, 13 Equalize, 14 Invert. A skipped AutoAugment sub-policy op is Identity.

    >>> import numpy as np, gpuaug
    >>> x = np.random.default_rng(0).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
    >>> ra = gpuaug.RandAugment(num_ops=2, magnitude=9, seed=0)
    >>> y = ra(x)
    >>> ra.last_params.ops.shape, y.shape
    ((4, 2), (4, 32, 32, 3))
    >>> bool((ra(x, params=ra.last_params) == y).all())
    True
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from gpuaug import random as R
from gpuaug._stream import on_device
from gpuaug._util import cupy_module
from gpuaug.kernels import _cuda as _kc  # imports no CuPy; compiles nothing until a launch
from gpuaug.policy.transforms import Transform

__all__ = ["RandAugment", "TrivialAugmentWide", "AutoAugment", "AugMix", "AutoParams", "OP_NAMES", "apply_ops"]

OP_NAMES = ("Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
            "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert")
OP_ID = {name: i for i, name in enumerate(OP_NAMES)}
_GEOMETRIC = (1, 2, 3, 4, 5)
_STATS = (8, 12, 13)  # ops that need a per-image reduction first
_P = 9  # parameter row: [op, t0..t5, a, b]
_F32 = np.float32
_NOP = len(OP_NAMES)


def _by_op(entries, dtype):
    """A lookup table over op ids, (16,): ``np.take(table, ops, mode="clip")`` sends ids below 0
    to Identity's entry and ids past 14 to the last one, which stays 0 (no class, no reduction)."""
    t = np.zeros(_NOP + 1, dtype)
    for ops, v in entries:
        t[list(ops)] = v
    return t


#: step_rows' row class of each op id: 0 nothing past the op id, 1 geometric (an inverse map),
#: 2 Brightness / Color / Contrast (a = ratio, b = 1 - ratio), 3 Sharpness (b), 4 Posterize,
#: 5 Solarize.
_CLASS = _by_op([(_GEOMETRIC, 1), ((6, 7, 8), 2), ((9,), 3), ((10,), 4), ((11,), 5)], np.intp)
#: reduction code of each op id: 0 none, 1 a statistics launch first (Contrast, AutoContrast),
#: 2 that and Equalize's table launch (the max over a step's samples says what the step needs).
_RED = _by_op([((8, 12), 1), ((13,), 2)], np.int8)
#: Posterize's bit mask ``(((1 << bits) - 1) << (8 - bits)) & 0xFF`` for bits 0..8.
_POSTER_MASK = np.array([(((1 << b) - 1) << (8 - b)) & 0xFF for b in range(9)], _F32)


# -- magnitude tables (torchvision's, in float32 as torch.linspace makes them) ---------------

def _linspace(start, end, steps):
    """torch.linspace in float32: start + i*step for the first half, end - (steps-1-i)*step after."""
    steps = int(steps)
    if steps == 1:
        return np.array([start], _F32)
    step = _F32((_F32(end) - _F32(start)) / _F32(steps - 1))
    i = np.arange(steps)
    lo = _F32(start) + step * i.astype(_F32)
    hi = _F32(end) - step * (steps - 1 - i).astype(_F32)
    return np.where(i < steps // 2, lo, hi).astype(_F32)


def _posterize_bits(num_bins, span, top=8):
    """``8 - (arange(num_bins) / ((num_bins - 1) / span)).round().int()`` (float32, half to even)."""
    d = _F32((num_bins - 1) / span) if num_bins > 1 else _F32(1.0)
    return (top - np.rint(np.arange(num_bins).astype(_F32) / d)).astype(_F32)


@functools.lru_cache(maxsize=64)
def _space(kind, num_bins, h, w):
    """{op id: (magnitudes (float32 array, or None for no magnitude), signed)} in torchvision's order."""
    if kind == "trivial":
        s, t, r, c, span = 0.99, 32.0, 135.0, 0.99, 6
        tx = ty = t
    else:  # RandAugment and AutoAugment
        s, r, c, span = 0.3, 30.0, 0.9, 4
        tx, ty = 150.0 / 331.0 * w, 150.0 / 331.0 * h
    sp = {0: (None, False)} if kind != "auto" else {}
    sp.update({1: (_linspace(0.0, s, num_bins), True), 2: (_linspace(0.0, s, num_bins), True),
               3: (_linspace(0.0, tx, num_bins), True), 4: (_linspace(0.0, ty, num_bins), True),
               5: (_linspace(0.0, r, num_bins), True), 6: (_linspace(0.0, c, num_bins), True),
               7: (_linspace(0.0, c, num_bins), True), 8: (_linspace(0.0, c, num_bins), True),
               9: (_linspace(0.0, c, num_bins), True), 10: (_posterize_bits(num_bins, span), False),
               11: (_linspace(255.0, 0.0, num_bins), False), 12: (None, False), 13: (None, False)})
    if kind == "auto":
        sp[14] = (None, False)
    return sp


def _dense(space):
    """The space as arrays: (15, B) float64 magnitudes (0 where an op has none), (15,) signed,
    (15,) number of bins (1 where none)."""
    nb = max([len(t) for t, _ in space.values() if t is not None] + [1])
    table = np.zeros((len(OP_NAMES), nb))
    signed = np.zeros(len(OP_NAMES), bool)
    size = np.ones(len(OP_NAMES), np.int64)
    for op, (t, sg) in space.items():
        if t is not None:
            table[op, :len(t)] = t.astype(np.float64)
            size[op] = len(t)
        signed[op] = sg
    return table, signed, size


def _magnitudes(space, ops, bins, flip):
    """Signed magnitude per (sample, step): table[op][bin], negated where ``flip`` and signed."""
    table, signed, size = _dense(space)
    m = table[ops, np.minimum(np.maximum(bins, 0), size[ops] - 1)]
    return np.where(flip & signed[ops], -m, m)


class _Table:
    """One policy space at one image size, as flat tables over ``(op, bin, flip)`` (index
    ``(op * bins + bin) * 2 + flip``): ``mag`` the signed magnitudes (float64, what
    :func:`_magnitudes` gives) and ``rows`` their kernel rows (float32 (., 9), what
    :func:`step_rows` gives), so a fresh draw gets both by one gather each. ``ids``: the
    space's op ids in torchvision's order (what the draws index)."""

    __slots__ = ("bins", "mag", "rows", "ids")

    def __init__(self, space, h, w, bilinear):
        table, signed, size = _dense(space)
        nb = self.bins = table.shape[1]
        op = np.repeat(np.arange(_NOP), nb * 2)
        b = np.tile(np.repeat(np.arange(nb), 2), _NOP)
        flip = np.tile(np.array([False, True]), _NOP * nb)
        self.mag = _magnitudes(space, op, b, flip)  # element-wise: entry i is what a draw of (op, b, flip) gives
        self.rows = step_rows(op, self.mag, h, w, bilinear)
        self.ids = np.array(list(space))
        for a in (self.mag, self.rows, self.ids):
            a.flags.writeable = False


#: Tables are made for spaces of up to this many magnitude bins (7680 rows, 300 KB); policies
#: with more bins draw and build rows per call as step_rows does.
_TABLE_MAX_BINS = 256


@functools.lru_cache(maxsize=128)
def _table(kind, num_bins, h, w, bilinear):
    """The :class:`_Table` of a policy space ("rand", "trivial", "auto", "augmix",
    "augmix_all") for (H, W) images, memoised."""
    if kind.startswith("augmix"):
        return _Table(_augmix_space(num_bins, h, w, kind == "augmix_all"), h, w, bilinear)
    return _Table(_space(kind, num_bins, h, w), h, w, bilinear)


def _step_codes(ops=None, rows=None):
    """Per step, the reduction code (see ``_RED``) of its most demanding sample, as a list:
    from the (N, K) int op ids, or else from the (K, N, 9) rows."""
    if ops is not None:
        return _RED.take(ops, mode="clip").max(axis=0, initial=0).tolist()
    return _RED.take(rows[:, :, 0].astype(np.intp), mode="clip").max(axis=1, initial=0).tolist()


# -- AutoAugment sub-policies (torchvision's, verbatim: (op, probability, magnitude bin)) ---

_AA = {
    "imagenet": (
        (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)), (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)), (("Equalize", 0.4, None), ("Rotate", 0.8, 8)),
        (("Solarize", 0.6, 3), ("Equalize", 0.6, None)), (("Posterize", 0.8, 5), ("Equalize", 1.0, None)),
        (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)), (("Equalize", 0.6, None), ("Posterize", 0.4, 6)),
        (("Rotate", 0.8, 8), ("Color", 0.4, 0)), (("Rotate", 0.4, 9), ("Equalize", 0.6, None)),
        (("Equalize", 0.0, None), ("Equalize", 0.8, None)), (("Invert", 0.6, None), ("Equalize", 1.0, None)),
        (("Color", 0.6, 4), ("Contrast", 1.0, 8)), (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
        (("Color", 0.8, 8), ("Solarize", 0.8, 7)), (("Sharpness", 0.4, 7), ("Invert", 0.6, None)),
        (("ShearX", 0.6, 5), ("Equalize", 1.0, None)), (("Color", 0.4, 0), ("Equalize", 0.6, None)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)), (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Invert", 0.6, None), ("Equalize", 1.0, None)), (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
    ),
    "cifar10": (
        (("Invert", 0.1, None), ("Contrast", 0.2, 6)), (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
        (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)), (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.5, None), ("Equalize", 0.9, None)), (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
        (("Color", 0.4, 3), ("Brightness", 0.6, 7)), (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
        (("Equalize", 0.6, None), ("Equalize", 0.5, None)), (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
        (("Color", 0.7, 7), ("TranslateX", 0.5, 8)), (("Equalize", 0.3, None), ("AutoContrast", 0.4, None)),
        (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)), (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
        (("Solarize", 0.5, 2), ("Invert", 0.0, None)), (("Equalize", 0.2, None), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.2, None), ("Equalize", 0.6, None)), (("Color", 0.9, 9), ("Equalize", 0.6, None)),
        (("AutoContrast", 0.8, None), ("Solarize", 0.2, 8)), (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
        (("Solarize", 0.4, 5), ("AutoContrast", 0.9, None)), (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.9, None), ("Solarize", 0.8, 3)), (("Equalize", 0.8, None), ("Invert", 0.1, None)),
        (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, None)),
    ),
    "svhn": (
        (("ShearX", 0.9, 4), ("Invert", 0.2, None)), (("ShearY", 0.9, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.6, None), ("Solarize", 0.6, 6)), (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Equalize", 0.6, None), ("Rotate", 0.9, 3)), (("ShearX", 0.9, 4), ("AutoContrast", 0.8, None)),
        (("ShearY", 0.9, 8), ("Invert", 0.4, None)), (("ShearY", 0.9, 5), ("Solarize", 0.2, 6)),
        (("Invert", 0.9, None), ("AutoContrast", 0.8, None)), (("Equalize", 0.6, None), ("Rotate", 0.9, 3)),
        (("ShearX", 0.9, 4), ("Solarize", 0.3, 3)), (("ShearY", 0.8, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.9, None), ("TranslateY", 0.6, 6)), (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Contrast", 0.3, 3), ("Rotate", 0.8, 4)), (("Invert", 0.8, None), ("TranslateY", 0.0, 2)),
        (("ShearY", 0.7, 6), ("Solarize", 0.4, 8)), (("Invert", 0.6, None), ("Rotate", 0.8, 4)),
        (("ShearY", 0.3, 7), ("TranslateX", 0.9, 3)), (("ShearX", 0.1, 6), ("Invert", 0.6, None)),
        (("Solarize", 0.7, 2), ("TranslateY", 0.6, 7)), (("ShearY", 0.8, 4), ("Invert", 0.8, None)),
        (("ShearX", 0.7, 9), ("TranslateY", 0.8, 3)), (("ShearY", 0.8, 5), ("AutoContrast", 0.7, None)),
        (("ShearX", 0.7, 2), ("Invert", 0.1, None)),
    ),
}


@dataclass
class AutoParams:
    """What a policy call drew: ``ops`` (N, K) int op ids (see :data:`OP_NAMES`) and
    ``magnitudes`` (N, K) float64 signed magnitudes, applied in column order. ``extra`` holds
    policy-specific draws (AutoAugment: ``policy_ids``, ``probs``). Pass it back as
    ``policy(x, params=...)`` to replay a call."""

    ops: np.ndarray
    magnitudes: np.ndarray
    extra: dict = field(default_factory=dict)

    def names(self):
        """The op names, (N, K) nested lists."""
        return [[OP_NAMES[o] for o in row] for row in np.asarray(self.ops)]


def _int_arg(name, v, low, high=None):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name}: got {v!r}; expected an int")
    if v < low or (high is not None and v >= high):
        rng = f"in [{low}, {high})" if high is not None else f">= {low}"
        raise ValueError(f"{name}: got {v}; expected an int {rng}")
    return int(v)


# -- per-step parameter rows ----------------------------------------------------------------

def _inverse_affine(center, angle, translate, shear):
    """torchvision's ``_get_inverse_affine_matrix(center, angle, translate, 1.0, shear)``,
    vectorised over samples (float64 arrays): (n, 6). The formula as written there;
    :func:`_geo_maps` evaluates the same operations for the policies' rows."""
    rot = np.radians(angle)
    sx, sy = np.radians(shear[0]), np.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = np.cos(rot - sy) / np.cos(sy)
    b = -np.cos(rot - sy) * np.tan(sx) / np.cos(sy) - np.sin(rot)
    c = np.sin(rot - sy) / np.cos(sy)
    d = -np.sin(rot - sy) * np.tan(sx) / np.cos(sy) + np.cos(rot)
    m = np.stack([d, -b, np.zeros_like(a), -c, a, np.zeros_like(a)], axis=-1)
    m[:, 2] += m[:, 0] * (-cx - tx) + m[:, 1] * (-cy - ty)
    m[:, 5] += m[:, 3] * (-cx - tx) + m[:, 4] * (-cy - ty)
    m[:, 2] += cx
    m[:, 5] += cy
    return m


@functools.lru_cache(maxsize=64)
def _geo_consts(h, w):
    """(x centre by op id (16,) float64: -W/2 for the shears, 0 else; the same for y; the
    (6,) float32 scale that takes an inverse map to the kernel's normalised coordinates)."""
    cx = _by_op([((1, 2), -w * 0.5)], np.float64)
    cy = _by_op([((1, 2), -h * 0.5)], np.float64)
    return cx, cy, np.array([0.5 * w] * 3 + [0.5 * h] * 3, _F32)


def _geo_maps(o, m, h, w):
    """The rows' (k, 6) float32 inverse maps of geometric ops ``o`` (1..5) with magnitudes
    ``m``: :func:`_inverse_affine` of torchvision's arguments for each op (shears: center
    (0, 0), i.e. (-W/2, -H/2) from the middle, angle ``degrees(arctan(m))``; translations:
    ``trunc(m)`` pixels; Rotate: angle ``-m``), over the kernel's (W/2, W/2, W/2, H/2, H/2,
    H/2) scale. The same float64 operations in the same order as :func:`_inverse_affine`,
    with its repeated cos/sin/tan of the same arguments computed once (the same values)."""
    cxt, cyt, scale = _geo_consts(h, w)
    shear = np.degrees(np.arctan(m))
    sx = np.radians(np.where(o == 1, shear, 0.0))
    sy = np.radians(np.where(o == 2, shear, 0.0))
    tm = np.trunc(m)  # int(magnitude)
    ex = -cxt[o] - np.where(o == 3, tm, 0.0)  # -cx - tx
    ey = -cyt[o] - np.where(o == 4, tm, 0.0)
    rot = np.radians(np.where(o == 5, -m, 0.0) + 0.0)  # F.rotate passes -angle; + 0.0: no -0.0
    rs = rot - sy
    cos_sy, tan_sx = np.cos(sy), np.tan(sx)
    crs, srs = np.cos(rs), np.sin(rs)
    out = np.empty((len(o), 6))
    a = out[:, 4] = crs / cos_sy
    mb = out[:, 1] = -(-crs * tan_sx / cos_sy - np.sin(rot))
    mc = out[:, 3] = -(srs / cos_sy)
    d = out[:, 0] = -srs * tan_sx / cos_sy + np.cos(rot)
    out[:, 2] = (d * ex + mb * ey + 0.0) + cxt[o]  # the map's zero entry += ..., then += cx
    out[:, 5] = (mc * ex + a * ey + 0.0) + cyt[o]
    return out.astype(_F32) / scale


def step_rows(ops, mags, h, w, bilinear=False):
    """The (n, 9) float32 kernel rows of one step from op ids and signed magnitudes (n,);
    ``bilinear``: the geometric ops interpolate bilinearly (else nearest).

    Row: ``[op, t0..t5, a, b]``; geometric ops: ``t`` the inverse map (torchvision's
    ``_get_inverse_affine_matrix``) over (W/2, W/2, W/2, H/2, H/2, H/2), ``a`` 1 for bilinear;
    Brightness/Color/Contrast: ``a = 1 + m``, ``b = 1 - a``; Sharpness: ``b = 1 - (1 + m)``;
    Posterize: ``a`` the bit mask of ``trunc(m)`` bits (clipped to [0, 8]); Solarize: ``a = m``;
    other entries 0. The op classes come from lookup tables (one gather for all ops), the
    per-class maths runs on the samples of that class only, each value computed as an
    element-wise float64 expression and cast to float32 once."""
    ops = np.asarray(ops, np.int64)
    mags = np.asarray(mags, np.float64)
    n = ops.shape[0]
    rows = np.zeros((n, _P), _F32)
    rows[:, 0] = ops
    cls = _CLASS.take(ops, mode="clip")
    count = np.bincount(cls, minlength=6) if n else np.zeros(6, np.intp)
    if count[1]:
        geo = cls == 1
        rows[geo, 1:7] = _geo_maps(ops[geo], mags[geo], h, w)
        rows[geo, 7] = 1.0 if bilinear else 0.0
    if count[2] or count[3]:
        ratio = 1.0 + mags
        if count[2]:
            np.copyto(rows[:, 7], ratio, casting="unsafe", where=cls == 2)
        np.copyto(rows[:, 8], 1.0 - ratio, casting="unsafe", where=(cls == 2) | (cls == 3))
    if count[4]:
        sel = cls == 4
        bits = np.clip(np.trunc(mags[sel]).astype(np.int64), 0, 8)
        rows[sel, 7] = _POSTER_MASK[bits]
    if count[5]:
        np.copyto(rows[:, 7], mags, casting="unsafe", where=cls == 5)
    return rows


# -- the NumPy twin of kernels/auto_augment.cu ----------------------------------------------

def _gray_floor(x):
    """floor(fma(b, 0.114, fma(g, 0.587, r * 0.2989))) in float32 (exact fmas through float64)."""
    r, g, b = (x[..., i].astype(_F32) for i in range(3))
    t = r * _F32(0.2989)
    t = (g.astype(np.float64) * np.float64(_F32(0.587)) + t).astype(_F32)
    t = (b.astype(np.float64) * np.float64(_F32(0.114)) + t).astype(_F32)
    return np.floor(t)


def _trunc_u8(v):
    return np.clip(v, _F32(0), _F32(255)).astype(np.uint8)


def _equalize_luts(x):
    """PIL's equalisation tables (n, C, 256) for uint8 images (n, H, W, C)."""
    n, h, w, c = x.shape
    idx = (np.arange(n)[:, None, None, None] * c + np.arange(c)) * 256 + x.astype(np.int64)
    return _luts_from_hist(np.bincount(idx.ravel(), minlength=n * c * 256).reshape(n, c, 256))


def _luts_from_hist(hist):
    """PIL's tables (n, C, 256) from 256-bin histograms (n, C, 256) (gpuaug_equalize_lut's rule)."""
    hist = np.asarray(hist, np.int64)
    ks = np.arange(256)
    last = 255 - np.argmax(hist[:, :, ::-1] > 0, axis=2)
    step = (hist.sum(2) - np.take_along_axis(hist, last[..., None], 2)[..., 0]) // 255
    cum = np.cumsum(hist, axis=2) - hist  # cum[k-1]
    safe = np.maximum(step, 1)[..., None]
    lut = np.minimum((cum + safe // 2) // safe, 255)
    lut[..., 0] = 0
    return np.where(step[..., None] == 0, ks, lut).astype(np.uint8)


def _bilinear(xs, fx, fy):
    """grid_sample bilinear (zeros outside) at source coordinates (n, H, W) float32, rounded
    half to even (torchvision's cast back to uint8), in the kernel's float32 order."""
    n, h, w, c = xs.shape
    x0f, y0f = np.floor(fx), np.floor(fy)
    wx1, wx0 = fx - x0f, (x0f + _F32(1)) - fx
    wy1, wy0 = fy - y0f, (y0f + _F32(1)) - fy
    x0, y0 = x0f.astype(np.int64), y0f.astype(np.int64)
    acc = np.zeros((n, h, w, c), _F32)
    k = np.arange(n)[:, None, None]
    for dx, dy, wt in ((0, 0, wx0 * wy0), (1, 0, wx1 * wy0), (0, 1, wx0 * wy1), (1, 1, wx1 * wy1)):
        xx, yy = x0 + dx, y0 + dy
        ok = (xx >= 0) & (xx < w) & (yy >= 0) & (yy < h)
        v = xs[k, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)].astype(_F32) * wt[..., None]
        acc = np.where(ok[..., None], acc + v, acc)
    return _trunc_u8(np.rint(acc))


def _apply_numpy(x, rows):
    """One step on uint8 (n, H, W, C) NumPy images with (n, 9) rows; returns a new array."""
    n, h, w, c = x.shape
    out = x.copy()
    ops = rows[:, 0].astype(np.int64)
    for op in np.unique(ops):
        i = np.nonzero(ops == op)[0]
        xs, r = x[i], rows[i]
        a = r[:, 7][:, None, None, None]
        b = r[:, 8][:, None, None, None]
        if op in _GEOMETRIC:
            xp = np.arange(w).astype(_F32) + (_F32(0.5) - _F32(0.5) * _F32(w))
            yp = np.arange(h).astype(_F32) + (_F32(0.5) - _F32(0.5) * _F32(h))
            t = [r[:, k][:, None, None] for k in range(1, 7)]
            gx = (xp[None, None, :] * t[0] + yp[None, :, None] * t[1]) + t[2]
            gy = (xp[None, None, :] * t[3] + yp[None, :, None] * t[4]) + t[5]
            fx = ((gx + _F32(1)) * _F32(w) - _F32(1)) * _F32(0.5)
            fy = ((gy + _F32(1)) * _F32(h) - _F32(1)) * _F32(0.5)
            bil = r[:, 7] != 0
            if bil.any():
                out[i[bil]] = _bilinear(xs[bil], fx[bil], fy[bil])
            if bil.all():
                continue
            i, xs, fx, fy = i[~bil], xs[~bil], np.rint(fx[~bil]), np.rint(fy[~bil])
            inside = (fx >= 0) & (fx <= w - 1) & (fy >= 0) & (fy <= h - 1)
            ix = np.where(inside, fx, 0).astype(np.int64)
            iy = np.where(inside, fy, 0).astype(np.int64)
            g = xs[np.arange(len(i))[:, None, None], iy, ix]
            out[i] = np.where(inside[..., None], g, 0)
        elif op == 6:
            out[i] = _trunc_u8(xs.astype(_F32) * a)
        elif op in (7, 8):
            if op == 7 and c != 3:
                continue
            if op == 7:
                g = _gray_floor(xs)[..., None]
            else:
                g = (_gray_floor(xs) if c == 3 else xs[..., 0].astype(_F32)).astype(np.int64)
                g = (g.reshape(len(i), -1).sum(1).astype(_F32) / _F32(h * w))[:, None, None, None]
            out[i] = _trunc_u8(xs.astype(_F32) * a + g * b)
        elif op == 9:
            if h <= 2 or w <= 2:
                continue
            xf = xs.astype(_F32)
            acc = np.zeros((len(i), h - 2, w - 2, c), _F32)
            w1, w5 = _F32(1) / _F32(13), _F32(5) / _F32(13)
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    acc = acc + (w5 if dy == 0 and dx == 0 else w1) * xf[:, 1 + dy:h - 1 + dy, 1 + dx:w - 1 + dx]
            xc = xf[:, 1:-1, 1:-1]
            d = np.rint(acc) - xc
            v = (d.astype(np.float64) * b.astype(np.float64) + xc).astype(_F32)
            o = xs.copy()
            o[:, 1:-1, 1:-1] = _trunc_u8(v)
            out[i] = o
        elif op == 10:
            out[i] = xs & r[:, 7].astype(np.uint8)[:, None, None, None]
        elif op == 11:
            out[i] = np.where(xs.astype(_F32) >= a, 255 - xs, xs)
        elif op == 12:
            lo = xs.min(axis=(1, 2), keepdims=True).astype(_F32)
            hi = xs.max(axis=(1, 2), keepdims=True).astype(_F32)
            inv = (hi - lo) * _F32(1.0 / 255.0)
            v = _trunc_u8((xs.astype(_F32) - lo) / np.where(hi == lo, _F32(1), inv))
            out[i] = np.where(hi == lo, xs, v)
        elif op == 13:
            lut = _equalize_luts(xs)
            out[i] = np.take_along_axis(lut[:, None, None, :, :], xs[..., None].astype(np.int64), 4)[..., 0]
        elif op == 14:
            out[i] = 255 - xs
    return out


# -- the CUDA path ---------------------------------------------------------------------------

def _run_cuda(x, rows, out, stream, fused=True, ops=None):
    """All K steps on a dense uint8 NHWC CuPy batch; rows (K, N, 9) float32 on the host.
    ``fused``: the fused launches (default); else one gpuaug_autoaug_apply launch per step.
    ``ops``: the (N, K) int op ids of the rows where the caller has them (the fused path reads
    which steps reduce from them instead of from the rows)."""
    cp = cupy_module()
    k, n = rows.shape[0], rows.shape[1]
    _, h, w, c = x.shape
    if n > 65535:  # blockIdx.y walks the samples
        raise ValueError(f"x: got a batch of {n} images; expected at most 65535 per call (split the batch)")
    if h * w >= 2 ** 31 - 256:
        raise ValueError(f"x: got images of {h} x {w} pixels; expected fewer than 2**31 pixels per image")
    if out is not None:
        if not isinstance(out, cp.ndarray) or out.shape != x.shape or out.dtype != np.uint8 \
                or not out.flags.c_contiguous:
            raise ValueError(f"out: got {type(out).__name__} {getattr(out, 'dtype', '')} of shape "
                             f"{getattr(out, 'shape', None)}; expected a C-contiguous uint8 CuPy array "
                             f"of shape {x.shape}")
        if out.data.ptr < x.data.ptr + x.nbytes and x.data.ptr < out.data.ptr + out.nbytes:
            with on_device(x.device.id, stream):
                out[...] = _run_cuda(x, rows, None, None, fused, ops)  # overlapping: through a new array
            return out
    if fused:
        return _run_cuda_fused(x, rows, out, stream, ops)
    from gpuaug._stream import on_stream
    from gpuaug.kernels._cuda import get_function, upload

    with cp.cuda.Device(x.device.id), on_stream(stream):
        if out is None:
            out = cp.empty_like(x)
        if k == 0:
            out[...] = x
            return out
        (rows_d,) = upload(np.ascontiguousarray(rows))
        tmp = cp.empty_like(x) if k > 1 else None
        npix = h * w
        apply_fn = get_function("auto_augment.cu", f"gpuaug_autoaug_apply<{c}>")
        stats_fn = None
        lp = c * 256 + 1
        minmax = hist = gsum = lut = stats_buf = None
        src = x
        for j in range(k):
            dst = out if (k - 1 - j) % 2 == 0 else tmp
            p = rows_d[j]
            ops = rows[j, :, 0]
            need = np.isin(ops, _STATS)
            if need.any():
                if stats_fn is None:
                    stats_fn = get_function("auto_augment.cu", f"gpuaug_autoaug_stats<{c}>")
                    # minmax (N, 2C), hist (N, C, 256), gsum (N,) uint64 in one buffer: one memset
                    # per step (N C 258 words before gsum: 8-byte aligned)
                    a, b = n * 2 * c, n * c * 258
                    stats_buf = cp.empty(b + 2 * n, cp.uint32)
                    minmax = stats_buf[:a].reshape(n, 2 * c)
                    hist = stats_buf[a:b].reshape(n, c, 256)
                    gsum = stats_buf[b:].view(cp.uint64)
                    lut = cp.empty((n, lp), cp.float32)
                stats_buf.fill(0)
                bps = max(1, min(64, -(-npix // (256 * 16))))
                stats_fn((bps, n), (256,), (src, np.int32(h), np.int32(w), p, minmax, hist, gsum, np.int32(n)))
                if (ops == 13).any():
                    get_function("equalize.cu", "gpuaug_equalize_lut")(
                        (n * c,), (256,), (hist, lut, np.int32(lp), np.int32(c), np.int32(0)))
            apply_fn((-(-npix // 256), n), (256,),
                     (src, dst, np.int32(h), np.int32(w), p, minmax if minmax is not None else p,
                      gsum if gsum is not None else p, lut if lut is not None else p, np.int32(lp), np.int32(n)))
            src = dst
    return out


#: Steps per fused launch at most (kernels/auto_augment.cu instantiates gpuaug_autoaug_fused<C, 1..4>).
FUSED_MAX_STEPS = 4
#: Steps per launch of the policies' GPU path (1..FUSED_MAX_STEPS): 1 (the default) runs every step
#: as its own gpuaug_autoaug_apply launch after its statistics launch; 2-4 fuse that many steps
#: per gpuaug_autoaug_fused pass (a chunk of one step still takes gpuaug_autoaug_apply, which
#: was the faster single step: 75 against 88 us on the H200). See the module docstring.
STEPS_PER_LAUNCH = 1


def _steps_per_launch():
    """``STEPS_PER_LAUNCH`` clamped to 1..FUSED_MAX_STEPS (read per call: tests and benches set it)."""
    return max(1, min(FUSED_MAX_STEPS, int(STEPS_PER_LAUNCH)))


#: Pixels per thread of gpuaug_autoaug_fused (GPUAUG_AA_PX in kernels/auto_augment.cu): a block
#: covers 256 * _FUSED_PX pixels.
_FUSED_PX = 2


#: compiled kernels by (get_function in use, device, key): a launch looks its kernels up by a
#: tuple instead of formatting their names (a test that swaps get_function gets its own entries)
_KERNELS = {}
_KERNEL_NAMES = {
    "fused": ("auto_augment.cu", "gpuaug_autoaug_fused<{}, {}>"),
    "apply": ("auto_augment.cu", "gpuaug_autoaug_apply<{}>"),
    "stats": ("auto_augment.cu", "gpuaug_autoaug_stats_fused<{}, {}>"),
    "augmix": ("auto_augment.cu", "gpuaug_augmix_fused<{}, {}>"),
    "lut": ("equalize.cu", "gpuaug_equalize_lut"),
}


def _kernel(dev, kind, c=0, k=0):
    """The kernel ``kind`` (see ``_KERNEL_NAMES``) for C channels and template step k, memoised."""
    gf = _kc.get_function
    key = (gf, dev, kind, c, k)
    fn = _KERNELS.get(key)
    if fn is None:
        if len(_KERNELS) > 512:
            _KERNELS.clear()
        filename, name = _KERNEL_NAMES[kind]
        fn = _KERNELS[key] = gf(filename, name.format(c, k))
    return fn


def _at(cp, base, offset, shape, dtype):
    """A ``dtype`` view of ``shape`` at ``offset`` bytes into the device buffer ``base``: one
    ndarray constructor (slices and views cost a few microseconds each)."""
    return cp.ndarray(shape, dtype, memptr=base.data + offset)


def _stats_buffers(cp, m, c, lp, equalize, dummy):
    """(minmax, hist, gsum, lut) of ``m`` statistics rows (steps x samples): minmax (m, 2C) and
    hist (m, C, 256) uint32, gsum (m,) uint64 (8-byte aligned after them), zeroed; with
    ``equalize`` the (m, LP) float32 tables after them (not zeroed: the table launches write
    them), else ``dummy``. One allocation and one memset; ``minmax`` is the buffer itself."""
    a, b = m * 2 * c, m * c * 258
    words = b + 2 * m
    buf = cp.empty(words + (m * lp if equalize else 0), cp.uint32)
    buf.data.memset_async(0, 4 * words)
    lut = _at(cp, buf, 4 * words, (m, lp), cp.float32) if equalize else dummy
    return buf, _at(cp, buf, 4 * a, (b - a,), cp.uint32), _at(cp, buf, 4 * b, (m,), cp.uint64), lut


def _stats_blocks(fn, npix, m):
    """Blocks per sample of a statistics launch over ``m`` samples of ``npix`` pixels: about 16
    pixels a thread (at most 64 blocks a sample), then spread so that the launch is whole waves
    of the blocks the GPU holds at once (the kernel's registers decide how many an SM holds):
    a launch of 1.35 waves took as long as two."""
    base = max(1, min(64, -(-npix // (256 * 16))))
    slots = _SLOTS.get(fn)
    if slots is None:  # SMs x blocks of 256 threads an SM holds by registers (8 warps, 8-register steps)
        from gpuaug.ops._colour import _multiprocessors

        regs = (-(-max(1, int(getattr(fn, "num_regs", 64))) // 8) * 8) * 256
        slots = _SLOTS[fn] = _multiprocessors(cupy_module()) * max(1, min(8, 65536 // regs))
    waves = max(1, round(m * base / slots))
    return max(1, min(2 * base, -(-waves * slots // m)))


#: The fused path's statistics launches take only the samples that reduce at their step, in
#: whole waves (:func:`_stats_blocks`); False: a grid row per sample (before session 9; timed
#: beside it by tests/gpu/ra_px.py and kprof.py).
COMPACT_STATS = True

#: _stats_blocks' blocks the GPU holds at once, per kernel (a kernel is one device's)
_SLOTS: dict = {}


def _run_cuda_fused(x, rows, out, stream, ops=None):
    """All K steps in chunks of ``STEPS_PER_LAUNCH``: one launch per chunk (gpuaug_autoaug_apply
    for a chunk of one step, gpuaug_autoaug_fused for more), after a statistics launch (and a
    table launch for Equalize) per step in which some sample reduces; same results as
    :func:`_run_cuda`. ``ops``: the (N, K) int op ids, if the caller has them (else read from
    the rows)."""
    cp = cupy_module()
    k_all, n = rows.shape[0], rows.shape[1]
    _, h, w, c = x.shape
    npix, lp = h * w, c * 256 + 1
    dev = x.data.device_id  # (x.device makes a Device object)
    with on_device(dev, stream):
        if out is None:
            out = cp.empty_like(x)
        if k_all == 0:
            out[...] = x
            return out
        codes = _step_codes(ops, rows)
        # per reducing step, the samples that reduce there (the statistics launches' grid rows)
        red_ops = _RED.take(ops.T if ops is not None else rows[:, :, 0].astype(np.intp), mode="clip")
        acts = [np.flatnonzero(red_ops[k]).astype(np.int32) for k in range(k_all) if codes[k]]
        rows_all, *acts_d = _kc.upload(rows, *acts)
        act_at = iter(zip(acts, acts_d))
        per = _steps_per_launch()
        nchunks = -(-k_all // per)
        tmp = cp.empty_like(x) if nchunks > 1 else None
        i32 = np.int32
        hh, ww, nn, lpp = i32(h), i32(w), i32(n), i32(lp)
        src = x
        for ci in range(nchunks):
            start = ci * per
            kk = min(per, k_all - start)
            rows_d = rows_all if nchunks == 1 else _at(cp, rows_all, 4 * start * n * _P, (kk, n, _P), cp.float32)
            dst = out if (nchunks - 1 - ci) % 2 == 0 else tmp
            red = codes[start:start + kk]
            minmax = gsum = lut = rows_d
            if any(red):
                minmax, hist, gsum, lut = _stats_buffers(cp, kk * n, c, lp, max(red) == 2, rows_d)
                for i in range(kk):
                    if not red[i]:
                        continue
                    act, act_d = next(act_at)
                    fn = _kernel(dev, "stats", c, i)
                    if COMPACT_STATS:
                        fn((_stats_blocks(fn, npix, len(act)), len(act)), (256,),
                           (src, hh, ww, rows_d, nn, minmax, hist, gsum, lut, lpp, act_d))
                    else:  # every sample a grid row (the blocks of the others return at once)
                        fn((max(1, min(64, -(-npix // 4096))), n), (256,),
                           (src, hh, ww, rows_d, nn, minmax, hist, gsum, lut, lpp, None))
                    if red[i] == 2:  # step i's histograms and tables (step 0's: where hist and lut start)
                        hist_i = _at(cp, hist, 4 * i * n * c * 256, (n * c * 256,), cp.uint32) if i else hist
                        lut_i = _at(cp, lut, 4 * i * n * lp, (n, lp), cp.float32) if i else lut
                        _kernel(dev, "lut")((n * c,), (256,), (hist_i, lut_i, lpp, i32(c), i32(0)))
            if kk == 1:  # the step's (N, P) rows, its statistics rows 0..N-1
                _kernel(dev, "apply", c)((-(-npix // 256), n), (256,),
                                         (src, dst, hh, ww, rows_d, minmax, gsum, lut, lpp, nn))
            else:
                _kernel(dev, "fused", c, kk)((-(-npix // (256 * _FUSED_PX)), n), (256,),
                                             (src, dst, hh, ww, rows_d, nn, minmax, gsum, lut, lpp))
            src = dst
    return out


def _augmix_cuda(x, rows, k, d, weights, out, stream, ops=None):
    """AugMix on the GPU: per chain, the statistics launches its reduction steps need; then one
    launch evaluating every chain per pixel and mixing (rows (k d, N, 9), weights (N, 1 + k);
    ``ops``: the (N, k d) int op ids, if the caller has them)."""
    cp = cupy_module()
    n, h, w, c = x.shape
    npix, lp = h * w, c * 256 + 1
    if n > 65535 or npix >= 2 ** 31 - 256:
        raise ValueError(f"x: got {n} images of {h} x {w}; expected at most 65535 images of fewer than 2**31 pixels")
    if out is not None and (not isinstance(out, cp.ndarray) or out.shape != x.shape or out.dtype != np.uint8
                            or not out.flags.c_contiguous):
        raise ValueError(f"out: got {type(out).__name__} of shape {getattr(out, 'shape', None)}; expected a "
                         f"C-contiguous uint8 CuPy array of shape {x.shape}")
    dev = x.data.device_id
    with on_device(dev, stream):
        if not x.flags.c_contiguous:
            x = cp.ascontiguousarray(x)
        if out is not None and out.data.ptr < x.data.ptr + x.nbytes and x.data.ptr < out.data.ptr + out.nbytes:
            out[...] = _augmix_cuda(x, rows, k, d, weights, None, None, ops)  # overlapping: through a new array
            return out
        y = cp.empty_like(x) if out is None else out
        rows_d, wt = _kc.upload(rows, weights if weights.dtype == np.float32 else weights.astype(np.float32))
        steps = k * d
        minmax = gsum = lut = rows_d
        codes = _step_codes(ops, rows)
        i32 = np.int32
        hh, ww, nn, lpp = i32(h), i32(w), i32(n), i32(lp)
        if any(codes):
            a, b = steps * n * 2 * c, steps * n * c * 258
            minmax, hist, gsum, lut = _stats_buffers(cp, steps * n, c, lp, max(codes) == 2, rows_d)
            buf = minmax
            bps = max(1, min(64, -(-npix // (256 * 16))))
            eq = lut is not rows_d
            for j in range(k):
                st = j * d
                cj = codes[st:st + d]
                if not any(cj):
                    continue
                # chain j's rows and statistics: the buffers from its first step on (chain 0: their start)
                rows_j = _at(cp, rows_d, 4 * st * n * _P, (d, n, _P), cp.float32) if st else rows_d
                mm_j = _at(cp, buf, 4 * st * n * 2 * c, (a - st * n * 2 * c,), cp.uint32) if st else buf
                hist_j = _at(cp, buf, 4 * (a + st * n * c * 256), (b - a - st * n * c * 256,), cp.uint32) if st \
                    else hist
                gsum_j = _at(cp, gsum, 8 * st * n, (steps * n - st * n,), cp.uint64) if st else gsum
                lut_j = (_at(cp, lut, 4 * st * n * lp, (d, n, lp), cp.float32) if st else lut) if eq else rows_d
                for i in range(d):
                    if not cj[i]:
                        continue
                    _kernel(dev, "stats", c, i)((bps, n), (256,), (x, hh, ww, rows_j, nn, mm_j, hist_j, gsum_j, lut_j,
                                                                    lpp, None))
                    if cj[i] == 2:
                        s_i = st + i
                        hist_i = _at(cp, buf, 4 * (a + s_i * n * c * 256), (b - a - s_i * n * c * 256,), cp.uint32) \
                            if i else hist_j
                        lut_i = _at(cp, lut, 4 * s_i * n * lp, (n, lp), cp.float32) if i else lut_j
                        _kernel(dev, "lut")((n * c,), (256,), (hist_i, lut_i, lpp, i32(c), i32(0)))
        _kernel(dev, "augmix", c, d)((-(-npix // 256), n), (256,), (x, y, hh, ww, rows_d, nn, i32(k), minmax, gsum,
                                                                      lut, lpp, wt))
    return y


def apply_ops(x, params, *, out=None, stream=None, interpolation="nearest"):
    """Apply the ops of ``params`` (an :class:`AutoParams`) to a uint8 batch, column by column.

    Args:
        x: uint8 (N, H, W, C) NHWC, C = 1 or 3: a NumPy array (NumPy twin) or a CuPy array
            (CUDA kernels); or one (H, W, C) image.
        params: :class:`AutoParams` with (N, K) ``ops`` and ``magnitudes``.
        out: optional output array like ``x`` (CuPy path only).
        stream: CUDA stream (CuPy path).
        interpolation: "nearest" (torchvision's default for these policies) or "bilinear",
            for the geometric ops.

    Returns:
        An array like ``x``.

    Example::

        >>> import numpy as np
        >>> from gpuaug.policy.auto import AutoParams, apply_ops
        >>> x = np.full((1, 4, 4, 3), 200, np.uint8)
        >>> int(apply_ops(x, AutoParams(np.array([[14]]), np.zeros((1, 1))))[0, 0, 0, 0])  # Invert
        55
    """
    return _apply_ops(x, params, out, stream, interpolation)


_CUPY_NDARRAY = [None]  # cupy.ndarray once seen: CuPy input skips the interface conversion


def _as_input(x):
    """NumPy and CuPy arrays as they are; other CUDA arrays (PyTorch, Numba, ...) as zero-copy
    CuPy views."""
    t = type(x)
    if t is np.ndarray or t is _CUPY_NDARRAY[0]:
        return x
    if not isinstance(x, np.ndarray) and hasattr(x, "__cuda_array_interface__"):
        import cupy

        _CUPY_NDARRAY[0] = cupy.ndarray
        return x if t is cupy.ndarray else cupy.asarray(x)
    return x


def _apply_ops(x, params, out, stream, interpolation, fresh=None):
    """:func:`apply_ops`; ``fresh``: (table, idx) of a draw made for this very batch by a policy
    (its rows are gathered from the table instead of built, its ops need no range check)."""
    x = _as_input(x)
    single = getattr(x, "ndim", 0) == 3
    if single:
        x = x[None]
    if getattr(x, "ndim", 0) != 4 or x.dtype != np.uint8 or x.shape[3] not in (1, 3):
        raise ValueError(f"x: got {getattr(x, 'dtype', type(x).__name__)} array of shape "
                         f"{getattr(x, 'shape', None)}; expected uint8 (N, H, W, C) NHWC with C = 1 or 3")
    n, h, w, _ = x.shape
    ops = params.ops
    if fresh is None:
        ops = np.asarray(ops)
        mags = np.asarray(params.magnitudes, np.float64)
        if ops.ndim != 2 or ops.shape[0] != n or mags.shape != ops.shape:
            raise ValueError(f"params: got ops of shape {ops.shape} and magnitudes of shape {mags.shape}; "
                             f"expected both (N, K) with N = {n}")
        if ops.size and (ops.min() < 0 or ops.max() >= len(OP_NAMES)):
            raise ValueError(f"params.ops: got values in [{ops.min()}, {ops.max()}]; expected op ids in "
                             f"[0, {len(OP_NAMES)})")
        if interpolation not in ("nearest", "bilinear"):
            raise ValueError(f"interpolation: got {interpolation!r}; expected 'nearest' or 'bilinear'")
        k = ops.shape[1]
        rows = step_rows(ops.T.ravel(), mags.T.ravel(), h, w, interpolation == "bilinear").reshape(k, n, _P)
        if ops.dtype.kind not in "iu":
            ops = None  # the fused path reads the steps' reductions from the rows
    else:
        if interpolation not in ("nearest", "bilinear"):
            raise ValueError(f"interpolation: got {interpolation!r}; expected 'nearest' or 'bilinear'")
        table, idx = fresh
        rows = table.rows.take(idx.T, axis=0)  # (K, N, 9): all steps at once
    if isinstance(x, np.ndarray):
        y = x
        for j in range(rows.shape[0]):
            y = _apply_numpy(y, rows[j])
        if rows.shape[0] == 0:
            y = x.copy()
        if out is not None:
            out[...] = y[0] if single else y
            return out
        return y[0] if single else y
    if not x.flags.c_contiguous:
        import cupy

        x = cupy.ascontiguousarray(x)
    y = _run_cuda(x, rows, None if single else out, stream, ops=ops)
    return y[0] if single else y


class _Policy(Transform):
    """Shared machinery: a generator, ``draw``, ``__call__`` with replay, ``plan``; and the
    Transform protocol (``kind = "op"``: ``sample``/``run``), so a policy is also a step of
    :class:`gpuaug.Compose` (it runs there as its own launches, on uint8 NHWC data)."""

    num_steps = 1
    kind = "op"
    op = "auto_augment"
    interpolation = "nearest"

    def __init__(self, seed=None, interpolation="nearest"):
        if interpolation not in ("nearest", "bilinear"):
            raise ValueError(f"interpolation: got {interpolation!r}; expected 'nearest' or 'bilinear'")
        self.interpolation = interpolation
        self._rng = R.generator(seed)
        self.last_params = None
        self._memo = None

    def _remember(self, params, table, idx, h, w):
        """Keep the last draw's table indices with copies of its ops and magnitudes, so that a
        replay of it (``params=last_params``, Compose's run after its sample) gathers its rows
        instead of building them (:meth:`_recall` checks the values are still those)."""
        if table is None:
            self._memo = None
            return
        ops, mags = params.ops, params.magnitudes
        self._memo = (h, w, self.interpolation, ops.shape, ops.dtype, ops.tobytes(), mags.tobytes(), table, idx)

    def _recall(self, x, params):
        """(table, idx) of the remembered draw if ``params`` holds exactly its ops and magnitudes
        (bit for bit) for a batch of its size and this interpolation, else None."""
        m = self._memo
        if m is None:
            return None
        ops, mags = params.ops, params.magnitudes
        shape = getattr(x, "shape", None)
        if type(ops) is not np.ndarray or type(mags) is not np.ndarray or shape is None or len(shape) not in (3, 4):
            return None
        n, h, w = (1, shape[0], shape[1]) if len(shape) == 3 else shape[:3]
        h0, w0, interp, shape0, dtype0, ops0, mags0, table, idx = m
        if (h, w, self.interpolation) != (h0, w0, interp) or ops.shape != shape0 or n != shape0[0] \
                or ops.dtype != dtype0 or mags.dtype != np.float64 or mags.shape != shape0:
            return None
        if ops.tobytes() != ops0 or mags.tobytes() != mags0:  # bit for bit (signed zeros too)
            return None
        return table, idx

    def __getstate__(self):  # the memo is a cache: not pickled
        state = dict(self.__dict__)
        state["_memo"] = None
        return state

    def __setstate__(self, state):
        state.setdefault("_memo", None)
        self.__dict__.update(state)

    def _apply(self, x, params, out, stream, fresh=None):
        return _apply_ops(x, params, out, stream, self.interpolation, fresh or self._recall(x, params))

    def _draw_idx(self, rng, n, h, w):  # pragma: no cover - overridden
        """(AutoParams, table, idx): the draws, and the (N, K) indices of their (op, bin, flip)
        in the policy's :class:`_Table` at this size and interpolation (None, None for a
        space past ``_TABLE_MAX_BINS``)."""
        raise NotImplementedError

    def _draw(self, rng, n, h, w):
        return self._draw_idx(rng, n, h, w)[0]

    def draw(self, n, size, seed=None):
        """Draw the parameters for ``n`` images of ``size = (H, W)`` (an :class:`AutoParams`)."""
        rng = self._rng if seed is None else R.generator(seed)
        h, w = int(size[0]), int(size[1])
        p, table, idx = self._draw_idx(rng, int(n), h, w)
        self._remember(p, table, idx, h, w)
        return p

    # -- gpuaug.Compose's Transform protocol --------------------------------------------------
    def sample(self, rng, n, sizes) -> dict:
        """Compose's draw: ``{"ops", "magnitudes"}`` for ``n`` images of one size."""
        sizes = np.asarray(sizes, np.int64).reshape(-1, 2)
        if len(sizes) and (sizes != sizes[0]).any():
            raise ValueError(f"{type(self).__name__}: got images of different sizes; it runs on a dense batch")
        h, w = (int(sizes[0, 0]), int(sizes[0, 1])) if len(sizes) else (1, 1)
        p, table, idx = self._draw_idx(rng, int(n), h, w)
        self._remember(p, table, idx, h, w)
        return {"ops": p.ops, "magnitudes": p.magnitudes, **p.extra}

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):
        """Compose's launch: the drawn ops on uint8 NHWC data (NumPy twin or CUDA kernels)."""
        if dtype != "uint8" or layout != "NHWC" or isinstance(x, list):
            raise ValueError(f"{type(self).__name__} in a Compose: got {dtype} {layout}"
                             f"{' varshape' if isinstance(x, list) else ''} data at its step; it needs a dense "
                             "uint8 NHWC batch (put it before ToDtype/Normalize/ToLayout and resizing crops)")
        return self._apply(x, AutoParams(params["ops"], params["magnitudes"], {k: v for k, v in params.items()
                                                                             if k not in ("ops", "magnitudes")}),
                           out, stream)

    def __call__(self, x, seed=None, *, params=None, out=None, stream=None):
        """Augment ``x`` (uint8 (N, H, W, C) NHWC, NumPy or CuPy, or one HWC image).

        ``seed`` draws this call from a fresh generator; ``params`` (e.g. ``last_params``)
        replays a call instead of drawing. Returns an array like ``x``; the draws are kept in
        ``self.last_params``.
        """
        shape = getattr(x, "shape", None)
        if shape is None or len(shape) not in (3, 4):
            raise ValueError(f"x: got {type(x).__name__} of shape {shape}; expected uint8 (N, H, W, C) or (H, W, C)")
        n, h, w = (1,) + tuple(shape[:2]) if len(shape) == 3 else tuple(shape[:3])
        if params is None:
            rng = self._rng if seed is None else R.generator(seed)
            params, table, idx = self._draw_idx(rng, int(n), int(h), int(w))
            self._remember(params, table, idx, int(h), int(w))
            y = self._apply(x, params, out, stream, (table, idx) if table is not None else None)
        elif seed is not None:
            raise ValueError("seed: got a seed and params; pass one of them (params replays a call)")
        else:
            y = self._apply(x, params, out, stream)
        self.last_params = params
        return y

    def plan(self):
        """The launches of one call on the GPU: per chunk of ``STEPS_PER_LAUNCH`` steps (default
        1), one launch (gpuaug_autoaug_apply for one step, gpuaug_autoaug_fused for more), after
        a statistics launch (and Equalize's table launch) for each step in which some sample
        drew Contrast, AutoContrast or Equalize."""
        per = _steps_per_launch()
        lines = []
        for start in range(0, self.num_steps, per):
            kk = min(per, self.num_steps - start)
            pre = " ".join(f"[stats<{i}> + equalize_lut if drawn]" for i in range(kk))
            main = "gpuaug_autoaug_apply<C>" if kk == 1 else f"gpuaug_autoaug_fused<C, {kk}>"
            lines.append(f"steps {start}..{start + kk - 1}: {pre} {main}")
        return lines


class RandAugment(_Policy):
    """RandAugment (Cubuk et al. 2019) as torchvision's, with per-sample draws.

    Each sample draws ``num_ops`` ops uniformly (with replacement) from torchvision's 14
    (Identity, ShearX, ShearY, TranslateX, TranslateY, Rotate, Brightness, Color, Contrast,
    Sharpness, Posterize, Solarize, AutoContrast, Equalize), each at bin ``magnitude`` of
    ``num_magnitude_bins``, negated with probability 1/2 for signed ops.

    Args:
        num_ops: ops per sample, >= 0.
        magnitude: the magnitude bin, in [0, num_magnitude_bins).
        num_magnitude_bins: >= 1.
        seed: seeds the policy's generator.

    Example::

        >>> import numpy as np, gpuaug
        >>> y = gpuaug.RandAugment(2, 9, seed=1)(np.zeros((2, 16, 16, 3), np.uint8))
        >>> y.shape
        (2, 16, 16, 3)
    """

    def __init__(self, num_ops=2, magnitude=9, num_magnitude_bins=31, *, interpolation="nearest", seed=None):
        self.num_ops = _int_arg("num_ops", num_ops, 0)
        self.num_magnitude_bins = _int_arg("num_magnitude_bins", num_magnitude_bins, 1)
        self.magnitude = _int_arg("magnitude", magnitude, 0, self.num_magnitude_bins)
        self.num_steps = self.num_ops
        super().__init__(seed, interpolation)

    def _draw_idx(self, rng, n, h, w):
        if self.num_magnitude_bins > _TABLE_MAX_BINS:
            space = _space("rand", self.num_magnitude_bins, h, w)
            ops = rng.integers(0, len(space), (n, self.num_ops))
            flip = rng.integers(0, 2, (n, self.num_ops)) == 1
            return AutoParams(ops, _magnitudes(space, ops, np.full(ops.shape, self.magnitude), flip)), None, None
        t = _table("rand", self.num_magnitude_bins, h, w, self.interpolation == "bilinear")
        ops = rng.integers(0, len(t.ids), (n, self.num_ops))
        idx = ops * (2 * t.bins) + rng.integers(0, 2, (n, self.num_ops))  # flip: the second draw == 1
        idx += 2 * self.magnitude
        return AutoParams(ops, t.mag[idx]), t, idx

    def __repr__(self):
        return f"RandAugment(num_ops={self.num_ops}, magnitude={self.magnitude}, " \
               f"num_magnitude_bins={self.num_magnitude_bins})"


class TrivialAugmentWide(_Policy):
    """TrivialAugmentWide (Müller & Hutter 2021) as torchvision's, with per-sample draws: one
    op per sample, uniform over 14, at a uniform magnitude bin, negated with probability 1/2
    for signed ops.

    Args:
        num_magnitude_bins: >= 1.
        seed: seeds the policy's generator.

    Example::

        >>> import numpy as np, gpuaug
        >>> ta = gpuaug.TrivialAugmentWide(seed=0)
        >>> _ = ta(np.zeros((3, 8, 8, 3), np.uint8)); ta.last_params.ops.shape
        (3, 1)
    """

    def __init__(self, num_magnitude_bins=31, *, interpolation="nearest", seed=None):
        self.num_magnitude_bins = _int_arg("num_magnitude_bins", num_magnitude_bins, 1)
        super().__init__(seed, interpolation)

    def _draw_idx(self, rng, n, h, w):
        if self.num_magnitude_bins > _TABLE_MAX_BINS:
            space = _space("trivial", self.num_magnitude_bins, h, w)
            ops = rng.integers(0, len(space), (n, 1))
            bins = rng.integers(0, self.num_magnitude_bins, (n, 1))
            flip = rng.integers(0, 2, (n, 1)) == 1
            return AutoParams(ops, _magnitudes(space, ops, bins, flip), {"bins": bins}), None, None
        t = _table("trivial", self.num_magnitude_bins, h, w, self.interpolation == "bilinear")
        ops = rng.integers(0, len(t.ids), (n, 1))
        bins = rng.integers(0, self.num_magnitude_bins, (n, 1))
        idx = ops * (2 * t.bins) + rng.integers(0, 2, (n, 1))  # flip: the third draw == 1
        idx += 2 * bins
        return AutoParams(ops, t.mag[idx], {"bins": bins}), t, idx

    def __repr__(self):
        return f"TrivialAugmentWide(num_magnitude_bins={self.num_magnitude_bins})"


class AutoAugment(_Policy):
    """AutoAugment (Cubuk et al. 2018) with torchvision's learned sub-policies, per sample:
    each sample picks one of the 25 sub-policies and applies each of its two ops with the
    op's probability, at the listed magnitude bin of 10, negated with probability 1/2.

    Args:
        policy: "imagenet", "cifar10" or "svhn" (or torchvision's AutoAugmentPolicy enum).
        seed: seeds the policy's generator.

    Example::

        >>> import numpy as np, gpuaug
        >>> aa = gpuaug.AutoAugment("cifar10", seed=0)
        >>> aa(np.zeros((2, 8, 8, 3), np.uint8)).shape
        (2, 8, 8, 3)
    """

    num_steps = 2

    def __init__(self, policy="imagenet", *, interpolation="nearest", seed=None):
        name = getattr(policy, "value", policy)
        if not isinstance(name, str) or name.lower() not in _AA:
            raise ValueError(f"policy: got {policy!r}; expected one of {', '.join(map(repr, _AA))}")
        self.policy = name.lower()
        table = _AA[self.policy]
        self._ops = np.array([[OP_ID[o] for o, _, _ in sp] for sp in table])
        self._probs = np.array([[p for _, p, _ in sp] for sp in table])
        self._bins = np.array([[-1 if m is None else m for _, _, m in sp] for sp in table])
        super().__init__(seed, interpolation)
        # (op, bin) of each sub-policy op in the tables' index ((op * 10 + bin) * 2 + flip)
        self._base = (self._ops * 10 + np.maximum(self._bins, 0)) * 2

    def _draw_idx(self, rng, n, h, w):
        t = _table("auto", 10, h, w, self.interpolation == "bilinear")
        pid = rng.integers(0, len(self._ops), n)
        probs = rng.random((n, 2))
        signs = rng.integers(0, 2, (n, 2))
        applied = probs <= self._probs[pid]
        # a skipped op is Identity with magnitude 0: the tables' entry 0
        idx = np.where(applied, self._base[pid] + (signs == 0), 0)
        ops = np.where(applied, self._ops[pid], 0)
        return AutoParams(ops, t.mag[idx], {"policy_ids": pid, "probs": probs}), t, idx

    def __repr__(self):
        return f"AutoAugment(policy={self.policy!r})"


def _augmix_space(num_bins, h, w, all_ops):
    """torchvision's AugMix._augmentation_space (op id -> (magnitudes, signed)), in its order."""
    sp = {1: (_linspace(0.0, 0.3, num_bins), True), 2: (_linspace(0.0, 0.3, num_bins), True),
          3: (_linspace(0.0, w / 3.0, num_bins), True), 4: (_linspace(0.0, h / 3.0, num_bins), True),
          5: (_linspace(0.0, 30.0, num_bins), True), 10: (_posterize_bits(num_bins, 4, top=4), False),
          11: (_linspace(255.0, 0.0, num_bins), False), 12: (None, False), 13: (None, False)}
    if all_ops:
        sp.update({k: (_linspace(0.0, 0.9, num_bins), True) for k in (6, 7, 8, 9)})
    return sp


class AugMix(_Policy):
    """AugMix (Hendrycks et al. 2020) as torchvision's, with per-sample draws.

    Per sample: ``mixture_width`` chains of ``chain_depth`` ops (or 1 to 3, drawn per sample
    and chain, when ``chain_depth`` <= 0) from torchvision's AugMix op set, magnitudes at a
    uniform bin below ``severity`` of 10 (negated with probability 1/2 for signed ops); then
    ``out = trunc(m0 x + sum_i w_i chain_i(x))`` in float32 with ``(m0, m1) ~ Dirichlet(alpha,
    alpha)`` and ``w = m1 Dirichlet(alpha, ..., alpha)``. Geometric ops are bilinear by
    default, as torchvision's AugMix. ``last_params.ops`` is (N, width * depth), chain by
    chain; ``extra["weights"]`` (N, 1 + width) the mixing weights.

    Args:
        severity: in [1, 10].
        mixture_width: chains per sample, >= 1.
        chain_depth: ops per chain (> 0), or <= 0 for 1 to 3 per sample and chain.
        alpha: the Dirichlet parameter, > 0.
        all_ops: include Brightness, Color, Contrast and Sharpness.
        interpolation: "bilinear" (default) or "nearest".
        seed: seeds the policy's generator.

    Example::

        >>> import numpy as np, gpuaug
        >>> am = gpuaug.AugMix(seed=0)
        >>> am(np.zeros((2, 16, 16, 3), np.uint8)).shape, am.last_params.ops.shape
        ((2, 16, 16, 3), (2, 9))
    """

    def __init__(self, severity=3, mixture_width=3, chain_depth=-1, alpha=1.0, all_ops=True, *,
                 interpolation="bilinear", seed=None):
        self.severity = _int_arg("severity", severity, 1, 11)
        self.mixture_width = _int_arg("mixture_width", mixture_width, 1)
        if isinstance(chain_depth, (bool, np.bool_)) or not isinstance(chain_depth, (int, np.integer)):
            raise TypeError(f"chain_depth: got {chain_depth!r}; expected an int (<= 0: 1 to 3 per chain)")
        self.chain_depth = int(chain_depth)
        try:
            self.alpha = float(alpha)
        except (TypeError, ValueError):
            raise TypeError(f"alpha: got {alpha!r}; expected a number > 0") from None
        if not np.isfinite(self.alpha) or self.alpha <= 0:
            raise ValueError(f"alpha: got {alpha!r}; expected a finite number > 0")
        self.all_ops = bool(all_ops)
        self._depth = self.chain_depth if self.chain_depth > 0 else 3
        self.num_steps = self.mixture_width * self._depth
        super().__init__(seed, interpolation)

    def _draw_idx(self, rng, n, h, w):
        t = _table("augmix_all" if self.all_ops else "augmix", 10, h, w, self.interpolation == "bilinear")
        ids = t.ids
        k, d = self.mixture_width, self._depth
        m = rng.dirichlet([self.alpha] * 2, n) if n else np.zeros((0, 2))
        cw = (rng.dirichlet([self.alpha] * k, n) if n else np.zeros((0, k))) * m[:, 1:2]
        depth = np.full((n, k), d) if self.chain_depth > 0 else rng.integers(1, 4, (n, k))
        ops = ids[rng.integers(0, len(ids), (n, k, d))]
        idx = ops * (2 * t.bins) + 2 * rng.integers(0, self.severity, (n, k, d))
        idx += rng.integers(0, 2, (n, k, d))  # flip: == 1
        used = np.arange(d)[None, None, :] < depth[..., None]
        # an unused chain slot is Identity with magnitude 0: the tables' entry 0
        idx = np.where(used, idx, 0).reshape(n, k * d)
        ops = np.where(used, ops, 0).reshape(n, k * d)
        weights = np.concatenate([m[:, :1], cw], axis=1)
        return AutoParams(ops, t.mag[idx], {"weights": weights, "depth": depth}), t, idx

    def _apply(self, x, params, out, stream, fresh=None):
        ops = np.asarray(params.ops)
        mags = np.asarray(params.magnitudes)
        x = _as_input(x)
        fresh = fresh or self._recall(x, params)
        if "weights" not in params.extra:
            raise ValueError("params: got no extra['weights']; expected AugMix parameters (e.g. last_params)")
        weights = np.asarray(params.extra["weights"], np.float32)
        k = weights.shape[1] - 1
        single = getattr(x, "ndim", 0) == 3
        xb = x[None] if single else x
        n = xb.shape[0]
        if ops.shape[0] != n or ops.shape[1] % max(k, 1) or weights.shape[0] != n:
            raise ValueError(f"params: got ops of shape {ops.shape} and weights of shape {weights.shape}; "
                             f"expected (N, width * depth) and (N, 1 + width) with N = {n}")
        d = ops.shape[1] // k
        if not isinstance(xb, np.ndarray) and d <= FUSED_MAX_STEPS:
            p = AutoParams(ops, mags)
            if xb.ndim != 4 or xb.dtype != np.uint8 or xb.shape[3] not in (1, 3):
                raise ValueError(f"x: got {xb.dtype} array of shape {xb.shape}; expected uint8 (N, H, W, C) NHWC "
                                 "with C = 1 or 3")
            if fresh is not None:  # this call's own draw: rows gathered from the policy's table
                rows = fresh[0].rows.take(fresh[1].T, axis=0)
            else:
                if ops.size and (ops.min() < 0 or ops.max() >= len(OP_NAMES)):
                    raise ValueError(f"params.ops: got values in [{ops.min()}, {ops.max()}]; expected op ids in "
                                     f"[0, {len(OP_NAMES)})")
                rows = step_rows(p.ops.T.ravel(), p.magnitudes.T.ravel(), xb.shape[1], xb.shape[2],
                                 self.interpolation == "bilinear").reshape(k * d, n, _P)
            y = _augmix_cuda(xb, rows, k, d, weights, None if single else out, stream,
                             ops if ops.dtype.kind in "iu" else None)
            return y[0] if single else y
        xp = np if isinstance(xb, np.ndarray) else __import__("cupy")
        if xp is np:
            wt = weights
        else:
            from gpuaug._stream import on_stream
            from gpuaug.kernels._cuda import upload

            with on_stream(stream):
                (wt,) = upload(np.ascontiguousarray(weights))
        w4 = lambda j: wt[:, j].reshape(n, 1, 1, 1)  # noqa: E731
        ctx = _nullctx() if xp is np else __import__("gpuaug._stream", fromlist=["on_stream"]).on_stream(stream)
        with ctx:
            mix = w4(0) * xb.astype(xp.float32)
            for i in range(k):
                aug = apply_ops(xb, AutoParams(ops[:, i * d:(i + 1) * d], mags[:, i * d:(i + 1) * d]),
                                stream=stream, interpolation=self.interpolation)
                mix = mix + w4(1 + i) * aug.astype(xp.float32)
            y = xp.clip(mix, 0, 255).astype(xp.uint8)  # torchvision's cast truncates
            if out is not None:
                out[...] = y[0] if single else y
                return out
        return y[0] if single else y

    def plan(self):
        """The statistics launches of the chains' reduction steps, then one launch that evaluates
        every chain per pixel and mixes (chains deeper than 4: chain by chain, mixed by CuPy ops)."""
        d = self._depth
        return [f"chain {i}: [stats<j> + equalize_lut if drawn, j < {d}]" for i in range(self.mixture_width)] \
            + [f"gpuaug_augmix_fused<C, {d}>: m0 x + sum_i w_i chain_i(x) in float32, truncated to uint8"]

    def __repr__(self):
        return (f"AugMix(severity={self.severity}, mixture_width={self.mixture_width}, "
                f"chain_depth={self.chain_depth}, alpha={self.alpha}, all_ops={self.all_ops})")


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
