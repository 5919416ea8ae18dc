"""gpuaug.dali's automatic policies and mixing (``gd.rand_augment``, ``gd.trivial_augment``,
``gd.auto_augment``, ``gd.augmix``, ``gd.mixup``, ``gd.cutmix``, ``gd.mosaic``) in DALI pipelines.

CPU pipelines run here for real: each operator, batch after batch, against the gpuaug policy
called directly with the same seed on the same batches. The GPU variants (marked gpu) run the
same pipelines on GPU data against the CuPy path and the NumPy twin.
"""
from __future__ import annotations

import numpy as np
import pytest

import gpuaug

pytestmark = pytest.mark.dali

N, H, W = 4, 13, 15

POLICIES = [
    ("rand_augment", dict(num_ops=2, magnitude=9), lambda s: gpuaug.RandAugment(2, 9, seed=s)),
    ("rand_augment", dict(num_ops=3, magnitude=20, interpolation="bilinear"),
     lambda s: gpuaug.RandAugment(3, 20, interpolation="bilinear", seed=s)),
    ("trivial_augment", {}, lambda s: gpuaug.TrivialAugmentWide(seed=s)),
    ("auto_augment", dict(policy="imagenet"), lambda s: gpuaug.AutoAugment("imagenet", seed=s)),
    ("auto_augment", dict(policy="svhn"), lambda s: gpuaug.AutoAugment("svhn", seed=s)),
    ("augmix", dict(severity=3, mixture_width=2), lambda s: gpuaug.AugMix(3, 2, seed=s)),
]


def _batches(iters, n=N, h=H, w=W, c=3, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (n, h, w, c), dtype=np.uint8) for _ in range(iters)]


def _source(batches, device="cpu", layout="HWC"):
    """An external_source feeding ``batches`` (lists of samples or 4-D arrays), one per run."""
    from nvidia.dali import fn

    it = iter(batches)
    return fn.external_source(source=lambda: [np.ascontiguousarray(s) for s in next(it)], batch=True,
                              device=device, layout=layout)


def _run(graph, iters=1, batch_size=N, device_id=None, seed=None):
    from nvidia.dali import pipeline_def

    pipe = pipeline_def(graph, batch_size=batch_size, num_threads=1, device_id=device_id, prefetch_queue_depth=1,
                        seed=seed)()
    pipe.build()
    runs = []
    for _ in range(iters):
        outs = pipe.run()
        runs.append([[np.array(o.as_cpu()[i] if hasattr(o, "as_cpu") else o[i]) for i in range(len(o))]
                     for o in outs])
    del pipe
    return runs


def _same(got, ref, what):
    ref = [np.asarray(r) for r in ref]
    assert len(got) == len(ref), what
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape and g.dtype == r.dtype, f"{what} sample {i}: {g.shape} {g.dtype} vs {r.shape}"
        np.testing.assert_array_equal(g, r, err_msg=f"{what} sample {i}")


@pytest.mark.parametrize("op,kw,make", POLICIES, ids=[f"{p[0]}-{i}" for i, p in enumerate(POLICIES)])
def test_policy_matches_standalone(op, kw, make):
    """Two batches through the DALI operator equal the standalone policy's two calls with the
    same seed (so the generator advances per batch as per call)."""
    import gpuaug.dali as gd

    batches = _batches(2)

    def graph():
        return getattr(gd, op)(_source(batches), **kw, seed=11)

    runs = _run(graph, iters=2)
    pol = make(11)
    for it, x in enumerate(batches):
        ref = pol(x)
        _same(runs[it][0], list(ref), f"{op} batch {it}")
        assert not all((r == x[i]).all() for i, r in enumerate(ref)) or op == "auto_augment"


def test_grayscale_and_varshape_groups():
    """One channel; samples of two shapes run as one call per shape, in order of first appearance."""
    import gpuaug.dali as gd

    rng = np.random.default_rng(3)
    a = [rng.integers(0, 256, (9, 11, 1), dtype=np.uint8) for _ in range(2)]
    b = [rng.integers(0, 256, (12, 8, 1), dtype=np.uint8) for _ in range(2)]
    samples = [a[0], b[0], a[1], b[1]]

    def graph():
        return gd.trivial_augment(_source([samples]), seed=4)

    (got,), = _run(graph)
    pol = gpuaug.TrivialAugmentWide(seed=4)
    ya = pol(np.stack(a))
    yb = pol(np.stack(b))
    _same(got, [ya[0], yb[0], ya[1], yb[1]], "trivial_augment varshape")


def test_pipeline_seed_repeats():
    """Without seed=, the policy's seed comes from the pipeline's: same pipeline seed, same
    output; another pipeline seed, other draws."""
    import gpuaug.dali as gd

    batches = _batches(1, n=6, seed=5)

    def graph():
        return gd.rand_augment(_source(batches), num_ops=2, magnitude=15)

    first = _run(graph, batch_size=6, seed=7)[0][0]
    again = _run(graph, batch_size=6, seed=7)[0][0]
    other = _run(graph, batch_size=6, seed=8)[0][0]
    _same(again, first, "same pipeline seed")
    assert any((f != o).any() for f, o in zip(first, other))


@pytest.mark.parametrize("op,cls", [("mixup", "MixUp"), ("cutmix", "CutMix")])
def test_mixing_int_labels(op, cls):
    """Images and int labels ((1,) int32 per sample, as fn.readers.file gives) through the
    operator equal the standalone mixer's images and soft labels with the same seed."""
    import gpuaug.dali as gd
    from nvidia.dali import fn

    batches = _batches(2, n=5, seed=6)
    labels = [np.array([[i % 3] for i in range(5)], np.int32), np.array([[2], [1], [0], [1], [2]], np.int32)]

    def graph():
        lab = fn.external_source(source=lambda i: list(labels[i]), batch=True)
        return getattr(gd, op)(_source(batches), lab, alpha=0.7, num_classes=3, seed=9)

    runs = _run(graph, iters=2, batch_size=5)
    mixer = getattr(gpuaug, cls)(0.7, num_classes=3, seed=9)
    for it in range(2):
        y, soft = mixer(batches[it], labels[it][:, 0])
        _same(runs[it][0], list(y), f"{op} images batch {it}")
        _same(runs[it][1], list(soft), f"{op} labels batch {it}")
        assert runs[it][1][0].shape == (3,) and np.allclose(np.sum(runs[it][1], axis=1), 1)


def test_mixup_soft_labels_chw():
    """(K,) soft-label rows and CHW float32 samples."""
    import gpuaug.dali as gd
    from nvidia.dali import fn

    rng = np.random.default_rng(2)
    x = rng.random((4, 3, 6, 7), dtype=np.float32)
    soft = rng.dirichlet([1.0] * 5, 4).astype(np.float32)

    def graph():
        lab = fn.external_source(source=lambda: list(soft), batch=True)
        return gd.mixup(_source([x], layout="CHW"), lab, alpha=0.5, seed=3, layout="CHW")

    (imgs, labs), = _run(graph)
    y, s = gpuaug.MixUp(0.5, seed=3)(x, soft, layout="NCHW")
    _same(imgs, list(y), "mixup CHW images")
    _same(labs, list(s), "mixup soft labels")


def test_bad_arguments_at_definition():
    """Bad policy arguments fail while the pipeline is defined, naming the operator and the argument."""
    import gpuaug.dali as gd

    x = _batches(1)
    cases = [
        (lambda d: gd.rand_augment(d, magnitude=31), ValueError, r"gpuaug\.dali\.rand_augment: magnitude: got 31"),
        (lambda d: gd.rand_augment(d, num_ops=-1), ValueError, r"rand_augment: num_ops: got -1"),
        (lambda d: gd.auto_augment(d, policy="coco"), ValueError, r"auto_augment: policy: got 'coco'"),
        (lambda d: gd.augmix(d, severity=0), ValueError, r"augmix: severity: got 0"),
        (lambda d: gd.trivial_augment(d, layout="CHW"), ValueError, r"trivial_augment: layout: got 'CHW'"),
        (lambda d: gd.rand_augment(d, seed=-3), TypeError, r"rand_augment: seed: got -3"),
        (lambda d: gd.mixup(d, d, alpha=0), ValueError, r"mixup: alpha: got 0"),
        (lambda d: gd.cutmix(d, np.zeros(4), num_classes=2), TypeError, r"cutmix: labels: got ndarray"),
        (lambda d: gd.mixup(np.zeros((4, 4, 3)), d), TypeError, r"mixup: data: got ndarray"),
    ]
    for make, cls, pat in cases:
        def graph(make=make):
            return make(_source(x))

        with pytest.raises(cls, match=pat):
            _run(graph)


def test_bad_data_at_run_time():
    """Float images into a policy, and labels of the wrong shape into mixup, fail in run()
    naming the operator and the argument."""
    import gpuaug.dali as gd
    from nvidia.dali import fn

    f = [np.zeros((N, H, W, 3), np.float32)]

    def graph():
        return gd.rand_augment(_source(f), seed=1)

    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.rand_augment: data: got float32 samples"):
        _run(graph)

    x = _batches(1)
    bad = [np.zeros((2, 2), np.float32)] * N

    def graph2():
        lab = fn.external_source(source=lambda: bad, batch=True)
        return gd.mixup(_source(x), lab, num_classes=3, seed=1)

    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.mixup: labels: got float32 samples of shape \(2, 2\)"):
        _run(graph2)


def _det_batch(rng, n, h, w, normalized):
    boxes, labels = [], []
    for _ in range(n):
        m = int(rng.integers(0, 5))
        a = rng.uniform(0, 0.7, (m, 2)) * [w, h]
        b = np.minimum(a + rng.uniform(2, 9, (m, 2)), [w, h])
        bx = np.concatenate([a, b], 1).astype(np.float32)
        boxes.append(bx / np.array([w, h, w, h], np.float32) if normalized else bx)
        labels.append(rng.integers(0, 80, (m, 1)).astype(np.int32))
    return boxes, labels


@pytest.mark.parametrize("normalized", [False, True])
def test_mosaic_with_boxes(normalized):
    """Images, boxes ((M_i, 4) per sample) and (M_i, 1) labels through gd.mosaic equal
    gpuaug.Mosaic with the same seed on ragged Boxes, batch after batch."""
    import gpuaug.dali as gd
    from gpuaug.targets import Boxes
    from nvidia.dali import fn

    rng = np.random.default_rng(12)
    batches = _batches(2, n=5, h=16, w=20, seed=13)
    targets = [_det_batch(rng, 5, 16, 20, normalized) for _ in range(2)]

    def graph():
        b = fn.external_source(source=lambda i: targets[i][0], batch=True)
        lab = fn.external_source(source=lambda i: targets[i][1], batch=True)
        return gd.mosaic(_source(batches), b, lab, size=(24, 30), normalized=normalized, min_visibility=0.3,
                         seed=14)

    runs = _run(graph, iters=2, batch_size=5)
    mo = gpuaug.Mosaic(size=(24, 30), seed=14)
    for it in range(2):
        bx, lab = targets[it]
        y, b = mo(batches[it], Boxes(bx, normalized=normalized, min_visibility=0.3,
                                     labels=[v[:, 0] for v in lab]))
        imgs, boxes, labels = runs[it]
        _same(imgs, list(y), f"mosaic images batch {it}")
        _same(boxes, b.data, f"mosaic boxes batch {it}")
        _same(labels, [v.reshape(-1, 1) for v in b.labels], f"mosaic labels batch {it}")
        assert sum(len(v) for v in boxes) > 0


def test_mosaic_images_only_and_bad():
    import gpuaug.dali as gd

    x = _batches(1, n=4, seed=15)

    def graph():
        return gd.mosaic(_source(x), fill=0, seed=2)

    (got,), = _run(graph)
    ref, _ = gpuaug.Mosaic(fill=0, seed=2)(x[0])
    _same(got, list(ref), "mosaic images only")
    for kw, cls, pat in ((dict(format="ltrb"), ValueError, r"gpuaug\.dali\.mosaic: format: got 'ltrb'"),
                         (dict(center=(0.9, 0.1)), ValueError, r"mosaic: center: got \(0.9, 0.1\)"),
                         (dict(labels=np.zeros(3)), TypeError, r"mosaic: labels: given without bboxes")):
        def bad(kw=kw):
            return gd.mosaic(_source(x), **kw)

        with pytest.raises(cls, match=pat):
            _run(bad)


# -- GPU -------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("op,kw,make", POLICIES, ids=[f"{p[0]}-{i}" for i, p in enumerate(POLICIES)])
def test_policy_gpu(op, kw, make):
    """GPU data: the operator equals the CuPy policy with the same seed, and the NumPy twin."""
    import cupy as cp
    import gpuaug.dali as gd

    batches = _batches(2, n=8, h=33, w=29)

    def graph():
        return getattr(gd, op)(_source(batches, device="gpu"), **kw, seed=21)

    runs = _run(graph, iters=2, batch_size=8, device_id=0)
    gpu, cpu = make(21), make(21)
    for it, x in enumerate(batches):
        _same(runs[it][0], list(cp.asnumpy(gpu(cp.asarray(x)))), f"{op} GPU batch {it} vs CuPy")
        _same(runs[it][0], list(cpu(x)), f"{op} GPU batch {it} vs NumPy twin")


@pytest.mark.gpu
@pytest.mark.parametrize("op,cls", [("mixup", "MixUp"), ("cutmix", "CutMix")])
def test_mixing_gpu(op, cls):
    import gpuaug.dali as gd
    from nvidia.dali import fn

    batches = _batches(1, n=8, h=32, w=32, seed=8)
    labels = np.arange(8, dtype=np.int32).reshape(8, 1) % 4

    def graph():
        lab = fn.external_source(source=lambda: list(labels), batch=True)
        return getattr(gd, op)(_source(batches, device="gpu"), lab.gpu(), alpha=1.0, num_classes=4, seed=2)

    (imgs, labs), = _run(graph, batch_size=8, device_id=0)
    y, soft = getattr(gpuaug, cls)(1.0, num_classes=4, seed=2)(batches[0], labels[:, 0])
    _same(imgs, list(y), f"{op} GPU images")
    for g, r in zip(labs, soft):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_mosaic_gpu():
    import gpuaug.dali as gd
    from gpuaug.targets import Boxes
    from nvidia.dali import fn

    rng = np.random.default_rng(16)
    batches = _batches(1, n=8, h=40, w=48, seed=17)
    bx, lab = _det_batch(rng, 8, 40, 48, False)

    def graph():
        b = fn.external_source(source=lambda: bx, batch=True)
        lb = fn.external_source(source=lambda: lab, batch=True)
        return gd.mosaic(_source(batches, device="gpu"), b.gpu(), lb.gpu(), size=(80, 96), seed=3)

    (imgs, boxes, labels), = _run(graph, batch_size=8, device_id=0)
    y, b = gpuaug.Mosaic(size=(80, 96), seed=3)(batches[0], Boxes(bx, labels=[v[:, 0] for v in lab]))
    _same(imgs, list(y), "mosaic GPU images")
    for g, r in zip(boxes, b.data):
        np.testing.assert_allclose(g, r, atol=1e-4)
    _same(labels, [v.reshape(-1, 1) for v in b.labels], "mosaic GPU labels")
