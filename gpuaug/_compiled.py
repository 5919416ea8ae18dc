"""Host parameter code compiled by Numba: per-sample checks and parameter rows in one call.

A call with per-sample host values (``gpuaug.erase(x, boxes, values)``) checks them and packs
the kernel's parameter rows on the host before its launch. Done with NumPy, that is one call
per step (a conversion, two comparisons, a count, a reduction per bound, a column write...),
each 0.5-2 us on a 256-sample batch, 20-45 us per op call in all: more than the kernel itself
for the light ops. The functions here do the same work in one loop, compiled by
``numba.njit`` (nogil) on their first call, never at import, kept in Numba's on-disk cache as
the CPU twins are (``GPUAUG_NUMBA_CACHE``, see :func:`gpuaug.kernels.numba._dual.disk_cache`).

Each returns whether every value passed; the callers then use the rows, or else take the
general path, whose checks and messages are the contract (the compiled checks are never
looser than it: a value they pass, it passes, with the same result bit for bit; the tests
compare both on random and edge values). Only exact arithmetic runs compiled, here and in
the ops' own row loops (conversions, comparisons, +, -, *, /, floor, nextafter): transcendental
functions stay with NumPy, whose results may differ from the C library's in the last bit.
"""
from __future__ import annotations

import functools

import numpy as np

#: int64 bounds meaning "no bound" for :func:`int_bounds`
I64_MIN, I64_MAX = -(2 ** 63), 2 ** 63 - 1

#: dtype characters the compiled checks take (bool, integers up to 64 bits, float32, float64;
#: not float16, long double or complex, which the NumPy path converts)
CHARS = frozenset("?bBhHiIlLqQfd")
#: the integer ones among them
INTS = frozenset("bBhHiIlLqQ")


def compiled(func):
    """``func`` (plain Python on NumPy arrays and numbers) compiled by ``numba.njit`` on its
    first call (nogil, Numba's on-disk cache per GPUAUG_NUMBA_CACHE); one compile per
    argument type signature, as Numba does."""
    box = []

    def make():
        import numba

        from gpuaug.kernels.numba._dual import disk_cache

        box.append(numba.njit(nogil=True, cache=disk_cache())(func))
        return box[0]

    @functools.wraps(func)
    def call(*args):
        return (box[0] if box else make())(*args)

    call.py_func = func  # the Python function itself (tests run it uncompiled too)
    return call


@compiled
def converted_in(src, out, lo, hi):
    """``out[...] = src`` converted to ``out``'s dtype (float64, or int64 for integer ``src``:
    signed, or unsigned up to 32 bits), ``src`` of any shape and ``out`` a new C-contiguous
    array of its shape; whether every converted value is within ``[lo, hi]`` (NaN is not: it
    fails both comparisons). With :func:`gpuaug._params.closed_range`'s bounds (floats) or
    :func:`int_bounds` (ints) this is per_sample's check of finite values in range."""
    s = src.ravel()  # a view when src is C-contiguous, else a copy (read only)
    o = out.ravel()  # a view: out is C-contiguous
    ok = True
    for i in range(s.shape[0]):  # no branch in the loop: it vectorises
        o[i] = s[i]
        v = o[i]
        ok &= (v >= lo) & (v <= hi)
    return ok


@compiled
def rows_in(values, lo, hi, out):
    """``out[:, j] = values[j]`` for a tuple of k (n,) float64 arrays (``out`` (n, >= k)); whether
    every value of column ``j`` is within ``[lo[j], hi[j]]`` (host_rows' check)."""
    ok = True
    for j in range(len(values)):
        v = values[j]
        a, b = lo[j], hi[j]
        for i in range(v.shape[0]):
            x = v[i]
            out[i, j] = x
            ok &= (x >= a) & (x <= b)
    return ok


def int_bounds(low, high, low_open):
    """(lo, hi) int64 bounds for :func:`converted_in` equal to per_sample's integer checks
    (``v >= low``, ``v > low`` when ``low_open``, ``v <= high``), or None when there is no bound
    or a bound is not an int (the NumPy path converts and compares those)."""
    for b in (low, high):
        if b is not None and type(b) is not int:
            return None
    if low is None and high is None:  # nothing to check: the conversion alone is cheaper
        return None
    lo = I64_MIN if low is None else low + 1 if low_open else low
    hi = I64_MAX if high is None else high
    if lo > I64_MAX or hi < I64_MIN:  # nothing passes: the NumPy path says so
        return None
    return max(lo, I64_MIN), min(hi, I64_MAX)


def plain(value, n, shape=()):
    """``value`` itself when it is a NumPy array of shape ``(n,) + shape`` of a dtype the compiled
    loops read (:data:`CHARS`): what an op's compiled rows may take as it is, checking it there
    as :func:`gpuaug._params.per_sample` would; None for anything else (the general path)."""
    if type(value) is np.ndarray and value.dtype.char in CHARS and value.shape == ((n,) + shape if shape else (n,)):
        return value
    return None

