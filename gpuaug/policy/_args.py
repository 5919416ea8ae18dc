"""Argument checks for the transforms: ranges, probabilities, sizes.

Every error names the argument, the value and what is accepted (STYLE.md). Ranges follow
torchvision's conventions (``_check_input``, ``_setup_angle``): one number ``v`` means a
symmetric range about a centre, a pair ``(lo, hi)`` is taken as given.
"""
from __future__ import annotations

import numbers

import numpy as np

from gpuaug._util import check_choice
from gpuaug._util import check_flag as flag  # noqa: F401  (the transforms' A.flag)

DTYPES = ("uint8", "float16", "float32")
LAYOUTS = ("NHWC", "NCHW")
INTERPOLATIONS = ("bilinear", "nearest")
#: Angles (degrees, shear) beyond this many degrees are refused: the samplers' range widths
#: and the matrices' trigonometry overflow long before float64 runs out (1e308 gave NaNs).
ANGLE_LIMIT = 1e6
#: Output sides: the kernels index within one image with 32-bit integers.
MAX_SIDE = 2 ** 31 - 1


def _show(v):
    a = np.asarray(v, dtype=object) if not isinstance(v, (int, float)) else v
    return repr(v) if np.size(a) <= 8 else f"a sequence of {np.size(a)} values"


def is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def number(name, v, *, low=None, high=None, low_open=False):
    if not is_number(v):
        raise TypeError(f"{name}: got {_show(v)}; expected a finite number")
    if not np.isfinite(v):
        raise ValueError(f"{name}: got {v!r}; expected a finite number (no NaN or inf)")
    v = float(v)
    if low is not None and (v <= low if low_open else v < low):
        raise ValueError(f"{name}: got {v}; expected a number {'>' if low_open else '>='} {low}")
    if high is not None and v > high:
        raise ValueError(f"{name}: got {v}; expected a number <= {high}")
    return v


def prob(name, p):
    """A probability in [0, 1]."""
    if not is_number(p) or not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"{name}: got {_show(p)}; expected a probability in [0, 1]")
    return float(p)


def numbers_seq(name, v, lengths):
    """A sequence of finite numbers whose length is one of ``lengths``, as a tuple of floats."""
    if is_number(v) or isinstance(v, (str, bytes)):
        raise TypeError(f"{name}: got {_show(v)}; expected a sequence of {' or '.join(map(str, lengths))} numbers")
    try:
        t = tuple(v)
    except TypeError:
        raise TypeError(f"{name}: got {_show(v)}; expected a sequence of "
                        f"{' or '.join(map(str, lengths))} numbers") from None
    if len(t) not in lengths or not all(is_number(e) and np.isfinite(e) for e in t):
        raise ValueError(f"{name}: got {_show(v)}; expected a sequence of {' or '.join(map(str, lengths))} "
                         "finite numbers")
    return tuple(float(e) for e in t)


def sym_range(name, v, *, center=0.0, low=None, high=None, allow_none=True):
    """torchvision's ranges: a number ``d >= 0`` -> ``(center - d, center + d)`` (clipped at
    ``low``), a pair ``(lo, hi)`` with ``lo <= hi`` within [low, high]. None (when allowed) stays None."""
    if v is None:
        if allow_none:
            return None
        raise TypeError(f"{name}: got None; expected a number or a pair (min, max)")
    if is_number(v):
        d = number(name, v, low=0.0)
        lo, hi = center - d, center + d
        if low is not None:
            lo = max(lo, low)
        if high is not None and hi > high:
            raise ValueError(f"{name}: got {v}; expected at most {high - center}")
        return lo, hi
    lo, hi = numbers_seq(name, v, (2,))
    if lo > hi or (low is not None and lo < low) or (high is not None and hi > high):
        bounds = f" within [{low}, {high}]" if low is not None or high is not None else ""
        raise ValueError(f"{name}: got {_show(v)}; expected a pair (min, max) with min <= max{bounds}")
    return lo, hi


def size(name, v):
    """(h, w) from an int or a pair of ints, > 0."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name}: got {v!r}; expected an int or a pair (height, width) of ints")
    try:
        t = (v, v) if isinstance(v, numbers.Integral) else tuple(v)
    except TypeError:
        raise TypeError(f"{name}: got {_show(v)}; expected an int or a pair (height, width) of ints") from None
    if len(t) == 1:
        t = (t[0], t[0])
    if len(t) != 2 or not all(isinstance(e, numbers.Integral) and not isinstance(e, bool) for e in t):
        raise ValueError(f"{name}: got {_show(v)}; expected an int or a pair (height, width) of ints")
    if t[0] <= 0 or t[1] <= 0:
        raise ValueError(f"{name}: got {_show(v)}; expected positive sizes")
    if t[0] > MAX_SIDE or t[1] > MAX_SIDE:
        raise ValueError(f"{name}: got {_show(v)}; expected sizes up to 2**31 - 1 (the kernels index an "
                         "image with 32-bit integers)")
    return int(t[0]), int(t[1])


def per_channel(name, v):
    """A number or a sequence of 1..4 numbers (one per channel), as a tuple of floats."""
    if is_number(v):
        return (number(name, v),)
    t = numbers_seq(name, v, (1, 2, 3, 4))
    return t


def channels_of(name, t, c):
    """``t`` (per_channel's tuple) broadcast to ``c`` channels."""
    if len(t) == 1:
        return np.full(c, t[0])
    if len(t) != c:
        raise ValueError(f"{name}: got {len(t)} values; the images have {c} channels (give 1 or {c})")
    return np.asarray(t, np.float64)


def dtype(name, v, allowed=DTYPES):
    try:
        d = np.dtype(v)
    except TypeError:
        d = None
    if d is None or d.name not in allowed:
        raise ValueError(f"{name}: got {v!r}; expected one of {', '.join(allowed)}")
    return d.name


def layout(name, v):
    return check_choice(name, v, LAYOUTS)


def interpolation(name, v):
    return check_choice(name, v, INTERPOLATIONS)
