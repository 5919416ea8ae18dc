"""gpuaug.dali in DALI CPU pipelines (no GPU needed): every registry op against the standalone
op on the same batch and parameters, per-sample DataNode parameters, varshape batches, CHW
data, compose, the Numba operator path, the image-folder pipeline, and bad use.

Small batches of small odd-sized uint8 images keep Numba compile time (which dominates)
low: the standalone references compile the same specialisations the DALI callbacks use.
"""
from __future__ import annotations

import functools
import time
import warnings

import numpy as np
import pytest

import gpuaug
import refs

pytestmark = pytest.mark.dali

N, H, W, C = 3, 9, 11, 3
OPS = sorted(gpuaug.registry)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _images(n=N, h=H, w=W, c=C, seed=1):
    return [_rng(seed).integers(0, 256, (n, h, w, c), dtype=np.uint8)[i] for i in range(n)]


def _split(op, kwargs, n):
    """Example kwargs -> (constants, per-sample lists): per-sample values go through
    external_source, one array per sample."""
    spec = gpuaug.registry[op]
    by_name = {p.name: p for p in spec.params}
    consts, per = {}, {}
    for k, v in kwargs.items():
        p = by_name[k]
        a = np.asarray(v) if not isinstance(v, (str, type(None))) else None
        if (a is not None and p.per_sample and p.kind != "size" and a.ndim >= 1 and a.shape[0] == n
                and a.ndim == len(p.shape) + 1):
            per[k] = [np.array(a[i]) for i in range(n)]
        else:
            consts[k] = v
    return consts, per


def run_pipeline(graph, batch_size=N, num_threads=1, iterations=1):
    """Build a CPU pipeline from ``graph()`` (returns DataNodes) and run it; outputs as lists of
    NumPy arrays per output (one list per iteration when iterations > 1)."""
    from nvidia.dali import pipeline_def

    pipe = pipeline_def(graph, batch_size=batch_size, num_threads=num_threads, device_id=None,
                        prefetch_queue_depth=1)()
    pipe.build()
    runs = []
    for _ in range(iterations):
        outs = pipe.run()
        runs.append([[np.array(t) for t in o] for o in outs] + [[o.layout() for o in outs]])
    del pipe
    return runs[0] if iterations == 1 else runs


def feed(samples):
    from nvidia.dali import fn

    return fn.external_source(source=lambda: samples, batch=True)


def images_node(samples, layout="HWC"):
    from nvidia.dali import fn

    return fn.external_source(source=lambda: samples, batch=True, layout=layout)


def _check_same(got, ref, what):
    ref = ref if isinstance(ref, list) else [ref[i] for i in range(ref.shape[0])]
    assert len(got) == len(ref), what
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape and g.dtype == r.dtype, f"{what} sample {i}: {g.shape} {g.dtype} vs {r.shape} {r.dtype}"
        np.testing.assert_array_equal(g, r, err_msg=f"{what} sample {i}")


def _op_case(op, backend=None):
    import gpuaug.dali as gd

    spec = gpuaug.registry[op]
    c = C if C in spec.channels else spec.channels[-1]
    imgs = _images(c=c)
    kw = spec.example(_rng(2), N, H, W) if spec.example else {}
    consts, per = _split(op, kw, N)

    def graph():
        x = images_node(imgs)
        nodes = {k: feed(v) for k, v in per.items()}
        return getattr(gd, op)(x, **consts, **nodes, backend=backend)

    got, layouts = run_pipeline(graph)
    ref_kw = dict(consts, **{k: np.stack(v) for k, v in per.items()})
    ref = spec.func(np.stack(imgs), **ref_kw, backend="cpu")
    return got, ref, layouts


@pytest.mark.parametrize("op", OPS)
def test_every_op_python_function(op):
    """CPU python_function (njit twins) == the standalone op, with per-sample DataNode params."""
    got, ref, layouts = _op_case(op)
    _check_same(got, ref, op)
    assert layouts[0] == refs.get(op, "DALI_LAYOUT", "HWC")


#: one op per kind of numba_function path, as each op's tests/refs module declares (DALI_NUMBA)
NUMBA_OPS = tuple(op for op in OPS if refs.get(op, "DALI_NUMBA"))


@pytest.mark.parametrize("op", NUMBA_OPS)
def test_numba_function(op):
    """backend="numba": DALI's numba_function (CPU) on the njit twins == the standalone op.

    One op per kind of path (the ops whose tests/refs module sets DALI_NUMBA): copy twins
    (flip, rot90 changes the shape per sample, pad has per-sample sizes and fills), value twins
    (rotate; crop_mirror_normalize changes dtype, layout and size; contrast plans a per-sample
    mean first), and an op that falls back to python_function (box_blur, DALI_FALLBACK, with a
    warning).
    """
    from gpuaug.dali._numba import _probe

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, ref, _ = _op_case(op, backend="numba")
    _check_same(got, ref, f"{op} numba")
    fell_back = _probe(op) is not None
    assert fell_back == bool(refs.get(op, "DALI_FALLBACK"))
    if fell_back:
        assert any(op in str(w.message) and "python_function" in str(w.message) for w in caught)


def test_numba_varshape():
    """numba_function runs per sample, so images of different sizes need nothing special."""
    import gpuaug.dali as gd

    rng = _rng(6)
    imgs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((9, 11), (12, 7), (10, 10))]
    angles = [np.float32(v) for v in (10, -20, 33)]
    ks = [np.int32(v) for v in (1, 2, 3)]

    def graph():
        x = images_node(imgs)
        return gd.rotate(x, angle=feed(angles), backend="numba"), gd.rot90(x, k=feed(ks), backend="numba")

    rot, r90, _ = run_pipeline(graph)
    _check_same(rot, gpuaug.rotate(imgs, angle=np.stack(angles)), "rotate numba varshape")
    _check_same(r90, gpuaug.rot90(imgs, k=np.stack(ks)), "rot90 numba varshape")


def test_numba_support_table():
    from gpuaug.dali import numba_support

    table = numba_support("cpu")
    assert set(table) == set(gpuaug.registry)
    assert table["flip"] is None and table["rotate"] is None
    assert "launch shape" in table["gaussian_blur"]


def test_random_param_nodes():
    """fn.random.* and fn.transforms.* nodes as per-sample parameters; the values come out of
    the pipeline too, so the expected result can be computed."""
    import gpuaug.dali as gd
    from nvidia.dali import fn, types

    imgs = _images(n=4)

    def graph():
        x = images_node(imgs)
        angle = fn.random.uniform(range=(-30.0, 30.0))
        hflip = fn.random.coin_flip()
        k = fn.random.uniform(values=[0, 1, 2, 3], dtype=types.INT32)
        mat = fn.transforms.rotation(angle=angle, center=(5.0, 4.0))
        return (gd.rotate(x, angle=angle, border="reflect"), gd.flip(x, horizontal=hflip),
                gd.rot90(x, k=k), gd.warp_affine(x, matrix=mat, interpolation="nearest"),
                angle, hflip, k, mat)

    rot, fl, r90, wa, angle, hflip, k, mat, _ = run_pipeline(graph, batch_size=4)
    x = np.stack(imgs)
    _check_same(rot, gpuaug.rotate(x, angle=np.stack(angle), border="reflect"), "rotate")
    _check_same(fl, gpuaug.flip(x, horizontal=np.stack(hflip)), "flip")
    _check_same(r90, gpuaug.rot90(list(x), k=np.stack(k)), "rot90")
    _check_same(wa, gpuaug.warp_affine(x, matrix=np.stack(mat), interpolation="nearest"), "warp_affine")


@pytest.mark.parametrize("op", ["flip", "rotate", "brightness", "resize", "crop_mirror_normalize"])
def test_varshape(op):
    import gpuaug.dali as gd

    rng = _rng(3)
    imgs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((9, 11), (12, 7), (10, 10))]
    params = {"flip": ({}, {"horizontal": [np.bool_(v) for v in (True, False, True)]}),
              "rotate": ({"border": "replicate"}, {"angle": [np.float32(v) for v in (10, -20, 33)]}),
              "brightness": ({}, {"factor": [np.float32(v) for v in (0.5, 1.0, 1.7)]}),
              "resize": ({"size": (6, 8)}, {}),
              "crop_mirror_normalize": ({"crop": (5, 6), "mean": 128.0, "std": 64.0},
                                        {"mirror": [np.int32(v) for v in (1, 0, 1)]})}[op]
    consts, per = params

    def graph():
        nodes = {k: feed(v) for k, v in per.items()}
        return getattr(gd, op)(images_node(imgs), **consts, **nodes)

    got, _ = run_pipeline(graph)
    ref = getattr(gpuaug, op)(imgs, **consts, **{k: np.stack(v) for k, v in per.items()})
    _check_same(got, ref, op)


def test_chw_layout():
    import gpuaug.dali as gd

    x = np.stack(_images())
    chw = [np.ascontiguousarray(a.transpose(2, 0, 1)) for a in x]
    angles = [np.float32(a) for a in (5, 15, -40)]

    def graph():
        d = images_node(chw, layout="CHW")
        return gd.rotate(d, angle=feed(angles), layout="CHW"), gd.flip(d, vertical=True, layout="CHW")

    rot, fl, layouts = run_pipeline(graph)
    nchw = np.stack(chw)
    _check_same(rot, gpuaug.rotate(nchw, angle=np.stack(angles), layout="NCHW"), "rotate CHW")
    _check_same(fl, gpuaug.flip(nchw, vertical=True, layout="NCHW"), "flip CHW")
    assert layouts == ["CHW", "CHW"]


def test_noise_seed_advances_per_batch():
    import gpuaug.dali as gd

    imgs = _images()

    def graph():
        return gd.gaussian_noise(images_node(imgs), std=20.0, seed=7)

    (b0, _), (b1, _) = run_pipeline(graph, iterations=2)
    x = np.stack(imgs)
    _check_same(b0, gpuaug.gaussian_noise(x, std=20.0, seed=7), "noise batch 0")
    _check_same(b1, gpuaug.gaussian_noise(x, std=20.0, seed=8), "noise batch 1")


def test_compose_fuses_into_one_operator():
    import gpuaug.dali as gd
    imgs = _images(n=4)
    flags = [np.int32(v) for v in (1, 0, 0, 1)]
    angles = [np.float32(v) for v in (3, -7, 12, 0)]
    factors = [np.float32(v) for v in (0.8, 1.0, 1.3, 1.1)]
    made = []

    def graph():
        x = images_node(imgs)
        aug = gd.compose([
            ("flip", {"horizontal": feed(flags)}),
            functools.partial(gd.rotate, angle=feed(angles), border="reflect"),
            functools.partial(gpuaug.brightness, factor=feed(factors)),
            "invert",
            ("crop_mirror_normalize", {"crop": (6, 8), "mean": 100.0, "std": 50.0}),
        ])
        out = aug(x)
        made.append(aug.operators)
        return out

    got, layouts = run_pipeline(graph, batch_size=4)
    x = np.stack(imgs)
    ref = gpuaug.flip(x, horizontal=np.stack(flags))
    ref = gpuaug.rotate(ref, angle=np.stack(angles), border="reflect")
    ref = gpuaug.brightness(ref, factor=np.stack(factors))
    ref = gpuaug.invert(ref)
    ref = gpuaug.crop_mirror_normalize(ref, crop=(6, 8), mean=100.0, std=50.0)
    _check_same(got, ref, "compose")
    assert layouts[0] == "CHW"
    assert made == [1]  # one python_function for the five ops


def test_compose_with_dali_ops_and_numba():
    """A plain DALI function in the list splits the fusion; backend="numba" chains numba nodes."""
    import gpuaug.dali as gd
    from nvidia.dali import fn

    imgs = _images()

    def graph():
        x = images_node(imgs)
        a = gd.compose(["transpose", lambda d: fn.flip(d, horizontal=1), ("brightness", {"factor": 1.5})])(x)
        b = gd.compose([("flip", {"vertical": True}), ("rotate", {"angle": 90.0})], backend="numba")(x)
        return a, b

    a, b, _ = run_pipeline(graph)
    x = np.stack(imgs)
    _check_same(a, gpuaug.brightness(gpuaug.flip(gpuaug.transpose(x)), 1.5), "compose + fn.flip")
    _check_same(b, gpuaug.rotate(gpuaug.flip(x, vertical=True), 90.0), "compose numba")


def test_policy():
    """A gpuaug.Compose policy as one DALI operator: with a fixed seed it gives what the policy
    gives standalone with the same seed."""
    import gpuaug.dali as gd

    imgs = _images(n=4)

    def make():
        return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(20),
                               gpuaug.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))], seed=5, draws="host")

    def graph():
        return gd.policy(images_node(imgs), make())

    got, layouts = run_pipeline(graph, batch_size=4)
    _check_same(got, make()(np.stack(imgs)), "policy")
    assert layouts == ["CHW"]


def test_default_augment_runs():
    import gpuaug.dali as gd

    imgs = _images(n=4, h=16, w=20)

    def graph():
        return gd.default_augment()(images_node(imgs))

    got, layouts = run_pipeline(graph, batch_size=4)
    assert [g.shape for g in got] == [(16, 20, 3)] * 4 and layouts == ["HWC"]


def _jpeg_tree(root, classes=3, per_class=4):
    from PIL import Image

    rng = _rng(4)
    for c in range(classes):
        d = root / f"class{c}"
        d.mkdir(parents=True)
        for i in range(per_class):
            h, w = rng.integers(20, 48, 2)
            a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            Image.fromarray(a).save(d / f"{i}.jpg", quality=90)
    return root


@pytest.mark.parametrize("training,augment", [(True, "default"), (True, "flip"), (True, None), (False, None)])
def test_image_folder_pipeline_cpu(tmp_path, training, augment):
    import gpuaug.dali as gd

    root = _jpeg_tree(tmp_path / "imgs")
    kw = {"augment": augment} if training else {}
    make = gd.image_folder_pipeline if training else gd.validation_pipeline
    pipe = make(str(root), size=16, batch_size=4, device_id=None, num_threads=1, seed=3, **kw)
    pipe.build()
    for _ in range(2):
        images, labels = pipe.run()
        x = np.stack([np.array(t) for t in images])
        y = np.stack([np.array(t) for t in labels])
        assert x.shape == (4, 3, 16, 16) and x.dtype == np.float32
        assert images.layout() == "CHW"
        assert y.shape == (4, 1) and set(y.ravel()) <= {0, 1, 2}
        assert np.isfinite(x).all() and -3 < x.mean() < 3
    del pipe


@pytest.mark.parametrize("roi", ["dali", "gpuaug"])
def test_image_folder_pipeline_decoder_kwargs_reach_the_decoder(tmp_path, roi):
    """decoder_kwargs go to the decoder (hw_decoder_load on the GPU): an argument the decoder does
    not know is DALI's error naming it; a known one runs."""
    import gpuaug.dali as gd

    root = _jpeg_tree(tmp_path / "imgs", classes=2, per_class=2)
    with pytest.raises(Exception, match="not_a_decoder_argument"):
        gd.image_folder_pipeline(str(root), "flip", size=8, batch_size=4, device_id=None, num_threads=1, seed=1,
                                 roi=roi, decoder_kwargs={"not_a_decoder_argument": 1}).build()
    pipe = gd.image_folder_pipeline(str(root), "flip", size=8, batch_size=4, device_id=None, num_threads=1, seed=1,
                                    roi=roi, decoder_kwargs={"use_fast_idct": True})
    pipe.build()
    assert np.stack([np.array(t) for t in pipe.run()[0]]).shape == (4, 3, 8, 8)
    del pipe


def test_validation_pipeline_is_deterministic(tmp_path):
    import gpuaug.dali as gd

    root = _jpeg_tree(tmp_path / "imgs", classes=2, per_class=2)
    outs = []
    for seed in (1, 2):
        pipe = gd.validation_pipeline(str(root), size=12, batch_size=4, device_id=None, num_threads=1, seed=seed)
        pipe.build()
        outs.append(np.stack([np.array(t) for t in pipe.run()[0]]))
        del pipe
    np.testing.assert_array_equal(outs[0], outs[1])


# -- bad use --------------------------------------------------------------------------------


def _build_error(graph):
    from nvidia.dali import pipeline_def

    pipe = pipeline_def(graph, batch_size=N, num_threads=1, device_id=None)()
    pipe.build()


def test_size_param_as_datanode():
    import gpuaug.dali as gd

    with pytest.raises(TypeError, match=r"gpuaug\.dali\.resize: argument 'size' got a DataNode.*constant"):
        _build_error(lambda: gd.resize(images_node(_images()), size=feed([np.int32(4)] * N)))


def test_mode_param_as_datanode():
    import gpuaug.dali as gd

    with pytest.raises(TypeError, match=r"gpuaug\.dali\.rotate: argument 'border'"):
        _build_error(lambda: gd.rotate(images_node(_images()), angle=1.0, border=feed([np.int32(0)] * N)))


def test_unsupported_layout_and_choice():
    import gpuaug.dali as gd

    with pytest.raises(ValueError, match=r"gpuaug\.dali\.flip: layout: got 'FHWC'"):
        _build_error(lambda: gd.flip(images_node(_images()), layout="FHWC"))
    with pytest.raises(ValueError, match=r"gpuaug\.dali\.rotate: argument 'interpolation' got 'cubic'"):
        _build_error(lambda: gd.rotate(images_node(_images()), angle=1.0, interpolation="cubic"))


def test_unknown_argument_and_backend():
    import gpuaug.dali as gd

    with pytest.raises(TypeError, match=r"gpuaug\.dali\.flip: unknown argument 'horizonal'"):
        _build_error(lambda: gd.flip(images_node(_images()), horizonal=True))
    with pytest.raises(ValueError, match=r"gpuaug\.dali\.flip: backend: got 'cuda' for CPU data"):
        _build_error(lambda: gd.flip(images_node(_images()), backend="cuda"))
    with pytest.raises(TypeError, match=r"gpuaug\.dali\.flip: data: got ndarray"):
        gd.flip(np.zeros((2, 2, 3), np.uint8))


def test_gpu_param_node_with_cpu_data():
    import gpuaug.dali as gd
    from nvidia.dali import fn

    with pytest.raises(TypeError, match=r"gpuaug\.dali\.rotate: argument 'angle' is a GPU DataNode"):
        _build_error(lambda: gd.rotate(images_node(_images()), angle=fn.random.uniform(range=(0, 1)).gpu()))


def _run_error(graph):
    from nvidia.dali import pipeline_def

    pipe = pipeline_def(graph, batch_size=N, num_threads=1, device_id=None, prefetch_queue_depth=1)()
    pipe.build()
    try:
        pipe.run()
    finally:
        del pipe


def test_param_node_wrong_shape():
    import gpuaug.dali as gd

    bad = [np.zeros(2, np.float32)] * N
    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.rotate: argument 'angle' \(a DataNode\) gave samples "
                                           r"of shape \(2,\); expected shape \(\)"):
        _run_error(lambda: gd.rotate(images_node(_images()), angle=feed(bad)))
    mats = [np.zeros((3, 3), np.float32)] * N
    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.warp_affine: argument 'matrix'.*\(3, 3\).*\(2, 3\)"):
        _run_error(lambda: gd.warp_affine(images_node(_images()), matrix=feed(mats)))


def test_param_node_wrong_dtype():
    import gpuaug.dali as gd

    floats = [np.float32(0.7)] * N
    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.flip: argument 'horizontal' \(a DataNode\) gave "
                                           r"values of dtype float32; expected bool or integer"):
        _run_error(lambda: gd.flip(images_node(_images()), horizontal=feed(floats)))


def test_error_inside_callback_names_op():
    import gpuaug.dali as gd

    # rot90's k must be an integer: the op's own check, re-raised naming the op
    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.rot90: k: got"):
        _run_error(lambda: gd.rot90(images_node(_images()), k=1.5))
    # a window larger than the images
    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.crop_mirror_normalize: crop: got \(20, 20\)"):
        _run_error(lambda: gd.crop_mirror_normalize(images_node(_images()), crop=(20, 20)))
    # inside a composed chain the failing op is named
    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.resize: size"):
        _run_error(lambda: gd.compose(["flip", ("resize", {"size": (0, 3)})])(images_node(_images())))


def test_non_image_samples():
    import gpuaug.dali as gd

    flat = [np.zeros((5, 4), np.uint8)] * N
    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.flip: the data samples have shape \(5, 4\)"):
        _run_error(lambda: gd.flip(images_node(flat, layout="HW")))


# -- an error at run time, then the pipeline rebuilt ----------------------------------------
#
# DALI reports an exception from a callback as a RuntimeError from run() and marks the
# pipeline object invalid ("Current pipeline object is no longer valid"): running it again
# raises again (promptly), and build() on it does not revive it. What must work is a new
# pipeline with the same op, built afterwards in the same process: it runs and its output is
# right. Each case: runs before the faulty one are right; the faulty run raises naming the
# op; the same object keeps failing; a new pipeline (same op, the faulty run's data fixed)
# gives the standalone op's output on every run.


def _per_run(runs):
    """An external_source callback giving ``runs[i]`` on its i-th call (the last one after)."""
    calls = [0]

    def source():
        i = min(calls[0], len(runs) - 1)
        calls[0] += 1
        return runs[i]
    return source


def _imgs(c=3, seed=0, h=H, w=W):
    rng = _rng(seed)
    return [rng.integers(0, 256, (h, w, c), dtype=np.uint8) for _ in range(N)]


def _vals(*v, dtype=np.float32):
    return [np.array(a, dtype) for a in v]


_NAN = float("nan")
_M23 = np.array([[1, 0.1, -1], [0.05, 1, 2]], np.float32)

#: name -> (make(x, nodes), reference(x, params), images per run, params per run,
#:          the faulty run, its fixed images or params, the error's pattern)
FAULTS = {
    "op_check_constant": (lambda x, p: gd_().rot90(x, k=p.get("k", 1.5)),
                          lambda x, p: gpuaug.rot90(x, k=1), [_imgs()], {}, 0, {"const": {"k": 1}},
                          r"gpuaug\.dali\.rot90: k: got 1\.5"),
    "nan_per_sample": (lambda x, p: gd_().brightness(x, factor=p["factor"]),
                       lambda x, p: gpuaug.brightness(x, factor=p["factor"]),
                       [_imgs(seed=1)] * 3,
                       {"factor": [_vals(1.0, 0.5, 2.0), _vals(1.5, 1.0, 0.7), _vals(1.0, _NAN, 2.0)]},
                       2, {"factor": _vals(1.1, 0.9, 1.3)},
                       r"gpuaug\.dali\.brightness: factor: got \[1\.0, nan, 2\.0\]; expected finite"),
    "channels_change_mid_stream": (lambda x, p: gd_().hue(x, shift=0.1),
                                   lambda x, p: gpuaug.hue(x, shift=0.1),
                                   [_imgs(seed=2), _imgs(seed=3), _imgs(c=2, seed=4)], {},
                                   2, {"images": _imgs(seed=4)},
                                   r"gpuaug\.dali\.hue: x: got 2 channels"),
    "param_shape_change_mid_stream": (lambda x, p: gd_().warp_affine(x, matrix=p["matrix"]),
                                      lambda x, p: gpuaug.warp_affine(x, matrix=p["matrix"]),
                                      [_imgs(seed=5)] * 3,
                                      {"matrix": [[_M23] * N, [_M23 * 0.9] * N, [np.eye(3, dtype=np.float32)] * N]},
                                      2, {"matrix": [_M23 * 1.1] * N},
                                      r"gpuaug\.dali\.warp_affine: argument 'matrix'.*\(3, 3\).*\(2, 3\)"),
    "compose_nan_in_second_op": (lambda x, p: gd_().compose(["flip", ("brightness", {"factor": p["factor"]})])(x),
                                 lambda x, p: gpuaug.brightness(gpuaug.flip(x), factor=p["factor"]),
                                 [_imgs(seed=6)] * 2, {"factor": [_vals(1.0, 0.5, 2.0), _vals(0.5, _NAN, 1.0)]},
                                 1, {"factor": _vals(0.5, 0.8, 1.0)},
                                 r"gpuaug\.dali\.brightness: factor: got .*nan"),
    "numba_nan_per_sample": (lambda x, p: gd_().rotate(x, angle=p["angle"], backend="numba"),
                             lambda x, p: gpuaug.rotate(x, angle=p["angle"], backend=_numba_ref(x)),
                             [_imgs(seed=7)] * 2, {"angle": [_vals(10, -5, 30), _vals(1, _NAN, 2)]},
                             1, {"angle": _vals(1, 3, 2)},
                             r"gpuaug\.dali\.rotate: angle: got \[1\.0, nan, 2\.0\]; expected finite"),
    "numba_channels_change_mid_stream": (lambda x, p: gd_().flip(x, backend="numba"),
                                         lambda x, p: gpuaug.flip(x, backend=_numba_ref(x)),
                                         [_imgs(seed=8), _imgs(c=2, seed=9)], {},
                                         1, {"images": _imgs(seed=9)},
                                         r"gpuaug\.dali\.flip: x: got 2 channels"),
}


def _numba_ref(x):
    """The standalone op's backend matching backend="numba" in DALI: njit twins on the CPU."""
    return "cpu" if isinstance(x, np.ndarray) else "numba"


def gd_():
    import gpuaug.dali as gd

    return gd


def _fault_pipe(make, images, params, const, device_id=None):
    from nvidia.dali import fn, pipeline_def

    def graph():
        x = fn.external_source(source=_per_run(images), batch=True, layout="HWC",
                               device="cpu" if device_id is None else "gpu")
        nodes = {k: fn.external_source(source=_per_run(v), batch=True) for k, v in params.items()}
        return make(x, dict(nodes, **const))

    pipe = pipeline_def(graph, batch_size=N, num_threads=1, device_id=device_id, prefetch_queue_depth=1)()
    pipe.build()
    return pipe


def _fault_run(pipe):
    out = pipe.run()[0]
    if hasattr(out, "as_cpu"):
        out = out.as_cpu()
    return [np.array(t) for t in out]


def _fault_ref(ref, images, params, const, i, device_id=None):
    p = {k: np.stack(v[min(i, len(v) - 1)]) for k, v in params.items()}
    x = np.stack(images[min(i, len(images) - 1)])
    if device_id is None:
        return ref(x, dict(p, **const))
    import cupy as cp

    return cp.asnumpy(ref(cp.asarray(x), dict(p, **const)))


def run_fault_case(case, device_id=None, log=lambda msg: None):
    """One FAULTS case on the CPU (device_id None) or the GPU; raises AssertionError (or the
    pytest.raises failure) when something is wrong; ``log`` hears each step."""
    make, ref, images, params, bad, fix, pattern = FAULTS[case]
    runs = max(len(images), *(len(v) for v in params.values())) if params else len(images)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # backend="numba" fallbacks say why, once
        pipe = _fault_pipe(make, images, params, {}, device_id)
        for i in range(bad):
            _check_same(_fault_run(pipe), _fault_ref(ref, images, params, {}, i, device_id), f"{case} run {i}")
            log(f"run {i} right")
        t0 = time.perf_counter()
        with pytest.raises(RuntimeError, match=pattern):
            pipe.run()
        log(f"run {bad} raised, naming the op")
        with pytest.raises(RuntimeError):  # the failed object stays failed (DALI), and says so at once
            pipe.run()
        assert time.perf_counter() - t0 < 30
        log("the failed pipeline raises again")
        del pipe
        # a new pipeline of the same op, the faulty run fixed: every run right
        images = list(images)
        params = {k: list(v) for k, v in params.items()}
        const = fix.get("const", {})
        if "images" in fix:
            images[bad] = fix["images"]
        for k, v in fix.items():
            if k in params:
                params[k][bad] = v
        for attempt in range(2):  # twice: nothing left over from the failed pipeline or the first rebuild
            pipe = _fault_pipe(make, images, params, const, device_id)
            for i in range(runs):
                _check_same(_fault_run(pipe), _fault_ref(ref, images, params, const, i, device_id),
                            f"{case} rebuilt, run {i}")
            del pipe
            log(f"rebuilt pipeline {attempt + 1}: {runs} runs right")


@pytest.mark.parametrize("case", sorted(FAULTS))
def test_error_then_pipeline_rebuilt(case):
    run_fault_case(case)

def test_adapters_generated_from_registry():
    import inspect

    import gpuaug.dali as gd

    for op in gpuaug.registry:
        f = getattr(gd, op)
        assert f.__name__ == op and f.__gpuaug_op__ == op
        names = list(inspect.signature(f).parameters)
        assert names[1:1 + len(gpuaug.registry[op].params)] == list(gpuaug.registry[op].param_names)
    assert set(gpuaug.registry) <= set(dir(gd))
    with pytest.raises(AttributeError):
        gd.no_such_op


def test_import_gpuaug_does_not_import_dali():
    import subprocess
    import sys

    code = ("import sys, gpuaug, gpuaug.dali; gpuaug.dali.flip; "
            "print('nvidia.dali' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class _DeviceValues:
    """Stands in for a CuPy array of per-sample values: ``get()`` copies to the host."""

    def __init__(self, a):
        self.a = np.asarray(a)
        self.gets = 0

    def get(self):
        self.gets += 1
        return self.a


def test_host_read_values_are_learned_once_per_step():
    """A value the op must read on the host (pad's padding) arrives from a GPU pipeline as a
    device array: the first batch fails over to a host copy, later batches copy it first."""
    from gpuaug.dali._callback import call_host

    x = np.stack(_images())
    calls = []

    def pad(x, padding, **kw):
        calls.append(type(padding).__name__)
        if isinstance(padding, _DeviceValues):
            raise TypeError("padding: got a CUDA array; padding decides the output shape, which must be "
                            "known on the host: pass host ints (top, bottom, left, right)")
        return gpuaug.pad(x, padding, **kw)

    host = set()
    pads = np.tile(np.array([1, 2, 3, 4]), (N, 1))
    for batch in range(3):
        dev = _DeviceValues(pads)
        got = call_host(pad, x, {"padding": dev, "backend": "cpu"}, host)
        np.testing.assert_array_equal(got, gpuaug.pad(x, pads, backend="cpu"))
        assert dev.gets == 1
    assert host == {"padding"}
    assert calls == ["_DeviceValues", "ndarray", "ndarray", "ndarray"]  # refused once, then copied first


def test_host_read_retry_is_not_a_loop_for_other_type_errors():
    from gpuaug.dali._callback import call_host

    def op(x, value):
        raise TypeError("value: got a CUDA array, which must be known on the host")

    with pytest.raises(TypeError, match="value: got a CUDA array"):
        call_host(op, None, {"value": _DeviceValues([1.0])}, set())  # copied back once, still refused
