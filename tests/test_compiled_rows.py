"""Ops whose host per-sample values become parameter rows in one compiled loop (issue 13): the
rows equal the general path's (the same values as Python lists) bit for bit, and values the
general path refuses get its error, word for word."""
import numpy as np
import pytest

import gpuaug
from gpuaug._run import describe


def rows(op, x, **kw):
    """The parameter rows of ``op(x, **kw)``: run()'s (describe), or what the op hands run_custom."""
    mod = getattr(gpuaug.ops, op)
    got = describe(mod.__dict__[op], x, **kw)
    if got is not None:
        return got.params
    seen, keep = [], mod.run_custom
    mod.run_custom = lambda b, params, **_: seen.append(params)
    try:
        mod.__dict__[op](x, **kw)
    finally:
        mod.run_custom = keep
    return seen[0]


def as_lists(kw):
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in kw.items()}


def same_bits(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))


def cases(rng, n, h, w):
    yield "gamma", {"gamma": rng.uniform(0, 3, n), "gain": rng.uniform(-2, 2, n)}
    yield "gamma", {"gamma": np.arange(n, dtype=np.int32), "gain": rng.uniform(0, 1, n).astype(np.float32)}
    yield "resized_crop", {"boxes": np.column_stack([rng.uniform(-5, h, n), rng.uniform(-5, w, n),
                                                     rng.uniform(0.1, h, n), rng.uniform(1e-3, w, n)]), "size": (7, 5)}
    yield "resized_crop", {"boxes": rng.integers(1, 9, (n, 4)).astype(np.int32), "size": (3, 11),
                           "interpolation": "nearest"}
    yield "resized_crop", {"boxes": np.resize([0.1, 1 / 3, 3.4028235e38, 1e-45], (n, 4)), "size": (2, 2)}
    yield "solarize", {"threshold": rng.uniform(0, 1, n).astype(np.float32)}
    yield "solarize", {"threshold": np.arange(n, dtype=np.uint8) % 2}
    yield "crop", {"top": rng.integers(0, h - 3, n), "left": rng.integers(0, w - 4, n), "height": 3, "width": 4}
    yield "crop", {"top": np.zeros(n, np.int32), "left": np.full(n, w - 1, np.uint16), "height": h, "width": 1}
    yield "gaussian_blur", {"sigma": rng.uniform(0.2, 3, n)}
    yield "gaussian_blur", {"sigma": np.resize(np.array([0.5, 1.5, 31.0, 31.6, 1e-300, 5e-324], np.float64), n)}
    yield "gaussian_blur", {"sigma": rng.uniform(0.2, 30, n).astype(np.float32)}
    yield "gaussian_blur", {"sigma": np.arange(1, n + 1, dtype=np.int16) % 4 + 1}
    yield "box_blur", {"kernel_size": rng.choice([1, 3, 5, 255], n)}
    yield "box_blur", {"kernel_size": np.full(n, 7, np.uint8)}
    yield "rotate", {"angle": rng.uniform(-400, 400, n), "scale": rng.uniform(0.5, 2, n)}
    yield "rotate", {"angle": rng.uniform(-30, 30, n).astype(np.float32), "scale": 1.25, "fill": 3.5}
    yield "rotate", {"angle": np.resize(np.array([5, 90, -180, 7], np.int16), n), "border": "replicate"}
    yield "rotate", {"angle": rng.uniform(-1e-300, 1e-300, n), "scale": rng.integers(1, 4, n), "interpolation": "nearest"}
    yield "crop_mirror_normalize", {"crop": (4, 5), "crop_pos": rng.random((n, 2)), "mirror": rng.random(n) < 0.5,
                                    "mean": rng.uniform(100, 150, (n, 1)), "std": rng.uniform(50, 70, (n, 1))}
    yield "crop_mirror_normalize", {"crop_pos": rng.random((n, 2)).astype(np.float32), "mirror": np.arange(n) % 2,
                                    "mean": rng.uniform(0, 1, (n, 3)).astype(np.float32), "std": rng.uniform(1, 2, (n, 3)),
                                    "output_layout": "NHWC", "dtype": "float16"}
    yield "crop_mirror_normalize", {"crop_pos": np.resize([0, 1], (n, 2)), "mean": (1, 2.5, -3), "std": 2.0}
    yield "normalize", {"mean": rng.uniform(0, 1, (n, 1)), "std": rng.uniform(1, 2, (n, 3)).astype(np.float32)}
    yield "sharpen", {"factor": rng.uniform(0, 3, n)}
    yield "sharpen", {"factor": np.arange(n, dtype=np.uint8)}
    yield "median_blur", {"kernel_size": rng.choice([3, 5], n)}
    yield "median_blur", {"kernel_size": np.full(n, 3, np.int8)}
    yield "rot90", {"k": rng.choice(np.array([1, 3, -1, -3]), n)}
    yield "rot90", {"k": rng.integers(-3, 4, n).astype(np.int8) * 0 + np.resize([0, 2, -2], n).astype(np.int8)}
    yield "rot90", {"k": np.resize(np.array([1, 3], np.uint64), n)}
    t, le = rng.integers(0, 5, n), rng.integers(0, 3, n)
    sides = np.stack([t, 4 - t, le, 2 - le], axis=1)
    yield "pad", {"padding": sides, "value": rng.integers(0, 256, n)}
    yield "pad", {"padding": sides.astype(np.uint8), "value": np.resize([2.5, -0.5, 255.5, 1e10, 0.1 + 0.2, -1e-300], n),
                  "mode": "reflect"}
    yield "pad", {"padding": sides.astype(np.int32), "value": 1.7, "mode": "edge"}
    yield "pad", {"padding": np.zeros((n, 4), np.int16), "value": np.arange(n) % 2 == 1}
    for op, shape in (("warp_affine", (2, 3)), ("warp_perspective", (3, 3))):
        yield op, {"matrix": rng.uniform(-2, 2, (n,) + shape)}
        yield op, {"matrix": rng.uniform(-2, 2, shape).astype(np.float32), "fill": 2.5, "interpolation": "nearest"}
        yield op, {"matrix": rng.integers(-3, 4, (n,) + shape).astype(np.int16) + np.eye(*shape, dtype=np.int16),
                   "inverse_map": True, "border": "reflect"}


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_compiled_rows_equal_the_general_path(dtype):
    rng = np.random.default_rng(8)
    n, h, w = 9, 10, 12
    x = np.zeros((n, h, w, 3), dtype)
    for op, kw in cases(rng, n, h, w):
        got, want = rows(op, x, **kw), rows(op, x, **as_lists(kw))
        assert same_bits(got, want), (op, kw)
        y = x + np.arange(h * w * 3, dtype=x.dtype).reshape(h, w, 3)  # the outputs (shapes, fills) too
        got, want = getattr(gpuaug, op)(y, **kw), getattr(gpuaug, op)(y, **as_lists(kw))
        assert got.shape == want.shape and np.array_equal(got, want), (op, kw)


@pytest.mark.parametrize("op, kw, match", [
    ("crop", {"top": np.array([0, 8, 0]), "left": np.zeros(3, int), "height": 3, "width": 4}, "top, height: sample 1"),
    ("crop", {"top": np.zeros(3, int), "left": np.array([0, 0, 9]), "height": 3, "width": 4}, "left, width: sample 2"),
    ("crop", {"top": np.array([0, -1, 0]), "left": np.zeros(3, int), "height": 3, "width": 4}, "top"),
    ("gamma", {"gamma": np.array([1.0, -0.5, 1.0]), "gain": np.ones(3)}, "gamma"),
    ("gamma", {"gamma": np.ones(3), "gain": np.array([1.0, np.nan, 1.0])}, "gain"),
    ("salt_and_pepper", {"prob": np.array([0.1, 1.5, 0.0]), "salt_vs_pepper": np.ones(3), "seed": 1}, "prob"),
    ("salt_and_pepper", {"prob": np.ones(3), "salt_vs_pepper": np.array([0.5, -1e-300, 0]), "seed": 1},
     "salt_vs_pepper"),
    ("salt_and_pepper", {"prob": np.array([0.1, np.nan, 0.0]), "salt_vs_pepper": np.ones(3), "seed": 1}, "prob"),
    ("gamma", {"gamma": np.array([1.0, np.inf, 1.0], np.float32), "gain": np.ones(3)}, "gamma"),
    ("solarize", {"threshold": np.array([1.0, 256.0, 1.0])}, "threshold"),
    ("solarize", {"threshold": np.array([1, -1, 1])}, "threshold"),
    ("grid_mask", {"tile": np.array([4.0, 0.0, 4.0]), "ratio": np.ones(3) / 2, "angle": np.zeros(3),
                   "shift": np.zeros((3, 2))}, "tile"),
    ("grid_mask", {"tile": np.full(3, 4.0), "ratio": np.array([0.5, 1.5, 0.5]), "angle": np.zeros(3),
                   "shift": np.zeros((3, 2))}, "ratio"),
    ("grid_mask", {"tile": np.full(3, 4.0), "ratio": np.ones(3) / 2, "angle": np.array([0, np.nan, 0]),
                   "shift": np.zeros((3, 2))}, "angle"),
    ("grid_mask", {"tile": np.full(3, 4.0), "ratio": np.ones(3) / 2, "angle": np.zeros(3),
                   "shift": np.array([[0, 0], [0, np.inf], [0, 0]])}, "shift"),
    ("grid_mask", {"tile": np.array([4.0, 1e-50, 4.0]), "ratio": np.ones(3) / 2, "angle": np.zeros(3),
                   "shift": np.zeros((3, 2))}, "tile: sample 1"),
    ("resized_crop", {"boxes": np.array([[0, 0, 2, 2], [0, 0, 0, 2], [0, 0, 2, 2.0]]), "size": (4, 4)}, "height > 0"),
    ("resized_crop", {"boxes": np.array([[0, 0, 2, 2], [0, 0, 1e39, 2], [0, 0, 2, 2.0]]), "size": (4, 4)},
     "float32 range"),
    ("resized_crop", {"boxes": np.array([[0, 0, 2, 2], [0, np.nan, 1, 2], [0, 0, 2, 2.0]]), "size": (4, 4)},
     "boxes"),
    ("resized_crop", {"boxes": np.array([[0, 0, 2, 2], [0, 0, 1e-46, 2], [0, 0, 2, 2.0]]), "size": (4, 4)},
     "height > 0"),
    ("gaussian_blur", {"sigma": np.array([1.0, 0.0, 1.0])}, "sigma"),
    ("gaussian_blur", {"sigma": np.array([1.0, np.nan, 1.0])}, "sigma"),
    ("gaussian_blur", {"sigma": np.array([1.0, 42.5, 1.0])}, "sigma: got 42.5"),
    ("gaussian_blur", {"sigma": np.array([1.0, 1e300, 1.0])}, "sigma"),
    ("box_blur", {"kernel_size": np.array([3, 4, 3])}, "kernel_size: got 4"),
    ("box_blur", {"kernel_size": np.array([3, -1, 3])}, "kernel_size: got -1"),
    ("box_blur", {"kernel_size": np.array([3, 257, 3], np.uint16)}, "kernel_size: got 257"),
    ("rotate", {"angle": np.array([1.0, np.nan, 2.0])}, "angle"),
    ("rotate", {"angle": np.ones(3), "scale": np.array([1.0, 0.0, 2.0])}, "scale"),
    ("rotate", {"angle": np.ones(3), "scale": np.array([1.0, -np.inf, 2.0])}, "scale"),
    ("crop_mirror_normalize", {"crop_pos": np.array([[0, 0], [0.5, 1.5], [0, 0]])}, "crop_pos"),
    ("crop_mirror_normalize", {"crop_pos": np.array([[0, 0], [np.nan, 0], [0, 0]])}, "crop_pos"),
    ("crop_mirror_normalize", {"std": np.array([[1.0], [0.0], [2.0]])}, "std"),
    ("crop_mirror_normalize", {"mean": np.array([[1.0], [np.inf], [2.0]])}, "mean"),
    ("normalize", {"mean": 0.5, "std": np.array([[1.0, 2, 3], [1, 2, np.nan], [1, 1, 1]])}, "std"),
    ("sharpen", {"factor": np.array([1.0, -0.1, 1.0])}, "factor"),
    ("sharpen", {"factor": np.array([1.0, np.nan, 1.0], np.float32)}, "factor"),
    ("median_blur", {"kernel_size": np.array([3, 7, 5])}, "kernel_size: got 7"),
    ("median_blur", {"kernel_size": np.array([3, 4, 5], np.uint8)}, "kernel_size: got 4"),
    ("rot90", {"k": np.array([1, 4, 1])}, "k"),
    ("rot90", {"k": np.array([1, -4, 1], np.int8)}, "k"),
    ("rot90", {"k": np.array([1, 2, 1])}, "k: got"),
    ("pad", {"padding": np.array([[1, 1, 0, 0], [2, 0, 0, 0], [0, 2, 1, -1]])}, "padding"),
    ("pad", {"padding": np.array([[1, 1, 0, 0], [2, 0, 0, 0], [0, 2, 1, 0]])}, "padding"),
    ("pad", {"padding": np.ones((3, 4), np.uint64) << np.uint64(63)}, "padding"),
    ("pad", {"padding": np.ones((3, 4), int), "value": np.array([0, np.nan, 1])}, "value"),
    ("gaussian_noise", {"mean": np.zeros(3), "std": np.array([1.0, -0.5, 0.0]), "seed": 1}, "std"),
    ("gaussian_noise", {"mean": np.array([0.0, np.inf, 0.0]), "std": np.ones(3), "seed": 1}, "mean"),
    ("gaussian_noise", {"mean": np.zeros(3), "std": np.array([1.0, np.nan, 0.0], np.float32), "seed": 1}, "std"),
])
def test_compiled_rows_refusals_are_the_general_paths(op, kw, match):
    x = np.zeros((3, 10, 12, 3), np.uint8)
    errors = []
    for k in (kw, as_lists(kw)):
        with pytest.raises(ValueError, match=match) as e:
            getattr(gpuaug, op)(x, **k)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # 1e300 entries, on the general path
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("op, shape", [("warp_affine", (2, 3)), ("warp_perspective", (3, 3))])
def test_warp_matrix_rows_refuse_as_the_general_path(op, shape):
    """Singular, non-finite and near-threshold matrices: the compiled rows leave every one of them
    to the general path, which refuses it with its message or passes it with the same rows."""
    x = np.zeros((3, 6, 5, 3), np.uint8)
    base = np.eye(*shape)
    bads = [np.zeros(shape), np.full(shape, np.nan), np.full(shape, 1e300)]
    near = np.ones(shape)  # rows 0 and 1 differ by eps at [1, 1]: determinant about eps
    near[2:, 2:] = 2.0
    lin = near[:, :2] if shape == (2, 3) else near  # an affine matrix's linear part
    edge = 1e-12 * np.prod(np.sqrt((lin ** 2).sum(axis=1)))  # the threshold's determinant
    for eps in edge * (1 + np.linspace(-1e-3, 1e-3, 21)):
        m = near.copy()
        m[1, 1] += eps
        bads.append(m)
    for bad in bads:
        m = np.stack([base, bad, base])
        results = []
        for value in (m, m.tolist()):
            try:
                results.append(rows(op, x, matrix=value))
            except ValueError as e:
                results.append(str(e))
        if isinstance(results[0], str) or isinstance(results[1], str):
            assert results[0] == results[1]
            assert "matrix" in results[0]
        else:
            assert same_bits(*results)


def test_rotation_rows_equal_numpy_formula():
    """The compiled rotation rows equal the per-sample formula evaluated with NumPy arrays, bit for
    bit, for (n,) and one-value columns; the multiple-of-90 test equals ``q == np.rint(q)``."""
    from gpuaug.ops._warp import _cos_sin_host, _quarter_turns, _rotation_rows_in
    rng = np.random.default_rng(3)
    n = 40
    a = rng.uniform(-400, 400, n)
    k, cx, cy = 1 / rng.uniform(0.5, 2, n), rng.uniform(0, 50, n), rng.uniform(0, 50, n)
    for ang in (a, np.r_[a[:-3], 90.0, -180.0, 0.0]):
        c, sn = _cos_sin_host(ang)
        for kk, xx, yy in ((k, cx, cy), (np.array([1.0]), np.array([3.5]), np.array([7.0]))):
            got = _rotation_rows_in(c, sn, kk, xx, yy, np.empty((n, 6)))
            a00, a01 = c * kk, -sn * kk
            want = np.column_stack([a00, a01, (xx - a00 * xx) - a01 * yy, -a01, a00, (yy + a01 * xx) - a00 * yy])
            assert same_bits(got, want)
        q = ang / 90.0
        assert _quarter_turns(ang) == bool((q == np.rint(q)).any())
    assert not _quarter_turns(np.array([45.0, 1e-300, 89.99999999]))
    assert _quarter_turns(np.array([45.0, -0.0]))


def test_rot90_compiled_check_has_no_wrap_around():
    """A uint64 k past int64's range is refused (compared in its own type, not wrapped to -1)."""
    x = np.zeros((3, 4, 4, 1), np.uint8)
    with pytest.raises(ValueError, match="k: got"):
        gpuaug.rot90(x, np.array([1, 3, 2 ** 64 - 1], np.uint64))


def test_color_twist_host_matrix_equals_column_stack():
    from gpuaug._params import column_stack
    rng = np.random.default_rng(4)
    n = 7
    for dtype, top in (("uint8", 255.0), ("float32", 1.0)):
        x = np.zeros((n, 3, 3, 3), dtype)
        for m in (rng.uniform(-2, 2, (n, 3, 4)), rng.uniform(-2, 2, (3, 4)), np.eye(3, 4, dtype=np.float32)):
            got = rows("color_twist", x, matrix=m)
            want = column_stack([np.broadcast_to(np.asarray(m, np.float64), (n, 3, 4)), np.full(n, top)], n)
            assert same_bits(got, want)


@pytest.mark.parametrize("c", [1, 3, 4])
def test_channel_shuffle_permutation_check(c):
    """The compiled check passes exactly the rows that hold each of 0..C-1 once, as the sort
    comparison did; a refused row is named."""
    rng = np.random.default_rng(c)
    n = 6
    x = np.zeros((n, 2, 2, c), np.uint8)
    perms = np.array([rng.permutation(c) for _ in range(n)])
    assert np.array_equal(rows("channel_shuffle", x, permutation=perms), perms)
    bads = [np.full(c, c), np.full(c, -1)] + ([np.r_[np.zeros(2, int), np.arange(2, c)]] if c > 1 else [])
    for bad in bads:
        p = perms.copy()
        p[4] = bad
        with pytest.raises(ValueError, match=r"permutation: got .* \(sample 4\)"):
            gpuaug.channel_shuffle(x, p)
