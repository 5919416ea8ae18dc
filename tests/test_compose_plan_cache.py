"""Compose's per-shape memos (issue 13's host path) never hand one batch another batch's plan.

A policy keeps, per stage, what does not depend on the draws (gpuaug/policy/_fused.py:
``build``'s template: output shapes, the sizes each geometry transform sees, fill, in_scale and
the write's columns) and, for device draws, a draw plan per input geometry. These tests call
one policy on batches of different sizes, dtypes, layouts, channel counts and batch sizes,
interleaved, and compare every call bit for bit with a fresh policy (empty memos) given the
same seed: a memo keyed too loosely would give a batch the wrong output size, fill, scale or
rows."""
import pickle

import numpy as np
import pytest

import gpuaug
from gpuaug._batch import as_batch
from gpuaug.policy import _fused as F

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _policies():
    return {
        "bench": lambda **kw: gpuaug.Compose([
            gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10, translate=(0.2, 0.1), fill=7),
            gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05), gpuaug.Normalize(0.5, 0.25)], **kw),
        "crop-two-stages": lambda **kw: gpuaug.Compose([
            gpuaug.RandomCrop(3, padding=1, fill=0.25), gpuaug.RandomGrayscale(0.5), gpuaug.RandomRotation(20),
            gpuaug.ColorJitter(0, 0.4), gpuaug.ToDtype("float32", scale=True), gpuaug.ToLayout("NCHW")], **kw),
    }


def _batches():
    rng = np.random.default_rng(0)
    u8 = lambda *s: rng.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    return [
        (u8(4, 5, 6, 3), "NHWC"),
        (u8(2, 7, 4, 3), "NHWC"),                                        # other size and n
        (rng.random((3, 5, 6, 3)).astype(np.float32), "NHWC"),           # other dtype
        (np.ascontiguousarray(u8(4, 5, 6, 3).transpose(0, 3, 1, 2)), "NCHW"),  # other layout
        (u8(4, 5, 6, 1), "NHWC"),                                        # other channels
        (u8(3, 5, 6, 4), "NHWC"),
        (u8(4, 5, 6, 3), "NHWC"),                                        # the first geometry again
        ([u8(5, 6, 3), u8(4, 7, 3)], "NHWC"),                            # varshape
        ([u8(6, 4, 3), u8(5, 5, 3)], "NHWC"),                            # varshape, other sizes, same n
    ]


def _same(a, b):
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same_params(p, q):
    return np.array_equal(p.sizes, q.sizes) and all(
        d.keys() == e.keys() and all(_same(np.asarray(d[k]), np.asarray(e[k])) for k in d)
        for d, e in zip(p.values, q.values))


def _outcome(policy, x, layout, seed):
    """(output, params) of one call, or the error it raised (the same error either way)."""
    try:
        return policy(x, seed=seed, layout=layout, backend="cpu"), policy.last_params
    except ValueError as e:
        return str(e), None


@pytest.mark.parametrize("draws", ["host", "device"])
@pytest.mark.parametrize("name", sorted(_policies()))
def test_interleaved_batches_match_fresh_policies(name, draws):
    make = _policies()[name]
    warm = make(draws=draws)
    batches = _batches()
    for rnd in range(2):  # the second round runs entirely on memos
        for k, (x, layout) in enumerate(batches):
            seed = 10 * k + rnd
            got = _outcome(warm, x, layout, seed)
            want = _outcome(make(draws=draws), x, layout, seed)
            if isinstance(want[0], str):  # only device draws on a varshape batch refuse
                assert draws == "device" and isinstance(x, list), want[0]
                assert got[0] == want[0], (k, rnd)
                continue
            assert _same(got[0], want[0]), f"batch {k} round {rnd}: a memo gave another batch's result"
            assert _same_params(got[1], want[1]), (k, rnd)
            # replay through the warm memos too
            assert _same(warm(x, params=got[1], layout=layout, backend="cpu"), want[0]), (k, rnd)


def test_policy_generator_sequence_unchanged_by_memos():
    """Without seeds: a warm policy's calls equal a policy of the same seed called the same way
    (the memos do not consume or reorder draws)."""
    make = _policies()["bench"]
    a, b = make(seed=3), make(seed=3)
    batches = _batches()
    for x, layout in batches:  # a warms up on every geometry first, with its own seeds
        a(x, seed=99, layout=layout, backend="cpu")
    a = make(seed=3)
    for x, layout in batches:
        a(x, seed=98, layout=layout, backend="cpu")
    a._rng = np.random.default_rng(3)  # its generator back to the start, its memos warm
    for x, layout in batches + batches:
        assert _same(a(x, layout=layout, backend="cpu"), b(x, layout=layout, backend="cpu"))


def test_build_template_equals_full_build():
    """The template path gives the rows, shapes and flags of a build from scratch, call after call."""
    make = _policies()
    for name in sorted(make):
        policy = make[name](seed=1)
        for x, layout in _batches():
            b = as_batch(x, layout)
            for kind, spec in policy._items(b.dtype.name):
                if kind != "fused":
                    continue
                for rep in range(3):
                    params = policy._sample(b.n, _sizes(b), seed=rep)
                    try:
                        got = F.build(spec, policy.transforms, params.values, b, b.layout)
                    except ValueError as e:
                        with pytest.raises(ValueError, match=str(e)[:20]):
                            F._build_full(spec, policy.transforms, params.values, b, b.layout)
                        continue
                    want, _ = F._build_full(spec, policy.transforms, params.values, b, b.layout)
                    assert got.rows.tobytes() == want.rows.tobytes(), (name, rep)
                    assert list(got.shapes) == list(want.shapes) and got.codes == want.codes
                    assert (got.geo, got.border, got.out_dtype, got.out_layout, got.jidx) == \
                        (want.geo, want.border, want.out_dtype, want.out_layout, want.jidx)
                break  # the first fused stage reads the batch itself


def _sizes(b):
    from gpuaug.policy.compose import batch_sizes

    return batch_sizes(b)


def test_memo_follows_replaced_transforms_and_survives_pickling():
    """A plan built for one list of transforms is not used for another (identity check), and a
    pickled warm policy calls like the original."""
    make = _policies()["bench"]
    p = make(seed=0)
    x, layout = _batches()[0]
    y = p(x, seed=1, backend="cpu")
    spec = p._items("uint8")[0][1]
    other = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10, fill=99),
                            gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05), gpuaug.Normalize(0.5, 0.5)], seed=0, draws="host")
    b = as_batch(x, layout)
    params = other._sample(b.n, _sizes(b), seed=1)
    got = F.build(spec, other.transforms, params.values, b, layout)  # p's spec, other's transforms
    want, _ = F._build_full(spec, other.transforms, params.values, b, layout)
    assert got.rows.tobytes() == want.rows.tobytes()
    q = pickle.loads(pickle.dumps(p))
    assert _same(q(x, seed=1, backend="cpu"), y)
    assert _same(p(x, seed=1, backend="cpu"), y)
