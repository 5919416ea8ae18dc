"""The fast host parameter builders (issue 13) against the formulas they replaced, bit for bit.

Each reference below is the code as it was before the fast paths (kept here verbatim, NumPy
only): rotate's inverse maps, the warp parameter rows, flip's and brightness's matrices, and
per_sample's general path (``_per_sample``, still in gpuaug._params: the fast path must give
what it gives, and raise what it raises).
"""
from __future__ import annotations

import numpy as np
import pytest

from gpuaug._batch import as_batch
from gpuaug._params import _per_sample, column_stack, per_sample
from gpuaug.geometry import cos_sin
from gpuaug.ops import _colour, _warp
from gpuaug.ops import brightness as br
from gpuaug.ops import flip as fl


def bits(a):
    a = np.asarray(a)
    return a.shape, a.dtype.str, a.tobytes()


# -- references: the code before the fast paths --------------------------------------------------

def ref_rotation_inverse(b, angle, center, scale):
    n = b.n
    a = per_sample(angle, n, "angle")
    s = per_sample(scale, n, "scale")
    ctr = None if center is None else per_sample(center, n, "center", shape=(2,))
    if not (s != 0).all():
        raise ValueError("scale: zeros")
    if ctr is not None:
        ctr = np.asarray(ctr, dtype=np.float64)
        cx, cy = ctr[:, 0], ctr[:, 1]
    elif b.varshape:
        hw = np.asarray(np.stack(b.sizes(), axis=1).astype(np.float64))
        cx, cy = (hw[:, 1] - 1) / 2, (hw[:, 0] - 1) / 2
    else:
        h, w = b.nhwc.shape[1:3]
        cx, cy = (w - 1) / 2, (h - 1) / 2
    a, s = np.asarray(a, np.float64), np.asarray(s, np.float64)
    c, sn = cos_sin(a, np)
    k = 1.0 / s[0] if s.ndim == 1 and n and s.strides[0] == 0 else 1.0 / s
    a00, a01 = c * k, -sn * k
    inv = np.empty((n, 6))
    inv[:, 0], inv[:, 1], inv[:, 3], inv[:, 4] = a00, a01, -a01, a00
    inv[:, 2] = cx - a00 * cx - a01 * cy
    inv[:, 5] = cy + a01 * cx - a00 * cy
    return inv


def ref_params_matrix(b, interp, border, inv, fill):
    n = b.n
    f = _warp.fill_columns(fill, b)
    k = inv.shape[1]
    out = np.empty((n, 2 + k + f.shape[1]))
    out[:, 0], out[:, 1] = interp, border
    out[:, 2:2 + k] = inv
    out[:, 2 + k:] = f
    return out


def ref_flip(h, v, n):
    return column_stack([_per_sample(h, n, "horizontal", (), False, True, None, None, False, False, True),
                         _per_sample(v, n, "vertical", (), False, True, None, None, False, False, True)], n)


def raised(f):
    """(type, message) of what ``f()`` raises, or None."""
    try:
        f()
    except (TypeError, ValueError) as e:
        return type(e), str(e)
    return None


# -- rotate ----------------------------------------------------------------------------------------

def angle_cases(rng, n):
    yield rng.uniform(-30, 30, n)
    yield rng.uniform(-1e4, 1e4, n)
    yield rng.integers(-8, 9, n) * 90.0                        # exact quarter turns: cos_sin's table
    yield np.where(rng.random(n) < 0.5, rng.integers(-4, 5, n) * 90.0, rng.uniform(-360, 360, n))
    yield rng.choice([0.0, -0.0, 360.0, -360.0, 180.0, 45.0, 1e-300, -5e-324, 90 + 1e-13, 1e15], n)
    yield rng.integers(-720, 721, n)                           # integers: per_sample converts
    yield 30.0                                                  # one angle for the batch
    yield -0.0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("geometry", ["square", "wide", "varshape", "one"])
def test_rotation_inverse_equals_reference(seed, geometry):
    rng = np.random.default_rng(seed)
    n = 1 if geometry == "one" else int(rng.integers(2, 40))
    if geometry == "varshape":
        x = [np.zeros((int(rng.integers(1, 9)), int(rng.integers(1, 9)), 3), np.uint8) for _ in range(n)]
    else:
        x = np.zeros((n, 6, 6 if geometry != "wide" else 11, 3), np.uint8)
    b = as_batch(x, "NHWC")
    scales = [1.0, 1, 2.5, -0.5, 1e-310, np.float64(0.75), rng.uniform(0.5, 2, n) * rng.choice([-1, 1], n),
              rng.choice([1e-310, 3.0, 1.0], n), 7]
    centres = [None, (2.5, -1.0), rng.uniform(-50, 50, (n, 2)), [0.0, 0.0]]
    with np.errstate(all="ignore"):  # tiny scales: inf / NaN maps, compared by their bits too
        for angle in angle_cases(rng, n):
            for scale in scales:
                for centre in centres:
                    want = ref_rotation_inverse(b, angle, centre, scale)
                    got = _warp.rotation_inverse(b, angle, centre, scale)
                    assert bits(got) == bits(want), (angle, scale, centre)


def test_rotation_params_rows_equal_reference():
    """The whole parameter matrix rotate hands to run(), through the op (describe)."""
    from gpuaug._run import describe
    import gpuaug

    rng = np.random.default_rng(5)
    f = gpuaug.registry["rotate"].func
    for dtype in (np.uint8, np.float32, np.float16):
        x = np.zeros((17, 5, 7, 3), dtype)
        b = as_batch(x, "NHWC")
        for fill in (0, 0.0, -0.0, 7, 255.7, -3, 300, 0.25, rng.uniform(0, 255, 17), rng.uniform(0, 255, (17, 3))):
            for interp, border in (("bilinear", "constant"), ("nearest", "reflect")):
                angle = rng.uniform(-45, 45, 17)
                got = describe(f, x, angle=angle, fill=fill, interpolation=interp, border=border).params
                inv = ref_rotation_inverse(b, angle, None, 1.0)
                want = ref_params_matrix(b, _warp.INTERPOLATIONS[interp], _warp.BORDERS[border], inv, fill)
                assert bits(got) == bits(want), (dtype, fill, interp, border)
                got[:] = -1  # the caller's own matrix: writing it leaves the memoised rows alone
                again = describe(f, x, angle=angle, fill=fill, interpolation=interp, border=border).params
                assert bits(again) == bits(want)


@pytest.mark.parametrize("bad, name", [
    (dict(angle=np.array([1.0, np.nan, 2.0])), "angle"),
    (dict(angle=np.array([1.0, np.inf, 2.0])), "angle"),
    (dict(angle=[1.0, 2.0]), "angle"),
    (dict(angle=1.0, scale=0), "scale"),
    (dict(angle=1.0, scale=0.0), "scale"),
    (dict(angle=1.0, scale=np.array([1.0, 0.0, 2.0])), "scale"),
    (dict(angle=1.0, scale=float("nan")), "scale"),
    (dict(angle=1.0, scale=float("inf")), "scale"),
    (dict(angle=1.0, scale=0, center=(1.0, np.nan)), "center"),  # centre is checked before scale's zeros
    (dict(angle=1.0, scale="2"), "scale"),
])
def test_rotation_refusals(bad, name):
    import gpuaug

    x = np.zeros((3, 4, 4, 1), np.uint8)
    with pytest.raises((ValueError, TypeError), match=f"^{name}:"):
        gpuaug.rotate(x, **bad)


# -- per_sample ------------------------------------------------------------------------------------

def value_cases(rng, n):
    yield rng.uniform(-5, 5, n)
    yield rng.uniform(-5, 5, n).astype(np.float32)
    yield rng.integers(-5, 6, n)
    yield rng.integers(0, 6, n).astype(np.uint8)
    yield rng.random(n) < 0.5
    yield np.where(rng.random(n) < 0.2, np.nan, rng.uniform(0, 1, n))
    yield np.where(rng.random(n) < 0.2, -np.inf, rng.uniform(0, 1, n))
    yield np.array([0.0, -0.0, 1.0, 0.5] * n)[:n]
    yield rng.uniform(-5, 5, (n, 2))                    # shape (2,) per sample
    yield rng.uniform(-5, 5, n + 1)                     # wrong length
    yield np.array(["a"] * n)
    yield np.broadcast_to(np.float64(2.0), (n,))        # a broadcast view


@pytest.mark.parametrize("kw", [
    {}, {"low": 0}, {"low": 0, "low_open": True}, {"high": 1}, {"low": -1.5, "high": 2},
    {"finite": False}, {"finite": False, "low": 0}, {"boolean": True}, {"integer": True, "low": 0},
    {"shape": (2,)}, {"low": 2 ** 60},
])
def test_per_sample_fast_path_equals_general(kw):
    rng = np.random.default_rng(1)
    n = 13
    full = dict(shape=(), integer=False, finite=True, low=None, high=None, low_open=False, boolean=False)
    full.update(kw)
    for v in value_cases(rng, n):
        want = raised(lambda: _per_sample(v, n, "p", full["shape"], full["integer"], full["finite"], full["low"],
                                          full["high"], full["low_open"], False, full["boolean"]))
        got = raised(lambda: per_sample(v, n, "p", **kw))
        assert got == want, (v, kw)
        if want is None:
            w = _per_sample(v, n, "p", full["shape"], full["integer"], full["finite"], full["low"],
                            full["high"], full["low_open"], False, full["boolean"])
            g = per_sample(v, n, "p", **kw)
            assert bits(g) == bits(w), (v, kw)
            if type(v) is np.ndarray and g.size:
                assert not np.shares_memory(g, v)  # a copy, as before: callers may write it


def ref_scalar(v, n, integer, low, high, low_open, boolean):
    """per_sample's one-number path as it was (np.full), None for the general path."""
    if boolean:
        return np.full(n, 1.0 if v else 0.0) if v == 0 or v == 1 else None
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if f != f or f in (np.inf, -np.inf):
            return None
        if integer:
            if f != round(f):
                return None
            v = f
    elif integer and isinstance(v, (bool, np.bool_)):
        v = int(v)
    if integer:
        iv = int(v)
        if not -2 ** 63 <= iv < 2 ** 63:
            return None
        if (low is not None and (iv <= low if low_open else iv < low)) or (high is not None and iv > high):
            return None
        return np.full(n, iv, np.int64)
    f = float(v)
    if (low is not None and (f <= low if low_open else f < low)) or (high is not None and f > high):
        return None
    return np.full(n, f)


def test_per_sample_scalars_equal_reference():
    n = 5
    for v in (0, 1, -3, 2.5, -0.0, True, False, np.float32(1.5), np.int64(7), 2 ** 70, float("nan"), 0.5):
        for kw in ({}, {"low": 0}, {"integer": True}, {"boolean": True}, {"low": 0, "low_open": True},
                   {"high": 1}):
            full = dict(integer=False, low=None, high=None, low_open=False, boolean=False)
            full.update(kw)
            w = ref_scalar(v, n, **full)
            if w is None:
                want = raised(lambda: _per_sample(v, n, "p", (), full["integer"], True, full["low"], full["high"],
                                                  full["low_open"], False, full["boolean"]))
                if want is None:
                    w = _per_sample(v, n, "p", (), full["integer"], True, full["low"], full["high"],
                                    full["low_open"], False, full["boolean"])
                else:
                    assert raised(lambda: per_sample(v, n, "p", **kw)) == want, (v, kw)
                    continue
            assert bits(per_sample(v, n, "p", **kw)) == bits(w), (v, kw)


# -- flip and brightness ---------------------------------------------------------------------------

def test_flip_params_equal_reference():
    rng = np.random.default_rng(2)
    n = 11
    cases = [True, False, 1, 0, np.bool_(True), rng.random(n) < 0.5, (rng.random(n) < 0.5).astype(np.float32),
             rng.integers(0, 2, n), list(rng.random(n) < 0.5), np.zeros(n, bool)]
    for h in cases:
        for v in cases:
            got, want = fl.flip_params(h, v, n), ref_flip(h, v, n)
            assert bits(got) == bits(want), (h, v)


def test_flip_device_columns_are_per_samples():
    """With a flag array on the GPU flip stacks its columns on the device: each host flag then
    goes in as the float64 column per_sample gives (what column_stack packed before)."""
    rng = np.random.default_rng(4)
    n = 7
    for h in (True, False, 1, np.bool_(False), rng.random(n) < 0.5, rng.integers(0, 2, n), [True] * n):
        got = fl._column(fl._flag(h, n, "horizontal", True), n)
        assert bits(got) == bits(per_sample(h, n, "horizontal", boolean=True)), h


@pytest.mark.parametrize("h, v", [(0.5, False), (True, np.array([0.0, 2.0, 1.0])), (np.ones(4, bool), True),
                                  ("yes", False), (None, False), (True, np.array([True, np.nan, False]))])
def test_flip_refusals_equal_reference(h, v):
    assert raised(lambda: fl.flip_params(h, v, 3)) == raised(lambda: ref_flip(h, v, 3)) is not None


def test_brightness_rows_equal_reference():
    from gpuaug._run import describe
    import gpuaug

    rng = np.random.default_rng(3)
    f = gpuaug.registry["brightness"].func
    for dtype in (np.uint8, np.float32):
        x = np.zeros((9, 3, 4, 3), dtype)
        b = as_batch(x, "NHWC")
        for factor in (rng.uniform(0, 2, 9), 1.5, 0, np.zeros(9), rng.integers(0, 3, 9)):
            got = describe(f, x, factor=factor).params
            fac = _per_sample(factor, 9, "factor", (), False, True, 0, None, False, False, False)
            want = column_stack([fac, np.full(9, 255.0 if dtype == np.uint8 else 1.0)], 9)
            assert bits(got) == bits(want), (dtype, factor)
        for bad in (np.array([1.0, -0.5] + [1.0] * 7), np.array([np.nan] * 9), -1):
            with pytest.raises(ValueError, match="^factor:"):
                f(x, factor=bad)
    col = _colour.maxv_column(b)
    assert not col.flags.writeable and bits(col) == bits(np.full(9, 1.0))
    assert br._LIMITS == br.SPECS[0].limits("factor")


def test_per_sample_device_fast_path_returns_only_what_the_general_path_would(monkeypatch):
    """per_sample's shortcut for CuPy arrays (stand-ins here): an array of the full shape on
    the batch's device (else the current one) that needs no conversion comes back as it is;
    anything else (another shape, dtype or device) is left to the general path."""
    import sys
    import types

    from gpuaug import _params
    from gpuaug._util import BATCH_DEVICE

    class Arr:
        def __init__(self, shape, char, device=0):
            self.shape, self.dtype = shape, np.dtype(char)
            self.data = types.SimpleNamespace(device_id=device)

    fake = types.ModuleType("cupy")
    fake.ndarray = Arr
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 1))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert _params._cupy_ndarray() is Arr
    f = _params._device_array
    a = Arr((4,), "d", device=1)
    assert f(a, 4, (), False, False) is a  # current device 1
    assert f(Arr((4,), "f", 1), 4, (), False, False) is None  # float32: converted by the general path
    assert f(Arr((4,), "q", 1), 4, (), True, False) is not None and f(a, 4, (), True, False) is None
    flags = Arr((4,), "?", 1)
    assert f(flags, 4, (), False, True) is flags  # flags keep their dtype
    assert f(Arr((4, 2), "d", 1), 4, (2,), False, False) is not None and f(Arr((2,), "d", 1), 4, (2,), False, False) is None
    assert f(Arr((3,), "d", 1), 4, (), False, False) is None
    assert f(Arr((4,), "d", 0), 4, (), False, False) is None  # another device: the general path's error
    token = BATCH_DEVICE.set(0)
    try:
        assert f(Arr((4,), "d", 0), 4, (), False, False) is not None and f(a, 4, (), False, False) is None
    finally:
        BATCH_DEVICE.reset(token)
    monkeypatch.delitem(sys.modules, "cupy")
    assert _params._cupy_ndarray() is _params._NOT_A_TYPE


@pytest.mark.parametrize("value", [0.5, 3, -2, (0.485, 0.456, 0.406), (1, 2, 3), (True, False, True),
                                   "n1-f64", "n1-f32", "n1-nan", "nC", 2**60, float("inf")])
def test_channel_param_shortcuts_equal_the_general_path(value):
    """channel_param (a tuple of C numbers, a number, an (N, 1) or (N, C) array) gives what
    per_sample gives for the broadcast array, bit for bit, and the same errors (non-finite,
    huge ints). crop_mirror_normalize's in-place rows are checked against it in test_cmn_params."""
    from gpuaug._params import per_sample
    from gpuaug.ops._intensity import channel_param

    n, c = 5, 3
    rng = np.random.default_rng(1)
    if value == "n1-f64":
        value = rng.random((n, 1))
    elif value == "n1-f32":
        value = rng.random((n, 1)).astype(np.float32)
    elif value == "n1-nan":
        value = np.array([[1.0], [np.nan], [2.0], [3.0], [4.0]])
    elif value == "nC":
        value = rng.random((n, c))
    a = np.asarray(value)
    ref = (np.broadcast_to(a, (c,)) if a.ndim == 0 else np.broadcast_to(a, (n, c)) if a.shape == (n, 1)
           else value)

    def outcome(f, v):
        try:
            return f(v)
        except (ValueError, TypeError) as e:
            return type(e)
    want = outcome(lambda v: per_sample(v, n, "mean", shape=(c,)), ref)
    got = outcome(lambda v: channel_param(v, n, c, "mean", False), value)
    if isinstance(want, type):
        assert got is want
    else:
        assert got.dtype == want.dtype and got.shape == (n, c)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("value", [7, (3, 5), (3, 0), 0, -1, (2.0, 3.0), (2, 3, 4), True, np.array([4, 6]), [8, 9]])
def test_host_size_shortcut_equals_the_general_path(value):
    from gpuaug._params import host_size

    def outcome(v):
        try:
            return host_size(v, "size")
        except (ValueError, TypeError) as e:
            return type(e)
    want = outcome(np.asarray(value))  # an array: the general path
    got = outcome(value)
    assert got == want and (isinstance(got, type) or all(type(v) is int for v in got))


def test_spec_limits_memo_gives_each_caller_its_own_copy():
    import gpuaug

    spec = gpuaug.registry["color_jitter"]
    want = next(p for p in spec.params if p.name == "hue").limits("uint8")
    a = spec.limits("hue")
    a["low"] = 123  # a caller's change stays its own
    assert spec.limits("hue") == want and spec.limits("hue") is not spec.limits("hue")
    assert spec.limits("hue", "float32") == next(p for p in spec.params if p.name == "hue").limits("float32")
    with pytest.raises(KeyError, match="no parameter 'nope'"):
        spec.limits("nope")


def test_invert_affine_host_equals_the_closed_form_bit_for_bit():
    """invert_affine on the host (products written into place) against the closed form as
    plain expressions, for random, integer, singular and huge matrices."""
    rng = np.random.default_rng(11)
    ms = [rng.normal(size=(40, 2, 3)), rng.integers(-3, 4, (40, 2, 3)).astype(np.float64),
          np.zeros((3, 2, 3)), rng.normal(size=(5, 2, 3)) * 1e300]
    for m in ms:
        a, b_, c = m[:, 0, 0], m[:, 0, 1], m[:, 0, 2]
        d, e, f = m[:, 1, 0], m[:, 1, 1], m[:, 1, 2]
        with np.errstate(all="ignore"):
            det = a * e - b_ * d
            r = 1.0 / det
            want = np.empty((m.shape[0], 6))
            want[:, 0], want[:, 1], want[:, 3], want[:, 4] = e * r, -b_ * r, -d * r, a * r
            want[:, 2] = -(want[:, 0] * c + want[:, 1] * f)
            want[:, 5] = -(want[:, 3] * c + want[:, 4] * f)
            got, gdet = _warp.invert_affine(m, np)
        assert np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))
        assert np.array_equal(gdet, det, equal_nan=True)
