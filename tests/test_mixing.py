"""MixUp and CutMix (gpuaug/policy/mixing.py, kernels/mixing.cu): images and soft labels
against direct formulas, the CUDA C kernels under host emulation and on a GPU, draws,
determinism, bad input."""
import numpy as np
import pytest

import gpuaug
from gpuaug.policy.mixing import MixParams
from helpers import gpu


def _batch(rng, n=7, h=9, w=11, c=3, dtype="uint8", layout="NHWC"):
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    if dtype == "uint8":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.random(shape).astype(dtype)


def _mixup_ref(x, partner, lam):
    v = lam[:, None, None, None] * x.astype(np.float64) + (1 - lam[:, None, None, None]) * x[partner]
    return np.clip(np.floor(v + 0.5), 0, 255) if x.dtype == np.uint8 else v


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_mixup_cpu(dtype, layout):
    rng = np.random.default_rng(1)
    x = _batch(rng, dtype=dtype, layout=layout)
    labels = rng.integers(0, 4, len(x))
    m = gpuaug.MixUp(0.4, num_classes=4, seed=2)
    y, soft = m(x, labels, layout=layout)
    p = m.last_params
    assert sorted(p.partner) == list(range(len(x)))
    ref = _mixup_ref(x, p.partner, p.lam.astype(np.float32).astype(np.float64))
    tol = {"uint8": 1, "float16": 1e-3, "float32": 1e-6}[dtype]
    assert y.dtype == x.dtype and np.abs(y.astype(np.float64) - ref).max() <= tol
    eye = np.eye(4)
    ref_soft = p.lam[:, None] * eye[labels] + (1 - p.lam[:, None]) * eye[labels[p.partner]]
    np.testing.assert_allclose(soft, ref_soft, atol=1e-6)
    assert soft.dtype == np.float32


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_cutmix_cpu(layout):
    rng = np.random.default_rng(3)
    x = _batch(rng, 9, 20, 24, layout=layout)
    soft_in = rng.random((9, 5)).astype(np.float32)
    cm = gpuaug.CutMix(1.0, seed=4)
    y, soft = cm(x, soft_in, layout=layout)
    p = cm.last_params
    xn = x if layout == "NHWC" else x.transpose(0, 2, 3, 1)
    yn = y if layout == "NHWC" else y.transpose(0, 2, 3, 1)
    for i, (y0, x0, y1, x1) in enumerate(p.boxes):
        assert 0 <= y0 <= y1 <= 20 and 0 <= x0 <= x1 <= 24
        ref = xn[i].copy()
        ref[y0:y1, x0:x1] = xn[p.partner[i], y0:y1, x0:x1]
        np.testing.assert_array_equal(yn[i], ref)
        assert p.lam[i] == pytest.approx(1 - (y1 - y0) * (x1 - x0) / (20 * 24))
    np.testing.assert_allclose(soft, p.lam[:, None] * soft_in + (1 - p.lam[:, None]) * soft_in[p.partner], atol=1e-6)


def test_draws_and_determinism():
    n = 20000
    for cls in (gpuaug.MixUp, gpuaug.CutMix):
        a, b = cls(0.5, seed=7), cls(0.5, seed=7)
        pa, pb = a.draw(n, (32, 32)), b.draw(n, (32, 32))
        np.testing.assert_array_equal(pa.partner, pb.partner)
        np.testing.assert_array_equal(pa.lam, pb.lam)
        assert sorted(pa.partner) == list(range(n))
        if cls is gpuaug.MixUp:
            assert abs(pa.lam.mean() - 0.5) < 0.02  # Beta(a, a) is symmetric about 1/2
        else:  # the kept area: boxes clipped at the border keep more
            assert 0.5 < pa.lam.mean() < 0.8 and pa.lam.min() >= 0 and pa.lam.max() <= 1
    from scipy import stats

    lam = gpuaug.MixUp(0.4, seed=8).draw(n, (8, 8)).lam
    assert stats.kstest(lam, stats.beta(0.4, 0.4).cdf).pvalue > 1e-4
    rng = np.random.default_rng(9)
    x = _batch(rng)
    m = gpuaug.MixUp(1.0, num_classes=3, seed=1)
    y1, s1 = m(x, np.zeros(len(x), int))
    y2, s2 = m(x, np.zeros(len(x), int), params=m.last_params)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(s1, s2)


def test_bad_input():
    x = np.zeros((4, 8, 8, 3), np.uint8)
    for cls in (gpuaug.MixUp, gpuaug.CutMix):
        for alpha in (0, -1.0, float("nan")):
            with pytest.raises(ValueError, match=r"alpha: got .*; expected a finite number > 0"):
                cls(alpha)
        with pytest.raises(TypeError, match="alpha"):
            cls("big")
        m = cls(1.0, num_classes=3)
        with pytest.raises(ValueError, match=r"labels: got int64 array of shape \(3,\); expected \(4,\) int class ids"):
            m(x, np.zeros(3, np.int64))
        with pytest.raises(ValueError, match=r"labels: got float64 array of shape \(4, 2, 2\)"):
            m(x, np.zeros((4, 2, 2)))
        with pytest.raises(ValueError, match=r"labels: got class ids in \[0, 3\]; expected ids in \[0, 3\)"):
            m(x, np.array([0, 1, 2, 3]))
        with pytest.raises(ValueError, match="num_classes=None"):
            cls(1.0)(x, np.array([0, 1, 2, 0]))
        with pytest.raises(ValueError, match="num_classes"):
            cls(1.0, num_classes=0)
        with pytest.raises(ValueError, match="layout"):
            m(x, np.array([0, 1, 2, 0]), layout="HWC")
        with pytest.raises(ValueError, match="x: got"):
            m(x[0], np.array([0]))
        with pytest.raises(ValueError, match=r"params.partner: got shape \(3,\)"):
            m(x, np.array([0, 1, 2, 0]), params=MixParams(np.arange(3), np.ones(3)))


# -- CUDA C under host emulation -------------------------------------------------------------

def _emu():
    import cuda_emu

    why = cuda_emu.available()
    if why:
        pytest.skip(f"CUDA C emulation needs g++ with C++20: {why}")
    key = ("mixing",)
    if key not in cuda_emu._built:
        cuda_emu._built[key] = cuda_emu.Emulator(["mixing.cu"], [
            "gpuaug_mixup<unsigned char>", "gpuaug_mixup<float>", "gpuaug_cutmix<unsigned char>",
            "gpuaug_mixup_u8v", "gpuaug_cutmix_u8v"])
    return cuda_emu._built[key]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_kernels_host_emulation(layout):
    emu = _emu()
    rng = np.random.default_rng(10)
    # 8 x 10 x 3 = 240 bytes per sample: the 16-byte kernels apply; 5 x 7 x 3: the generic ones
    for h, w in ((8, 10), (5, 7)):
        x = _batch(rng, 5, h, w, layout=layout)
        for cls in (gpuaug.MixUp, gpuaug.CutMix):
            m = cls(0.7, num_classes=2, seed=11)
            ref, _ = m(x, np.zeros(5, int), layout=layout)
            p = m.last_params
            rows = np.zeros((5, 6), np.float32)
            rows[:, 0], rows[:, 1] = p.partner, p.lam
            if p.boxes is not None:
                rows[:, 2:] = p.boxes
            e = h * w * 3
            out = np.full_like(x, 0xAB)
            kind = "mixup" if cls is gpuaug.MixUp else "cutmix"
            cut_args = (x, out, h, w, 3, int(layout == "NCHW"), rows, 5)
            if e % 16 == 0:
                fn = emu.get_function("mixing.cu", f"gpuaug_{kind}_u8v")
                args = (x, out, e // 16, rows, 5) if kind == "mixup" else cut_args
                fn((-(-(e // 16) // 256), 5), (256,), args)
            else:
                fn = emu.get_function("mixing.cu", f"gpuaug_{kind}<unsigned char>")
                args = (x, out, e, rows, 5) if kind == "mixup" else cut_args
                fn((-(-e // 1024), 5), (256,), args)
            np.testing.assert_array_equal(out, ref)


def test_cutmix_u8v_boxes_inside_one_vector():
    """Narrow boxes strictly inside a 16-byte vector (the vector kernel's per-byte path)."""
    emu = _emu()
    rng = np.random.default_rng(12)
    x = _batch(rng, 4, 4, 16)
    rows = np.array([[1, 0, 1, 2, 2, 3], [0, 0, 0, 7, 4, 8], [3, 0, 2, 5, 3, 6], [2, 0, 0, 0, 0, 0]], np.float32)
    out = np.full_like(x, 0xAB)
    emu.get_function("mixing.cu", "gpuaug_cutmix_u8v")((1, 4), (256,), (x, out, 4, 16, 3, 0, rows, 4))
    boxes = rows[:, 2:].astype(int)
    ref, _ = gpuaug.CutMix(1.0)(x, np.zeros((4, 2)), params=MixParams(rows[:, 0].astype(int), np.ones(4), boxes))
    np.testing.assert_array_equal(out, ref)


def test_kernels_compile_with_nvrtc():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from gpuaug.kernels._cuda import check_compile

    try:
        check_compile("mixing.cu", ["gpuaug_mixup<unsigned char>", "gpuaug_mixup<float>",
                                    "gpuaug_cutmix<unsigned char>", "gpuaug_cutmix<unsigned short>",
                                    "gpuaug_cutmix<float>", "gpuaug_mixup_u8v", "gpuaug_cutmix_u8v"])
    except (ImportError, OSError) as e:
        pytest.skip(f"NVRTC not loadable: {e}")


@gpu
@pytest.mark.parametrize("dtype", ["uint8", "float32", "float16"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_gpu_matches_cpu(dtype, layout):
    import cupy

    rng = np.random.default_rng(13)
    for h, w in ((32, 32), (13, 17), (224, 224)):
        x = _batch(rng, 16, h, w, dtype=dtype, layout=layout)
        labels = rng.integers(0, 10, 16)
        for cls in (gpuaug.MixUp, gpuaug.CutMix):
            if cls is gpuaug.MixUp and dtype == "float16":
                continue
            m = cls(0.8, num_classes=10, seed=14)
            y, s = m(cupy.asarray(x), cupy.asarray(labels), layout=layout)
            ry, rs = m(x, labels, params=m.last_params, layout=layout)
            assert isinstance(s, cupy.ndarray)
            if dtype == "float32":
                np.testing.assert_allclose(cupy.asnumpy(y), ry, rtol=1e-6, atol=1e-6)
            else:
                np.testing.assert_array_equal(cupy.asnumpy(y), ry)
            np.testing.assert_allclose(cupy.asnumpy(s), rs, atol=1e-6)
