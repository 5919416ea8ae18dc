"""Compose's host draws and parameter rows, made cheaper for issue 13, give the same bits as the
formulas they replace (kept here as references) on random inputs: RandomResizedCrop's boxes
(and the generator's state after them), the geometry builders (flip, affine, box maps,
cos_sin), the 3x3 inverse and the integer-map test, and a fused stage's whole rows.

RandomResizedCrop's boxes are also checked against torchvision's get_params written per sample
(its loop of tries), fed the same uniforms."""
import math

import numpy as np
import pytest

import gpuaug
from gpuaug import geometry as G
from gpuaug import random as R
from gpuaug.policy import _fused as F


# ------------------------------------------------------------------ references (the old code)
def _old_integers(rng, low, high, n):
    low = np.asarray(low, np.int64)
    span = np.asarray(high, np.int64) - low
    return low + np.minimum(np.floor(rng.random(n) * span).astype(np.int64), np.maximum(span - 1, 0))


def _old_resized_crop_boxes(rng, sizes, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), attempts=10):
    s = np.asarray(sizes).astype(np.int64).reshape(-1, 2)
    n = s.shape[0]
    hh, ww = s[:, 0].astype(np.float64), s[:, 1].astype(np.float64)
    area = (hh * ww)[:, None] * rng.uniform(scale[0], scale[1], (n, attempts))
    logr = rng.uniform(math.log(ratio[0]), math.log(ratio[1]), (n, attempts))
    ar = np.exp(logr)
    w = np.rint(np.sqrt(area * ar))
    h = np.rint(np.sqrt(area / ar))
    ok = (w > 0) & (w <= ww[:, None]) & (h > 0) & (h <= hh[:, None])
    first = np.argmax(ok, axis=1)
    found = ok[np.arange(n), first]
    bh = h[np.arange(n), first]
    bw = w[np.arange(n), first]
    in_ratio = ww / hh
    lo, hi = min(ratio), max(ratio)
    fw = np.where(in_ratio < lo, ww, np.where(in_ratio > hi, np.rint(hh * hi), ww))
    fh = np.where(in_ratio < lo, np.rint(ww / lo), hh)
    bh = np.where(found, bh, fh).astype(np.int64)
    bw = np.where(found, bw, fw).astype(np.int64)
    top = _old_integers(rng, 0, s[:, 0] - bh + 1, n)
    left = _old_integers(rng, 0, s[:, 1] - bw + 1, n)
    top = np.where(found, top, (s[:, 0] - bh) // 2)
    left = np.where(found, left, (s[:, 1] - bw) // 2)
    return np.stack([top, left, bh, bw], axis=1)


def _old_affine_draws(rng, n, s, degrees, translate, scale, shear):
    k = 1 + 2 * (translate is not None) + (scale is not None) + (0 if shear is None else len(shear) // 2)
    u = iter(rng.random((k, n)))
    out = {"angle": degrees[0] + (degrees[1] - degrees[0]) * next(u)}
    if translate is not None:
        mx, my = translate[0] * s[:, 1], translate[1] * s[:, 0]
        out["tx"] = np.rint(mx * (2 * next(u) - 1))
        out["ty"] = np.rint(my * (2 * next(u) - 1))
    else:
        out["tx"] = out["ty"] = np.zeros(n)
    out["scale"] = scale[0] + (scale[1] - scale[0]) * next(u) if scale is not None else np.ones(n)
    out["shear_x"] = out["shear_y"] = np.zeros(n)
    if shear is not None:
        out["shear_x"] = shear[0] + (shear[1] - shear[0]) * next(u)
        if len(shear) == 4:
            out["shear_y"] = shear[2] + (shear[3] - shear[2]) * next(u)
    return out


def _old_cos_sin(angle_deg):
    r = np.deg2rad(angle_deg)
    c, s = np.cos(r), np.sin(r)
    q90 = angle_deg / 90.0
    q = np.round(q90)
    exact = q90 == q
    if not exact.any():
        return c, s
    k = np.mod(q, 4).astype(np.int64)
    c = np.where(exact, np.asarray([1.0, 0.0, -1.0, 0.0])[k], c)
    s = np.where(exact, np.asarray([0.0, 1.0, 0.0, -1.0])[k], s)
    return c, s


def _old_affine_matrices(sizes, angle, tx, ty, scale, shear_x, shear_y, center=None):
    n = len(angle)
    h, w = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
    cx, cy = ((w - 1) / 2, (h - 1) / 2) if center is None else (np.full(n, center[0]), np.full(n, center[1]))
    angle = np.asarray(angle, np.float64)
    cr, sr = _old_cos_sin(angle)
    if np.asarray(shear_x).any() or np.asarray(shear_y).any():
        sx, sy = np.deg2rad(shear_x), np.deg2rad(shear_y)
        cos_sy, tan_sx = np.cos(sy), np.tan(sx)
        crs, srs = _old_cos_sin(angle - shear_y)
        a = crs / cos_sy
        c = srs / cos_sy
        b = -(a * tan_sx + sr)
        d = cr - c * tan_sx
    else:
        a, b, c, d = cr, -sr, sr, cr
    m = np.zeros((n, 9))
    m[:, 0], m[:, 1], m[:, 3], m[:, 4] = a * scale, b * scale, c * scale, d * scale
    m[:, 2] = cx + tx - m[:, 0] * cx - m[:, 1] * cy
    m[:, 5] = cy + ty - m[:, 3] * cx - m[:, 4] * cy
    m[:, 8] = 1.0
    return m.reshape(n, 3, 3)


def _old_box_matrices(boxes, out_hw):
    top, left, bh, bw = (boxes[:, k].astype(np.float64) for k in range(4))
    fy, fx = out_hw[0] / bh, out_hw[1] / bw
    m = np.zeros((len(boxes), 3, 3))
    m[:, 0, 0], m[:, 1, 1], m[:, 2, 2] = fx, fy, 1.0
    m[:, 0, 2] = (0.5 - left) * fx - 0.5
    m[:, 1, 2] = (0.5 - top) * fy - 0.5
    return m


def _old_eye(n):
    m = np.empty((n, 9))
    m[:] = np.eye(3).reshape(9)
    return m.reshape(n, 3, 3)


def _old_flip_matrices(t, params, sizes):
    on = params["apply"]
    m = _old_eye(len(on))
    k = t.axis
    row = 0 if k == 1 else 1
    m[:, row, row] = 1.0 - 2.0 * on
    m[:, row, 2] = on * (sizes[:, k] - 1.0)
    return m


def _old_inverse(m):
    a, b, c, d, e, f, g, h, i = np.ascontiguousarray(m.reshape(-1, 9).T)
    inv = np.empty((9, m.shape[0]))
    inv[0], inv[3], inv[6] = e * i - f * h, f * g - d * i, d * h - e * g
    det = a * inv[0] + b * inv[3] + c * inv[6]
    inv[1], inv[4], inv[7] = c * h - b * i, a * i - c * g, b * g - a * h
    inv[2], inv[5], inv[8] = b * f - c * e, c * d - a * f, a * e - b * d
    with np.errstate(divide="ignore", invalid="ignore"):
        inv /= det
    return inv.T, det


def _old_integer_maps(a):
    v = a[:, :6]
    ok = (v == np.round(v)).all(axis=1)
    al = np.abs(a[:, [0, 1, 3, 4]])
    ok &= (al[:, 0] + al[:, 1] == 1) & (al[:, 2] + al[:, 3] == 1) & (al[:, 0] + al[:, 2] == 1)
    return ok & (a[:, 6] == 0) & (a[:, 7] == 0) & (a[:, 8] == 1)


def _old_matrices(t, params, sizes):
    """A geometry transform's (n, 3, 3) maps by the old builders (the ones this file covers)."""
    if isinstance(t, gpuaug.RandomHorizontalFlip) or isinstance(t, gpuaug.RandomVerticalFlip):
        return _old_flip_matrices(t, params, sizes)
    if isinstance(t, gpuaug.RandomAffine):
        ctr = None if t.center is None else (t.center[0] - 0.5, t.center[1] - 0.5)
        return _old_affine_matrices(sizes, params["angle"], params["tx"], params["ty"], params["scale"],
                                    params["shear_x"], params["shear_y"], ctr)
    if isinstance(t, gpuaug.RandomRotation):
        n = len(params["angle"])
        z, o = np.zeros(n), np.ones(n)
        ctr = None if t.center is None else (t.center[0] - 0.5, t.center[1] - 0.5)
        return _old_affine_matrices(sizes, -params["angle"], z, z, o, z, z, ctr)
    if isinstance(t, gpuaug.RandomResizedCrop):
        return _old_box_matrices(params["boxes"], t.size)
    if isinstance(t, gpuaug.Resize):
        return _old_box_matrices(np.concatenate([np.zeros((len(sizes), 2)), sizes], axis=1), t.size)
    return t.matrices(params, sizes)  # (builders this change left alone)


# ------------------------------------------------------------------ RandomResizedCrop's draws
def _sizes_case(g, kind, n):
    if kind == 0:
        return g.integers(1, 300, (n, 2))
    if kind == 1:  # one size, as Compose's zero-strided broadcast
        return F.uniform_sizes(n, int(g.integers(1, 60)), int(g.integers(1, 400)))
    if kind == 2:  # tiny images: many samples take the fallback
        return g.integers(1, 6, (n, 2))
    return np.broadcast_to(np.array([224, 224], np.int64), (n, 2))


@pytest.mark.parametrize("kind", range(4))
def test_resized_crop_boxes_match_the_previous_formulas(kind):
    for seed in range(150):
        g = np.random.default_rng(1000 * kind + seed)
        n = int(g.integers(0, 40))
        sizes = _sizes_case(g, kind, n)
        lo = g.uniform(0.01, 1.5)
        scale = (lo, lo + g.uniform(0, 2))
        r0 = g.uniform(0.1, 2)
        ratio = (r0, r0 * g.uniform(1, 5))
        attempts = int(g.integers(1, 12))
        ref_g, got_g, raw_g = (np.random.default_rng(seed) for _ in range(3))
        want = _old_resized_crop_boxes(ref_g, sizes, scale, ratio, attempts)
        got = R.resized_crop_boxes(got_g, sizes, scale, ratio, attempts)
        raw = R.resized_crop_draws(raw_g, np.asarray(sizes, np.int64), scale, ratio, attempts)
        assert got.dtype == raw.dtype == np.int64 and got.shape == raw.shape == (n, 4)
        assert want.tobytes() == got.tobytes() == raw.tobytes(), (kind, seed)
        # the same numbers were consumed
        assert ref_g.random() == got_g.random() == raw_g.random()


def _per_sample_get_params(h, w, area_u, logr_u, top_u, left_u, scale, ratio):
    """torchvision's RandomResizedCrop.get_params for one (h, w) image, its tries' uniforms
    given: area_u (U(scale) draws), logr_u (U(log ratio) draws), top_u / left_u (U[0, 1))."""
    area = h * w
    for k in range(len(area_u)):
        target_area = area * float(area_u[k])
        aspect_ratio = float(np.exp(logr_u[k]))
        cw = int(round(math.sqrt(target_area * aspect_ratio)))
        ch = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < cw <= w and 0 < ch <= h:
            i = int(min(math.floor(top_u * (h - ch + 1)), h - ch))
            j = int(min(math.floor(left_u * (w - cw + 1)), w - cw))
            return i, j, ch, cw
    in_ratio = float(w) / float(h)
    if in_ratio < min(ratio):
        cw = w
        ch = int(round(cw / min(ratio)))
    elif in_ratio > max(ratio):
        ch = h
        cw = int(round(ch * max(ratio)))
    else:
        cw, ch = w, h
    return (h - ch) // 2, (w - cw) // 2, ch, cw


@pytest.mark.parametrize("case", [((0.08, 1.0), (3 / 4, 4 / 3)), ((0.5, 2.5), (0.2, 5.0)), ((0.9, 1.0), (2.0, 3.0))])
def test_resized_crop_boxes_match_torchvisions_per_sample_loop(case):
    """The vectorised tries pick torchvision's box: its loop, per sample, fed the uniforms the
    docstring says are drawn (area (n, attempts), log ratio (n, attempts), tops n, lefts n)."""
    scale, ratio = case
    g = np.random.default_rng(7)
    n, attempts = 300, 10
    sizes = np.concatenate([g.integers(1, 400, (n // 2, 2)), g.integers(1, 8, (n - n // 2, 2))])
    got = R.resized_crop_boxes(np.random.default_rng(3), sizes, scale, ratio, attempts)
    u = np.random.default_rng(3)
    area_u = u.uniform(scale[0], scale[1], (n, attempts))
    logr_u = u.uniform(math.log(ratio[0]), math.log(ratio[1]), (n, attempts))
    top_u, left_u = u.random(n), u.random(n)
    want = [_per_sample_get_params(int(h), int(w), area_u[i], logr_u[i], top_u[i], left_u[i], scale, ratio)
            for i, (h, w) in enumerate(sizes)]
    np.testing.assert_array_equal(got, np.array(want, np.int64))
    # (torchvision's fallback can give a 0-pixel side on tiny images with ratios away from 1)
    assert (got[:, 2:] >= 0).all() and (got[:, 0] + got[:, 2] <= sizes[:, 0]).all()


def test_integers_match_the_previous_formula():
    g = np.random.default_rng(0)
    for n in (0, 1, 5, 256):
        low = g.integers(-50, 50, n)
        high = low + g.integers(0, 100, n)
        for lo, hi in ((low, high), (-50, high), (3, 9), (low.astype(np.float64), high.astype(np.float64))):
            a, b = np.random.default_rng(n), np.random.default_rng(n)
            np.testing.assert_array_equal(R.integers(a, lo, hi, n), _old_integers(b, lo, hi, n))
    with pytest.raises(ValueError, match="^low: got"):
        R.integers(g, np.array([0.0, np.nan]), 3, 2)
    with pytest.raises(ValueError, match="^low, high: got"):
        R.integers(g, np.array([5, 1]), np.array([4, 2]), 2)


@pytest.mark.parametrize("one_size", [False, True])
def test_affine_draws_match_the_previous_formulas(one_size):
    for seed in range(60):
        g = np.random.default_rng(seed)
        n = int(g.integers(0, 40))
        sizes = F.uniform_sizes(n, 37, 213) if one_size else g.integers(1, 400, (n, 2))
        translate = None if seed % 3 == 0 else tuple(g.uniform(0, 1, 2))
        scale = None if seed % 4 == 0 else (0.5, 1.7)
        shear = [None, (-5.0, 5.0), (-5.0, 5.0, -3.0, 8.0)][seed % 3]
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        want = _old_affine_draws(a, n, sizes, (-20.0, 35.0), translate, scale, shear)
        got = R.affine_draws(b, n, sizes, (-20.0, 35.0), translate, scale, shear)
        assert sorted(got) == sorted(want)
        for k in want:
            assert np.asarray(got[k]).tobytes() == np.asarray(want[k]).tobytes(), (seed, k)
        assert a.random() == b.random()


# ------------------------------------------------------------------ geometry builders
def test_geometry_builders_match_the_previous_formulas():
    for seed in range(400):
        g = np.random.default_rng(seed)
        n = int(g.integers(0, 30))
        h, w = (int(v) for v in g.integers(1, 500, 2))
        sizes = (F.uniform_sizes(n, h, h if seed % 4 == 1 else w) if seed % 2  # (square: cx == cy)
                 else g.integers(1, 500, (n, 2)))
        ang = g.uniform(-400, 400, n)
        ang[::3] = np.round(ang[::3] / 90) * 90  # exact quarter turns
        ang[1::7] = -0.0
        tx, ty = np.rint(g.uniform(-30, 30, (2, n)))
        sc = g.uniform(0.5, 2, n)
        shx = g.uniform(-20, 20, n) if seed % 3 == 0 else np.zeros(n)
        shy = g.uniform(-20, 20, n) if seed % 5 == 0 else np.zeros(n)
        ctr = None if seed % 4 else tuple(g.uniform(-5, 50, 2))
        want = _old_affine_matrices(sizes, ang, tx, ty, sc, shx, shy, ctr)
        got = G.affine_matrices(sizes, ang, tx, ty, sc, shx, shy, ctr)
        assert got.shape == want.shape and got.flags.c_contiguous
        assert got.tobytes() == want.tobytes(), seed
        for a, b in zip(G.cos_sin(ang), _old_cos_sin(ang)):
            assert a.tobytes() == b.tobytes()
        boxes = np.stack([g.integers(0, 50, n), g.integers(0, 50, n), g.integers(1, 300, n), g.integers(1, 300, n)], 1)
        if seed % 7 == 0:
            boxes = boxes + g.uniform(0, 1, (n, 4))
        hw = (int(g.integers(1, 300)), int(g.integers(1, 300)))
        assert G.box_matrices(boxes, hw).tobytes() == _old_box_matrices(boxes, hw).tobytes()
        assert G.eye(n).tobytes() == _old_eye(n).tobytes() and G.eye(n).flags.writeable
        for t in (gpuaug.RandomHorizontalFlip(), gpuaug.RandomVerticalFlip()):
            p = t.sample(g, n, sizes)
            for q in (p, {"apply": p["apply"].astype(np.float64)}):
                assert t.matrices(q, sizes).tobytes() == _old_flip_matrices(t, q, sizes).tobytes()


def test_inverse_and_integer_maps_match_the_previous_formulas():
    g = np.random.default_rng(5)
    n = 400
    m = g.normal(size=(n, 3, 3)) * g.choice([1e-300, 1.0, 3.0, 1e200], size=(n, 1, 1))
    m[::5] = np.round(m[::5])
    m[1::7] = -0.0
    m[2::11, 1] = np.nan
    # maps of flips, quarter turns and integer shifts (integer inverses), and near-integer ones
    perm = np.array([[[1, 0], [0, 1]], [[-1, 0], [0, 1]], [[0, 1], [-1, 0]], [[0, -1], [-1, 0]]], np.float64)
    m[3::4, :2, :2] = perm[g.integers(0, 4, len(m[3::4]))]
    m[3::4, :2, 2] = g.integers(-9, 9, (len(m[3::4]), 2))
    m[3::4, 2] = (0.0, 0.0, 1.0)
    m[3::8, 0, 2] += 1e-9
    with np.errstate(all="ignore"):
        got, gdet = F._inverse(m)
        want, wdet = _old_inverse(m)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
    assert gdet.tobytes() == wdet.tobytes()
    fin = np.isfinite(want).all(axis=1)
    with np.errstate(all="ignore"):
        a, b = F._integer_maps(got[fin]), _old_integer_maps(want[fin])
    assert a.tolist() == b.tolist() and a.any() and not a.all()


# ------------------------------------------------------------------ whole stage rows
def _old_rows(spec, transforms, tparams, sizes, base, bilinear):
    """The stage's rows (geometry only) by the old builders: maps, np.matmul, inverse, interp."""
    rows = base.copy()
    m = None
    for i in spec.geometry:
        mi = _old_matrices(transforms[i], tparams[i], sizes)
        m = mi if m is None else np.matmul(mi, m)
        sizes = np.asarray(transforms[i].out_sizes(sizes), np.int64)
    inv, _ = _old_inverse(m)
    rows[:, F.P_MAP:F.P_MAP + 9] = inv
    if bilinear:
        rows[:, F.P_INTERP] = ~_old_integer_maps(inv)
    return rows


POLICIES = {
    "flip_affine_rrc": lambda: [gpuaug.RandomHorizontalFlip(),
                                gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                                gpuaug.RandomResizedCrop(24)],
    "rotation_shear_resize": lambda: [gpuaug.RandomVerticalFlip(0.7), gpuaug.RandomRotation(180),
                                      gpuaug.RandomAffine(30, shear=(-10, 10, -5, 5), center=(3.5, 4.0)),
                                      gpuaug.Resize((20, 18))],
    "rrc_small_scale": lambda: [gpuaug.RandomResizedCrop((9, 13), scale=(0.01, 0.3), ratio=(0.5, 2.0)),
                                gpuaug.RandomHorizontalFlip(1.0)],
}


@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("varshape", [False, True])
def test_stage_rows_match_the_previous_builders(name, varshape):
    """F.build (template fast path included) gives the rows the old builders give, bit for bit,
    for uniform batches and lists of images of different sizes."""
    from gpuaug._batch import as_batch
    from gpuaug.policy.compose import batch_sizes

    pol = gpuaug.Compose(POLICIES[name](), seed=3)
    g = np.random.default_rng(1)
    n = 33
    if varshape:
        x = [np.zeros((int(h), int(w), 3), np.uint8) for h, w in g.integers(5, 60, (n, 2))]
    else:
        x = np.zeros((n, 41, 29, 3), np.uint8)
    b = as_batch(x, "NHWC")
    (kind, spec), = pol._items("uint8")
    sizes = batch_sizes(b)
    bilinear = any(pol.transforms[i].interpolation == "bilinear" for i in spec.geometry)
    for call in range(4):  # the first call builds the template, the later ones use it
        p = pol._sample(n, sizes, None)
        built = F.build(spec, pol.transforms, p.values, b, "NHWC")
        want = _old_rows(spec, pol.transforms, p.values, sizes, built.rows, bilinear)
        assert built.rows.tobytes() == want.tobytes(), (name, call)


def test_rrc_policy_is_deterministic_and_replays():
    """Same seed, same bits; last_params replays the call (RandomResizedCrop's fast draws)."""
    x = np.random.default_rng(0).integers(0, 256, (6, 12, 10, 3), dtype=np.uint8)
    make = POLICIES["flip_affine_rrc"]
    a, b = gpuaug.Compose(make(), seed=11), gpuaug.Compose(make(), seed=11)
    ya, yb = a(x, backend="cpu"), b(x, backend="cpu")
    assert ya.tobytes() == yb.tobytes()
    for k in range(3):
        np.testing.assert_array_equal(a.last_params[k][next(iter(a.last_params[k]))],
                                      b.last_params[k][next(iter(b.last_params[k]))])
    again = a(x, params=a.last_params, backend="cpu")
    assert again.tobytes() == ya.tobytes()
    # the boxes are torchvision's rule on the batch's sizes, drawn after the flip and affine draws
    assert (a.last_params[2]["boxes"][:, 0] + a.last_params[2]["boxes"][:, 2] <= 12).all()


# ------------------------------------------------------------------ the other integer draws
def _old_perspective_corners(rng, sizes, distortion_scale=0.5):
    s = np.asarray(sizes).astype(np.int64).reshape(-1, 2)
    n = s.shape[0]
    h, w = s[:, 0], s[:, 1]
    bh = (distortion_scale * (h // 2)).astype(np.int64) + 1
    bw = (distortion_scale * (w // 2)).astype(np.int64) + 1
    tl = (_old_integers(rng, 0, bw, n), _old_integers(rng, 0, bh, n))
    tr = (_old_integers(rng, w - bw, w, n), _old_integers(rng, 0, bh, n))
    br = (_old_integers(rng, w - bw, w, n), _old_integers(rng, h - bh, h, n))
    bl = (_old_integers(rng, 0, bw, n), _old_integers(rng, h - bh, h, n))
    return np.stack([np.stack(c, axis=1) for c in (tl, tr, br, bl)], axis=1).astype(np.float64)


def _old_erasing_boxes(rng, sizes, scale=(0.02, 0.33), ratio=(0.3, 3.3), attempts=10):
    s = np.asarray(sizes).astype(np.int64).reshape(-1, 2)
    n = s.shape[0]
    hh, ww = s[:, 0].astype(np.float64), s[:, 1].astype(np.float64)
    area = (hh * ww)[:, None] * rng.uniform(scale[0], scale[1], (n, attempts))
    ar = np.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1]), (n, attempts)))
    h = np.rint(np.sqrt(area * ar))
    w = np.rint(np.sqrt(area / ar))
    ok = (h < hh[:, None]) & (w < ww[:, None])
    first = np.argmax(ok, axis=1)
    found = ok[np.arange(n), first]
    bh = np.where(found, h[np.arange(n), first], 0).astype(np.int64)
    bw = np.where(found, w[np.arange(n), first], 0).astype(np.int64)
    top = _old_integers(rng, 0, s[:, 0] - bh + 1, n)
    left = _old_integers(rng, 0, s[:, 1] - bw + 1, n)
    return np.stack([top, left, bh, bw], axis=1)


def _old_crop_offsets(rng, sizes, size, padding=(0, 0, 0, 0)):
    s = np.asarray(sizes).astype(np.int64).reshape(-1, 2)
    n = s.shape[0]
    pl, pt, pr, pb = padding
    top = _old_integers(rng, -pt, s[:, 0] + pb - size[0] + 1, n)
    left = _old_integers(rng, -pl, s[:, 1] + pr - size[1] + 1, n)
    return np.stack([top, left], axis=1)


def test_integer_samplers_match_the_previous_formulas():
    """perspective_corners, erasing_boxes and crop_offsets draw their k integer quantities as
    one (k, n) block: the numbers k integers() calls took, the same values and dtypes."""
    for seed in range(120):
        g = np.random.default_rng(seed)
        n = int(g.integers(0, 30))
        h, w = (int(v) for v in g.integers(1, 300, 2))
        sizes = [g.integers(1, 300, (n, 2)), np.tile([h, w], (n, 1)), F.uniform_sizes(n, h, w)][seed % 4 % 3]
        pads = [(0, 0, 0, 0), tuple(int(v) for v in g.integers(0, 9, 4)),
                tuple(np.full(n, int(v), np.int64) for v in g.integers(0, 9, 4))][seed % 3]
        pl, pt, pr, pb = (np.broadcast_to(np.asarray(v, np.int64), (n,)) for v in pads)
        fit_h = int((sizes[:, 0] + pt + pb).min()) if n else 5  # the largest window every image fits
        fit_w = int((sizes[:, 1] + pl + pr).min()) if n else 5
        size = (max(1, fit_h - int(g.integers(0, 3))), max(1, fit_w - int(g.integers(0, 3))))
        cases = [(R.perspective_corners, _old_perspective_corners, (sizes, float(g.uniform(0, 1)))),
                 (R.erasing_boxes, _old_erasing_boxes, (sizes, (0.02, 0.5), (0.3, 3.3))),
                 (R.crop_offsets, _old_crop_offsets, (sizes, size, pads))]
        for new, old, args in cases:
            a, b = np.random.default_rng(seed), np.random.default_rng(seed)
            got, want = new(a, *args), old(b, *args)
            assert got.dtype == want.dtype and got.shape == want.shape, new.__name__
            assert got.tobytes() == want.tobytes(), (new.__name__, seed)
            assert a.random() == b.random()
