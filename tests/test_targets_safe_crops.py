"""RandomIoUCrop and RandomSizedBBoxSafeCrop (gpuaug.targets.safe_crops) on the CPU.

The IoU crop's windows are checked against a scalar reference written here from torchvision
v2's RandomIoUCrop.make_params (one sample at a time, Python ints for the hash, one trial
at a time), with the bounded retries gpuaug documents; the bbox-safe crop against the rule
written out per sample. Then both transforms in Compose: the images equal gpuaug.resized_crop
of the chosen windows, the boxes equal gpuaug.targets.resized_crop of them with the kept rows,
labels follow, replays repeat, a flip before the crop is seen by the crop, errors name the
argument. The device kernel's twin checks are in test_targets_cuda_host.py (emulated) and
test_targets_gpu.py.
"""
import numpy as np
import pytest

import gpuaug
from gpuaug import targets as T
from gpuaug.targets import Boxes, RandomIoUCrop, RandomSizedBBoxSafeCrop, sample_policy

RNG = np.random.default_rng(11)
M64 = (1 << 64) - 1


# ------------------------------------------------------------------------------ reference
def ref_mix(key, c):
    z = (int(key) + (c + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def ref_iou_crop(boxes_xyxy, h, w, key, opts, min_s, max_s, min_ar, max_ar, trials, rounds):
    """One sample, torchvision's loop bounded to `rounds`: ((top, left, h, w), within list)."""
    def centre_in(b, L, T_, R, B):
        cx, cy = 0.5 * (b[0] + b[2]), 0.5 * (b[1] + b[3])
        return L < cx < R and T_ < cy < B

    if len(boxes_xyxy):
        for r in range(rounds):
            base = r * (2 * trials + 1)
            thr = opts[((ref_mix(key, base) >> 32) * len(opts)) >> 32]
            if thr >= 1.0:
                break
            for t in range(trials):
                a, b = ref_mix(key, base + 1 + 2 * t), ref_mix(key, base + 2 + 2 * t)
                u = [(a >> 32) * 2.0 ** -32, (a & 0xFFFFFFFF) * 2.0 ** -32,
                     (b >> 32) * 2.0 ** -32, (b & 0xFFFFFFFF) * 2.0 ** -32]
                nw = int(w * (min_s + (max_s - min_s) * u[0]))
                nh = int(h * (min_s + (max_s - min_s) * u[1]))
                if nw <= 0 or nh <= 0 or not min_ar <= nw / nh <= max_ar:
                    continue
                left, top = int((w - nw) * u[2]), int((h - nh) * u[3])
                L, T_, R, B = float(left), float(top), float(left + nw), float(top + nh)
                best = -1.0
                for bx in boxes_xyxy:
                    if not centre_in(bx, L, T_, R, B):
                        continue
                    iw = max(min(bx[2], R) - max(bx[0], L), 0.0)
                    ih = max(min(bx[3], B) - max(bx[1], T_), 0.0)
                    inter = iw * ih
                    union = (bx[2] - bx[0]) * (bx[3] - bx[1]) + (R - L) * (B - T_) - inter
                    best = max(best, inter / union)
                if best < 0 or best < thr:
                    continue
                return (top, left, nh, nw), [centre_in(bx, L, T_, R, B) for bx in boxes_xyxy]
    return (0, 0, h, w), [True] * len(boxes_xyxy)


def _boxes(n, m, h, w):
    x1, y1 = RNG.uniform(-0.2 * w, w, (n, m)), RNG.uniform(-0.2 * h, h, (n, m))
    return np.stack([x1, y1, x1 + RNG.uniform(1, 0.6 * w, (n, m)), y1 + RNG.uniform(1, 0.6 * h, (n, m))], -1)


def _to(d, fmt):
    if fmt == "xyxy":
        return d
    wd, ht = d[..., 2] - d[..., 0], d[..., 3] - d[..., 1]
    if fmt == "xywh":
        return np.stack([d[..., 0], d[..., 1], wd, ht], -1)
    return np.stack([d[..., 0] + wd / 2, d[..., 1] + ht / 2, wd, ht], -1)


# ------------------------------------------------------------------------------ windows
@pytest.mark.parametrize("fmt,normalized,ragged", [("xyxy", False, False), ("xywh", False, True),
                                                   ("cxcywh", True, False)])
def test_iou_crop_windows_equal_the_reference(fmt, normalized, ragged):
    n, m = 9, 13
    sizes = np.stack([RNG.integers(20, 90, n), RNG.integers(20, 90, n)], 1)
    d = np.concatenate([_boxes(1, m, h, w) for h, w in sizes])
    counts = RNG.integers(0, m + 1, n)
    counts[0], counts[1] = 0, m
    keys = RNG.integers(0, 2 ** 63, n, dtype=np.int64)
    opts = (0.0, 0.3, 0.7, 0.9, 1.0)
    data = _to(d, fmt)
    if normalized:
        data = data / sizes[:, None, [1, 0, 1, 0]]
    if ragged:
        b = Boxes([data[i, :counts[i]] for i in range(n)], fmt, normalized)
    else:
        b = Boxes(data, fmt, normalized, counts=counts)
    win, within = T.iou_crop_windows(b, sizes, keys, sampler_options=opts, min_scale=0.3, max_scale=0.95,
                                     trials=7, rounds=5)
    crops = 0
    for i in range(n):
        (h, w), c = sizes[i], counts[i]
        want, wwithin = ref_iou_crop(d[i, :c].tolist(), h, w, keys[i], opts, 0.3, 0.95, 0.5, 2.0, 7, 5)
        assert tuple(win[i]) == want, i
        got = within[i] if ragged else within[i, :c]
        np.testing.assert_array_equal(got, wwithin)
        if not ragged:
            assert not within[i, c:].any()  # padding rows are never kept
        crops += want != (0, 0, h, w)
    assert crops >= 3  # the test exercises real crops, not only the fallback


def test_iou_crop_windows_rules():
    """Every window taken obeys the documented rules (an independent restatement)."""
    n, m = 40, 6
    sizes = np.array([[64, 80]] * n)
    d = np.concatenate([_boxes(1, m, 64, 80) for _ in range(n)])
    win, within = T.iou_crop_windows(Boxes(d), sizes, np.arange(n) * 7919 + 3, sampler_options=[0.5],
                                     min_scale=0.4, max_scale=0.9, min_aspect_ratio=0.6, max_aspect_ratio=1.5)
    for i in range(n):
        t, le, h, w = win[i]
        if (h, w) == (64, 80):
            continue
        assert 0.4 * 64 - 1 <= h <= 0.9 * 64 and 0.4 * 80 - 1 <= w <= 0.9 * 80 and 0.6 <= w / h <= 1.5
        assert 0 <= t <= 64 - h and 0 <= le <= 80 - w
        cx, cy = (d[i, :, 0] + d[i, :, 2]) / 2, (d[i, :, 1] + d[i, :, 3]) / 2
        inside = (le < cx) & (cx < le + w) & (t < cy) & (cy < t + h)
        np.testing.assert_array_equal(within[i], inside)
        ix = np.clip(np.minimum(d[i, :, 2], le + w) - np.maximum(d[i, :, 0], le), 0, None)
        iy = np.clip(np.minimum(d[i, :, 3], t + h) - np.maximum(d[i, :, 1], t), 0, None)
        iou = ix * iy / ((d[i, :, 2] - d[i, :, 0]) * (d[i, :, 3] - d[i, :, 1]) + h * w - ix * iy)
        assert (iou[inside] >= 0.5).any()


def test_bbox_safe_windows_hold_every_box():
    n, m = 30, 5
    sizes = np.stack([RNG.integers(16, 70, n), RNG.integers(16, 70, n)], 1)
    d = np.concatenate([_boxes(1, m, h, w) for h, w in sizes])
    counts = RNG.integers(0, m + 1, n)
    counts[0] = 0
    u = RNG.random((n, 4))
    win = T.bbox_safe_windows(Boxes(d, counts=counts), sizes, u)
    for i in range(n):
        (h, w), c = sizes[i], counts[i]
        t, le, wh, ww = win[i]
        assert 0 <= t and t + wh <= h and 0 <= le and le + ww <= w and wh >= 1 and ww >= 1
        if c == 0:
            assert tuple(win[i]) == (0, 0, h, w)
            continue
        ux1, uy1 = max(d[i, :c, 0].min(), 0), max(d[i, :c, 1].min(), 0)
        ux2, uy2 = min(d[i, :c, 2].max(), w), min(d[i, :c, 3].max(), h)
        assert le <= ux1 and t <= uy1 and le + ww >= ux2 and t + wh >= uy2
        # the rule, written out
        assert le == np.floor(ux1 * u[i, 0]) and t == np.floor(uy1 * u[i, 1])
        assert le + ww == min(np.ceil(ux2 + (w - ux2) * u[i, 2]), w)


# ------------------------------------------------------------------------------ in Compose
def _same_image(y, want):
    """The fused resampling against gpuaug.resized_crop: float32 maps composed differently, so
    a rare pixel rounds the other way (by 1)."""
    diff = np.abs(y.astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.01


def _det_batch(n=5, h=40, w=56, m=6):
    """A detection batch from its own generator: the same images and boxes whichever tests ran
    before (the module's RNG made the in-Compose comparisons depend on the test order)."""
    global RNG
    saved, RNG = RNG, np.random.default_rng(1000 + n)
    try:
        x = RNG.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
        d = _boxes(n, m, h, w).astype(np.float32)
        counts = RNG.integers(0, m + 1, n).astype(np.int32)
        counts[1] = m
        labels = RNG.integers(1, 80, (n, m)).astype(np.int32)
    finally:
        RNG = saved
    return x, Boxes(d, counts=counts, labels=labels, min_visibility=0.0)


def test_random_iou_crop_in_compose_equals_the_ops():
    x, b = _det_batch()
    pol = gpuaug.Compose([RandomIoUCrop((24, 32), sampler_options=[0.0, 0.3, 0.5], trials=10)])
    p = sample_policy(pol, x, boxes=b, seed=3)
    win, within = p[0]["window"], p[0]["within"]
    want_w, want_in = T.iou_crop_windows(b, np.array([[40, 56]] * 5), p[0]["key"], sampler_options=[0.0, 0.3, 0.5],
                                         trials=10)
    np.testing.assert_array_equal(win, want_w)
    np.testing.assert_array_equal(within, want_in)
    y, bo = pol(x, params=p, boxes=b)
    _same_image(y, gpuaug.resized_crop(x, win, (24, 32)))
    want = T.resized_crop(x, win, (24, 32), boxes=b, keep=within).boxes
    np.testing.assert_array_equal(bo.counts, want.counts)
    np.testing.assert_allclose(bo.data, want.data, atol=1e-5)
    # labels and index follow; only rows centred inside the crop survive
    for i in range(len(x)):
        k = bo.counts[i]
        rows = bo.index[i, :k]
        assert within[i, rows].all()
        np.testing.assert_array_equal(bo.labels[i, :k], b.labels[i, rows])
        assert (bo.labels[i, k:] == -1).all()
    # replay
    y2, bo2 = pol(x, params=pol.last_params, boxes=b)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(bo2.data, bo.data)


def test_iou_crop_sees_the_geometry_before_it():
    x, b = _det_batch(n=6)
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(p=1.0), RandomIoUCrop(20, trials=12),
                          gpuaug.ColorJitter(0.2)])
    p = sample_policy(pol, x, boxes=b, seed=5)
    flipped = T.flip(x, True, boxes=b.like(b.data, counts=b.counts)).boxes
    # the flip keeps every row (min_visibility 0 drops only empty boxes): rows line up
    want_w, _ = T.iou_crop_windows(flipped, np.array([[40, 56]] * 6), p[1]["key"], trials=12)
    np.testing.assert_array_equal(p[1]["window"], want_w)
    y, bo = pol(x, params=p, boxes=b)
    assert y.shape == (6, 20, 20, 3)
    want_b = T.resized_crop(x, want_w, 20, boxes=flipped, keep=p[1]["within"]).boxes
    np.testing.assert_array_equal(bo.counts, want_b.counts)
    np.testing.assert_allclose(bo.data, want_b.data, atol=1e-4)


def test_bbox_safe_crop_in_compose_keeps_every_box():
    x, b = _det_batch(n=6)
    b.data[..., 0::2] = np.clip(b.data[..., 0::2], 0, 56)  # boxes inside the image: all stay whole
    b.data[..., 1::2] = np.clip(b.data[..., 1::2], 0, 40)
    b.data[..., 2:] = np.maximum(b.data[..., 2:], b.data[..., :2] + 1)
    pol = gpuaug.Compose([RandomSizedBBoxSafeCrop((30, 30))])
    y, bo = pol(x, params=sample_policy(pol, x, boxes=b, seed=1), boxes=b)
    np.testing.assert_array_equal(bo.counts, b.counts)
    win = pol.last_params[0]["window"]
    _same_image(y, gpuaug.resized_crop(x, win, (30, 30)))
    want = T.resized_crop(x, win, (30, 30), boxes=b).boxes
    np.testing.assert_allclose(bo.data, want.data, atol=1e-5)
    # whole: the mapped boxes need no clipping
    scale = np.array([30.0, 30.0])[None] / win[:, [3, 2]]
    for i in range(6):
        c = b.counts[i]
        raw = (b.data[i, :c, :2] - win[i, [1, 0]]) * scale[i]
        np.testing.assert_allclose(bo.data[i, :c, :2], raw, atol=1e-4)


def test_box_aware_crops_need_boxes():
    x, b = _det_batch()
    pol = gpuaug.Compose([RandomIoUCrop(16)])
    with pytest.raises(ValueError, match="boxes"):
        pol(x)
    from gpuaug.targets._policy import PolicyTargets
    from gpuaug._batch import as_batch

    with pytest.raises(ValueError, match="boxes"):
        PolicyTargets(as_batch(x), np.array([[40, 56]] * 5)).resolve(pol, pol.sample(x, seed=0), "uint8")


@pytest.mark.parametrize("kw,name", [({"min_scale": 0.0}, "min_scale"), ({"max_scale": 1.5}, "max_scale"),
                                     ({"min_aspect_ratio": 3.0}, "min_aspect_ratio"),
                                     ({"sampler_options": [-0.1]}, "sampler_options"),
                                     ({"sampler_options": []}, "sampler_options"), ({"trials": 0}, "trials"),
                                     ({"rounds": 2.5}, "rounds")])
def test_iou_crop_bad_arguments(kw, name):
    with pytest.raises((ValueError, TypeError), match=name):
        RandomIoUCrop(16, **kw)


def test_safe_crop_bad_arguments():
    with pytest.raises(ValueError, match="erosion_rate"):
        RandomSizedBBoxSafeCrop(16, erosion_rate=1.0)
    with pytest.raises(ValueError, match="keys"):
        T.iou_crop_windows(Boxes(np.zeros((2, 1, 4))), [[8, 8]] * 2, keys=[1])
    with pytest.raises(ValueError, match="keep"):
        T.crop(np.array([[8, 8]]), 0, 0, 4, 4, boxes=np.zeros((1, 2, 4)), keep=np.ones((1, 3), bool))


def _hooked():
    """Compose.__call__ resolves box-aware crops itself (PolicyTargets.resolve after the draw)."""
    import inspect

    return "resolve" in inspect.getsource(gpuaug.Compose.__call__)


@pytest.mark.skipif(not _hooked(), reason="Compose.__call__ does not call PolicyTargets.resolve yet "
                                         "(use gpuaug.targets.sample_policy + params=)")
def test_compose_call_with_boxes_resolves_the_crops():
    x, b = _det_batch(n=4)
    pol = gpuaug.Compose([RandomIoUCrop(20, trials=12), gpuaug.RandomHorizontalFlip()])
    y, bo = pol(x, seed=7, boxes=b)
    p = pol.last_params
    want = sample_policy(pol, x, boxes=b, seed=7)
    np.testing.assert_array_equal(p[0]["window"], want[0]["window"])
    y2, bo2 = pol(x, params=want, boxes=b)
    np.testing.assert_array_equal(y, y2)
    np.testing.assert_array_equal(bo.data, bo2.data)


def test_labels_and_index_follow_through_several_stages():
    """Two fused stages (geometry, colour, geometry): the output's index points into the
    ORIGINAL rows (composed stage by stage) and labels are those rows' labels."""
    n, h, w, m = 6, 30, 40, 12
    x = RNG.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    d = _boxes(n, m, h, w)
    lab = RNG.integers(0, 1000, (n, m))
    pol = gpuaug.Compose([gpuaug.RandomRotation(40), gpuaug.ColorJitter(0.3), gpuaug.RandomResizedCrop((20, 24)),
                          gpuaug.RandomHorizontalFlip()])
    assert len([s for s in pol.plan() if s.kind == "fused"]) == 2
    _, bo = pol(x, seed=4, boxes=Boxes(d, labels=lab, min_visibility=0.4))
    # the same through the stages one by one, by hand
    p = pol.last_params
    m1 = pol.transforms[0].matrices(p[0], np.array([[h, w]] * n))
    s1 = T.apply_matrices(x, m1, boxes=Boxes(d, min_visibility=0.4)).boxes
    m2 = pol.transforms[3].matrices(p[3], np.array([[20, 24]] * n)) @ pol.transforms[2].matrices(
        p[2], np.array([[h, w]] * n))
    s2 = T.apply_matrices(x, m2, (20, 24), boxes=s1.like(s1.data, counts=s1.counts)).boxes  # index: stage 1's rows
    np.testing.assert_array_equal(bo.counts, s2.counts)
    np.testing.assert_allclose(bo.data, s2.data, atol=1e-9)
    for i in range(n):
        k = bo.counts[i]
        rows = s1.index[i][s2.index[i, :k]]  # stage 2's rows are stage 1's outputs
        np.testing.assert_array_equal(bo.index[i, :k], rows)
        np.testing.assert_array_equal(bo.labels[i, :k], lab[i, rows])
    assert 0 < bo.counts.sum() < n * m  # some boxes dropped, some kept
