"""gpuaug.targets on the GPU: the CUDA kernels of kernels/targets.cu against the NumPy twin
(padded and ragged boxes, every format, counts on host and device, more than one warp's worth
of boxes per sample, empty lists), keypoints, masks through the CUDA ops (== the CPU twin),
Compose on the GPU (masks == the fused nearest image, boxes == the CPU run), a side stream,
determinism, bad device input. Compile checks of targets.cu run without a GPU."""
import numpy as np
import pytest

import gpuaug
from gpuaug import targets as T
from gpuaug.targets import Boxes, Keypoints, Masks

gpu = pytest.mark.gpu
RNG = np.random.default_rng(5)


def test_targets_cu_compiles():
    from gpuaug.kernels._cuda import check_compile

    check_compile("targets.cu", ["gpuaug_target_boxes<float>", "gpuaug_target_boxes<double>",
                                 "gpuaug_target_points<float>", "gpuaug_target_points<double>",
                                 "gpuaug_target_both<float, float>", "gpuaug_iou_crop_select",
                                 "gpuaug_target_masks<unsigned char, false>", "gpuaug_target_masks<int, true>",
                                 "gpuaug_target_all<float, float, unsigned char, false>",
                                 "gpuaug_target_all<double, double, int, true>"])


def _boxes(n, m, h, w, dtype=np.float32):
    x1 = RNG.uniform(-0.3 * w, w, (n, m))
    y1 = RNG.uniform(-0.3 * h, h, (n, m))
    return np.stack([x1, y1, x1 + RNG.uniform(0, 0.7 * w, (n, m)), y1 + RNG.uniform(0, 0.7 * h, (n, m))],
                    -1).astype(dtype)


def _cp():
    import cupy

    return cupy


def _close(dev, host, atol):
    np.testing.assert_allclose(_cp().asnumpy(dev), host, atol=atol)


@gpu
@pytest.mark.parametrize("fmt", ["xyxy", "xywh", "cxcywh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mv", [None, 0.0, 0.4])
def test_boxes_kernel_equals_numpy_twin(fmt, dtype, mv):
    cp = _cp()
    n, m, h, w = 7, 70, 31, 45  # 70 boxes: three passes of a warp's ballot
    b = _boxes(n, m, h, w, dtype)
    if fmt != "xyxy":
        w_, h_ = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
        b = np.stack([b[..., 0], b[..., 1], w_, h_], -1) if fmt == "xywh" else \
            np.stack([b[..., 0] + w_ / 2, b[..., 1] + h_ / 2, w_, h_], -1)
    counts = RNG.integers(0, m + 1, n)
    ang = RNG.uniform(-40, 40, n)
    host = T.rotate(np.array([[h, w]] * n), ang, boxes=Boxes(b, fmt, counts=counts, min_visibility=mv)).boxes
    for c in (counts, cp.asarray(counts)):
        dev = T.rotate(np.array([[h, w]] * n), ang, boxes=Boxes(cp.asarray(b), fmt, counts=c, min_visibility=mv)).boxes
        assert isinstance(dev.data, cp.ndarray) and dev.data.dtype == dtype
        np.testing.assert_array_equal(dev.counts.get(), host.counts)
        np.testing.assert_array_equal(dev.index.get(), host.index)
        _close(dev.data, host.data, 1e-4 if dtype == np.float32 else 1e-9)


@gpu
def test_ragged_and_empty_boxes_on_the_gpu():
    cp = _cp()
    h, w = 20, 30
    lst = [_boxes(1, k, h, w)[0] for k in (0, 5, 40, 1)]
    sz = np.array([[h, w]] * 4)
    host = T.warp_perspective(sz, np.array([[1, 0.1, 2], [0.05, 1, -1], [0.001, 0.002, 1]]), boxes=Boxes(lst)).boxes
    dev = T.warp_perspective(sz, np.array([[1, 0.1, 2], [0.05, 1, -1], [0.001, 0.002, 1]]),
                             boxes=Boxes([cp.asarray(a) for a in lst])).boxes
    assert [len(a) for a in dev.data] == [len(a) for a in host.data]
    for d, hst, di, hi in zip(dev.data, host.data, dev.index, host.index):
        _close(d, hst, 1e-4)
        np.testing.assert_array_equal(di.get(), hi)
    e = T.flip(sz, boxes=cp.zeros((4, 0, 4), cp.float32)).boxes
    assert e.data.shape == (4, 0, 4) and e.counts.get().tolist() == [0, 0, 0, 0]


@gpu
def test_keypoints_kernel_equals_numpy_twin():
    cp = _cp()
    n, k, h, w = 6, 17, 25, 40
    pts = np.stack([RNG.uniform(-3, w + 3, (n, k)), RNG.uniform(-3, h + 3, (n, k))], -1).astype(np.float32)
    vis = RNG.random((n, k)) < 0.8
    mat = np.array([[1.0, 0.2, 3], [0.1, 0.9, -2], [0.004, -0.003, 1]])
    for coords in ("pixel", "continuous"):
        host = T.warp_perspective(np.array([[h, w]] * n), mat, keypoints=Keypoints(pts, vis, coords)).keypoints
        dev = T.warp_perspective(np.array([[h, w]] * n), mat,
                                 keypoints=Keypoints(cp.asarray(pts), cp.asarray(vis), coords)).keypoints
        _close(dev.data, host.data, 1e-4)
        np.testing.assert_array_equal(dev.visibility.get(), host.visibility)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_masks_on_the_gpu_equal_the_cpu_twin(backend):
    cp = _cp()
    n, h, w = 3, 21, 26
    lab = RNG.integers(0, 200, (n, h, w)).astype(np.uint8)
    img = np.zeros((n, h, w, 3), np.uint8)
    calls = [("rotate", dict(angle=[10.0, 95.0, -30.0])), ("resized_crop", dict(boxes_=(2.5, 3, 12, 15), size=(9, 9))),
             ("pad", dict(padding=(1, 2, 3, 4))), ("rot90", dict(k=[1, 3, 1])), ("flip", dict(horizontal=[1, 0, 1]))]
    for name, kw in calls:
        for m in (Masks(lab), Masks(lab.astype(np.int32) * 65537, fill=-1),
                  Masks(np.stack([lab == c for c in range(3)], 1))):
            host = getattr(T, name)(img, **kw, masks=m).masks.data
            dm = Masks(cp.asarray(m.data), onehot=m.onehot, fill=m.fill)
            dev = getattr(T, name)(cp.asarray(img), **kw, masks=dm, backend=backend).masks.data
            np.testing.assert_array_equal(cp.asnumpy(dev), host, err_msg=f"{name} {m}")


@gpu
def test_compose_on_the_gpu():
    cp = _cp()
    n, h, w = 16, 40, 48
    lab = RNG.integers(0, 200, (n, h, w)).astype(np.uint8)
    img = np.ascontiguousarray(lab[..., None])
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(),
                          gpuaug.RandomAffine(20, translate=(0.1, 0.1), scale=(0.8, 1.2), interpolation="nearest",
                                              fill=255),
                          gpuaug.RandomResizedCrop((24, 32), interpolation="nearest")], draws="host")
    b = _boxes(n, 50, h, w)
    pts = np.stack([RNG.uniform(0, w - 1, (n, 17)), RNG.uniform(0, h - 1, (n, 17))], -1)
    y, bb, kk, mm = pol(cp.asarray(img), seed=4, boxes=cp.asarray(b), keypoints=cp.asarray(pts),
                        masks=cp.asarray(lab))
    cp.testing.assert_array_equal(mm.data, y[..., 0])  # masks == the fused image's nearest warp
    yh, bh, kh, mh = pol(img, seed=4, boxes=b, keypoints=pts, masks=lab)
    np.testing.assert_array_equal(bb.counts.get(), bh.counts)
    _close(bb.data, bh.data, 1e-4)
    _close(kk.data, kh.data, 1e-6)
    np.testing.assert_array_equal(mm.data.get(), mh.data)
    # replay and determinism
    y2, bb2, kk2, mm2 = pol(cp.asarray(img), params=pol.last_params, boxes=cp.asarray(b), keypoints=cp.asarray(pts),
                            masks=cp.asarray(lab))
    cp.testing.assert_array_equal(bb2.data, bb.data)
    cp.testing.assert_array_equal(mm2.data, mm.data)


@gpu
def test_side_stream_and_bad_device_input():
    cp = _cp()
    n, h, w = 4, 16, 16
    b = _boxes(n, 8, h, w)
    s = cp.cuda.Stream(non_blocking=True)
    r = T.flip(cp.zeros((n, h, w, 3), cp.uint8), boxes=cp.asarray(b), masks=cp.zeros((n, h, w), cp.uint8), stream=s)
    s.synchronize()
    host = T.flip(np.zeros((n, h, w, 3), np.uint8), boxes=b).boxes
    _close(r.boxes.data, host.data, 1e-5)
    bad = b.copy()
    bad[2, 3, 0] = np.nan
    with pytest.raises(ValueError, match="boxes: sample 2 box 3"):
        T.flip(cp.zeros((n, h, w, 3), cp.uint8), boxes=cp.asarray(bad))
    bad = b.copy()
    bad[1, 0, 2] = bad[1, 0, 0] - 1
    with pytest.raises(ValueError, match="boxes: sample 1 box 0"):
        T.flip(cp.zeros((n, h, w, 3), cp.uint8), boxes=cp.asarray(bad))
    with pytest.raises(ValueError, match="masks: sample 0 is 16x15"):
        T.flip(cp.zeros((n, h, w, 3), cp.uint8), masks=cp.zeros((n, h, w - 1), cp.uint8))


@gpu
@pytest.mark.parametrize("ragged", [False, True])
def test_iou_crop_select_on_the_gpu_equals_the_numpy_twin(ragged):
    cp = _cp()
    n, m = 64, 45
    sizes = np.stack([RNG.integers(24, 300, n), RNG.integers(24, 300, n)], 1)
    d = np.concatenate([_boxes(1, m, int(h), int(w), np.float64) for h, w in sizes])
    counts = RNG.integers(0, m + 1, n).astype(np.int32)
    keys = RNG.integers(0, 2 ** 63, n, dtype=np.int64)
    if ragged:
        host = Boxes([d[i, :counts[i]] for i in range(n)])
        dev = Boxes([cp.asarray(d[i, :counts[i]]) for i in range(n)])
    else:
        host, dev = Boxes(d, counts=counts), Boxes(cp.asarray(d), counts=cp.asarray(counts))
    kw = dict(sampler_options=[0.1, 0.5, 0.9, 0.95], trials=20, rounds=8)
    wh, ih = T.iou_crop_windows(host, sizes, keys, **kw)
    wd, idev = T.iou_crop_windows(dev, sizes, keys, **kw)
    np.testing.assert_array_equal(wd, wh)
    if ragged:
        for a, b_ in zip(idev, ih):
            np.testing.assert_array_equal(cp.asnumpy(a), b_)
    else:
        np.testing.assert_array_equal(cp.asnumpy(idev), ih)


@gpu
def test_safe_crops_in_compose_on_the_gpu():
    cp = _cp()
    n, h, w = 12, 60, 80
    x = RNG.integers(0, 256, (n, h, w, 3)).astype(np.uint8)
    b = _boxes(n, 30, h, w)
    lab = RNG.integers(0, 90, (n, 30)).astype(np.int32)
    for crop in (T.RandomIoUCrop(32), T.RandomSizedBBoxSafeCrop((32, 40))):
        pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), crop, gpuaug.ColorJitter(0.2)], draws="host")
        hb = Boxes(b, labels=lab)
        db = Boxes(cp.asarray(b), labels=cp.asarray(lab))
        ph = T.sample_policy(pol, x, boxes=hb, seed=2)
        pd = T.sample_policy(pol, cp.asarray(x), boxes=db, seed=2)
        np.testing.assert_array_equal(pd[1]["window"], ph[1]["window"])
        yh, bh = pol(x, params=ph, boxes=hb)
        yd, bd = pol(cp.asarray(x), params=pd, boxes=db)
        np.testing.assert_array_equal(bd.counts.get(), bh.counts)
        _close(bd.data, bh.data, 1e-4)
        np.testing.assert_array_equal(bd.labels.get(), bh.labels)
        assert np.abs(yd.get().astype(int) - yh).max() <= 1


@gpu
@pytest.mark.parametrize("dtype,onehot", [(np.uint8, False), (np.int32, True)])
def test_compose_targets_in_one_launch_equal_the_warp_path(dtype, onehot, monkeypatch):
    """A policy stage's boxes, keypoints and masks go in one launch (gpuaug_target_all) and equal
    the two-launch path (map_targets + the nearest warp op), with a perspective and replicate
    borders too."""
    cp = _cp()
    from gpuaug.targets import _apply, _policy

    n, h, w = 24, 37, 45
    shape = (n, 3, h, w) if onehot else (n, h, w)
    lab = RNG.integers(0, 200, shape).astype(dtype)
    x = cp.asarray(RNG.integers(0, 256, (n, h, w, 3)).astype(np.uint8))
    b = cp.asarray(_boxes(n, 40, h, w))
    pts = cp.asarray(np.stack([RNG.uniform(0, w - 1, (n, 17)), RNG.uniform(0, h - 1, (n, 17))], -1))
    for pol in (gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomPerspective(0.3, p=0.7),
                                gpuaug.RandomResizedCrop((30, 34))], draws="host"),
                gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomResizedCrop((30, 34))], draws="host")):
        calls = []
        real = _apply._launch
        monkeypatch.setattr(_apply, "_launch", lambda db, dp, dm=None: calls.append(dm is not None) or real(db, dp, dm))
        y, bb, kk, mm = pol(x, seed=3, boxes=Boxes(b, min_visibility=0.3), keypoints=pts,
                            masks=Masks(cp.asarray(lab), onehot=onehot))
        assert calls == [True]
        monkeypatch.setattr(_policy, "map_stage", lambda *a, **k: None)  # the two-launch path
        y2, bb2, kk2, mm2 = pol(x, params=pol.last_params, boxes=Boxes(b, min_visibility=0.3), keypoints=pts,
                                masks=Masks(cp.asarray(lab), onehot=onehot))
        monkeypatch.undo()
        cp.testing.assert_array_equal(mm.data, mm2.data)
        cp.testing.assert_array_equal(bb.counts, bb2.counts)
        cp.testing.assert_allclose(bb.data, bb2.data, atol=1e-6)
        cp.testing.assert_allclose(kk.data, kk2.data, atol=1e-9)


@gpu
def test_compose_targets_across_shapes_on_the_gpu():
    """Issue 15's host path on the GPU: calls of several shapes in turn (samples, box rows,
    output size: what the shape memos and the device constant cache are keyed by), each equal
    to the CPU twin of the same parameters and, bit for bit, to the targets composed again
    (PolicyTargets.run without the images' stages); the first shape once more equals its
    first call."""
    cp = _cp()
    from gpuaug._batch import as_batch
    from gpuaug.policy.compose import batch_sizes
    from gpuaug.targets._policy import PolicyTargets

    h, w = 36, 44
    got = []
    for n, m, size in [(12, 30, 24), (9, 30, 24), (12, 41, 24), (12, 30, (20, 28)), (12, 30, 24)]:
        rng = np.random.default_rng(n * m)
        pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(),
                              gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                              gpuaug.RandomResizedCrop(size)], seed=0, draws="host")
        x = rng.integers(0, 256, (n, h, w, 3)).astype(np.uint8)
        x1, y1 = rng.uniform(-5, w, (n, m)), rng.uniform(-5, h, (n, m))
        b = np.stack([x1, y1, x1 + rng.uniform(0, 12, (n, m)), y1 + rng.uniform(0, 12, (n, m))], -1).astype(np.float32)
        pts = np.stack([rng.uniform(0, w - 1, (n, 17)), rng.uniform(0, h - 1, (n, 17))], -1).astype(np.float32)
        lab = rng.integers(0, 21, (n, h, w)).astype(np.uint8)
        xd = cp.asarray(x)
        tb = Boxes(cp.asarray(b), check=False, min_visibility=0.2)
        tk = Keypoints(cp.asarray(pts), check=False)
        tm = Masks(cp.asarray(lab))
        y, bb, kk, mm = pol(xd, seed=7, boxes=tb, keypoints=tk, masks=tm)
        p = pol.last_params
        yh, bh, kh, mh = pol(x, params=p, boxes=Boxes(b, min_visibility=0.2), keypoints=pts, masks=lab)
        np.testing.assert_array_equal(bb.counts.get(), bh.counts)
        np.testing.assert_array_equal(bb.index.get(), bh.index)
        _close(bb.data, bh.data, 1e-4)
        _close(kk.data, kh.data, 1e-4)
        np.testing.assert_array_equal(kk.visibility.get(), kh.visibility)
        np.testing.assert_array_equal(mm.data.get(), mh.data)
        bd = as_batch(xd, "NHWC")
        rb, rk, rm = PolicyTargets(bd, batch_sizes(bd), tb, tk, tm).run(pol, p, "uint8", None, "cuda")
        for a, c in ((rb.data, bb.data), (rb.counts, bb.counts), (rb.index, bb.index), (rk.data, kk.data),
                     (rk.visibility, kk.visibility), (rm.data, mm.data)):
            assert a.get().tobytes() == c.get().tobytes()
        got.append((bb.data.get(), bb.counts.get(), kk.data.get(), mm.data.get()))
    for a, c in zip(got[0], got[-1]):
        assert a.tobytes() == c.tobytes()


@gpu
def test_compose_targets_on_a_side_stream_equal_and_are_ready_on_the_callers_stream(monkeypatch):
    """A call with targets launches them on a side stream beside the images (gpuaug._stream.Fork):
    the same bytes as the call without the fork, and its outputs ready on the caller's stream without a synchronisation: the masks (eight int32 planes a sample, far more
    work than the one-channel images) are copied on the caller's stream right after the call."""
    cp = _cp()
    from gpuaug.policy import compose as C

    n, h, w = 64, 160, 192
    rng = np.random.default_rng(11)
    x = cp.asarray(rng.integers(0, 256, (n, h, w, 1)).astype(np.uint8))
    lab = cp.asarray(rng.integers(0, 1000, (n, 8, h, w)).astype(np.int32))
    b = cp.asarray(_boxes(n, 40, h, w))
    pts = cp.asarray(np.stack([rng.uniform(0, w - 1, (n, 17)), rng.uniform(0, h - 1, (n, 17))], -1))
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(20, scale=(0.8, 1.2)),
                          gpuaug.RandomResizedCrop((120, 150))], seed=0, draws="host")

    def call(s, **kw):
        with s:
            got = pol(x, boxes=Boxes(b, check=False), keypoints=Keypoints(pts, check=False),
                      masks=Masks(lab, onehot=True), **kw)
            return got, [a.copy() for a in (got[0], got[1].data, got[1].counts, got[2].data, got[3].data)]

    forks = []
    from gpuaug import _stream

    real_maybe = _stream.Fork.maybe
    monkeypatch.setattr(_stream.Fork, "maybe", classmethod(lambda cls, main: forks.append(main.ptr) or
                                                           real_maybe.__func__(cls, main)))
    s = cp.cuda.Stream(non_blocking=True)
    ref = None
    for k in range(3):
        got, copies = call(s, seed=5)
        if ref is None:
            monkeypatch.setattr(C, "OVERLAP_TARGETS", False)
            _, ref = call(s, params=pol.last_params)
            monkeypatch.setattr(C, "OVERLAP_TARGETS", True)
        s.synchronize()
        for a, r in zip(copies, ref):
            assert a.get().tobytes() == r.get().tobytes()
    assert forks == [s.ptr] * 3  # the reference call (OVERLAP_TARGETS False) did not fork


@gpu
def test_no_fork_while_the_stream_is_captured():
    cp = _cp()
    from gpuaug._stream import Fork

    s = cp.cuda.Stream(non_blocking=True)
    assert Fork.maybe(s) is not None
    s.begin_capture()
    try:
        assert Fork.maybe(s) is None
    finally:
        s.end_capture()
