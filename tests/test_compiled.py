"""gpuaug._compiled: the host parameter checks compiled by Numba (issue 13) give what the NumPy
formulas give, bit for bit, and refuse what they refuse (per_sample's own fast-path test,
tests/test_host_params.py, compares the whole path with the general one)."""
import math
import sys

import numpy as np
import pytest

from gpuaug import _compiled
from gpuaug._params import closed_range

MAX = sys.float_info.max
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, math.nextafter(0.0, 1.0), math.nextafter(1.0, 2.0), MAX, -MAX,
         math.inf, -math.inf, math.nan, 2.0 ** 53 + 1, -1e-300]


def numpy_floats_in(src, lo, hi):
    arr = src.astype(np.float64)
    return arr, bool(np.all((arr >= lo) & (arr <= hi)))


def float_sources(rng):
    yield np.array(EDGES)
    with np.errstate(over="ignore"):
        yield np.array(EDGES, np.float32)
    yield rng.uniform(-3, 3, 64)
    yield rng.uniform(-3, 3, (64, 2))[:, 1]         # a strided column
    yield rng.uniform(-3, 3, (8, 3, 4))             # several dimensions
    yield rng.uniform(-3, 3, (4, 8, 3)).transpose(1, 0, 2)  # several, not contiguous
    yield rng.integers(-5, 6, 17)
    yield rng.integers(0, 255, 17).astype(np.uint8)
    yield np.array([2 ** 63 - 1, -2 ** 63], np.int64)  # rounded by the conversion, as astype does
    yield np.array([2 ** 64 - 1], np.uint64)
    yield rng.random(9) < 0.5
    yield np.zeros(0)


@pytest.mark.parametrize("bounds", [(None, None, False), (0, None, False), (0, None, True), (None, 1, False),
                                    (-1.5, 2, False), (0.0, 1.0, True), (2 ** 53, None, False)])
@pytest.mark.parametrize("compiled", [True, False], ids=["njit", "python"])
def test_converted_in_floats_equal_the_numpy_checks(bounds, compiled):
    lo, hi = closed_range(*bounds)
    f = _compiled.converted_in if compiled else _compiled.converted_in.py_func
    for src in float_sources(np.random.default_rng(0)):
        out = np.full(src.shape, 7.0)
        ok = f(src, out, lo, hi)
        want, want_ok = numpy_floats_in(src, lo, hi)
        assert ok == want_ok, (src, bounds)
        np.testing.assert_array_equal(out.view(np.uint64), want.view(np.uint64))  # bits: -0.0, NaN


@pytest.mark.parametrize("bounds", [(0, None, False), (0, None, True), (None, 3, False),
                                    (-2, 2, True), (2 ** 63, None, False), (None, -2 ** 64, False)])
def test_converted_in_ints_equal_the_numpy_checks(bounds):
    low, high, low_open = bounds
    got_bounds = _compiled.int_bounds(low, high, low_open)
    rng = np.random.default_rng(1)
    sources = [rng.integers(-5, 6, 40), rng.integers(-5, 6, 40).astype(np.int32),
               rng.integers(0, 6, 40).astype(np.uint32), np.array([2 ** 63 - 1, -2 ** 63]),
               np.array([2 ** 32 - 1], np.uint32), rng.integers(-5, 6, (40, 3))[:, 2], np.zeros(0, np.int16),
               rng.integers(-5, 6, (5, 2, 4)), rng.integers(-5, 6, (2, 5, 4)).transpose(1, 0, 2)]
    for src in sources:
        a = src.astype(np.int64)
        below = (a <= low if low_open else a < low) if low is not None else np.zeros(a.shape, bool)
        above = a > high if high is not None else np.zeros(a.shape, bool)
        want_ok = not (below.any() or above.any())
        if got_bounds is None:  # nothing can pass: the NumPy path says so
            assert not want_ok or src.size == 0
            continue
        out = np.empty(src.shape, np.int64)
        assert _compiled.converted_in(src, out, *got_bounds) == want_ok, (src, bounds)
        np.testing.assert_array_equal(out, a)


def test_int_bounds_leave_other_types_to_numpy():
    assert _compiled.int_bounds(0.5, None, False) is None
    assert _compiled.int_bounds(None, np.int64(3), False) is None
    assert _compiled.int_bounds(None, None, False) is None  # astype alone
    assert _compiled.int_bounds(None, 2 ** 70, False) == (_compiled.I64_MIN, _compiled.I64_MAX)
    assert _compiled.int_bounds(-2 ** 70, 2 ** 70, False) == (_compiled.I64_MIN, _compiled.I64_MAX)
    assert _compiled.int_bounds(4, 9, True) == (5, 9)


def test_compiled_on_first_call_not_at_import():
    import subprocess

    code = ("import sys, numpy as np, gpuaug, gpuaug._compiled as c; "
            "assert 'numba' not in sys.modules; "
            "out = np.empty(3); assert c.converted_in(np.arange(3.0), out, 0.0, 2.0); "
            "assert 'numba' in sys.modules; print('ok')")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert got.stdout.strip() == "ok", got.stderr


def test_normalized_rows_sum_as_numpy_does():
    """Each row's sum is NumPy's pairwise sum of its k taps (np.add.reduce of the 1-D row) for
    every k of 1..255 (the block, one-split and two-split cases), bit for bit; past k, zeros."""
    from gpuaug.ops._launch import normalized_rows
    rng = np.random.default_rng(11)
    k = np.r_[np.arange(1, 256), rng.integers(1, 256, 200)]
    n, kmax = k.shape[0], int(k.max())
    w = np.exp(rng.uniform(-30, 0, (n, kmax))) * rng.choice([1.0, 1e-5, 1e5], (n, 1))
    got = normalized_rows(w, k, np.full((n, 1 + kmax), np.nan))
    for i in range(n):
        want = w[i, :k[i]] / np.add.reduce(w[i, :k[i]])
        assert got[i, 0] == k[i]
        assert np.array_equal(got[i, 1:1 + k[i]].view(np.uint64), want.view(np.uint64)), k[i]
        assert not got[i, 1 + k[i]:].any()
