"""Compose's host path on the CPU backend, guarded without a clock (issue 13).

Python-level function calls are counted with a profiler hook (``sys.setprofile``) over one call
of a 4-transform policy: the count must not grow with the batch (no per-sample Python work:
parameter draws, rows and the launch are vectorised) and must stay within a budget near
today's count (177 Python calls, 146 C calls on 2026-11-25), so a gross regression (a lost
memo, an extra per-call pass) fails here while timings stay out of the tests."""

import sys

import numpy as np
import pytest

import gpuaug

#: Today's counts plus about 40 %: room for small changes, not for a new per-call pass.
PY_CALLS_MAX = 250
C_CALLS_MAX = 210


def _policy():
    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10),
                           gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05),
                           gpuaug.Normalize((0.5,) * 3, (0.2,) * 3)], seed=0)


def _count(policy, x):
    """(Python calls, C calls) of one ``policy(x, backend="cpu")``."""
    ev = {"call": 0, "c_call": 0}

    def hook(frame, event, arg):
        if event in ev:
            ev[event] += 1

    old = sys.getprofile()
    sys.setprofile(hook)
    try:
        policy(x, backend="cpu")
    finally:
        sys.setprofile(old)
    return ev["call"], ev["c_call"]


def _batch(n):
    return np.random.default_rng(n).integers(0, 256, (n, 4, 4, 3), dtype=np.uint8)


def test_compose_host_calls_do_not_grow_with_the_batch():
    p = _policy()
    small, large = _batch(8), _batch(24)
    p(small, backend="cpu"), p(large, backend="cpu")  # compile, fill the memos
    assert _count(p, small) == _count(p, large)


def test_compose_host_calls_within_budget():
    p = _policy()
    x = _batch(8)
    p(x, backend="cpu")
    first = _count(p, x)
    assert _count(p, x) == first, "a warm call's host work changed between calls (a memo missed?)"
    py, c = first
    assert py <= PY_CALLS_MAX, f"Compose call made {py} Python-level calls; budget {PY_CALLS_MAX}"
    assert c <= C_CALLS_MAX, f"Compose call made {c} C-level calls; budget {C_CALLS_MAX}"


def test_compose_write_state_is_memoised(monkeypatch):
    """Normalize draws nothing: its scale and bias are worked out once per stage, not per call."""
    calls = []
    apply = gpuaug.Normalize.apply

    def counted(self, st):
        calls.append(1)
        return apply(self, st)

    monkeypatch.setattr(gpuaug.Normalize, "apply", counted)
    p = _policy()
    x = _batch(8)
    first = p(x, backend="cpu")
    for _ in range(3):
        p(x, backend="cpu")
    assert len(calls) == 1
    assert first.dtype == np.float32
    # a batch in another layout works its own state out
    p(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), layout="NCHW", backend="cpu")
    assert len(calls) == 2


def _inverse_entrywise(m):
    """The fused stage's 3x3 inverse written entry by entry (adjugate / determinant)."""
    a, b, c, d, e, f, g, h, i = np.ascontiguousarray(m.reshape(-1, 9).T)
    inv = np.empty((9, m.shape[0]))
    inv[0], inv[3], inv[6] = e * i - f * h, f * g - d * i, d * h - e * g
    det = a * inv[0] + b * inv[3] + c * inv[6]
    inv[1], inv[4], inv[7] = c * h - b * i, a * i - c * g, b * g - a * h
    inv[2], inv[5], inv[8] = b * f - c * e, c * d - a * f, a * e - b * d
    with np.errstate(divide="ignore", invalid="ignore"):
        inv /= det
    return inv.T, det


@pytest.mark.parametrize("n", [0, 1, 7, 300])
def test_compose_inverse_matches_entrywise_bit_for_bit(n):
    """The vectorised cofactor gather gives the entry-by-entry form's bits (zeros, signed
    zeros, non-finite and singular maps included)."""
    from gpuaug.policy._fused import _inverse

    rng = np.random.default_rng(n)
    m = rng.normal(size=(n, 3, 3)) * rng.choice([1e-300, 1.0, 3.0, 1e200], size=(n, 1, 1))
    m[::5] = np.round(m[::5])
    m[1::7] = -0.0
    m[2::11, 1] = np.nan
    with np.errstate(all="ignore"):
        got, gdet = _inverse(m)
        ref, rdet = _inverse_entrywise(m)
    assert got.shape == ref.shape == (n, 9)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(ref).tobytes()
    assert gdet.tobytes() == rdet.tobytes()
