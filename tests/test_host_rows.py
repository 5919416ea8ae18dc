"""_params.host_rows: several per-sample NumPy columns checked in one pass must give exactly
what per_sample + column_stack give, and None (the general path, with its errors) for
everything else."""
import sys

import numpy as np
import pytest

from gpuaug._params import RowLimits, column_stack, host_rows, per_sample

LIMITS = ({"low": 0, "high": None, "low_open": False}, {"low": 0.0, "high": 2, "low_open": True},
          {"low": -0.5, "high": 0.5, "low_open": False})
ROWS = RowLimits(*LIMITS)


def general(values, n, tail=None):
    cols = [per_sample(v, n, f"p{j}", **LIMITS[j]) for j, v in enumerate(values)]
    return column_stack(cols + ([tail] if tail is not None else []), n)


@pytest.mark.parametrize("n", [1, 7, 32])
def test_same_matrix_as_per_sample_and_column_stack(n):
    rng = np.random.default_rng(n)
    values = (rng.uniform(0, 3, n), rng.uniform(1e-9, 2, n).astype(np.float32), rng.uniform(-0.5, 0.5, n))
    tail = np.full(n, 255.0)
    for t in (None, tail):
        got = host_rows(values, n, ROWS, t)
        want = general(values, n, t)
        assert got.shape == want.shape and got.dtype == np.float64
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
    # bounds themselves: a closed low and a high are accepted, as per_sample accepts them
    edge = (np.zeros(n), np.full(n, 2.0), np.full(n, -0.5))
    assert np.array_equal(host_rows(edge, n, ROWS), general(edge, n))
    ints = (np.arange(n), np.ones(n, np.int32), np.zeros(n, np.bool_))
    assert np.array_equal(host_rows(ints, n, ROWS), general(ints, n))


@pytest.mark.parametrize("bad", ["below", "open", "above", "nan", "inf"])
def test_values_per_sample_refuses_give_none(bad):
    n = 5
    values = [np.ones(n), np.ones(n), np.zeros(n)]
    col, v = {"below": (0, -1e-300), "open": (1, 0.0), "above": (2, 0.5000001), "nan": (1, np.nan),
              "inf": (0, np.inf)}[bad]
    values[col] = values[col].copy()
    values[col][3] = v
    assert host_rows(tuple(values), n, ROWS) is None
    with pytest.raises(ValueError):
        general(values, n)  # the general path, which the caller then takes, says what is wrong


def test_other_forms_give_none():
    n = 4
    ok = np.ones(n)
    for other in (1.0, [1.0] * n, np.ones(n + 1), np.ones((n, 1)), np.array(["a"] * n), np.ones(n, complex)):
        assert host_rows((other, ok, np.zeros(n)), n, ROWS) is None
    # a bound that is no exact float: left to the general path
    huge = RowLimits({"low": 2 ** 60, "high": None, "low_open": False})
    assert host_rows((ok,), n, huge) is None
    assert len(ROWS) == 3


@pytest.mark.parametrize("low,high,low_open", [(0, None, False), (0.0, None, True), (-0.5, 0.5, False),
                                               (None, 255.0, False), (1e-300, 2, True), (None, None, False),
                                               (-3, -1, True), (float("-inf"), float("inf"), False)])
def test_closed_range_is_per_sample_rule(low, high, low_open):
    """lo <= v <= hi exactly when v is finite and passes per_sample's bounds, for every float64
    value, the bounds' neighbours, zeros of both signs, infinities and NaN included."""
    from gpuaug._params import _host_array, closed_range
    lo, hi = closed_range(low, high, low_open)
    edges = [0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, -5e-324, sys.float_info.max, -sys.float_info.max]
    for b in (low, high):
        if b is not None:
            edges += [float(b), np.nextafter(float(b), np.inf), np.nextafter(float(b), -np.inf)]
    v = np.array(edges + list(np.random.default_rng(0).normal(0, 3, 200)), np.float64)
    want = np.isfinite(v)
    if low is not None:
        want &= ~(v <= low if low_open else v < low)
    if high is not None:
        want &= ~(v > high)
    assert np.array_equal((v >= lo) & (v <= hi), want)
    # per_sample's host fast path: the whole array or None, as the general checks decide
    good = v[want]
    assert np.array_equal(_host_array(good, good.size, (), False, True, low, high, low_open, False), good)
    for e in v[~want]:
        assert _host_array(np.array([e]), 1, (), False, True, low, high, low_open, False) is None
    assert closed_range(2 ** 60, None, False) is None and closed_range(np.float64(1), None, False) is None


def _outcome(f, *args, **kw):
    try:
        r = f(*args, **kw)
        return "ok", r.dtype, r.shape, r.tolist()
    except (TypeError, ValueError) as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "uint16", "uint32", "uint64", "bool",
                                   "float64"])
def test_integer_arrays_take_the_fast_path_with_the_general_paths_results(dtype):
    """per_sample(integer=True) of an integer NumPy array (the int64 copy, one min and one max
    for the range) gives exactly the general path's array or error, for every range form; uint64,
    bools and floats still go the general way."""
    from gpuaug._params import _host_array, _per_sample
    rng = np.random.default_rng(4)
    n = 9
    base = [rng.integers(-5, 6, n), rng.integers(0, 4, (n, 4)), np.arange(n) * 2 ** 40 % 2 ** 62]
    ranges = [(None, None, False), (0, None, False), (0, None, True), (-3, 3, False), (1, 255, False),
              (0.5, 3.5, False), (-2 ** 63, 2 ** 63 - 1, False)]
    for raw in base:
        if np.dtype(dtype).kind == "u":
            raw = np.abs(raw)
        a = raw.astype(dtype)
        shape = a.shape[1:]
        for low, high, low_open in ranges:
            kw = dict(shape=shape, integer=True, low=low, high=high, low_open=low_open)
            want = _outcome(_per_sample, a, n, "k", shape, True, True, low, high, low_open, False, False)
            assert _outcome(per_sample, a, n, "k", **kw) == want, (dtype, low, high, low_open)
            fast = _host_array(a, n, shape, True, True, low, high, low_open, False)
            if dtype in ("uint64", "bool", "float64"):
                assert fast is None
            elif want[0] == "ok":
                assert fast is not None and fast is not a and fast.dtype == np.int64  # a copy
