"""gpuaug.dali's target operators (dali_plugins/_targets.py) in DALI pipelines: with_targets,
random_iou_crop, bbox_safe_crop and bb_flip against the standalone gpuaug / gpuaug.targets calls
on the same batch and parameters (CPU pipelines run here; the GPU variants are marked gpu).
Ragged boxes with an empty sample, labels following the boxes, per-sample DataNode parameters,
keypoints with visibility, masks, and bad use naming the argument."""
from __future__ import annotations

import numpy as np
import pytest

import gpuaug
from gpuaug import targets as T
from gpuaug.targets import Boxes, Keypoints, Masks

pytestmark = pytest.mark.dali

N, H, W = 3, 17, 23
RNG = np.random.default_rng(21)


def _batch():
    imgs = [RNG.integers(0, 256, (H, W, 3), dtype=np.uint8) for _ in range(N)]
    boxes, labels = [], []
    for m in (4, 0, 7):
        x1, y1 = RNG.uniform(-3, W - 2, m), RNG.uniform(-3, H - 2, m)
        boxes.append(np.stack([x1, y1, x1 + RNG.uniform(1, 9, m), y1 + RNG.uniform(1, 7, m)], 1).astype(np.float32))
        labels.append(RNG.integers(1, 50, m).astype(np.int32))
    kps = [np.stack([RNG.uniform(0, W - 1, 5), RNG.uniform(0, H - 1, 5)], 1).astype(np.float32) for _ in range(N)]
    masks = [RNG.integers(0, 9, (H, W)).astype(np.uint8) for _ in range(N)]
    return imgs, boxes, labels, kps, masks


def _run(graph, device_id=None):
    from nvidia.dali import pipeline_def

    pipe = pipeline_def(graph, batch_size=N, num_threads=1, device_id=device_id, prefetch_queue_depth=1)()
    pipe.build()
    outs = pipe.run()
    res = []
    for o in outs:
        if hasattr(o, "as_cpu"):
            o = o.as_cpu()
        res.append([np.array(t) for t in o])
    del pipe
    return res


def _src(samples, layout=None, gpu=False):
    from nvidia.dali import fn

    kw = {"layout": layout} if layout else {}
    node = fn.external_source(source=lambda: samples, batch=True, **kw)
    return node.gpu() if gpu else node


def _same_boxes(got, want, labels=None, got_labels=None):
    """Ragged outputs against a ragged Boxes result."""
    for i in range(N):
        np.testing.assert_allclose(got[i].reshape(-1, 4), want.data[i], atol=1e-4)
        if labels is not None:
            np.testing.assert_array_equal(got_labels[i], want.labels[i])


def _with_targets_case(op, params, per_sample, gpu=False):
    import gpuaug.dali as gd

    imgs, boxes, labels, kps, masks = _batch()

    def graph():
        kw = dict(params)
        for k, v in per_sample.items():
            kw[k] = _src([np.array(e) for e in v], gpu=gpu)
        return gd.with_targets(op, _src(imgs, "HWC", gpu), bboxes=_src(boxes, gpu=gpu), labels=_src(labels, gpu=gpu),
                               keypoints=_src(kps, gpu=gpu), masks=_src(masks, gpu=gpu), min_visibility=0.2, **kw)

    y, bo, lo, ko, vo, mo = _run(graph, 0 if gpu else None)
    x = np.stack(imgs)
    kw = dict(params, **{k: np.asarray(v) for k, v in per_sample.items()})
    want_y = getattr(gpuaug, op)(x, **kw)
    tkw = {("boxes_" if (op == "resized_crop" and k == "boxes") else k): v for k, v in kw.items()
           if k not in ("interpolation",) or op in ("resize", "resized_crop", "rotate", "warp_affine")}
    want = getattr(T, op)(x, **tkw, boxes=Boxes(boxes, min_visibility=0.2, labels=labels),
                          keypoints=Keypoints(np.stack(kps)), masks=Masks(np.stack(masks)))
    for i in range(N):
        if gpu:  # the CUDA C kernel against the CPU twin: bilinear may round differently by 1
            assert np.abs(y[i].astype(int) - want_y[i]).max() <= 1
        else:
            np.testing.assert_array_equal(y[i], want_y[i])
        np.testing.assert_array_equal(mo[i], want.masks.data[i])
        np.testing.assert_allclose(ko[i], want.keypoints.data[i], atol=1e-5)
        np.testing.assert_array_equal(vo[i].astype(bool), want.keypoints.visibility[i])
    _same_boxes(bo, want.boxes, labels, lo)
    return want


@pytest.mark.parametrize("op,params,per_sample", [
    ("flip", {}, {"horizontal": [1, 0, 1], "vertical": [0, 1, 1]}),
    ("rotate", {"border": "constant"}, {"angle": [10.0, -35.0, 90.0]}),
    ("resized_crop", {"size": (11, 13)}, {"boxes": [[1, 2, 12, 15], [0, 0, 17, 23], [4, 3, 9, 9]]}),
])
def test_with_targets_equals_the_standalone_ops(op, params, per_sample):
    want = _with_targets_case(op, params, per_sample)
    assert sum(len(a) for a in want.boxes.data) > 0  # some boxes survive: the comparison bites


def test_random_iou_crop_and_bbox_safe_crop():
    import gpuaug.dali as gd
    from gpuaug import random as R
    from gpuaug.targets.safe_crops import mix64

    imgs, boxes, labels, _, _ = _batch()

    def graph():
        x, b, lab = _src(imgs, "HWC"), _src(boxes), _src(labels)
        return gd.random_iou_crop(x, b, lab, size=12, seed=5, sampler_options=[0.0, 0.3]) + \
            gd.bbox_safe_crop(x, b, lab, size=(10, 14), seed=6)

    y, bo, lo, ys, bs, ls = _run(graph)
    x = np.stack(imgs)
    sizes = np.array([[H, W]] * N)
    b = Boxes(boxes, labels=labels)
    win, keep = T.iou_crop_windows(b, sizes, mix64(np.uint64(5), np.arange(N, dtype=np.uint64)),
                                   sampler_options=[0.0, 0.3])
    np.testing.assert_array_equal(np.stack(y), gpuaug.resized_crop(x, win, 12))
    _same_boxes(bo, T.resized_crop(x, win, 12, boxes=b, keep=keep).boxes, labels, lo)
    u = R.uniform(R.generator(6), 0.0, 1.0, 4 * N).reshape(N, 4)
    win = T.bbox_safe_windows(b, sizes, u)
    np.testing.assert_array_equal(np.stack(ys), gpuaug.resized_crop(x, win, (10, 14)))
    want = T.resized_crop(x, win, (10, 14), boxes=b).boxes
    _same_boxes(bs, want, labels, ls)


def test_bb_flip_matches_dali_semantics():
    import gpuaug.dali as gd

    boxes = [RNG.uniform(0, 0.5, (m, 4)).astype(np.float32) for m in (3, 0, 5)]  # xywh within [0, 1]

    def graph():
        b = _src(boxes)
        return (gd.bb_flip(b, horizontal=_src([np.int32(v) for v in (1, 0, 1)])),
                gd.bb_flip(b, horizontal=0, vertical=1))

    fh, fv = _run(graph)
    for i, a in enumerate(boxes):
        want = a.copy()
        if i != 1:
            want[:, 0] = 1 - a[:, 0] - a[:, 2]
        np.testing.assert_allclose(fh[i].reshape(-1, 4), want, atol=1e-6)
        want = a.copy()
        want[:, 1] = 1 - a[:, 1] - a[:, 3]
        np.testing.assert_allclose(fv[i].reshape(-1, 4), want, atol=1e-6)


def test_bad_use_names_the_argument():
    import gpuaug.dali as gd

    imgs, boxes, labels, _, _ = _batch()
    with pytest.raises(ValueError, match="op: got 'gaussian_blur'"):
        _run(lambda: gd.with_targets("gaussian_blur", _src(imgs, "HWC"), bboxes=_src(boxes)))
    with pytest.raises(ValueError, match="labels: given without bboxes"):
        _run(lambda: gd.with_targets("flip", _src(imgs, "HWC"), labels=_src(labels)))
    with pytest.raises(ValueError, match="format"):
        _run(lambda: gd.with_targets("flip", _src(imgs, "HWC"), bboxes=_src(boxes), format="ltrb"))
    with pytest.raises(ValueError, match="min_scale"):
        _run(lambda: gd.random_iou_crop(_src(imgs, "HWC"), _src(boxes), size=8, min_scale=0))
    bad = [np.ascontiguousarray(b[:, :3]) for b in boxes]
    with pytest.raises(Exception, match="bboxes: sample 0 has shape"):
        _run(lambda: gd.with_targets("flip", _src(imgs, "HWC"), bboxes=_src(bad)))
    inverted = [b.copy() for b in boxes]
    inverted[2][1, 2] = inverted[2][1, 0] - 1
    with pytest.raises(Exception, match="boxes: sample 2 box 1"):
        _run(lambda: gd.with_targets("flip", _src(imgs, "HWC"), bboxes=_src(inverted)))


@pytest.mark.gpu
@pytest.mark.parametrize("op,params,per_sample", [
    ("flip", {}, {"horizontal": [1, 0, 1], "vertical": [0, 1, 1]}),
    ("rotate", {"border": "constant"}, {"angle": [10.0, -35.0, 90.0]}),
])
def test_with_targets_on_the_gpu(op, params, per_sample):
    _with_targets_case(op, params, per_sample, gpu=True)


@pytest.mark.gpu
def test_random_iou_crop_on_the_gpu():
    import gpuaug.dali as gd
    from gpuaug.targets.safe_crops import mix64

    imgs, boxes, labels, _, _ = _batch()

    def graph():
        return gd.random_iou_crop(_src(imgs, "HWC", True), _src(boxes, gpu=True), _src(labels, gpu=True), size=12,
                                  seed=5)

    y, bo, lo = _run(graph, 0)
    b = Boxes(boxes, labels=labels)
    win, keep = T.iou_crop_windows(b, np.array([[H, W]] * N), mix64(np.uint64(5), np.arange(N, dtype=np.uint64)))
    _same_boxes(bo, T.resized_crop(np.array([[H, W]] * N), win, 12, boxes=b, keep=keep).boxes, labels, lo)
    assert np.abs(np.stack(y).astype(int) - gpuaug.resized_crop(np.stack(imgs), win, 12)).max() <= 1
