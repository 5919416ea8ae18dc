"""RandAugment, TrivialAugmentWide, AutoAugment (gpuaug/policy/auto.py, kernels/auto_augment.cu).

- per-op equivalence with the op and magnitude forced: against torchvision's own
  ``_apply_op`` (skipped where torchvision is not importable), and always against gpuaug's
  other ops' CPU twins and small independent NumPy formulas;
- the CUDA C kernels run on the CPU through the host emulation (tests/cuda_emu.py), bit-equal
  to the NumPy twin; on a GPU, the CuPy path bit-equal to the NumPy twin;
- op-choice distributions (chi-square over 100k draws), determinism and replay, bad input.
"""
import math

import numpy as np
import pytest

import gpuaug
from gpuaug.policy import auto as A
from gpuaug.policy.auto import AutoParams, apply_ops
from helpers import gpu

# Forced magnitudes per op: signed values both ways, and values that hit the tables' bins.
MAGS = {0: [0.0], 1: [0.3, -0.2, 0.99], 2: [0.27, -0.99], 3: [7.9, -12.0, 3.0], 4: [5.0, -9.5],
        5: [30.0, -17.0, 135.0], 6: [0.5, -0.9, 0.99], 7: [0.6, -0.7], 8: [0.8, -0.5], 9: [0.9, -0.9, 0.99],
        10: [2.0, 4.0, 6.0, 8.0, 0.0], 11: [0.0, 128.0, 246.5, 255.0], 12: [0.0], 13: [0.0], 14: [0.0]}


def _images(rng, n=6, h=23, w=29, c=3):
    x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    x[0] = x[0] // 3 + 60              # narrow range: AutoContrast stretches it
    if n > 1:
        x[1] = 77                      # flat: AutoContrast/Equalize leave it
    if n > 2:
        x[2] = (x[2].astype(np.float64) ** 2 / 255).astype(np.uint8)  # skewed histogram
    return x


def _force(op, mag, n, k=1):
    return AutoParams(np.full((n, k), op), np.full((n, k), float(mag)))


# -- against torchvision -------------------------------------------------------------------

def _torchvision():
    torch = pytest.importorskip("torch")
    aa = pytest.importorskip("torchvision.transforms.autoaugment")
    return torch, aa


@pytest.mark.parametrize("op", range(15))
def test_op_matches_torchvision_apply_op(op):
    torch, aa = _torchvision()
    from torchvision.transforms import InterpolationMode

    rng = np.random.default_rng(op)
    x = _images(rng, 6, 31, 37)
    for m in MAGS[op]:
        got = apply_ops(x, _force(op, m, len(x)))
        ref = np.stack([aa._apply_op(torch.from_numpy(s).permute(2, 0, 1).contiguous(), A.OP_NAMES[op], m,
                                     InterpolationMode.NEAREST, None).permute(1, 2, 0).numpy() for s in x])
        diff = np.abs(got.astype(int) - ref.astype(int))
        if op in A._GEOMETRIC:  # nearest sampling: rounding at exact half-pixel ties may differ
            assert (diff > 0).mean() <= 0.01, (A.OP_NAMES[op], m, (diff > 0).mean())
        else:
            # The colour ops' tolerance. gpuaug follows the float order of torchvision's v2
            # functionals; this _apply_op is v1's, which multiplies where v2 divides
            # (AutoContrast) and blends as f x + (1 - f) b where v2 adds (1 - f)(b - x)
            # (Sharpness): truncated results may then differ by one on whole flat regions.
            assert diff.max() <= 1, (A.OP_NAMES[op], m, diff.max())
            if op not in (9, 12):
                assert (diff > 0).mean() <= 0.01, (A.OP_NAMES[op], m, (diff > 0).mean())


@pytest.mark.parametrize("kind", ["rand", "trivial", "auto"])
def test_magnitude_tables_match_torchvision(kind):
    torch, aa = _torchvision()
    # A square size: torchvision passes (width, height) in older versions and (height, width)
    # in newer ones; TranslateX follows the width in both (checked below without torchvision).
    h = w = 224
    if kind == "rand":
        tv = aa.RandAugment()._augmentation_space(31, [w, h])
    elif kind == "trivial":
        tv = aa.TrivialAugmentWide()._augmentation_space(31)
    else:
        tv = aa.AutoAugment()._augmentation_space(10, [w, h])
    ours = A._space(kind, 10 if kind == "auto" else 31, h, w)
    assert [A.OP_NAMES[k] for k in ours] == list(tv)
    for k, (table, signed) in ours.items():
        mags, tsigned = tv[A.OP_NAMES[k]]
        assert signed == tsigned
        if mags.ndim == 0:
            assert table is None
        else:
            np.testing.assert_allclose(table, mags.numpy().astype(np.float32), rtol=1e-6, atol=1e-6)


def test_translate_tables_follow_width_and_height():
    for kind, bins in (("rand", 31), ("auto", 10)):
        sp = A._space(kind, bins, 100, 331)
        assert sp[3][0][-1] == pytest.approx(150.0) and sp[4][0][-1] == pytest.approx(150.0 / 331 * 100)
    sp = A._space("trivial", 31, 100, 331)
    assert sp[3][0][-1] == sp[4][0][-1] == 32.0
    assert list(A._space("trivial", 31, 8, 8)[10][0][[0, 5, 30]]) == [8, 7, 2]  # 8 - round(i / 5)


def test_autoaugment_policies_match_torchvision():
    torch, aa = _torchvision()
    for name in ("imagenet", "cifar10", "svhn"):
        tv = aa.AutoAugment(aa.AutoAugmentPolicy(name)).policies
        assert [tuple(sp) for sp in tv] == [tuple(sp) for sp in A._AA[name]]


# -- always: independent references on the CPU ---------------------------------------------

def test_colour_ops_match_gpuaug_ops_and_formulas():
    rng = np.random.default_rng(1)
    x = _images(rng)
    n = len(x)
    np.testing.assert_array_equal(apply_ops(x, _force(14, 0, n)), gpuaug.invert(x))
    np.testing.assert_array_equal(apply_ops(x, _force(13, 0, n)), gpuaug.equalize(x))
    for bits in (1, 3, 4, 8):
        np.testing.assert_array_equal(apply_ops(x, _force(10, bits, n)), gpuaug.posterize(x, bits))
    for t in (0.0, 100.5, 200.0):
        ref = np.where(x >= t, 255 - x, x)
        np.testing.assert_array_equal(apply_ops(x, _force(11, t, n)), ref)
    for m in (0.5, -0.9):  # brightness: trunc(clamp(x (1 + m)))
        ref = np.floor(np.clip(x * (1.0 + m), 0, 255))
        assert np.abs(apply_ops(x, _force(6, m, n)).astype(float) - ref).max() <= 1
    gray = np.floor(x @ np.array([0.2989, 0.587, 0.114]))[..., None]
    for m in (0.6, -0.7):  # Color: blend with the floored grey
        ref = np.floor(np.clip(x * (1 + m) - gray * m, 0, 255))
        assert np.abs(apply_ops(x, _force(7, m, n)).astype(float) - ref).max() <= 1
        mean = gray.mean(axis=(1, 2, 3), keepdims=True)
        ref = np.floor(np.clip(x * (1 + m) - mean * m, 0, 255))
        assert np.abs(apply_ops(x, _force(8, m, n)).astype(float) - ref).max() <= 1
    lo, hi = x.min(axis=(1, 2), keepdims=True).astype(float), x.max(axis=(1, 2), keepdims=True).astype(float)
    ref = np.where(hi > lo, np.floor(np.clip((x - lo) * 255 / np.maximum(hi - lo, 1), 0, 255)), x)
    assert np.abs(apply_ops(x, _force(12, 0, n)).astype(float) - ref).max() <= 1
    for m in (0.9, -0.9):  # Sharpness: gpuaug.sharpen rounds where torchvision truncates
        got = apply_ops(x, _force(9, m, n)).astype(int)
        assert np.abs(got - gpuaug.sharpen(x, 1 + m).astype(int)).max() <= 1


def test_geometric_ops_independent_reference():
    rng = np.random.default_rng(2)
    x = _images(rng, 4, 20, 26)
    n, h, w = x.shape[:3]
    for t in (5.0, -7.9, 12.5):  # TranslateX/Y by int(t) whole pixels, zeros shifted in
        k = int(t)
        ref = np.zeros_like(x)
        if k >= 0:
            ref[:, :, k:] = x[:, :, :w - k]
        else:
            ref[:, :, :w + k] = x[:, :, -k:]
        np.testing.assert_array_equal(apply_ops(x, _force(3, t, n)), ref)
        ref = np.zeros_like(x)
        if k >= 0:
            ref[:, k:] = x[:, :h - k]
        else:
            ref[:, :h + k] = x[:, -k:]
        np.testing.assert_array_equal(apply_ops(x, _force(4, t, n)), ref)
    # Shear and rotation: nearest source pixel of the inverse map, in float64.
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    for op, m in ((1, 0.3), (2, -0.25), (5, 20.0), (5, -135.0)):
        if op == 5:  # rotate about the centre by m degrees (counter-clockwise on screen)
            a = math.radians(m)
            u, v = xx + 0.5 - w / 2, yy + 0.5 - h / 2
            sx = math.cos(a) * u - math.sin(a) * v + w / 2 - 0.5
            sy = math.sin(a) * u + math.cos(a) * v + h / 2 - 0.5
        elif op == 1:  # torchvision's inverse map: source x = x + m y about the top-left corner
            sx, sy = xx + 0.5 + m * (yy + 0.5) - 0.5, yy
        else:
            sx, sy = xx, yy + 0.5 + m * (xx + 0.5) - 0.5
        ix, iy = np.rint(sx), np.rint(sy)
        inside = (ix >= 0) & (ix <= w - 1) & (iy >= 0) & (iy <= h - 1)
        src = x[:, np.clip(iy, 0, h - 1).astype(int), np.clip(ix, 0, w - 1).astype(int)]
        ref = np.where(inside[None, ..., None], src, 0)
        got = apply_ops(x, _force(op, m, n))
        assert (got != ref).any(axis=3).mean() <= 0.02, (op, m, (got != ref).any(axis=3).mean())


def test_steps_apply_in_order_and_single_image():
    rng = np.random.default_rng(3)
    x = _images(rng, 5, 12, 14)
    p = AutoParams(np.tile([[14, 10]], (5, 1)), np.tile([[0.0, 2.0]], (5, 1)))
    np.testing.assert_array_equal(apply_ops(x, p), (255 - x) & 0xC0)
    np.testing.assert_array_equal(apply_ops(x[2], AutoParams(p.ops[:1], p.magnitudes[:1])), ((255 - x) & 0xC0)[2])
    ra = gpuaug.RandAugment(0, seed=0)
    np.testing.assert_array_equal(ra(x), x)


def test_one_channel():
    rng = np.random.default_rng(4)
    x = _images(rng, 4, 15, 17, 1)
    np.testing.assert_array_equal(apply_ops(x, _force(7, 0.5, 4)), x)  # Color: unchanged for grey
    m = 0.5
    mean = x.reshape(4, -1).mean(1)[:, None, None, None]
    ref = np.floor(np.clip(x * (1 + m) - mean * m, 0, 255))
    assert np.abs(apply_ops(x, _force(8, m, 4)).astype(float) - ref).max() <= 1
    y = gpuaug.TrivialAugmentWide(seed=0)(x)
    assert y.shape == x.shape


# -- the CUDA C kernels, run on the CPU (host emulation), against the NumPy twin -------------

def _emulated(x, rows_k, emu):
    """The steps of gpuaug.policy.auto._run_cuda with host arrays and emulated kernels."""
    n, h, w, c = x.shape
    stats = emu.get_function("auto_augment.cu", f"gpuaug_autoaug_stats<{c}>")
    apply = emu.get_function("auto_augment.cu", f"gpuaug_autoaug_apply<{c}>")
    lp = c * 256 + 1
    src = np.ascontiguousarray(x)
    for rows in rows_k:
        rows = np.ascontiguousarray(rows, np.float32)
        minmax = np.zeros((n, 2 * c), np.uint32)
        hist = np.zeros((n, c, 256), np.uint32)
        gsum = np.zeros(n, np.uint64)
        lut = np.full((n, lp), np.nan, np.float32)
        stats((2, n), (256,), (src, h, w, rows, minmax, hist, gsum, n))
        lut[:, :c * 256] = A._luts_from_hist(hist).reshape(n, -1)  # equalize.cu's table step
        dst = np.full_like(src, 0xAB)
        apply((-(-h * w // 256), n), (256,), (src, dst, h, w, rows, minmax, gsum, lut, lp, n))
        src = dst
    return src


@pytest.mark.parametrize("c", [3, 1])
def test_cuda_kernels_host_emulation(monkeypatch, c):
    import cuda_emu

    why = cuda_emu.available()
    if why:
        pytest.skip(f"CUDA C emulation needs g++ with C++20: {why}")
    names = [f"gpuaug_autoaug_stats<{c}>", f"gpuaug_autoaug_apply<{c}>"]
    emu = cuda_emu._built.get(("auto", c))
    if emu is None:
        emu = cuda_emu._built[("auto", c)] = cuda_emu.Emulator(["auto_augment.cu"], names)
    rng = np.random.default_rng(5)
    x = _images(rng, 15, 9, 13, c)  # 117 pixels: more than 255 values only with C = 3 ...
    x = np.concatenate([x, _images(rng, 15, 24, 23, c)[:, :9, :13]])  # ... two blocks of pixels
    n = len(x)
    ops = np.tile(np.arange(15), 2)[:n]
    mags = np.array([MAGS[o][i % len(MAGS[o])] for i, o in enumerate(ops)])
    for bil in (False, True):
        rows = A.step_rows(ops, mags, 9, 13, bil)
        got = _emulated(x, [rows], emu)
        ref = A._apply_numpy(x, rows)
        bad = np.nonzero((got != ref).reshape(n, -1).any(1))[0]
        assert not len(bad), (bil, [A.OP_NAMES[ops[i]] for i in bad])
    # two steps, random ops
    p = gpuaug.RandAugment(2, 17, seed=6).draw(n, (9, 13))
    rows_k = [A.step_rows(p.ops[:, j], p.magnitudes[:, j], 9, 13) for j in range(2)]
    np.testing.assert_array_equal(_emulated(x, rows_k, emu), apply_ops(x, p))


def _emulated_fused(x, rows, emu):
    """gpuaug.policy.auto._run_cuda_fused (one chunk of <= 4 steps) with host arrays."""
    n, h, w, c = x.shape
    kk = rows.shape[0]
    lp = c * 256 + 1
    rows = np.ascontiguousarray(rows, np.float32)
    minmax = np.zeros(kk * n * 2 * c, np.uint32)
    hist = np.zeros((kk, n, c, 256), np.uint32)
    gsum = np.zeros(kk * n, np.uint64)
    lut = np.full((kk, n, lp), np.nan, np.float32)
    src = np.ascontiguousarray(x)
    for i in range(kk):
        if np.isin(rows[i, :, 0], A._STATS).any():
            # one block of 32 threads: 32 < h w, so each thread steps (y, x) through several rows
            # grid rows: the samples that reduce at step i, as _run_cuda_fused lists them
            act = np.flatnonzero(np.isin(rows[i, :, 0], A._STATS)).astype(np.int32)
            emu.get_function("auto_augment.cu", f"gpuaug_autoaug_stats_fused<{c}, {i}>")(
                (1, len(act)), (32,), (src, h, w, rows, n, minmax, hist, gsum, lut, lp, act))
            lut[i, :, :c * 256] = A._luts_from_hist(hist[i]).reshape(n, -1)  # equalize.cu's table step
    dst = np.full_like(src, 0xAB)
    emu.get_function("auto_augment.cu", f"gpuaug_autoaug_fused<{c}, {kk}>")(
        (-(-h * w // (64 * A._FUSED_PX)), n), (64,), (src, dst, h, w, rows, n, minmax, gsum, lut, lp))
    return dst


def _fused_emulator(c):
    """The fused kernels (1-3 steps) and their statistics launches, emulated, built once."""
    import cuda_emu

    key = ("auto_fused", c)
    if key not in cuda_emu._built:
        names = [f"gpuaug_autoaug_fused<{c}, {k}>" for k in (1, 2, 3)] + \
            [f"gpuaug_autoaug_stats_fused<{c}, {k}>" for k in (0, 1, 2)]
        cuda_emu._built[key] = cuda_emu.Emulator(["auto_augment.cu"], names)
    return cuda_emu._built[key]


@pytest.mark.parametrize("c", [3, 1])
def test_fused_kernels_host_emulation(c):
    """The fused path (all steps in one pass, statistics of intermediate images evaluated on
    the fly) equals the step-by-step NumPy twin bit for bit."""
    import cuda_emu

    why = cuda_emu.available()
    if why:
        pytest.skip(f"CUDA C emulation needs g++ with C++20: {why}")
    emu = _fused_emulator(c)
    rng = np.random.default_rng(15)
    x = _images(rng, 16, 8, 11, c)
    n, h, w = x.shape[:3]
    cases = []
    # every op at step 1 after every op at step 0 would be 225 pairs: walk them in 15 shifts
    ops0 = np.arange(15)[np.arange(n) % 15]
    for shift in (0, 3, 7, 9, 12):
        ops1 = (ops0 + shift) % 15
        ops = np.stack([ops0, ops1], 1)
        mags = np.array([[MAGS[o][(i + j) % len(MAGS[o])] for j, o in enumerate(row)] for i, row in enumerate(ops)])
        cases.append((AutoParams(ops, mags), "nearest"))
    cases.append((gpuaug.RandAugment(3, 20, seed=16).draw(n, (h, w)), "nearest"))
    cases.append((gpuaug.RandAugment(2, 9, seed=17).draw(n, (h, w)), "bilinear"))
    for p, interp in cases:
        k = p.ops.shape[1]
        rows = A.step_rows(p.ops.T.ravel(), p.magnitudes.T.ravel(), h, w, interp == "bilinear").reshape(k, n, -1)
        got = _emulated_fused(x, rows, emu)
        ref = apply_ops(x, p, interpolation=interp)
        bad = np.nonzero((got != ref).reshape(n, -1).any(1))[0]
        assert not len(bad), (interp, [p.names()[i] for i in bad])


def test_fused_kernel_grid_covers_every_pixel():
    """auto.py's grid for gpuaug_autoaug_fused (_FUSED_PX pixels a thread) and the kernel's
    GPUAUG_AA_PX agree: an image of several blocks' pixels (64-thread blocks here) is written
    whole, equal to the NumPy twin."""
    import cuda_emu

    why = cuda_emu.available()
    if why:
        pytest.skip(f"CUDA C emulation needs g++ with C++20: {why}")
    emu = _fused_emulator(3)
    rng = np.random.default_rng(19)
    x = _images(rng, 2, 23, 29, 3)  # 667 pixels: 6 blocks of 64 x 2
    p = AutoParams(np.array([[6, 14], [0, 10]]), np.array([[0.3, 0.0], [0.0, 5.0]]))
    rows = A.step_rows(p.ops.T.ravel(), p.magnitudes.T.ravel(), 23, 29, False).reshape(2, 2, -1)
    np.testing.assert_array_equal(_emulated_fused(x, rows, emu), apply_ops(x, p))


def test_augmix_fused_kernel_host_emulation():
    """gpuaug_augmix_fused (chains evaluated per pixel, mixed in float32) equals AugMix's NumPy path."""
    import cuda_emu

    why = cuda_emu.available()
    if why:
        pytest.skip(f"CUDA C emulation needs g++ with C++20: {why}")
    names = ["gpuaug_augmix_fused<3, 3>"] + [f"gpuaug_autoaug_stats_fused<3, {k}>" for k in (0, 1, 2)]
    key = ("augmix_fused",)
    if key not in cuda_emu._built:
        cuda_emu._built[key] = cuda_emu.Emulator(["auto_augment.cu"], names)
    emu = cuda_emu._built[key]
    rng = np.random.default_rng(22)
    x = _images(rng, 12, 7, 9)
    n, h, w, c = x.shape
    am = gpuaug.AugMix(seed=23)
    p = am.draw(n, (h, w))
    p.ops[:4, 0] = 12  # reductions at the first steps of chain 0, after a warp in chain 1
    p.ops[4:8, 3], p.ops[4:8, 4] = 1, 13
    p.magnitudes[4:8, 3], p.magnitudes[4:8, 4] = 0.2, 0.0
    ref = am(x, params=p)
    k, d, lp = 3, 3, c * 256 + 1
    rows = A.step_rows(p.ops.T.ravel(), p.magnitudes.T.ravel(), h, w, True).reshape(k * d, n, -1).astype(np.float32)
    minmax = np.zeros(k * d * n * 2 * c, np.uint32)
    hist = np.zeros((k * d, n, c, 256), np.uint32)
    gsum = np.zeros(k * d * n, np.uint64)
    lut = np.full((k * d, n, lp), np.nan, np.float32)
    for j in range(k):
        st = j * d
        for i in range(d):
            if np.isin(rows[st + i, :, 0], A._STATS).any():
                emu.get_function("auto_augment.cu", f"gpuaug_autoaug_stats_fused<3, {i}>")(
                    (2, n), (64,), (x, h, w, np.ascontiguousarray(rows[st:st + d]), n, minmax[st * n * 2 * c:],
                                    hist[st:], gsum[st * n:], np.ascontiguousarray(lut[st:st + d]), lp,
                                    np.arange(n, dtype=np.int32)))
                lut[st + i, :, :c * 256] = A._luts_from_hist(hist[st + i]).reshape(n, -1)
    out = np.full_like(x, 0xAB)
    weights = np.ascontiguousarray(p.extra["weights"], np.float32)
    emu.get_function("auto_augment.cu", "gpuaug_augmix_fused<3, 3>")(
        (-(-h * w // 64), n), (64,), (x, out, h, w, rows, n, k, minmax, gsum, lut, lp, weights))
    np.testing.assert_array_equal(out, ref)


# -- distributions, determinism, replay -----------------------------------------------------

def _chi2_uniform(counts):
    from scipy import stats

    return stats.chisquare(counts).pvalue


def test_op_choice_distributions():
    n = 100_000
    p = gpuaug.RandAugment(2, 9, seed=11).draw(n, (224, 224))
    assert _chi2_uniform(np.bincount(p.ops.ravel(), minlength=14)) > 1e-4
    assert p.ops.max() == 13 and p.ops.min() == 0
    shear = p.ops == 1  # signed: half negative
    neg = (p.magnitudes[shear] < 0).sum()
    assert abs(neg / shear.sum() - 0.5) < 0.02
    t = gpuaug.TrivialAugmentWide(seed=12).draw(n, (224, 224))
    assert _chi2_uniform(np.bincount(t.ops.ravel(), minlength=14)) > 1e-4
    assert _chi2_uniform(np.bincount(t.extra["bins"].ravel(), minlength=31)) > 1e-4
    for name in ("imagenet", "cifar10", "svhn"):
        aa = gpuaug.AutoAugment(name, seed=13)
        q = aa.draw(n, (32, 32))
        pid = q.extra["policy_ids"]
        assert _chi2_uniform(np.bincount(pid, minlength=25)) > 1e-4
        # expected frequency of each op id: sum over sub-policies of P(pick) * P(apply)
        from scipy import stats

        exp = np.zeros(15)
        for sp in A._AA[name]:
            for op, prob, _ in sp:
                exp[A.OP_ID[op]] += prob / 25
                exp[0] += (1 - prob) / 25
        obs = np.bincount(q.ops.ravel(), minlength=15)
        keep = exp > 0
        assert (obs[~keep] == 0).all()
        assert stats.chisquare(obs[keep], exp[keep] / exp[keep].sum() * obs.sum()).pvalue > 1e-4


def test_determinism_and_replay():
    rng = np.random.default_rng(7)
    x = _images(rng, 8, 20, 22)
    for make in (lambda: gpuaug.RandAugment(3, 20, seed=5), lambda: gpuaug.TrivialAugmentWide(seed=5),
                 lambda: gpuaug.AutoAugment("imagenet", seed=5)):
        a, b = make(), make()
        ya, yb = a(x), b(x)
        np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(a.last_params.ops, b.last_params.ops)
        np.testing.assert_array_equal(a(x, params=a.last_params), a(x, params=a.last_params))
        np.testing.assert_array_equal(a(x, seed=3), b(x, seed=3))
    ra = gpuaug.RandAugment(seed=0)
    p = ra.draw(8, (20, 22))
    assert (ra.draw(8, (20, 22), seed=1).ops == gpuaug.RandAugment().draw(8, (20, 22), seed=1).ops).all()
    assert p.ops.shape == (8, 2)


# -- bad input -------------------------------------------------------------------------------

def test_bad_input():
    with pytest.raises(ValueError, match=r"magnitude: got 31; expected an int in \[0, 31\)"):
        gpuaug.RandAugment(2, 31)
    with pytest.raises(ValueError, match=r"magnitude: got -1"):
        gpuaug.RandAugment(2, -1)
    with pytest.raises(ValueError, match=r"magnitude: got 5; expected an int in \[0, 5\)"):
        gpuaug.RandAugment(2, 5, num_magnitude_bins=5)
    with pytest.raises(ValueError, match=r"num_ops: got -1; expected an int >= 0"):
        gpuaug.RandAugment(-1)
    with pytest.raises(TypeError, match="num_ops"):
        gpuaug.RandAugment(1.5)
    with pytest.raises(ValueError, match=r"num_magnitude_bins: got 0"):
        gpuaug.TrivialAugmentWide(0)
    with pytest.raises(ValueError, match=r"policy: got 'imagenet21k'; expected one of 'imagenet', 'cifar10', 'svhn'"):
        gpuaug.AutoAugment("imagenet21k")
    ra = gpuaug.RandAugment(seed=0)
    with pytest.raises(ValueError, match=r"x: got float32 array .*expected uint8"):
        ra(np.zeros((2, 8, 8, 3), np.float32))
    with pytest.raises(ValueError, match=r"x: got uint8 array of shape \(2, 8, 8, 4\)"):
        ra(np.zeros((2, 8, 8, 4), np.uint8))
    with pytest.raises(ValueError, match=r"params: got ops of shape \(3, 2\)"):
        ra(np.zeros((2, 8, 8, 3), np.uint8), params=AutoParams(np.zeros((3, 2), int), np.zeros((3, 2))))
    with pytest.raises(ValueError, match=r"params.ops: got values in \[15, 15\]; expected op ids in \[0, 15\)"):
        ra(np.zeros((1, 8, 8, 3), np.uint8), params=AutoParams(np.array([[15]]), np.zeros((1, 1))))
    with pytest.raises(ValueError, match="seed: got a seed and params"):
        ra(np.zeros((1, 8, 8, 3), np.uint8), 1, params=ra.draw(1, (8, 8)))


def test_kernel_compiles_with_nvrtc():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from gpuaug.kernels._cuda import check_compile

    try:
        check_compile("auto_augment.cu", [f"gpuaug_autoaug_{k}<{c}>" for k in ("stats", "apply") for c in (1, 3)])
    except (ImportError, OSError) as e:  # no NVRTC library on this machine
        pytest.skip(f"NVRTC not loadable: {e}")


# -- GPU ---------------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("c", [3, 1])
def test_cuda_matches_numpy_twin_gpu(c):
    import cupy

    rng = np.random.default_rng(8)
    x = _images(rng, 30, 37, 41, c)
    n = len(x)
    ops = np.tile(np.arange(15), 2)
    mags = np.array([MAGS[o][i % len(MAGS[o])] for i, o in enumerate(ops)])
    p = AutoParams(ops[:, None], mags[:, None])
    np.testing.assert_array_equal(cupy.asnumpy(apply_ops(cupy.asarray(x), p)), apply_ops(x, p))
    for pol in (gpuaug.RandAugment(2, 9, seed=1), gpuaug.RandAugment(3, 30, seed=2), gpuaug.TrivialAugmentWide(seed=3),
                gpuaug.AutoAugment("imagenet", seed=4), gpuaug.AutoAugment("svhn", seed=4), gpuaug.AugMix(seed=5),
                gpuaug.RandAugment(2, 9, interpolation="bilinear", seed=6)):
        y = pol(cupy.asarray(x))
        np.testing.assert_array_equal(cupy.asnumpy(y), pol(x, params=pol.last_params))
    # a big batch and a stream, output into a given array
    xb = cupy.asarray(rng.integers(0, 256, (64, 224, 224, c), dtype=np.uint8))
    s = cupy.cuda.Stream(non_blocking=True)
    ta = gpuaug.TrivialAugmentWide(seed=9)
    out = cupy.empty_like(xb)
    y = ta(xb, out=out, stream=s)
    s.synchronize()
    assert y is out
    np.testing.assert_array_equal(cupy.asnumpy(y), ta(cupy.asnumpy(xb), params=ta.last_params))
    # the step-by-step launches equal the fused ones; more than 4 steps run in chunks
    for pol in (gpuaug.RandAugment(2, 9, seed=11), gpuaug.RandAugment(6, 15, seed=12)):
        p = pol.draw(64, (224, 224))
        k = p.ops.shape[1]
        rows = A.step_rows(p.ops.T.ravel(), p.magnitudes.T.ravel(), 224, 224).reshape(k, 64, -1)
        fused = A._run_cuda(xb, rows, None, None, True)
        steps = A._run_cuda(xb, rows, None, None, False)
        np.testing.assert_array_equal(cupy.asnumpy(fused), cupy.asnumpy(steps))
    np.testing.assert_array_equal(cupy.asnumpy(fused[:4]), apply_ops(cupy.asnumpy(xb[:4]), AutoParams(
        p.ops[:4], p.magnitudes[:4])))
    # in place (out is x)
    ra = gpuaug.RandAugment(3, 9, seed=10)
    ref = ra(xb)
    xc = xb.copy()
    assert ra(xc, out=xc, params=ra.last_params) is xc
    np.testing.assert_array_equal(cupy.asnumpy(xc), cupy.asnumpy(ref))
    with pytest.raises(ValueError, match="out: got"):
        ra(xb, out=cupy.empty((1, 2, 3, 3), cupy.uint8))


def test_policy_as_a_compose_step():
    rng = np.random.default_rng(9)
    x = _images(rng, 6, 16, 18)
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandAugment(2, 9), gpuaug.TrivialAugmentWide()], seed=1)
    y = pol(x)
    p = pol.last_params
    flipped = np.where(p[0]["apply"][:, None, None, None], x[:, :, ::-1], x)
    ref = apply_ops(flipped, AutoParams(p[1]["ops"], p[1]["magnitudes"]))
    ref = apply_ops(ref, AutoParams(p[2]["ops"], p[2]["magnitudes"]))
    np.testing.assert_array_equal(y, ref)
    np.testing.assert_array_equal(pol(x, params=p), y)
    assert [st.kind for st in pol.plan()] == ["fused", "op", "op"]
    with pytest.raises(ValueError, match="RandAugment in a Compose: got float32"):
        gpuaug.Compose([gpuaug.ToDtype("float32"), gpuaug.RandAugment()])(x)


# -- AugMix ------------------------------------------------------------------------------------

def test_augmix_identity_chains_and_weights():
    rng = np.random.default_rng(20)
    x = _images(rng, 5, 14, 15)
    am = gpuaug.AugMix(seed=1)
    p = am.draw(5, (14, 15))
    np.testing.assert_allclose(p.extra["weights"].sum(1), 1.0, rtol=1e-6)
    ident = AutoParams(np.zeros_like(p.ops), np.zeros_like(p.magnitudes), p.extra)
    y = am(x, params=ident)  # every chain the identity: x back (weights sum to 1, truncated)
    assert np.abs(y.astype(int) - x).max() <= 1 and (y == x).mean() > 0.5  # sums just below 1 truncate
    # one chain inverted, the others identity: trunc(w0 x + w1 (255 - x) + w2 x + w3 x)
    inv = ident.ops.copy()
    inv[:, 0] = 14
    w = p.extra["weights"].astype(np.float32)
    y = am(x, params=AutoParams(inv, ident.magnitudes, p.extra))
    ref = (w[:, 0, None, None, None] + w[:, 2, None, None, None] + w[:, 3, None, None, None]) * x + \
        w[:, 1, None, None, None] * (255.0 - x)
    assert np.abs(y - np.floor(ref)).max() <= 1


def test_augmix_draws_determinism_bad_input():
    n = 30000
    am = gpuaug.AugMix(severity=3, seed=2)
    p = am.draw(n, (30, 40))
    assert p.ops.shape == (n, 9)
    depth = p.extra["depth"]
    assert _chi2_uniform(np.bincount(depth.ravel(), minlength=4)[1:]) > 1e-4
    used = np.arange(3)[None, None, :] < depth[..., None]
    ops = p.ops.reshape(n, 3, 3)[used]
    assert set(np.unique(ops)) == {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
    assert _chi2_uniform(np.bincount(ops, minlength=14)[1:]) > 1e-4
    assert (p.ops.reshape(n, 3, 3)[~used] == 0).all()
    assert gpuaug.AugMix(chain_depth=2, seed=0).draw(4, (8, 8)).ops.shape == (4, 6)
    assert set(np.unique(gpuaug.AugMix(all_ops=False, seed=0).draw(2000, (8, 8)).ops)) == \
        {0, 1, 2, 3, 4, 5, 10, 11, 12, 13}
    x = _images(np.random.default_rng(3), 4, 12, 12)
    np.testing.assert_array_equal(gpuaug.AugMix(seed=5)(x), gpuaug.AugMix(seed=5)(x))
    am = gpuaug.AugMix(seed=6)
    np.testing.assert_array_equal(am(x), am(x, params=am.last_params))
    for kw, msg in (({"severity": 0}, r"severity: got 0; expected an int in \[1, 11\)"),
                    ({"severity": 11}, "severity: got 11"), ({"mixture_width": 0}, "mixture_width: got 0"),
                    ({"alpha": 0}, "alpha: got 0"), ({"interpolation": "cubic"}, "interpolation: got 'cubic'")):
        with pytest.raises(ValueError, match=msg):
            gpuaug.AugMix(**kw)


def test_augmix_space_and_bilinear_match_torchvision():
    torch, aa = _torchvision()
    from torchvision.transforms import InterpolationMode

    if not hasattr(aa, "AugMix"):
        pytest.skip("this torchvision has no AugMix")
    tv = aa.AugMix()._augmentation_space(10, (224, 224))
    ours = A._augmix_space(10, 224, 224, True)
    assert [A.OP_NAMES[k] for k in ours] == list(tv)
    for k, (table, signed) in ours.items():
        mags, tsigned = tv[A.OP_NAMES[k]]
        assert signed == tsigned and (table is None) == (mags.ndim == 0)
        if table is not None:
            np.testing.assert_allclose(table, mags.numpy().astype(np.float32), rtol=1e-6, atol=1e-6)
    rng = np.random.default_rng(21)
    x = _images(rng, 4, 31, 37)
    for op, m in ((1, 0.2), (2, -0.3), (3, 7.0), (5, 17.0), (5, -29.0)):
        got = apply_ops(x, _force(op, m, 4), interpolation="bilinear")
        ref = np.stack([aa._apply_op(torch.from_numpy(s).permute(2, 0, 1).contiguous(), A.OP_NAMES[op], m,
                                     InterpolationMode.BILINEAR, None).permute(1, 2, 0).numpy() for s in x])
        diff = np.abs(got.astype(int) - ref.astype(int))
        assert diff.max() <= 1 and (diff > 0).mean() <= 0.01, (op, m, diff.max(), (diff > 0).mean())
