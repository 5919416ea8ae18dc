"""Randomness for gpuaug: every random draw the library makes happens here.

Samplers take an explicit :class:`numpy.random.Generator` (make one with
:func:`generator` from a seed) and the number of samples ``n``, and return per-sample
parameters as NumPy arrays of length ``n``: the same seed gives the same parameters on
every machine and backend, and a call's parameters can be kept and replayed (that is
what :class:`gpuaug.Compose` does with ``last_params``). Kernels never draw random numbers;
the noise ops take a seed drawn here (:func:`seed64`) and run a counter-based generator.

Draws are vectorised over the batch (one NumPy call per quantity, never a Python loop
over samples), in a fixed order, so the stream of numbers a sampler consumes depends only
on ``n`` and its arguments.

Sizes are per sample: ``sizes`` is an ``(n, 2)`` integer array of ``(height, width)``.

    >>> import numpy as np
    >>> from gpuaug import random as R
    >>> rng = R.generator(0)
    >>> R.bernoulli(rng, 0.5, 4)
    array([False,  True,  True,  True])
    >>> boxes = R.resized_crop_boxes(R.generator(1), np.array([[240, 320]] * 2))
    >>> boxes.shape, boxes.dtype
    ((2, 4), dtype('int64'))

Everything here is host (NumPy) code.
"""
from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["generator", "bernoulli", "uniform", "integers", "seed64", "affine", "resized_crop_boxes", "resized_crop_draws",
           "perspective_corners", "erasing_boxes", "crop_offsets", "permutations", "philox4x32_10", "affine_draws",
           "philox_key", "philox_uniforms"]


def generator(seed=None) -> np.random.Generator:
    """A NumPy Generator from ``seed``: None (fresh entropy from the OS), an int >= 0, a
    :class:`numpy.random.SeedSequence`, or a Generator (returned as it is, so draws advance it).

    Example::

        >>> from gpuaug import random as R
        >>> int(R.generator(7).integers(100)) == int(R.generator(7).integers(100))
        True
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed: got {seed!r}; expected None, an int >= 0, a numpy.random.SeedSequence "
                        "or a numpy.random.Generator")
    if seed < 0:
        raise ValueError(f"seed: got {seed}; expected an int >= 0")
    return np.random.default_rng(int(seed))


# -- argument checks (every error names the argument, the value and what is accepted) ---------

def _rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng: got {type(rng).__name__} {rng!r:.40}; expected a numpy.random.Generator "
                        "(make one with gpuaug.random.generator(seed))")
    return rng


def _count(n, name="n"):
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{name}: got {n!r}; expected an int >= 0")
    if n < 0:
        raise ValueError(f"{name}: got {n}; expected an int >= 0")
    return int(n)


def _show(a):
    a = np.asarray(a)
    return repr(a.tolist()) if a.size <= 8 else f"an array of shape {a.shape}"


def _values(name, v, *, low=None, high=None, low_open=False):
    """Finite numbers (a scalar or an array) within [low, high] as float64."""
    try:
        a = np.asarray(v, np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: got {v!r:.60}; expected numbers") from None
    # (ndarray methods, not the np.all / np.any wrappers: ~1 us less each; integers are finite)
    if not (type(v) is int or (type(v) is np.ndarray and v.dtype.kind in "biu")) and not np.isfinite(a).all():
        raise ValueError(f"{name}: got {_show(v)}; expected finite numbers (no NaN or inf)")
    if low is not None and (a <= low if low_open else a < low).any():
        raise ValueError(f"{name}: got {_show(v)}; expected values {'>' if low_open else '>='} {low}")
    if high is not None and (a > high).any():
        raise ValueError(f"{name}: got {_show(v)}; expected values <= {high}")
    return a


def _range(name, r, *, low=None, high=None, low_open=False):
    """A (min, max) pair of finite numbers with min <= max within the bounds."""
    a = _values(name, r, low=low, high=high, low_open=low_open)
    if a.shape != (2,) or a[0] > a[1]:
        raise ValueError(f"{name}: got {_show(r)}; expected a pair (min, max) with min <= max")
    return float(a[0]), float(a[1])


def _plain(rng, n):
    """The common call (a Generator and an int ``n``), which the fast paths below take."""
    return type(rng) is np.random.Generator and type(n) is int and n >= 0


def bernoulli(rng, p, n) -> np.ndarray:
    """``n`` bools, each True with probability ``p`` (one uniform draw per sample)."""
    if type(p) is float and 0.0 <= p <= 1.0 and _plain(rng, n):
        # a plain float in range: the checks below cost ~8 us a call (Compose draws one per flip)
        return rng.random(n) < p
    _values("p", p, low=0.0, high=1.0)
    return _rng(rng).random(_count(n)) < p


def uniform(rng, low, high, n) -> np.ndarray:
    """``n`` floats uniform in ``[low, high)`` (``low`` and ``high`` numbers or (n,) arrays)."""
    if (type(low) is float and type(high) is float and low <= high and math.isfinite(low)
            and math.isfinite(high) and _plain(rng, n)):
        # plain floats: the same arithmetic as below (high - low in float64) without the checks
        return low + (high - low) * rng.random(n)
    if np.any(_values("low", low) > _values("high", high)):
        raise ValueError(f"low, high: got low={_show(low)} and high={_show(high)}; expected low <= high")
    _rng(rng), _count(n)
    return low + (np.asarray(high, np.float64) - low) * rng.random(n)


def integers(rng, low, high, n) -> np.ndarray:
    """``n`` ints uniform in ``[low, high)``; bounds may be per-sample (n,) arrays.

    Drawn as ``low + floor(u * (high - low))`` from one uniform per sample, so per-sample
    bounds cost one vectorised draw."""
    if (_values("low", low) > _values("high", high)).any():
        raise ValueError(f"low, high: got low={_show(low)} and high={_show(high)}; expected low <= high")
    _rng(rng), _count(n)
    low = np.asarray(low, np.int64)
    span = np.asarray(high, np.int64) - low
    return low + np.minimum(np.floor(rng.random(n) * span).astype(np.int64), np.maximum(span - 1, 0))


def _integer_rows(rng, low, high):
    """:func:`integers` for k quantities at once, without the checks (the callers' bounds
    satisfy low <= high): ``low``, ``high`` (k, n) int64 -> (k, n) int64, row j drawn from
    the j-th n uniforms of one ``rng.random((k, n))``, the numbers k calls of integers() in a
    row would take (PCG64 fills an array in order), by the same formula."""
    span = high - low
    u = rng.random(span.shape)
    return low + np.minimum(np.floor(u * span).astype(np.int64), np.maximum(span - 1, 0))


def seed64(rng) -> int:
    """One int in [0, 2**63) to key a counter-based noise generator (gpuaug.gaussian_noise)."""
    return int(_rng(rng).integers(0, 2 ** 63, dtype=np.int64))


def _sizes(sizes, n):
    if (type(sizes) is np.ndarray and sizes.dtype == np.int64 and sizes.ndim == 2 and sizes.shape[1] == 2
            and sizes.shape[0] != 1 and (not sizes.size or sizes.min() > 0)):
        return sizes  # (n, 2) int64 sizes, as Compose passes them (read, never written, here): no copy
    try:
        a = np.asarray(sizes)
    except (TypeError, ValueError):
        a = np.asarray(None)
    if a.dtype.kind not in "iuf" or a.shape[-1:] != (2,) or a.ndim > 2 or np.any(a <= 0) or np.any(a != np.round(a)):
        raise ValueError(f"sizes: got {_show(sizes) if a.dtype != object else repr(sizes)[:60]}; expected "
                         "positive image sizes (height, width), one pair or one per sample (n, 2)")
    s = a.astype(np.int64).reshape(-1, 2)
    if n is not None and s.shape[0] == 1 and n != 1:
        s = np.broadcast_to(s, (n, 2))
    return s


def affine(rng, n, sizes, degrees=(0.0, 0.0), translate=None, scale=None, shear=None) -> dict:
    """torchvision's RandomAffine parameters, one set per sample.

    ``degrees``: (lo, hi); ``translate``: None or (fx, fy), fractions of the width/height:
    ``tx = round(U(-fx w, fx w))`` (whole pixels, as torchvision); ``scale``: None or
    (lo, hi); ``shear``: None or (x_lo, x_hi) or (x_lo, x_hi, y_lo, y_hi) degrees.
    Returns ``angle, tx, ty, scale, shear_x, shear_y`` (n,) float64 arrays. Draws n uniforms
    for each of: angle, tx, ty, scale, shear_x, shear_y (each only when its range is given),
    in that order (as one block)."""
    _rng(rng), _count(n)
    s = _sizes(sizes, n)
    if s.shape[0] not in (1, n):
        raise ValueError(f"sizes: got {s.shape[0]} sizes for n={n} samples; expected 1 or {n}")
    _range("degrees", degrees)
    if translate is not None:
        _values("translate", translate, low=0.0, high=1.0)
    if scale is not None:
        _range("scale", scale, low=0.0, low_open=True)
    if shear is not None and len(shear) not in (2, 4):
        raise ValueError(f"shear: got {shear!r}; expected (x_min, x_max) or (x_min, x_max, y_min, y_max)")
    if shear is not None:
        _range("shear", shear[:2]), len(shear) == 4 and _range("shear", shear[2:])
    return affine_draws(rng, n, s, degrees, translate, scale, shear)


def affine_draws(rng, n, sizes, degrees, translate, scale, shear) -> dict:
    """:func:`affine` without its argument checks, for callers that made them (gpuaug's
    RandomAffine checks its ranges when it is made, Compose its sizes): ``sizes`` an (n, 2)
    int64 array, the ranges as :func:`affine` takes them. The same draws and values; the checks
    cost ~10 us a call, more than the draws."""
    s = sizes
    k = 1 + 2 * (translate is not None) + (scale is not None) + (0 if shear is None else len(shear) // 2)
    u = iter(rng.random((k, n)))
    out = {"angle": degrees[0] + (degrees[1] - degrees[0]) * next(u)}
    if translate is not None:
        if n and s.strides[0] == 0:  # one size (a zero-strided broadcast): the same products as scalars
            mx, my = translate[0] * float(s[0, 1]), translate[1] * float(s[0, 0])
        else:
            mx, my = translate[0] * s[:, 1], translate[1] * s[:, 0]
        out["tx"] = np.rint(mx * (2 * next(u) - 1))
        out["ty"] = np.rint(my * (2 * next(u) - 1))
    else:
        out["tx"] = out["ty"] = np.zeros(n)
    if scale is not None:
        out["scale"] = scale[0] + (scale[1] - scale[0]) * next(u)
    else:  # np.ones(n)'s array without its Python wrapper (~0.5 us)
        out["scale"] = one = np.empty(n)
        one.fill(1.0)
    out["shear_x"] = out["shear_y"] = np.zeros(n)
    if shear is not None:
        out["shear_x"] = shear[0] + (shear[1] - shear[0]) * next(u)
        if len(shear) == 4:
            out["shear_y"] = shear[2] + (shear[3] - shear[2]) * next(u)
    return out


def resized_crop_boxes(rng, sizes, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), attempts=10) -> np.ndarray:
    """torchvision's RandomResizedCrop.get_params for every sample: ``(n, 4)`` int64 boxes
    ``(top, left, height, width)``.

    Up to ``attempts`` tries per sample, all drawn at once: area ``A U(scale)`` and aspect
    ratio ``exp(U(log ratio))`` give ``w = round(sqrt(area ratio))``, ``h = round(sqrt(area /
    ratio))``; the first try that fits the image (``0 < w <= W``, ``0 < h <= H``) wins, placed
    uniformly; samples where none fits take torchvision's fallback (the central crop of the
    ratio nearest the image's). ``round`` is round-half-to-even (Python's, as torchvision).

    Draws, in this order: ``(n, attempts)`` area uniforms (``Generator.uniform``), ``(n,
    attempts)`` log-ratio uniforms, then ``n`` uniforms for the tops and ``n`` for the lefts
    (drawn for every sample, the fallback's too): the same stream whatever the tries give.

        >>> import numpy as np
        >>> from gpuaug import random as R
        >>> b = R.resized_crop_boxes(R.generator(3), [[100, 80]] * 4)
        >>> bool((b[:, 0] + b[:, 2] <= 100).all() and (b[:, 1] + b[:, 3] <= 80).all() and (b >= 0).all())
        True
    """
    _rng(rng), _range("scale", scale, low=0.0, low_open=True), _range("ratio", ratio, low=0.0, low_open=True)
    if _count(attempts, "attempts") == 0:
        raise ValueError("attempts: got 0; expected an int >= 1")
    return resized_crop_draws(rng, _sizes(sizes, None), scale, ratio, attempts)


@functools.lru_cache(maxsize=32)
def _row_starts(n, k):
    """(n,) intp ``arange(n) * k``: flat indices of row starts of an (n, k) array (read-only)."""
    a = np.arange(n, dtype=np.intp) * k
    a.flags.writeable = False
    return a


def resized_crop_draws(rng, sizes, scale, ratio, attempts=10) -> np.ndarray:
    """:func:`resized_crop_boxes` without its argument checks, for callers that made them
    (gpuaug's RandomResizedCrop checks its ranges when it is made, Compose its sizes):
    ``sizes`` an (n, 2) int64 array, ``scale`` and ``ratio`` checked pairs, ``attempts`` >= 1.
    The same draws and boxes (the checks and the per-quantity temporaries cost more than the
    draws: ~100 -> ~40 us for 256 samples on a 2-core VM).

    The tries' arithmetic is elementwise on the (n, attempts) draws, in the formulas' order
    (area = (H W) u, ar = exp(log-ratio), w = rint(sqrt(area ar)), h = rint(sqrt(area / ar))),
    with h and w stacked as one (2, n, attempts) array so that each step is one ufunc; the
    chosen try's (h, w) is one flat ``take``. A batch of one size (Compose's uniform batches
    pass a zero-strided broadcast of one (h, w)) works with scalar bounds: the same values."""
    n = sizes.shape[0]
    ua = rng.uniform(scale[0], scale[1], (n, attempts))
    lr = rng.uniform(math.log(ratio[0]), math.log(ratio[1]), (n, attempts))
    if n and sizes.strides[0] == 0:  # one size: scalar bounds (a broadcast of one row)
        hh, ww = float(sizes[0, 0]), float(sizes[0, 1])
        area = np.multiply(hh * ww, ua, out=ua)
        lim = _pair_column(hh, ww)  # (2, 1) [[H], [W]]
    else:
        hh, ww = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
        area = np.multiply((hh * ww)[:, None], ua, out=ua)
        lim = sizes.T.astype(np.float64)  # (2, n)
    ar = np.exp(lr, out=lr)
    hw = np.empty((2, n, attempts))  # [h; w] of every try
    np.divide(area, ar, out=hw[0])
    np.multiply(area, ar, out=hw[1])
    np.rint(np.sqrt(hw, out=hw), out=hw)
    fits = hw <= lim[:, :, None]
    ok = np.logical_and(fits[0], fits[1], out=fits[0])
    ok &= np.minimum(hw[0], hw[1], out=ar) > 0  # 0 < h and 0 < w (both >= 0)
    idx = ok.argmax(axis=1)
    idx += _row_starts(n, attempts)
    found = ok.ravel().take(idx)
    box = hw.reshape(2, -1).take(idx, axis=1)  # (2, n): the chosen tries' [h; w]
    u = rng.random((2, n))  # the tops' n uniforms, then the lefts' (as two integers() draws)
    allfound = found.all()
    if not allfound:  # torchvision's fallback: the central crop of the ratio nearest the image's
        in_ratio = ww / hh
        lo, hi = min(ratio), max(ratio)
        fw = np.where(in_ratio < lo, ww, np.where(in_ratio > hi, np.rint(hh * hi), ww))
        fh = np.where(in_ratio < lo, np.rint(ww / lo), hh)
        box[0] = np.where(found, box[0], fh)
        box[1] = np.where(found, box[1], fw)
    # integers(rng, 0, H - h + 1, n) and (rng, 0, W - w + 1, n): floor(u span), at most
    # span - 1 (all whole numbers, exact in float64); the fallback: the central (H - h) // 2
    span = lim - box
    span += 1.0
    pos = np.floor(np.multiply(u, span, out=u), out=u)
    span -= 1.0
    np.minimum(pos, span, out=pos)
    if not allfound:
        np.copyto(pos, np.floor_divide(span, 2.0), where=~found)
    out = np.empty((n, 4), np.int64)
    out[:, :2] = pos.T
    out[:, 2:] = box.T
    return out


@functools.lru_cache(maxsize=32)
def _pair_column(a, b):
    """(2, 1) float64 [[a], [b]] (read-only, memoised)."""
    c = np.array([[a], [b]], np.float64)
    c.flags.writeable = False
    return c


def perspective_corners(rng, sizes, distortion_scale=0.5) -> np.ndarray:
    """torchvision's RandomPerspective.get_params for every sample: ``(n, 4, 2)`` float64
    end points ``(x, y)`` of the corners top-left, top-right, bottom-right, bottom-left
    (each moved inwards by up to ``distortion_scale`` of half the size, whole pixels)."""
    _rng(rng), _values("distortion_scale", distortion_scale, low=0.0, high=1.0)
    s = _sizes(sizes, None)
    n = s.shape[0]
    h, w = s[:, 0], s[:, 1]
    bh = (distortion_scale * (h // 2)).astype(np.int64) + 1
    bw = (distortion_scale * (w // 2)).astype(np.int64) + 1
    z = np.zeros_like(h)
    # the corners' (x, y) in draw order: top-left, top-right, bottom-right, bottom-left
    low = np.stack([z, z, w - bw, z, w - bw, h - bh, z, h - bh])
    high = np.stack([bw, bh, w, bh, w, h, bw, h])
    return _integer_rows(rng, low, high).T.reshape(n, 4, 2).astype(np.float64)


def erasing_boxes(rng, sizes, scale=(0.02, 0.33), ratio=(0.3, 3.3), attempts=10) -> np.ndarray:
    """torchvision's RandomErasing.get_params for every sample: ``(n, 4)`` int64 boxes
    ``(top, left, height, width)``; a sample where no try fits gets an empty box (0 x 0).

    A try draws area ``A U(scale)`` and ratio ``exp(U(log ratio))``: ``h = round(sqrt(area
    ratio))``, ``w = round(sqrt(area / ratio))``, which must be smaller than the image."""
    _rng(rng), _range("scale", scale, low=0.0, high=1.0), _range("ratio", ratio, low=0.0, low_open=True)
    if _count(attempts, "attempts") == 0:
        raise ValueError("attempts: got 0; expected an int >= 1")
    s = _sizes(sizes, None)
    n = s.shape[0]
    ua = rng.uniform(scale[0], scale[1], (n, attempts))
    lr = rng.uniform(math.log(ratio[0]), math.log(ratio[1]), (n, attempts))
    # as resized_crop_draws: the tries' [h; w] as one (2, n, attempts) array, one take
    if n and s.strides[0] == 0:
        hh, ww = float(s[0, 0]), float(s[0, 1])
        area, lim = np.multiply(hh * ww, ua, out=ua), _pair_column(hh, ww)
    else:
        hh, ww = s[:, 0].astype(np.float64), s[:, 1].astype(np.float64)
        area, lim = np.multiply((hh * ww)[:, None], ua, out=ua), s.T.astype(np.float64)
    ar = np.exp(lr, out=lr)
    hw = np.empty((2, n, attempts))
    np.multiply(area, ar, out=hw[0])
    np.divide(area, ar, out=hw[1])
    np.rint(np.sqrt(hw, out=hw), out=hw)
    fits = hw < lim[:, :, None]
    ok = np.logical_and(fits[0], fits[1], out=fits[0])
    idx = ok.argmax(axis=1)
    idx += _row_starts(n, attempts)
    box = hw.reshape(2, -1).take(idx, axis=1)
    box *= ok.ravel().take(idx)  # (the tries' sides are finite: x * False is 0)
    box = box.astype(np.int64)
    pos = _integer_rows(rng, np.zeros((2, n), np.int64), s.T - box + 1)
    out = np.empty((n, 4), np.int64)
    out[:, :2] = pos.T
    out[:, 2:] = box.T
    return out


def crop_offsets(rng, sizes, size, padding=(0, 0, 0, 0)) -> np.ndarray:
    """Random crop windows: ``(n, 2)`` int64 ``(top, left)`` of a ``size = (h, w)`` window,
    uniform over the positions inside the image padded by ``padding = (left, top, right,
    bottom)`` (the top-left corner may then be negative)."""
    _rng(rng)
    s = _sizes(sizes, None)
    n = s.shape[0]
    pl, pt, pr, pb = padding
    if np.any(s[:, 0] + pt + pb < size[0]) or np.any(s[:, 1] + pl + pr < size[1]):
        raise ValueError(f"size: got {tuple(size)}; an image (padded by {tuple(padding)}) is smaller: "
                         f"sizes {_show(s)}; expected a window that fits every padded image")
    low, high = np.empty((2, n), np.int64), np.empty((2, n), np.int64)
    low[0], low[1] = -np.asarray(pt), -np.asarray(pl)
    high[0], high[1] = s[:, 0] + pb - size[0] + 1, s[:, 1] + pr - size[1] + 1
    return _integer_rows(rng, low, high).T.copy()


def permutations(rng, n, k) -> np.ndarray:
    """``(n, k)`` int64: a uniformly random permutation of ``range(k)`` per sample."""
    return np.argsort(_rng(rng).random((_count(n), _count(k, "k"))), axis=1)


# -- counter-based draws (Compose's device draws, draws="device") ------------------------------
#
# The CUDA C copy is kernels/philox_core.cuh + kernels/fused_draw.cu; both give the same bits.
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK32, _SH32 = np.uint64(0xFFFFFFFF), np.uint64(32)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 (Salmon et al., SC'11, as in Random123) over NumPy arrays: counter words
    ``c0..c3`` and key words ``k0, k1`` (uint32 values, broadcast together) -> four uint32 arrays.

    Example::

        >>> from gpuaug import random as R
        >>> [hex(int(w)) for w in R.philox4x32_10(0, 0, 0, 0, 0, 0)]  # Random123's known answer
        ['0x6627e8d5', '0xe169c58d', '0xbc57ac4c', '0x9b00dbd8']
    """
    words = (np.asarray(v, np.uint64) & _MASK32 for v in (c0, c1, c2, c3, k0, k1))
    c0, c1, c2, c3, k0, k1 = np.broadcast_arrays(*words)
    c0, c1, c2, c3, k0, k1 = (v.copy() for v in (c0, c1, c2, c3, k0, k1))
    for _ in range(10):
        p0, p1 = _M0 * c0, _M1 * c2  # 32 x 32 -> 64 bits: exact in uint64
        c0, c1, c2, c3 = ((p1 >> _SH32) ^ c1 ^ k0, p1 & _MASK32, (p0 >> _SH32) ^ c3 ^ k1, p0 & _MASK32)
        k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
    return tuple(v.astype(np.uint32) for v in (c0, c1, c2, c3))


def philox_key(seed=None):
    """The two uint32 key words of the counter-based draws from ``seed``: an int >= 0 or a
    SeedSequence (through SeedSequence: nearby seeds give unrelated keys), a Generator (one
    :func:`seed64` draw, which advances it) or None (fresh entropy).

    Example::

        >>> from gpuaug import random as R
        >>> R.philox_key(7) == R.philox_key(7), R.philox_key(7) == R.philox_key(8)
        (True, False)
    """
    if isinstance(seed, np.random.Generator):
        v = seed64(seed)
        return int(v & 0xFFFFFFFF), int(v >> 32)
    if seed is not None and not isinstance(seed, np.random.SeedSequence):
        generator(seed)  # the same checks and errors as every seed
        seed = int(seed)
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    k = ss.generate_state(2, np.uint32)
    return int(k[0]), int(k[1])


def philox_uniforms(key, counter, samples, stream, count):
    """``(len(samples), count)`` float64 uniforms in [0, 1) of the counter-based draws: column
    ``j`` of sample ``s`` is a function of ``(key, counter, s, stream, j)`` alone (not of the
    batch size or of the other samples).

    Uniform ``j`` comes from the Philox block with counter ``(s, stream * 256 + j // 2,
    counter mod 2**32, counter // 2**32)``: its words 0-1 for even ``j``, 2-3 for odd ``j``,
    as 53 bits (``(a >> 5) * 2**26 + (b >> 6)``) times 2**-53, as NumPy's own doubles.
    ``stream`` (< 2**24) numbers the transform of a policy, ``count`` <= 512.

    Example::

        >>> import numpy as np
        >>> from gpuaug import random as R
        >>> u = R.philox_uniforms(R.philox_key(0), 5, np.arange(4), 2, 3)
        >>> u.shape, bool(((u >= 0) & (u < 1)).all())
        ((4, 3), True)
        >>> bool((R.philox_uniforms(R.philox_key(0), 5, np.arange(2, 3), 2, 3) == u[2:3]).all())
        True
    """
    k0, k1 = key
    s = np.asarray(samples, np.uint64)[:, None]
    j = np.arange(_count(count, "count"), dtype=np.uint64)[None, :]
    counter = int(counter)
    w = philox4x32_10(s, np.uint64(int(stream) << 8) + (j >> np.uint64(1)), counter & 0xFFFFFFFF,
                      (counter >> 32) & 0xFFFFFFFF, k0, k1)
    odd = (j & np.uint64(1)).astype(bool)
    a = np.where(odd, w[2], w[0]).astype(np.float64)
    b = np.where(odd, w[3], w[1]).astype(np.float64)
    return (np.floor(a / 32.0) * 67108864.0 + np.floor(b / 64.0)) * (1.0 / 9007199254740992.0)
