"""gpuaug.dali on the GPU (marked gpu and dali; the lead runs them on the GPU machine with DALI
from the kit): every op through python_function (CUDA C) and through the Numba path against
the standalone op, the batch viewed as one 4-D array, no host synchronisation inside the
callbacks, compose, varshape, and the mixed-decode folder pipeline end to end.
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import gpuaug
from test_dali import _split  # example kwargs -> (constants, per-sample lists)

pytestmark = [pytest.mark.gpu, pytest.mark.dali]

N, H, W, C = 4, 33, 47, 3
OPS = sorted(gpuaug.registry)

# Ops that read some per-sample values on the host by design (they decide output shapes,
# crop offsets or filter weights), so device values are copied back: a stream wait.
HOST_READS = {
    "crop": "top/left are read on the host",
    "pad": "padding decides the output shape",
    "rot90": "k decides the output shape",
    "gaussian_blur": "sigma and kernel_size build the filter weights on the host",
    "box_blur": "kernel_size is read on the host",
    "median_blur": "kernel_size is read on the host",
}

SPIN = r"""
extern "C" __global__ void gpuaug_test_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


def _images(n=N, h=H, w=W, c=C, seed=1):
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, c), dtype=np.uint8)


def _const(value):
    """An external_source callback without arguments (DALI passes an index to callbacks that
    take one, default arguments included)."""
    return lambda: value


def _case(op, seed=2):
    spec = gpuaug.registry[op]
    c = C if C in spec.channels else spec.channels[-1]
    x = _images(c=c)
    kw = spec.example(np.random.default_rng(seed), N, H, W) if spec.example else {}
    consts, per = _split(op, kw, N)
    return spec, x, consts, per


def _run_gpu_pipeline(graph, batch_size=N):
    from nvidia.dali import pipeline_def

    pipe = pipeline_def(graph, batch_size=batch_size, num_threads=2, device_id=0, prefetch_queue_depth=1)()
    pipe.build()
    outs = pipe.run()
    res = []
    for o in outs:
        cpu = o.as_cpu() if hasattr(o, "as_cpu") else o
        res.append(([np.array(t) for t in cpu], o.layout()))
    del pipe
    return res


def _close(got, ref, what):
    import cupy as cp

    ref = cp.asnumpy(cp.stack(ref)) if isinstance(ref, list) else cp.asnumpy(ref)
    got = np.stack(got)
    assert got.shape == ref.shape and got.dtype == ref.dtype, f"{what}: {got.shape} {got.dtype} vs {ref.shape} {ref.dtype}"
    if got.dtype == np.uint8:
        d = np.abs(got.astype(np.int32) - ref.astype(np.int32)).max()
        assert d <= 1, f"{what}: max |diff| {d}"
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, err_msg=what)


def _through_dali(op, backend):
    import cupy as cp
    import gpuaug.dali as gd
    from nvidia.dali import fn

    spec, x, consts, per = _case(op)

    def graph():
        d = fn.external_source(source=lambda: [x[i] for i in range(N)], batch=True, device="gpu", layout="HWC")
        nodes = {k: fn.external_source(source=_const(v), batch=True) for k, v in per.items()}
        return getattr(gd, op)(d, **consts, **nodes, backend=backend)

    (got, layout), = _run_gpu_pipeline(graph)
    # per-sample values from the host: some ops read them there (pad's padding, rot90's k...)
    ref = spec.func(cp.asarray(x), **consts, **{k: np.stack(v) for k, v in per.items()},
                    backend=backend or "cuda")
    return got, ref, layout


@pytest.mark.parametrize("op", OPS)
def test_every_op_python_function_gpu(op):
    from gpuaug.dali._callback import STATS

    dense = STATS["dense"]
    got, ref, layout = _through_dali(op, "cuda")  # "cuda": python_function (None may pick the native operator)
    _close(got, ref, op)
    assert layout == ("CHW" if op == "crop_mirror_normalize" else "HWC")
    assert STATS["dense"] > dense, "DALI's GPU batch was not viewed as one 4-D array"


@pytest.mark.parametrize("op", OPS)
def test_every_op_numba_gpu(op):
    """backend="numba": DALI's numba_function on the GPU where DALI accepts the toolkit, else the
    Numba CUDA twin inside python_function (with a warning naming the reason)."""
    from gpuaug.dali._numba import _probe, _warned, gpu_refusal

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, ref, _ = _through_dali(op, "numba")
    _close(got, ref, f"{op} numba")
    why = _probe(op) or gpu_refusal()
    if why is not None:  # ran the Numba CUDA twin inside python_function, and said so once
        assert (op, "gpu") in {k[:2] for k in _warned}, why


@pytest.mark.parametrize("op", OPS)
def test_no_host_sync_in_callback(op):
    """The callback only enqueues work: with DALI's stream held busy for 0.5 s by a spin kernel,
    a call returns long before the stream is free (per-sample values stay on the device)."""
    import cupy as cp

    from gpuaug.dali._callback import Chain
    from gpuaug.dali._steps import Step

    if op in HOST_READS:
        pytest.skip(f"{op} reads per-sample values on the host: {HOST_READS[op]}")
    spec, x, consts, per = _case(op)
    seed = consts.pop("seed", None)
    step = Step(op, consts, tuple(per), "NHWC", seed)
    chain = Chain([step], "cuda", "gpu")
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        xb = cp.asarray(x)
        pb = [cp.asarray(np.stack(v)) for v in per.values()]
        args = [[xb[i] for i in range(N)]] + [[p[i] for i in range(N)] for p in pb]
        chain(*args)  # compile, upload constants
        stream.synchronize()
        clock_khz = cp.cuda.runtime.getDeviceProperties(0).get("clockRate") or cp.cuda.runtime.deviceGetAttribute(13, 0)
        cp.RawKernel(SPIN, "gpuaug_test_spin")((1,), (1,), (np.int64(clock_khz * 500),))
        t0 = time.perf_counter()
        chain(*args)
        dt = time.perf_counter() - t0
        stream.synchronize()
    assert dt < 0.25, f"{op}: the callback took {dt * 1e3:.0f} ms behind a 500 ms kernel: it waited for the GPU"


def test_repeated_batches():
    """Several batches through one pipeline: the kept output buffer is rewritten each batch,
    and rot90 switches between one 4-D output and per-sample shapes as k varies."""
    import cupy as cp
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def, types

    rng = np.random.default_rng(9)
    batches = [_images(seed=s) for s in range(4)]
    angles = [rng.uniform(-40, 40, N).astype(np.float32) for _ in range(4)]
    ks = [np.array(k, np.int32) for k in ([1, 1, 3, 1], [0, 1, 2, 3], [2, 2, 0, 0], [1, 3, 1, 1])]

    def src(info):
        return [batches[info.iteration % 4][i] for i in range(N)]

    @pipeline_def(batch_size=N, num_threads=2, device_id=0, prefetch_queue_depth=1)
    def pipe():
        d = fn.external_source(source=src, batch=True, device="gpu", layout="HWC", batch_info=True)
        a = fn.external_source(source=lambda info: list(angles[info.iteration % 4]), batch=True, batch_info=True)
        k = fn.external_source(source=lambda info: list(ks[info.iteration % 4]), batch=True, batch_info=True,
                               dtype=types.INT32)
        return gd.rotate(d, angle=a), gd.rot90(d, k=k)

    p = pipe()
    p.build()
    for it in range(4):
        rot, r90 = p.run()
        xb = cp.asarray(batches[it])
        _close([np.array(t) for t in rot.as_cpu()], gpuaug.rotate(xb, angle=angles[it]), f"rotate batch {it}")
        ref = gpuaug.rot90([xb[i] for i in range(N)], k=ks[it])
        for i, t in enumerate(r90.as_cpu()):
            _close([np.array(t)], [ref[i]], f"rot90 batch {it} sample {i}")
    del p


def test_compose_gpu():
    import cupy as cp
    import gpuaug.dali as gd
    from nvidia.dali import fn

    x = _images(n=8)
    flags = [np.int32(v) for v in (1, 0, 0, 1, 1, 0, 1, 0)]
    angles = [np.float32(v) for v in np.linspace(-20, 20, 8)]

    def graph():
        d = fn.external_source(source=lambda: [x[i] for i in range(8)], batch=True, device="gpu", layout="HWC")
        return gd.compose([("flip", {"horizontal": fn.external_source(source=lambda: flags, batch=True)}),
                           ("rotate", {"angle": fn.external_source(source=lambda: angles, batch=True)}),
                           ("color_jitter", {"brightness": 1.2, "contrast": 0.9}),
                           ("crop_mirror_normalize", {"mean": 120.0, "std": 60.0})])(d)

    (got, layout), = _run_gpu_pipeline(graph, batch_size=8)
    xb = cp.asarray(x)
    ref = gpuaug.flip(xb, horizontal=np.stack(flags))
    ref = gpuaug.rotate(ref, angle=np.stack(angles))
    ref = gpuaug.color_jitter(ref, brightness=1.2, contrast=0.9)
    ref = gpuaug.crop_mirror_normalize(ref, mean=120.0, std=60.0)
    _close(got, ref, "compose")
    assert layout == "CHW"


@pytest.mark.parametrize("backend", [None, "cuda"], ids=["default", "python_function"])
def test_policy_gpu(backend):
    """gd.policy gives, batch after batch, what the policy's own calls give (same seed): by
    default through the native operator where the plugin loads (it replays the policy's
    generator), and through python_function."""
    import cupy as cp
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    x = _images(n=8)

    def make():
        return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(20),
                               gpuaug.ColorJitter(0.3, 0.3), gpuaug.Normalize((0.5,) * 3, (0.25,) * 3)], seed=5, draws="host")

    @pipeline_def(batch_size=8, num_threads=2, device_id=0, prefetch_queue_depth=1)
    def pipe():
        d = fn.external_source(source=lambda: [x[i] for i in range(8)], batch=True, device="gpu", layout="HWC")
        return gd.policy(d, make(), backend=backend)

    p = pipe()
    p.build()
    ref = make()
    for it in range(3):
        (out,) = p.run()
        got = [np.array(t) for t in out.as_cpu()]
        assert out.layout() == "CHW"
        want = ref(cp.asarray(x))
        assert not np.all(np.stack(got) == -2.0), "every output is the fill's value"
        _close(got, want, f"policy batch {it}")
    del p


def test_varshape_gpu():
    import cupy as cp
    import gpuaug.dali as gd
    from nvidia.dali import fn

    rng = np.random.default_rng(5)
    imgs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((30, 41), (17, 64), (50, 50), (9, 13))]
    angles = [np.float32(v) for v in (5, -15, 30, 90)]

    def graph():
        d = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
        a = fn.external_source(source=lambda: angles, batch=True)
        return gd.rotate(d, angle=a), gd.resize(d, size=(16, 24))

    (rot, _), (rsz, _) = _run_gpu_pipeline(graph)
    dev = [cp.asarray(a) for a in imgs]
    ref_rot = gpuaug.rotate(dev, angle=np.stack(angles))
    for g, r in zip(rot, ref_rot):
        _close([g], [r], "rotate varshape")
    _close(rsz, gpuaug.resize(dev, size=(16, 24)), "resize varshape")


def _jpeg_tree(root, classes=3, per_class=8):
    from PIL import Image

    rng = np.random.default_rng(4)
    for c in range(classes):
        d = root / f"class{c}"
        d.mkdir(parents=True)
        for i in range(per_class):
            h, w = rng.integers(40, 120, 2)
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(d / f"{i}.jpg", quality=90)
    return root


def test_folder_pipeline_mixed_decode(tmp_path):
    import gpuaug.dali as gd

    root = _jpeg_tree(tmp_path / "imgs")
    for make in (gd.image_folder_pipeline, gd.validation_pipeline):
        pipe = make(str(root), size=32, batch_size=8, device_id=0, num_threads=2, seed=1)
        pipe.build()
        for _ in range(3):
            images, labels = pipe.run()
            assert type(images).__name__ == "TensorListGPU" and images.layout() == "CHW"
            x = np.stack([np.array(t) for t in images.as_cpu()])
            assert x.shape == (8, 3, 32, 32) and x.dtype == np.float32 and np.isfinite(x).all()
            y = np.stack([np.array(t) for t in labels.as_cpu()])
            assert set(y.ravel()) <= {0, 1, 2}
        del pipe


def test_torch_loader(tmp_path):
    torch = pytest.importorskip("torch")
    import gpuaug.dali as gd

    root = _jpeg_tree(tmp_path / "imgs", classes=2, per_class=8)
    loader = gd.torch_loader(str(root), size=24, batch_size=4, device_id=0, num_threads=2)
    assert len(loader) == 4
    seen = 0
    for epoch in range(2):
        for images, labels in loader:
            assert images.is_cuda and images.shape == (4, 3, 24, 24) and images.dtype == torch.float32
            assert labels.dtype == torch.int64 and labels.shape == (4,)
            seen += 1
    assert seen == 8
