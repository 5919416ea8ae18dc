"""The fast CPU kernels (kernels/numba/cpu_fast) against the generic njit twins.

Each case runs an op on ``backend="cpu"`` twice, with the fast paths on and off
(``GPUAUG_CPU_FAST``), on tiny random inputs over dtypes, layouts, channel counts,
borders, interpolations and varshape batches, and compares: exactly where the fast
kernel claims the twin's results (copies, colour ops, resize, warps, median), within the
op tests' tolerance where it computes in float32 (uint8 within 1; floats 1e-5 relative).
A spy checks that the fast kernel really ran for the cases it was written for, so a fast
path that silently declines (or breaks) fails here. (Bilinear warps are the twin's float64 maths
but LLVM may contract a multiply-add differently: float32 outputs can differ in the last bit.)
"""
import numpy as np
import pytest

import gpuaug
from gpuaug.kernels.numba import cpu_fast
from helpers import DTYPES, random_images, to_layout


@pytest.fixture
def spy(monkeypatch):
    """Records (twin key, whether the fast kernel handled it) for every CPU kernel call."""
    calls = []
    real = cpu_fast.fast_function

    def fake(key):
        fn = real(key)

        def wrapped(*args):
            ok = fn(*args)
            calls.append((key, bool(ok)))
            return ok

        return wrapped

    monkeypatch.setattr(cpu_fast, "fast_function", fake)
    monkeypatch.setattr(cpu_fast, "_RESOLVED", {})  # resolve (through the spy) again
    return calls


def both(monkeypatch, fn, x, **kw):
    """(fast, generic) outputs of ``fn(x, backend='cpu', **kw)``."""
    monkeypatch.setenv("GPUAUG_CPU_FAST", "1")
    fast = fn(x, backend="cpu", **kw)
    monkeypatch.setenv("GPUAUG_CPU_FAST", "0")
    generic = fn(x, backend="cpu", **kw)
    monkeypatch.setenv("GPUAUG_CPU_FAST", "1")
    return fast, generic


def compare(fast, generic, exact):
    if isinstance(fast, list):
        assert len(fast) == len(generic)
        for f, g in zip(fast, generic):
            compare(f, g, exact)
        return
    assert fast.shape == generic.shape and fast.dtype == generic.dtype
    if exact:
        np.testing.assert_array_equal(fast, generic)
    elif fast.dtype == np.uint8:
        assert np.abs(fast.astype(int) - generic.astype(int)).max(initial=0) <= 1
    else:
        tol = 2e-3 if fast.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(fast.astype(np.float64), generic.astype(np.float64), rtol=tol, atol=tol)


def batch(dtype, layout, c=3, n=3, h=9, w=13, seed=0):
    x = random_images(np.random.default_rng(seed), n, h, w, c, dtype)
    return to_layout(x, layout)


def varshape(dtype, c=3, seed=1):
    rng = np.random.default_rng(seed)
    return [random_images(rng, 1, h, w, c, dtype)[0] for h, w in [(5, 7), (11, 6), (1, 9), (2, 2)]]


def ran_fast(calls):
    assert calls and all(ok for _, ok in calls), [c for c in calls if not c[1]] or calls


N = 3
CASES = {  # op: (function, keyword arguments, exact, NCHW handled by the fast kernel)
    "flip": (gpuaug.flip, {"horizontal": [1, 0, 1], "vertical": [0, 1, 1]}, True, True),
    "crop": (gpuaug.crop, {"top": [0, 2, 3], "left": [1, 0, 2], "height": 6, "width": 11}, True, True),
    "center_crop": (gpuaug.center_crop, {"size": (12, 5)}, True, True),
    "pad_constant": (gpuaug.pad, {"padding": (2, 1, 3, 4), "value": 7}, True, True),
    "pad_edge": (gpuaug.pad, {"padding": (2, 1, 3, 4), "mode": "edge"}, True, True),
    "pad_reflect": (gpuaug.pad, {"padding": (12, 1, 3, 17), "mode": "reflect"}, True, True),
    "resize_bilinear": (gpuaug.resize, {"size": (5, 17)}, True, True),
    "resize_half": (gpuaug.resize, {"size": (4, 6)}, True, True),
    "resize_nearest": (gpuaug.resize, {"size": (14, 6), "interpolation": "nearest"}, True, True),
    "warp_affine": (gpuaug.warp_affine, {"matrix": [[0.9, 0.3, -2.0], [-0.2, 1.1, 1.5]], "fill": [3, 200, 9]},
                    False, True),
    "warp_nearest_reflect": (gpuaug.warp_affine, {"matrix": [[0.9, 0.3, -2.0], [-0.2, 1.1, 1.5]],
                                                  "interpolation": "nearest", "border": "reflect"}, True, True),
    "warp_replicate_size": (gpuaug.warp_affine, {"matrix": [[1.3, 0.2, -4.0], [0.1, 0.8, 3.0]], "size": (7, 15),
                                                 "border": "replicate"}, False, True),
    "rotate": (gpuaug.rotate, {"angle": [10.0, -35.0, 90.0], "scale": [1.0, 0.8, 1.2]}, False, True),
    "gaussian_blur": (gpuaug.gaussian_blur, {"sigma": [0.7, 1.5, 3.0]}, False, True),
    "gaussian_blur_k": (gpuaug.gaussian_blur, {"sigma": 2.0, "kernel_size": [1, 5, 31]}, False, True),
    "box_blur": (gpuaug.box_blur, {"kernel_size": 5}, False, True),
    "box_blur_sizes": (gpuaug.box_blur, {"kernel_size": [3, 7, 21]}, False, True),
    "median_blur3": (gpuaug.median_blur, {"kernel_size": 3}, True, True),
    "median_blur": (gpuaug.median_blur, {"kernel_size": [5, 3, 5]}, True, True),
    "brightness": (gpuaug.brightness, {"factor": [0.5, 1.3, 2.0]}, True, True),
    "contrast": (gpuaug.contrast, {"factor": [0.5, 1.3, 2.0]}, True, True),
    "color_jitter": (gpuaug.color_jitter, {"brightness": [0.8, 1.2, 1.0], "contrast": [1.1, 0.7, 1.0],
                                           "saturation": [0.5, 1.4, 1.0], "hue": [0.1, -0.3, 0.0]}, True, True),
    "normalize": (gpuaug.normalize, {"mean": [0.4, 0.5, 0.45], "std": [0.2, 0.25, 0.3]}, True, True),
    "normalize_nchw_out": (gpuaug.normalize, {"mean": 0.5, "std": 0.25, "output_layout": "NCHW"}, True, True),
    "crop_mirror_normalize": (gpuaug.crop_mirror_normalize, {"crop": (6, 7), "crop_pos": [[0.2, 0.9]] * N,
                                                            "mirror": [1, 0, 1], "mean": 0.3, "std": 0.5,
                                                            "pad_output": True}, True, True),
}
#: ops whose fast kernels take floats only as float32 (float16 runs through float32 on the twins)
_UNIT = {"normalize", "normalize_nchw_out", "crop_mirror_normalize"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_matches_generic_nhwc(monkeypatch, spy, name, dtype):
    fn, kw, exact, _ = CASES[name]
    x = batch(dtype, "NHWC")
    if name in _UNIT and dtype == "uint8":
        kw = dict(kw, mean=np.asarray(kw["mean"]) * 255, std=np.asarray(kw["std"]) * 255)
    fast, generic = both(monkeypatch, fn, x, **kw)
    compare(fast, generic, exact)
    ran_fast(spy)


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_matches_generic_nchw(monkeypatch, spy, name, dtype):
    fn, kw, exact, nchw_fast = CASES[name]
    x = batch(dtype, "NCHW", seed=2)
    if name in _UNIT and dtype == "uint8":
        kw = dict(kw, mean=np.asarray(kw["mean"]) * 255, std=np.asarray(kw["std"]) * 255)
    fast, generic = both(monkeypatch, fn, x, layout="NCHW", **kw)
    compare(fast, generic, exact)
    if nchw_fast:
        ran_fast(spy)


@pytest.mark.parametrize("channels", [1, 4])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_matches_generic_channels(monkeypatch, spy, name, channels):
    fn, kw, exact, _ = CASES[name]
    x = batch("uint8", "NHWC", c=channels, seed=3)
    kw = dict(kw)
    if name in ("warp_affine",):
        kw["fill"] = 5
    if name in _UNIT:
        kw = dict(kw, mean=100.0, std=50.0)
    try:
        fast, generic = both(monkeypatch, fn, x, **kw)
    except ValueError:  # an op that does not take this channel count refuses on both paths
        pytest.skip(f"{name} does not take {channels} channels")
    compare(fast, generic, exact)
    ran_fast(spy)


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("name", sorted(n for n in CASES if n not in ("crop_mirror_normalize", "crop")))
def test_fast_matches_generic_varshape(monkeypatch, spy, name, dtype):
    fn, kw, exact, _ = CASES[name]
    kw = {k: (v + v[:1] if isinstance(v, list) and len(v) == N and k not in ("mean", "std") else v)
          for k, v in kw.items()}  # per-sample lists for 4 images
    if name in ("center_crop",):
        kw = {"size": (2, 3)}
    if name in _UNIT and dtype == "uint8":
        kw = dict(kw, mean=np.asarray(kw["mean"]) * 255, std=np.asarray(kw["std"]) * 255)
    xs = varshape(dtype)
    try:
        fast, generic = both(monkeypatch, fn, xs, **kw)
    except ValueError as e:
        pytest.skip(f"{name} refuses this varshape batch on both paths: {e}")
    compare(fast, generic, exact)
    ran_fast(spy)


def test_strided_views_give_the_bits_of_a_dense_batch(monkeypatch, spy):
    """A strided view goes through the fast kernels too (dense copies where they need dense
    rows), so it gives exactly what the same batch, dense, gives."""
    rng = np.random.default_rng(4)
    for dtype in ("uint8", "float32"):
        base = random_images(rng, 4, 12, 16, 3, dtype)
        view = base[::2, 1:, ::2]
        for fn, kw in [(gpuaug.gaussian_blur, {"sigma": 1.0}), (gpuaug.box_blur, {"kernel_size": 3}),
                       (gpuaug.resize, {"size": (5, 4)}), (gpuaug.rotate, {"angle": 20.0}),
                       (gpuaug.flip, {}), (gpuaug.brightness, {"factor": 1.5}),
                       (gpuaug.color_jitter, {"saturation": 0.5, "hue": 0.2}), (gpuaug.median_blur, {"kernel_size": 3})]:
            got = fn(view, backend="cpu", **kw)
            np.testing.assert_array_equal(got, fn(np.ascontiguousarray(view), backend="cpu", **kw))
            fast, generic = both(monkeypatch, fn, view, **kw)
            compare(fast, generic, fn in (gpuaug.flip, gpuaug.brightness, gpuaug.median_blur, gpuaug.resize))
    ran_fast(spy)


def test_area_resize_is_generic(monkeypatch, spy):
    x = batch("uint8", "NHWC")
    fast, generic = both(monkeypatch, gpuaug.resize, x, size=(4, 5), interpolation="area")
    compare(fast, generic, True)
    assert spy == [(("resize", "resample_value"), False)]


@pytest.mark.parametrize("m", [9, 25])
def test_median_network_selects_the_median(m):
    from gpuaug.kernels.numba.cpu_fast._median import network

    lines, result = network(m)
    src = "def f(" + ", ".join(f"v{i}" for i in range(m)) + "):\n"
    src += "".join(f"    {ln}\n" for ln in lines) + f"    return {result}\n"
    g = {}
    exec(src, g)  # noqa: S102 (our own generated code)
    rng = np.random.default_rng(m)
    for _ in range(3000):
        v = rng.integers(0, 6, m).tolist()  # many ties
        assert g["f"](*v) == sorted(v)[m // 2]


def test_disabled_means_generic(monkeypatch, spy):
    monkeypatch.setenv("GPUAUG_CPU_FAST", "0")
    gpuaug.flip(batch("uint8", "NHWC"), backend="cpu")
    assert spy == []
