"""Session 10's shortcuts on Compose's CPU host path (issue 13) give what the longer forms gave.

- F.build's template check by the identity of the policy's transforms tuple (``_Template.seen``),
  with the per-transform check behind it for any other sequence;
- Compose._draw skipping ``np.asarray(t.out_sizes(...))`` for transforms that keep the sizes
  (``_resizes``, per transforms tuple);
- ColorJitter's (n, 4) block as ``np.array([...]).T`` (np.stack's values);
- F._inverse_cols dividing outside ``np.errstate`` when every determinant is finite and nonzero
  (no warning either way), and the interp column set at once when no map is integer;
- the flips' -1 entries by a masked store, RandomAffine's unit scale by ``fill``;
- the CPU kernels and output dtype looked up once.

Each is compared bit for bit with the longer form, or a warm policy with a fresh one (empty
memos, first call: F._build_full) over shapes, dtypes, layouts and seeds."""
import pickle
import warnings

import numpy as np
import pytest

import gpuaug
from gpuaug._batch import as_batch
from gpuaug.policy import _fused as F
from gpuaug.policy.compose import batch_sizes

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

POLICIES = {
    "bench": lambda: [gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10), gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05),
                      gpuaug.Normalize(MEAN, STD)],
    "p-shear-translate": lambda: [gpuaug.RandomVerticalFlip(0.3),
                                  gpuaug.RandomAffine(30, translate=(0.1, 0.2), scale=(0.8, 1.2),
                                                      shear=(-5, 5, -3, 3)),
                                  gpuaug.ColorJitter(0.4, 0.3, 0.2, 0.1, p=0.6), gpuaug.Normalize(0.5, 0.25)],
    "quarter-turns": lambda: [gpuaug.RandomRotation((90, 90)), gpuaug.RandomHorizontalFlip(),
                              gpuaug.ColorJitter(0.3, 0, 0.3, 0)],
    "resizing": lambda: [gpuaug.RandomResizedCrop(5), gpuaug.RandomHorizontalFlip(), gpuaug.CenterCrop(3),
                         gpuaug.RandomAffine(15, translate=(0.1, 0.1)), gpuaug.ColorJitter(0.2),
                         gpuaug.ToDtype("float32")],
}


def _inputs():
    g = np.random.default_rng(3)
    u8 = lambda *s: g.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    return [
        (u8(8, 4, 4, 3), "NHWC"),
        (u8(3, 6, 5, 3), "NHWC"),                                           # other size and n
        (g.random((4, 5, 5, 3), dtype=np.float32), "NHWC"),                 # other dtype
        (g.random((2, 4, 6, 3)).astype(np.float16), "NHWC"),
        (np.ascontiguousarray(u8(8, 4, 4, 3).transpose(0, 3, 1, 2)), "NCHW"),  # other layout
        (u8(1, 7, 7, 3), "NHWC"),
        (u8(8, 4, 4, 3), "NHWC"),                                           # the first geometry again
        ([u8(5, 6, 3), u8(4, 7, 3)], "NHWC"),                               # varshape
    ]


def _same(a, b):
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _same_params(p, q):
    return p.n == q.n and _same(p.sizes, q.sizes) and len(p.values) == len(q.values) and all(
        d.keys() == e.keys() and all(_same(d[k], e[k]) for k in d) for d, e in zip(p.values, q.values))


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_warm_calls_equal_fresh_policies(name):
    """One policy called on every input in turn (twice round, so its memos are warm and then
    keyed by another input) equals, call by call, a fresh policy's first call with the same
    seed: output, last_params and the replay of last_params."""
    warm = gpuaug.Compose(POLICIES[name](), seed=0)
    for rnd in range(2):
        for k, (x, layout) in enumerate(_inputs()):
            seed = 10 * rnd + k
            y = warm(x, seed=seed, layout=layout, backend="cpu")
            fresh = gpuaug.Compose(POLICIES[name](), seed=0)
            want = fresh(x, seed=seed, layout=layout, backend="cpu")
            assert _same(y, want), (name, rnd, k)
            assert _same_params(warm.last_params, fresh.last_params), (name, rnd, k)
            assert _same(warm(x, params=warm.last_params, layout=layout, backend="cpu"), want), (name, rnd, k)


def test_generator_stream_unchanged_by_the_shortcuts():
    """Calls without a seed draw from the policy's generator: the same sequence of outputs as a
    policy whose memos are emptied before every call."""
    x = _inputs()[0][0]
    a, b = (gpuaug.Compose(POLICIES["resizing"](), seed=5) for _ in range(2))
    for _ in range(4):
        for p in (b,):  # b: every call from scratch
            p._plans.clear()
            p.__dict__.pop("_resizes", None)
        assert _same(a(x, backend="cpu"), b(x, backend="cpu"))
        assert _same_params(a.last_params, b.last_params)
    assert a._rng.bit_generator.state == b._rng.bit_generator.state


def test_template_identity_follows_the_transforms_tuple():
    """A warm spec given another tuple, or a list, of transforms checks them one by one: other
    transforms (another fill, another Normalize) give their own rows, not the template's."""
    p = gpuaug.Compose(POLICIES["bench"](), seed=0)
    x = _inputs()[0][0]
    p(x, backend="cpu")
    spec = p._items("uint8")[0][1]
    b = as_batch(x, "NHWC")
    other = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10, fill=99),
                            gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05), gpuaug.Normalize(0.5, 0.5)], seed=0)
    for ts in (other.transforms, list(other.transforms), list(p.transforms), p.transforms):
        params = other._sample(b.n, batch_sizes(b), seed=1)
        got = F.build(spec, ts, params.values, b, "NHWC")
        want, _ = F._build_full(spec, ts, params.values, b, "NHWC")
        assert got.rows.tobytes() == want.rows.tobytes()
        assert (got.codes, got.jidx, got.out_dtype, got.out_layout) == (want.codes, want.jidx, want.out_dtype,
                                                                         want.out_layout)
    # the policy's transforms replaced by another tuple: its calls follow them
    p.transforms = tuple(other.transforms)
    assert _same(p(x, seed=4, backend="cpu"), other(x, seed=4, backend="cpu"))


def test_resize_flags_follow_replaced_transforms_and_pickles():
    """The per-tuple flags of which transforms change the sizes are remade for new transforms, an
    instance's own out_sizes counts, and pickles leave the flags out."""
    x = np.random.default_rng(0).integers(0, 256, (3, 6, 6, 3), dtype=np.uint8)
    p = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.ColorJitter(0.2)], seed=0)
    p(x, backend="cpu")
    assert p._resizes[1] == (False, False)
    ts = [gpuaug.CenterCrop(4), gpuaug.RandomAffine(20), gpuaug.ColorJitter(0.2)]
    p.transforms = tuple(ts)
    p._plans.clear()
    fresh = gpuaug.Compose(ts, seed=0)
    assert _same(p(x, seed=2, backend="cpu"), fresh(x, seed=2, backend="cpu"))
    assert _same_params(p.last_params, fresh.last_params)
    assert p._resizes[1] == (True, False, False)
    assert "_resizes" not in p.__getstate__()
    q = pickle.loads(pickle.dumps(p))
    assert _same(q(x, seed=2, backend="cpu"), fresh(x, seed=2, backend="cpu"))

    # an instance's own out_sizes (RandomAffine's class keeps the sizes): its sizes reach the next draw
    seen = []
    flip = gpuaug.RandomHorizontalFlip()
    orig = flip.sample
    flip.sample = lambda rng, n, sizes: (seen.append(np.array(sizes)), orig(rng, n, sizes))[1]
    aff = gpuaug.RandomAffine(5)
    aff.out_sizes = lambda sizes: np.asarray(sizes) * 2
    r = gpuaug.Compose([aff, flip], seed=0)
    r._sample(3, np.full((3, 2), 6, np.int64), None)
    assert (seen[-1] == 12).all()


@pytest.mark.parametrize("p", [1.0, 0.6, 0.0])
@pytest.mark.parametrize("n", [0, 1, 8, 33])
def test_color_jitter_block_equals_np_stack(p, n):
    for t in (gpuaug.ColorJitter(0.4, 0.3, 0.2, 0.1, p=p), gpuaug.ColorJitter(0.4, 0, 0.2, 0, p=p),
              gpuaug.ColorJitter(brightness=0.5, p=p)):
        params = t.sample(np.random.default_rng(n), n, np.full((n, 2), 4, np.int64))
        (code, block), = t.steps(params, 3)
        want = np.stack([params["brightness"], params["contrast"], params["saturation"], params["hue"]], axis=1)
        assert block.shape == want.shape == (n, 4) and block.dtype == want.dtype
        assert np.ascontiguousarray(block).tobytes() == want.tobytes()


def _old_inverse_cols(e9):
    t = e9.take(F._COFACTOR_TAKE, axis=0)
    inv = t[0] * t[1]
    inv -= t[2] * t[3]
    det = e9[0] * inv[0]
    det += e9[1] * inv[3]
    det += e9[2] * inv[6]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv /= det
    return inv, det


def test_inverse_without_errstate_equals_and_never_warns():
    """Finite nonzero determinants (no errstate) and zero, inf or NaN ones (errstate): the same
    bits as dividing under errstate always, and no divide or invalid warning."""
    g = np.random.default_rng(7)
    good = g.normal(size=(9, 16))
    cases = [good, np.zeros((9, 4)), np.ones((9, 4))]  # zeros and rank-1: zero determinants
    mixed = good.copy()
    mixed[:, 3] = 0.0
    mixed[0, 5] = np.nan
    mixed[:, 7] = 1e200  # overflowing products: inf - inf
    cases.append(mixed)
    cases.append(np.zeros((9, 0)))
    for e9 in cases:
        e9 = np.ascontiguousarray(e9)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*(divide|invalid value).*in (divide|true_divide)")
            with np.errstate(over="ignore", invalid="ignore" if e9 is cases[3] else "warn"):
                # (the cofactors' own inf - inf warns as before; only the division is silenced)
                got, gdet = F._inverse_cols(e9)
        with np.errstate(all="ignore"):
            want, wdet = _old_inverse_cols(e9)
        assert got.tobytes() == want.tobytes() and gdet.tobytes() == wdet.tobytes()
    with pytest.raises(ValueError, match="singular"):
        F._checked_inverse_cols(np.zeros((9, 3)))


def test_interp_column_for_integer_and_other_maps():
    """A bilinear stage's interp column: 0 for integer maps (quarter turns, flips), 1 otherwise;
    the template path equals the full build for batches of only integer maps, of none, and mixed."""
    g = np.random.default_rng(2)
    x = g.integers(0, 256, (6, 5, 5, 3), dtype=np.uint8)
    b = as_batch(x, "NHWC")
    for degrees in ((90, 90), (0, 0), (-20, 20), (0, 180)):
        pol = gpuaug.Compose([gpuaug.RandomRotation(degrees), gpuaug.RandomHorizontalFlip()], seed=1)
        (kind, spec), = pol._items("uint8")
        for rep in range(3):
            p = pol._sample(b.n, batch_sizes(b), rep)
            got = F.build(spec, pol.transforms, p.values, b, "NHWC")
            want, _ = F._build_full(spec, pol.transforms, p.values, b, "NHWC")
            assert got.rows.tobytes() == want.rows.tobytes(), (degrees, rep)
        if degrees in ((90, 90), (0, 0)):
            assert (got.rows[:, F.P_INTERP] == 0).all()
        if degrees == (-20, 20):
            assert (got.rows[:, F.P_INTERP] == 1).all()


def test_flip_and_affine_draw_arrays_are_fresh():
    """The flips' maps (masked store) equal np.where's, for bool and float ``apply``; RandomAffine
    without a scale range gives a fresh, writeable array of ones each call."""
    g = np.random.default_rng(4)
    sizes = np.full((9, 2), 7, np.int64)
    for t, col in ((gpuaug.RandomHorizontalFlip(), 0), (gpuaug.RandomVerticalFlip(), 4)):
        on = g.random(9) < 0.5
        for apply in (on, on.astype(np.float64)):
            m = t.matrices({"apply": apply}, sizes).reshape(9, 9)
            assert m[:, col].tobytes() == np.where(on, -1.0, 1.0).tobytes()
    a = gpuaug.RandomAffine(10)
    s1, s2 = (a.sample(g, 5, np.full((5, 2), 4, np.int64))["scale"] for _ in range(2))
    assert s1 is not s2 and s1.flags.writeable and s1.dtype == np.float64
    assert s1.tobytes() == np.ones(5).tobytes()


@pytest.mark.parametrize("shape", [(8, 4, 4, 3), (6, 130, 120, 3)])
def test_serial_and_chunked_kernels_agree(shape, monkeypatch):
    """The CPU stage calls the serial kernels itself below PARALLEL_MIN_ELEMENTS and the chunked
    (threaded) wrappers above it: either way round, the same output for the same seed."""
    from gpuaug.kernels.numba import fused as NF

    x = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
    want = gpuaug.Compose(POLICIES["bench"](), seed=0)(x, seed=3, backend="cpu")
    for limit in (0, 1 << 40):  # everything chunked, everything serial
        monkeypatch.setattr(NF, "PARALLEL_MIN_ELEMENTS", limit)
        got = gpuaug.Compose(POLICIES["bench"](), seed=0)(x, seed=3, backend="cpu")
        assert _same(got, want), limit


def _old_cj_sample(t, rng, n):
    """ColorJitter.sample as it was (one range at a time out of the block, no memo)."""
    ranges = (("brightness", t.brightness, 1.0), ("contrast", t.contrast_range, 1.0),
              ("saturation", t.saturation, 1.0), ("hue", t.hue, 0.0))
    given = [(r, nt) for _, r, nt in ranges if r is not None]
    u = rng.random((1 + len(given), n))
    on = u[0] < t.p
    out, k = {"apply": on}, 0
    for key, r, neutral in ranges:
        if r is None:
            out[key] = np.full(n, neutral)
            continue
        v = r[0] + (r[1] - r[0]) * u[1 + k]
        out[key] = np.where(on, v, neutral) if t.p != 1.0 else v
        k += 1
    return out


def test_color_jitter_draws_follow_changed_ranges():
    """ColorJitter keeps its block layout per ranges: ranges changed after a draw (or a memo of an
    older version's format under the old name) give the draws of the formula without memo."""
    t = gpuaug.ColorJitter(0.4, 0.3, 0.2, 0.1, p=0.7)
    sizes = np.full((6, 2), 4, np.int64)
    t.sample(np.random.default_rng(0), 6, sizes)
    t._ranges = ("stale", 0)  # an older pickle's memo: ignored
    for change in ({"brightness": None}, {"contrast_range": (0.5, 0.9), "hue": None}, {"saturation": None},
                   {"brightness": (0.1, 0.2), "hue": (-0.2, 0.3)}):
        for k, v in change.items():
            setattr(t, k, v)
        got, want = t.sample(np.random.default_rng(5), 6, sizes), _old_cj_sample(t, np.random.default_rng(5), 6)
        assert got.keys() == want.keys() and all(_same(got[k], want[k]) for k in got), change
