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
        with pytest.raises(ValueError, match=r"params.lam: got shape \(3,\); expected \(4,\)"):
            m(x, np.array([0, 1, 2, 0]), params=MixParams(np.arange(4), np.ones(3)))
        with pytest.raises(ValueError, match=r"params.order: got shape \(4,\); expected None or a permutation"):
            m(x, np.array([0, 1, 2, 0]), params=MixParams(np.arange(4), np.ones(4), np.zeros((4, 4), int),
                                                          np.array([0, 1, 1, 2])))
    with pytest.raises(ValueError, match=r"params.boxes: got \(4, 4\) array; expected \(4, 4\) ints .* y1 <= 8"):
        gpuaug.CutMix(1.0, num_classes=3)(x, np.array([0, 1, 2, 0]), params=MixParams(
            np.arange(4), np.ones(4), np.array([[0, 0, 9, 8]] * 4)))


# -- CUDA C under host emulation -------------------------------------------------------------

_MIX_NAMES = [f"gpuaug_mix<{t}, {cut}, {vec}>" for cut in (0, 1) for vec in (0, 1)
              for t in (("unsigned char", "float") if cut == 0 else ("unsigned char", "unsigned short", "float"))]


def _emu(monkeypatch):
    """The mixing kernels under host emulation, routed through gpuaug.kernels._cuda.get_function
    (so the host-side launch plan, MixUp/CutMix._plan, is the one under test)."""
    import cuda_emu

    return cuda_emu.patch(monkeypatch, ["mixing.cu"], _MIX_NAMES)


def _emu_call(m, x, labels, layout, params=None, offset=0):
    """What _Mix._cuda launches, on host stand-ins: returns (images, soft labels, kernel name,
    grid). ``labels``: None, int ids (N,) or float32 (N, K); ``offset``: misaligns the input."""
    import cuda_emu
    from gpuaug.policy import mixing as mx

    n, h, w, c = mx._shape(x, layout)
    if params is None:
        params = m.draw(n, (h, w))
    partner, lam, boxes, order = mx._checked(params, n, h, w, m.kind == "cutmix")
    rec = mx._records(partner, lam, boxes, order)
    src = cuda_emu.DeviceView(x, offset)
    out = np.full_like(x, 0xAB) if x.dtype == np.uint8 else np.full_like(x, np.nan)
    lkind, k, lab, soft = 0, 0, None, None
    if labels is not None:
        lab = np.ascontiguousarray(labels)
        lkind = mx._LABEL_KIND[lab.dtype.name]
        k = lab.shape[1] if lab.ndim == 2 else m.num_classes
        soft = np.full((n, k), np.nan, np.float32)
    fn, grid, geo = m._plan(0, x.dtype.name, n, h, w, c, layout, src.data.ptr % 16 == 0, lkind)
    none = 0  # a null pointer for the emulator (the launch passes None)
    fn(grid, (256,), (src, out, rec) + geo + (none if lab is None else lab, none if soft is None else soft,
                                                np.int32(k), np.int32(lkind)))
    return out, soft, params, grid


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_kernels_host_emulation(monkeypatch, layout):
    """Images and soft labels of the one launch = the NumPy twin, bit for bit: every dtype, the
    16-byte and the element kernels (16 x 16 x 3: rows of 48 bytes; 5 x 7 x 3 and misaligned
    input: elements), several chunks per sample (48 x 120 x 3 bytes, 19 x 23 x 3 elements),
    int32 / int64 ids and float32 soft labels, the cyclic launch order and 0..N-1."""
    _emu(monkeypatch)
    rng = np.random.default_rng(10)
    cases = [(16, 16, "uint8", 0), (5, 7, "uint8", 0), (16, 16, "uint8", 3), (48, 120, "uint8", 0),
             (19, 23, "uint8", 0), (8, 4, "float32", 0), (5, 7, "float32", 0), (8, 8, "float16", 0),
             (5, 7, "float16", 0)]
    for h, w, dtype, offset in cases:
        n = 3 if h * w > 1000 else 5
        x = _batch(rng, n, h, w, dtype=dtype, layout=layout)
        for cls in (gpuaug.MixUp, gpuaug.CutMix):
            if cls is gpuaug.MixUp and dtype == "float16":
                continue
            m = cls(0.7, num_classes=6, seed=11)
            ids = rng.integers(0, 6, n)
            for j, labels in enumerate((ids.astype(np.int32), ids, rng.random((n, 4)).astype(np.float32), None)):
                m.seg = (1, 2, 4, 3)[j]  # outputs per block (MixUp reuses the partner's units along the walk)
                got, soft, p, grid = _emu_call(m, x, labels, layout, offset=offset)
                ref, rsoft = m(x, labels if labels is not None else ids, params=p, layout=layout)
                np.testing.assert_array_equal(got, ref, err_msg=f"{cls.__name__} {dtype} {h}x{w} +{offset}")
                if labels is not None:
                    np.testing.assert_array_equal(soft, rsoft)
            # the launch order schedules, it does not change the result
            p.order = None
            got, _, _, _ = _emu_call(m, x, None, layout, params=p, offset=offset)
            np.testing.assert_array_equal(got, ref)


def test_kernel_plan_picks_the_16_byte_kernel(monkeypatch):
    """uint8 224 x 224 x 3 (the benchmark's shape) takes the 16-byte kernels, chunks of 1024
    units, and one grid for images and labels; misaligned or odd rows take the element ones."""
    calls = []

    def get_function(filename, name):
        calls.append(name)
        return name

    import gpuaug.kernels._cuda as cuda_mod

    monkeypatch.setattr(cuda_mod, "get_function", get_function)
    for cls, cut in ((gpuaug.MixUp, 0), (gpuaug.CutMix, 1)):
        m = cls(1.0, num_classes=1000)
        name, grid, geo = m._plan(0, "uint8", 256, 224, 224, 3, "NHWC", True, 2)
        units = 224 * 224 * 3 // 16
        assert name == f"gpuaug_mix<unsigned char, {cut}, 1>"
        seg = cls.seg
        assert int(geo[5]) == -(-units // 1024) and int(geo[6]) == seg and int(geo[7]) == 64
        assert grid == (64 + 256 // seg * int(geo[5]),)
        assert m._plan(0, "uint8", 256, 224, 224, 3, "NHWC", False, 0)[0] == f"gpuaug_mix<unsigned char, {cut}, 0>"
        assert m._plan(0, "float32", 4, 5, 7, 3, "NCHW", True, 0)[0] == f"gpuaug_mix<float, {cut}, 0>"
    assert gpuaug.CutMix(1.0)._plan(0, "uint8", 2, 8, 10, 3, "NHWC", True, 0)[0] == "gpuaug_mix<unsigned char, 1, 0>"
    # CutMix needs rows of whole units: 4 x 4 channels (16 bytes) in NHWC, 4 bytes in NCHW
    assert gpuaug.CutMix(1.0)._plan(0, "uint8", 2, 8, 4, 4, "NHWC", True, 0)[0] == "gpuaug_mix<unsigned char, 1, 1>"
    assert gpuaug.CutMix(1.0)._plan(0, "uint8", 2, 8, 4, 4, "NCHW", True, 0)[0] == "gpuaug_mix<unsigned char, 1, 0>"
    assert gpuaug.MixUp(1.0)._plan(0, "uint8", 2, 8, 10, 3, "NHWC", True, 0)[0] == "gpuaug_mix<unsigned char, 0, 1>"


def test_cutmix_boxes_inside_one_vector(monkeypatch):
    """Narrow boxes inside a 16-byte unit, and on its edges (the kernel's per-byte masks), in
    uint8 and float16."""
    _emu(monkeypatch)
    rng = np.random.default_rng(12)
    boxes = np.array([[1, 1, 2, 2], [0, 7, 4, 8], [2, 5, 3, 6], [0, 0, 0, 0], [0, 0, 4, 16], [1, 10, 3, 11],
                      [3, 0, 4, 1], [0, 15, 4, 16]])
    partner = np.array([1, 0, 3, 2, 7, 6, 5, 4])
    for dtype in ("uint8", "float16"):
        x = _batch(rng, 8, 4, 16, dtype=dtype)
        for lam in (np.ones(8), np.linspace(0, 1, 8)):
            p = MixParams(partner, lam, boxes, rng.permutation(8))
            m = gpuaug.CutMix(1.0)
            labels = rng.random((8, 3)).astype(np.float32)
            got, soft, _, _ = _emu_call(m, x, labels, "NHWC", params=p)
            ref, rsoft = m(x, labels, params=p)
            np.testing.assert_array_equal(got, ref)
            np.testing.assert_array_equal(soft, rsoft)


@pytest.mark.parametrize("seg", [1, 2, 3, 4, 8])
def test_mixup_walk_reuse(monkeypatch, seg):
    """Blocks of seg outputs along the launch order: the partner's units kept for the next
    output only where that output is the partner (self-partners, broken walks, a launch order
    that is not the walk's), every dtype kernel."""
    _emu(monkeypatch)
    rng = np.random.default_rng(13)
    partner = np.array([0, 2, 1, 3, 5, 6, 4])  # fixed points, a 2-cycle, a 3-cycle
    for order in (np.arange(7), np.array([4, 5, 6, 1, 2, 0, 3]), np.array([6, 5, 4, 3, 2, 1, 0])):
        p = MixParams(partner, rng.random(7), order=order)
        for h, w, dtype in ((8, 16, "uint8"), (5, 7, "uint8"), (4, 8, "float32")):
            x = _batch(rng, 7, h, w, dtype=dtype)
            m = gpuaug.MixUp(1.0, num_classes=3)
            m.seg = seg
            got, _, _, _ = _emu_call(m, x, None, "NHWC", params=p)
            ref, _ = m(x, np.zeros(7, int), params=p)
            np.testing.assert_array_equal(got, ref, err_msg=f"{dtype} order {order}")


def test_mixup_u8_lambdas_outside_0_1(monkeypatch):
    """Replayed lambdas outside [0, 1] (and the edges) take the clamped path of the 16-byte
    kernel: still the twin's bits (saturated)."""
    _emu(monkeypatch)
    rng = np.random.default_rng(14)
    x = _batch(rng, 6, 8, 16)
    lam = np.array([-0.5, 1.7, 0.0, 1.0, 0.5, 1.0 - 2 ** -24])
    p = MixParams(np.array([1, 2, 3, 4, 5, 0]), lam)
    m = gpuaug.MixUp(1.0, num_classes=3)
    got, soft, _, _ = _emu_call(m, x, np.array([0, 1, 2, 0, 1, 2]), "NHWC", params=p)
    ref, rsoft = m(x, np.array([0, 1, 2, 0, 1, 2]), params=p)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(soft, rsoft)


def test_u8_rounding_exhaustive(monkeypatch):
    """Every (a, b) byte pair for a few lambdas: the exact float conversion and the
    floor(v + 0.5) of the 16-byte kernel (bit tricks) = the twin."""
    _emu(monkeypatch)
    a = np.repeat(np.arange(256, dtype=np.uint8), 256).reshape(256, 16, 16, 1)  # sample s: all s
    b = np.tile(np.arange(256, dtype=np.uint8), 256).reshape(256, 16, 16, 1)  # every sample: 0..255
    x = np.concatenate([a, b])  # sample s and s + 256 are each other's partners: all (a, b) pairs
    partner = np.concatenate([np.arange(256, 512), np.arange(256)])
    m = gpuaug.MixUp(1.0, num_classes=2)
    for lam0 in (0.5, 0.3, 0.1 + 2 ** -20, 0.999):
        p = MixParams(partner, np.full(512, lam0))
        got, _, _, _ = _emu_call(m, x, None, "NHWC", params=p)
        ref, _ = m(x, np.zeros(512, int), params=p)
        np.testing.assert_array_equal(got, ref)


def test_kernels_compile_with_nvrtc():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from gpuaug.kernels._cuda import check_compile

    try:
        check_compile("mixing.cu", _MIX_NAMES)
    except (ImportError, OSError) as e:
        pytest.skip(f"NVRTC not loadable: {e}")


@gpu
@pytest.mark.parametrize("dtype", ["uint8", "float32", "float16"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_gpu_matches_cpu(dtype, layout):
    """The one launch (images and soft labels) = the NumPy twin, bit for bit: int64 / int32 ids,
    float32 and float64 soft labels, host labels, aligned and misaligned input (16-byte and
    element kernels), 1 and 2 samples, an empty batch."""
    import cupy

    rng = np.random.default_rng(13)
    for n, h, w, skew in ((16, 32, 32, 0), (16, 13, 17, 0), (16, 224, 224, 0), (5, 32, 32, 1), (1, 8, 16, 0),
                          (2, 8, 16, 0), (0, 8, 16, 0)):
        x = _batch(rng, n, h, w, dtype=dtype, layout=layout)
        ids = rng.integers(0, 10, n)
        offset = skew * x.itemsize  # off the 16-byte grid, on the element's
        buf = cupy.empty(x.nbytes + 16, np.uint8)
        xd = buf[offset:offset + x.nbytes].view(x.dtype).reshape(x.shape)
        xd[...] = cupy.asarray(x)
        for cls in (gpuaug.MixUp, gpuaug.CutMix):
            if cls is gpuaug.MixUp and dtype == "float16":
                continue
            m = cls(0.8, num_classes=10, seed=14)
            soft_in = rng.random((n, 7))
            for labels in (ids, ids.astype(np.int32), soft_in.astype(np.float32), soft_in):
                for dev_labels in (True, False):
                    y, s = m(xd, cupy.asarray(labels) if dev_labels else labels, layout=layout)
                    ry, rs = m(x, labels, params=m.last_params, layout=layout)
                    assert isinstance(s, cupy.ndarray if dev_labels else np.ndarray)
                    np.testing.assert_array_equal(cupy.asnumpy(y), ry)
                    np.testing.assert_array_equal(cupy.asnumpy(s), rs)


@gpu
def test_gpu_one_launch_and_stream():
    """A call on CuPy images and labels is one launch on the given stream, its records sent ahead
    on the mixer's side ring (no staged upload), and nothing waits for the device (the result is
    right after the stream's work)."""
    import cupy

    from gpuaug.kernels import _cuda

    rng = np.random.default_rng(15)
    x = cupy.asarray(_batch(rng, 8, 16, 16))
    labels = cupy.asarray(rng.integers(0, 5, 8))
    for cls in (gpuaug.MixUp, gpuaug.CutMix):
        m = cls(0.5, num_classes=5, seed=16)
        m(x, labels)  # compiles
        launches = []
        real = _cuda.Kernel.__call__

        def count(self, *a, **k):
            launches.append(self)
            return real(self, *a, **k)

        st = _cuda.staging()
        before = st.stats["uploads"]
        (ring,) = m._rings.values()
        sent = ring.stats["sent"]
        _cuda.Kernel.__call__ = count
        try:
            s = cupy.cuda.Stream(non_blocking=True)
            y, soft = m(x, labels, stream=s)
        finally:
            _cuda.Kernel.__call__ = real
        assert len(launches) == 1 and st.stats["uploads"] == before and ring.stats["sent"] == sent + 1
        s.synchronize()
        ry, rs = m(cupy.asnumpy(x), cupy.asnumpy(labels), params=m.last_params)
        np.testing.assert_array_equal(cupy.asnumpy(y), ry)
        np.testing.assert_array_equal(cupy.asnumpy(soft), rs)


@gpu
def test_gpu_side_ring_behind_a_busy_stream():
    """Forty calls queued behind a long kernel: the first 16 take the side ring's slots, the rest
    (every slot still in flight) upload as before; every result equals the NumPy twin of its
    params, and a second round reuses the freed slots."""
    import cupy

    spin = cupy.RawKernel(r'''extern "C" __global__ void spin(unsigned long long n) {
        unsigned long long t0 = clock64(); while (clock64() - t0 < n) {} }''', "spin")
    rng = np.random.default_rng(17)
    xh = _batch(rng, 6, 16, 24)
    x = cupy.asarray(xh)
    ids = rng.integers(0, 5, 6)
    labels = cupy.asarray(ids)
    for cls in (gpuaug.MixUp, gpuaug.CutMix):
        m = cls(0.7, num_classes=5, seed=18)
        m(x, labels)
        cupy.cuda.Device().synchronize()
        (ring,) = m._rings.values()
        for _ in range(2):
            sent, full = ring.stats["sent"], ring.stats["full"]
            spin((1,), (1,), (np.uint64(200_000_000),))  # ~0.1 s on the stream
            outs = [(m(x, labels), m.last_params) for _ in range(40)]
            assert ring.stats["sent"] - sent == ring.SLOTS and ring.stats["full"] - full == 40 - ring.SLOTS
            for (y, soft), p in outs:
                ry, rs = m(xh, ids, params=p)
                np.testing.assert_array_equal(cupy.asnumpy(y), ry)
                np.testing.assert_array_equal(cupy.asnumpy(soft), rs)
            cupy.cuda.Device().synchronize()


def test_side_ring_slots_on_standins(monkeypatch):
    """kernels/_cuda.SideRing on a stand-in CuPy: each send packs the table into the next slot,
    copies it on the ring's stream and makes the caller's stream wait for that copy; a slot is
    taken again only once the event recorded behind its launch has completed (else None, the
    caller uploads); nothing goes through the ring while the stream captures or launches are
    recorded."""
    import ctypes
    import sys
    import types

    from gpuaug.kernels import _cuda as kc

    class Ev:
        def __init__(self, *a, **k):
            self.done, self.on = True, None

        def record(self, stream):
            self.on, self.done = stream, False

    class Stream:
        def __init__(self, non_blocking=False):
            self.ptr, self.capturing, self.waited = id(self), False, []

        def is_capturing(self):
            return self.capturing

        def wait_event(self, ev):
            self.waited.append(ev)

    class Ptr:
        def __init__(self, ptr):
            self.ptr = ptr

        def __add__(self, o):
            return Ptr(self.ptr + o)

    class Dev(np.ndarray):
        @property
        def data(self):
            return Ptr(self.ctypes.data)

    class Pinned(bytearray):
        @property
        def ptr(self):
            return ctypes.addressof(ctypes.c_char.from_buffer(self))

    copies = []

    def memcpy(dst, src, n, kind, stream):
        copies.append((dst, n, stream))
        ctypes.memmove(dst, src, n)

    def ndarray(shape, dtype, memptr):
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.frombuffer((ctypes.c_char * n).from_address(memptr.ptr), np.dtype(dtype)).reshape(shape)

    cp = types.ModuleType("cupy")
    cp.empty = lambda n, dtype: np.zeros(n, dtype).view(Dev)
    cp.ndarray = ndarray
    cp.cuda = types.SimpleNamespace(alloc_pinned_memory=Pinned, Stream=Stream, Event=Ev,
                                    runtime=types.SimpleNamespace(memcpyAsync=memcpy, memcpyHostToDevice=1))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    ring = kc.SideRing(96)
    main = Stream()
    tables = [np.arange(24, dtype=np.int32).reshape(3, 8) + 100 * t for t in range(ring.SLOTS + 1)]
    got = []
    for t in tables[:ring.SLOTS]:
        slot, arr = ring.send(t, main)
        np.testing.assert_array_equal(arr, t)  # the bytes landed in the slot's device memory
        assert main.waited[-1] is ring.copied[slot] and ring.copied[slot].on is ring.stream
        assert copies[-1][2] == ring.stream.ptr
        got.append(slot)
    assert got == list(range(ring.SLOTS))
    assert ring.send(tables[-1], main) is None  # slot 0 is taken until its launch is queued (sent)
    for i in range(ring.SLOTS):
        ring.sent(i, main)
    assert ring.send(tables[0], main) is None and ring.stats["full"] == 2  # slot 0's launch has not run
    ring.done[0].done = True
    slot, arr = ring.send(tables[3], main)
    assert slot == 0
    np.testing.assert_array_equal(arr, tables[3])
    assert ring.send(tables[0], main) is None  # slot 1's launch has not run either
    main.capturing = True
    assert ring.send(tables[0], main) is None
    main.capturing = False
    monkeypatch.setattr(kc, "RECORDING", [1])
    assert ring.send(tables[0], main) is None


# -- Mosaic ------------------------------------------------------------------------------------

def _mosaic_ref(x, sources, centers, oh, ow, fill, layout="NHWC"):
    """Pixel by pixel: quadrant, source sample, source pixel or fill."""
    xs = x if layout == "NHWC" else x.transpose(0, 2, 3, 1)
    n, h, w, c = xs.shape
    out = np.empty((n, oh, ow, c), x.dtype)
    for i in range(n):
        cy, cx = centers[i]
        for yy in range(oh):
            for xx in range(ow):
                q = 2 * (yy >= cy) + (xx >= cx)
                sy = yy - (cy - h if q < 2 else cy)
                sx = xx - (cx if q % 2 else cx - w)
                inside = 0 <= sy < h and 0 <= sx < w
                out[i, yy, xx] = xs[sources[i, q], sy, sx] if inside else np.asarray(fill, x.dtype)
    return out if layout == "NHWC" else out.transpose(0, 3, 1, 2)


def _mosaic_boxes_ref(data, counts, labels, sources, centers, h, w, oh, ow, min_vis):
    """Per output: the (xyxy pixel) boxes of its four sources, quadrant by quadrant, shifted,
    clipped to the quadrant, kept by the targets' rule."""
    res = []
    for i in range(len(sources)):
        cy, cx = centers[i]
        rows = []
        for q in range(4):
            oy = cy - h if q < 2 else cy
            ox = cx if q % 2 else cx - w
            ry0, ry1 = (0, cy) if q < 2 else (cy, oh)
            rx0, rx1 = (0, cx) if q % 2 == 0 else (cx, ow)
            s = sources[i, q]
            for j in range(counts[s]):
                x1, y1, x2, y2 = data[s, j] + [ox, oy, ox, oy]
                area = (x2 - x1) * (y2 - y1)
                cx1, cx2 = np.clip([x1, x2], rx0, rx1)
                cy1, cy2 = np.clip([y1, y2], ry0, ry1)
                clipped = (cx2 - cx1) * (cy2 - cy1)
                if min_vis is None or (clipped > 0 and clipped >= min_vis * area):
                    rows.append((cx1, cy1, cx2, cy2, labels[s, j]))
        res.append(rows)
    return res


def _random_boxes(rng, n, m, h, w):
    a = rng.uniform(0, 1, (n, m, 2)) * [w, h]
    b = a + rng.uniform(1, 8, (n, m, 2))
    data = np.concatenate([a, np.minimum(b, [w, h])], axis=2).astype(np.float32)
    return data, rng.integers(0, m + 1, n).astype(np.int32), rng.integers(0, 50, (n, m))


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_mosaic_images_cpu(dtype, layout):
    rng = np.random.default_rng(20)
    x = _batch(rng, 5, 9, 12, dtype=dtype, layout=layout)
    for size, center in ((None, (0.25, 0.75)), ((21, 30), (0.0, 1.0)), ((6, 7), (0.3, 0.6))):
        mo = gpuaug.Mosaic(size=size, center=center, fill=0.5 if dtype != "uint8" else 114, seed=21)
        y, b = mo(x, layout=layout)
        p = mo.last_params
        oh, ow = size or (9, 12)
        assert b is None and y.dtype == x.dtype
        assert (p.sources[:, 0] == np.arange(5)).all() and p.sources.min() >= 0 and p.sources.max() < 5
        lo, hi = center
        assert (p.centers[:, 0] >= np.floor(lo * oh)).all() and (p.centers[:, 0] <= hi * oh).all()
        np.testing.assert_array_equal(y, _mosaic_ref(x, p.sources, p.centers, oh, ow, mo.fill, layout))


@pytest.mark.parametrize("normalized", [False, True])
@pytest.mark.parametrize("min_vis", [0.0, 0.4, None])
def test_mosaic_boxes_padded(normalized, min_vis):
    from gpuaug.targets import Boxes

    rng = np.random.default_rng(22)
    n, h, w, m = 6, 20, 24, 5
    x = _batch(rng, n, h, w)
    data, counts, labels = _random_boxes(rng, n, m, h, w)
    scale = np.array([w, h, w, h], np.float32) if normalized else np.ones(4, np.float32)
    b = Boxes(data / scale, normalized=normalized, counts=counts, labels=labels, min_visibility=min_vis)
    mo = gpuaug.Mosaic(size=(30, 40), seed=23)
    y, out = mo(x, b)
    p = mo.last_params
    assert out.data.shape == (n, 4 * m, 4) and out.normalized == normalized
    oscale = np.array([40, 30, 40, 30]) if normalized else np.ones(4)
    ref = _mosaic_boxes_ref(data, counts, labels, p.sources, p.centers, h, w, 30, 40, min_vis)
    for i in range(n):
        k = len(ref[i])
        assert out.counts[i] == k, f"sample {i}"
        if k:
            r = np.array(ref[i])
            np.testing.assert_allclose(out.data[i, :k] * oscale, r[:, :4], atol=1e-3)
            np.testing.assert_array_equal(out.labels[i, :k], r[:, 4])
        assert (out.labels[i, k:] == -1).all() and (out.data[i, k:] == 0).all()


def test_mosaic_boxes_ragged_and_formats():
    """Ragged boxes come back ragged; xywh / cxcywh boxes move as their corners do."""
    from gpuaug.targets import Boxes

    rng = np.random.default_rng(24)
    n, h, w = 4, 16, 18
    x = _batch(rng, n, h, w)
    data, counts, labels = _random_boxes(rng, n, 3, h, w)
    xyxy = [data[i, :counts[i]] for i in range(n)]
    labs = [labels[i, :counts[i]] for i in range(n)]
    ref_y, ref_b = gpuaug.Mosaic(seed=25)(x, Boxes(data, counts=counts, labels=labels))
    for fmt in ("xyxy", "xywh", "cxcywh"):
        conv = [np.concatenate([a[:, :2], a[:, 2:] - a[:, :2]], 1) if fmt == "xywh" else
                np.concatenate([(a[:, :2] + a[:, 2:]) / 2, a[:, 2:] - a[:, :2]], 1) if fmt == "cxcywh" else a
                for a in xyxy]
        y, out = gpuaug.Mosaic(seed=25)(x, Boxes(conv, format=fmt, labels=labs))
        np.testing.assert_array_equal(y, ref_y)
        assert isinstance(out.data, list) and out.format == fmt
        for i in range(n):
            got = out.data[i]
            if fmt == "xywh":
                got = np.concatenate([got[:, :2], got[:, :2] + got[:, 2:]], 1)
            elif fmt == "cxcywh":
                got = np.concatenate([got[:, :2] - got[:, 2:] / 2, got[:, :2] + got[:, 2:] / 2], 1)
            np.testing.assert_allclose(got, ref_b.data[i, :ref_b.counts[i]], atol=1e-4)
            np.testing.assert_array_equal(out.labels[i], ref_b.labels[i, :ref_b.counts[i]])


def test_mosaic_determinism_and_bad_input():
    from gpuaug.policy.mixing import MosaicParams
    from gpuaug.targets import Boxes

    rng = np.random.default_rng(26)
    x = _batch(rng, 4, 8, 8)
    a, b = gpuaug.Mosaic(seed=3), gpuaug.Mosaic(seed=3)
    ya, _ = a(x)
    yb, _ = b(x)
    np.testing.assert_array_equal(ya, yb)
    yr, _ = a(x, params=a.last_params)
    np.testing.assert_array_equal(yr, ya)
    for kw, pat in ((dict(size=(0, 4)), r"size: got \(0, 4\)"), (dict(size=5), "size: got 5"),
                    (dict(center=(0.8, 0.2)), r"center: got \(0.8, 0.2\)"), (dict(center=(0, 1.5)), "center"),
                    (dict(fill=float("inf")), "fill: got inf")):
        with pytest.raises(ValueError, match=pat):
            gpuaug.Mosaic(**kw)
    with pytest.raises(ValueError, match=r"fill: got 300.0; expected a number in \[0, 255\]"):
        gpuaug.Mosaic(fill=300)(x)
    with pytest.raises(ValueError, match=r"params.sources: got shape \(4, 3\)"):
        a(x, params=MosaicParams(np.zeros((4, 3), int), np.zeros((4, 2), int)))
    with pytest.raises(ValueError, match=r"params.centers: got shape \(4, 2\); expected \(4, 2\) ints \(cy, cx\) in "
                                         r"\[0, 8\] x \[0, 8\]"):
        a(x, params=MosaicParams(np.zeros((4, 4), int), np.full((4, 2), 9)))
    with pytest.raises(ValueError, match="boxes: holds 3 samples; the images are 4"):
        a(x, Boxes(np.zeros((3, 1, 4), np.float32)))
    with pytest.raises(ValueError, match="x: got"):
        a(x[0])


def test_mosaic_kernel_host_emulation():
    import cuda_emu

    why = cuda_emu.available()
    if why:
        pytest.skip(f"CUDA C emulation needs g++ with C++20: {why}")
    names = ["gpuaug_mosaic<unsigned char>", "gpuaug_mosaic<unsigned short>", "gpuaug_mosaic<float>"]
    key = ("mosaic",)
    if key not in cuda_emu._built:
        cuda_emu._built[key] = cuda_emu.Emulator(["mixing.cu"], names)
    emu = cuda_emu._built[key]
    from gpuaug.policy.mixing import _fill_bits

    rng = np.random.default_rng(27)
    for dtype, t in (("uint8", "unsigned char"), ("float16", "unsigned short"), ("float32", "float")):
        for layout in ("NHWC", "NCHW"):
            x = _batch(rng, 5, 7, 9, dtype=dtype, layout=layout)
            for size in (None, (17, 19), (4, 5)):
                mo = gpuaug.Mosaic(size=size, fill=0.25 if dtype != "uint8" else 7, seed=28)
                ref, _ = mo(x, layout=layout)
                p = mo.last_params
                oh, ow = size or (7, 9)
                rows = np.zeros((5, 6), np.int32)
                rows[:, :4], rows[:, 4:] = p.sources, p.centers
                out = np.full_like(ref, 0xAB if dtype == "uint8" else 3)
                emu.get_function("mixing.cu", f"gpuaug_mosaic<{t}>")(
                    (oh * (3 if layout == "NCHW" else 1), 5), (256,), (x, out, 7, 9, 3, oh, ow, int(layout == "NCHW"), rows, 5,
                                                 _fill_bits(mo.fill, x.dtype)))
                np.testing.assert_array_equal(out, ref, err_msg=f"{dtype} {layout} {size}")


def test_mosaic_kernel_compiles_with_nvrtc():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from gpuaug.kernels._cuda import check_compile

    try:
        check_compile("mixing.cu", ["gpuaug_mosaic<unsigned char>", "gpuaug_mosaic<unsigned short>",
                                    "gpuaug_mosaic<float>"])
    except (ImportError, OSError) as e:
        pytest.skip(f"NVRTC not loadable: {e}")


@gpu
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_mosaic_gpu_matches_cpu(dtype, layout):
    import cupy
    from gpuaug.targets import Boxes

    rng = np.random.default_rng(29)
    for h, w, size in ((32, 32, None), (13, 17, (26, 34)), (224, 224, (448, 448))):
        x = _batch(rng, 16, h, w, dtype=dtype, layout=layout)
        data, counts, labels = _random_boxes(rng, 16, 6, h, w)
        mo = gpuaug.Mosaic(size=size, seed=30)
        y, b = mo(cupy.asarray(x), Boxes(cupy.asarray(data), counts=cupy.asarray(counts),
                                         labels=cupy.asarray(labels)), layout=layout)
        ry, rb = mo(x, Boxes(data, counts=counts, labels=labels), params=mo.last_params, layout=layout)
        np.testing.assert_array_equal(cupy.asnumpy(y), ry)
        np.testing.assert_array_equal(cupy.asnumpy(b.counts), rb.counts)
        np.testing.assert_allclose(cupy.asnumpy(b.data), rb.data, atol=1e-4)
        np.testing.assert_array_equal(cupy.asnumpy(b.labels), rb.labels)


# -- boxes through MixUp / CutMix --------------------------------------------------------------

def test_mixup_boxes_concatenated_with_weights():
    from gpuaug.targets import Boxes

    rng = np.random.default_rng(31)
    n, h, w, m = 6, 12, 14, 4
    x = _batch(rng, n, h, w)
    data, counts, labels = _random_boxes(rng, n, m, h, w)
    mu = gpuaug.MixUp(0.5, seed=32)
    y, soft, b, wts = mu(x, boxes=Boxes(data, counts=counts, labels=labels))
    p = mu.last_params
    assert soft is None and b.data.shape == (n, 2 * m, 4) and wts.shape == (n, 2 * m)
    y2, _ = mu(x, np.zeros((n, 2)), params=p)
    np.testing.assert_array_equal(y, y2)
    for i in range(n):
        j = p.partner[i]
        k = counts[i] + counts[j]
        assert b.counts[i] == k
        np.testing.assert_array_equal(b.data[i, :k], np.concatenate([data[i, :counts[i]], data[j, :counts[j]]]))
        np.testing.assert_array_equal(b.labels[i, :k], np.concatenate([labels[i, :counts[i]], labels[j, :counts[j]]]))
        np.testing.assert_allclose(wts[i, :k], [p.lam[i]] * counts[i] + [1 - p.lam[i]] * counts[j], rtol=1e-6)
        assert (wts[i, k:] == 0).all() and (b.labels[i, k:] == -1).all()


@pytest.mark.parametrize("min_vis", [0.0, 0.5, None])
@pytest.mark.parametrize("normalized", [False, True])
def test_cutmix_boxes(min_vis, normalized):
    from gpuaug.targets import Boxes

    rng = np.random.default_rng(33)
    n, h, w, m = 8, 20, 24, 5
    x = _batch(rng, n, h, w)
    data, counts, labels = _random_boxes(rng, n, m, h, w)
    scale = np.array([w, h, w, h], np.float32) if normalized else np.ones(4, np.float32)
    b = Boxes(data / scale, normalized=normalized, counts=counts, labels=labels, min_visibility=min_vis)
    cm = gpuaug.CutMix(1.0, num_classes=50, seed=34)
    y, soft, out, wts = cm(x, np.zeros(n, int), boxes=b)
    p = cm.last_params
    for i in range(n):
        y0, x0, y1, x1 = p.boxes[i]
        ref = []
        for bx in data[i, :counts[i]]:  # own boxes: visible area outside the patch
            area = (bx[2] - bx[0]) * (bx[3] - bx[1])
            iw = max(0.0, min(bx[2], x1) - max(bx[0], x0))
            ih = max(0.0, min(bx[3], y1) - max(bx[1], y0))
            vis = area - iw * ih
            if min_vis is None or (vis > 0 and vis >= min_vis * area):
                ref.append(bx)
        nown = len(ref)
        j = p.partner[i]
        for bx in data[j, :counts[j]]:  # partner's boxes: clipped to the patch
            c = np.array([np.clip(bx[0], x0, x1), np.clip(bx[1], y0, y1), np.clip(bx[2], x0, x1),
                          np.clip(bx[3], y0, y1)])
            area = (bx[2] - bx[0]) * (bx[3] - bx[1])
            ca = (c[2] - c[0]) * (c[3] - c[1])
            if min_vis is None or (ca > 0 and ca >= min_vis * area):
                ref.append(c)
        k = len(ref)
        assert out.counts[i] == k, f"sample {i}"
        if k:
            np.testing.assert_allclose(out.data[i, :k] * scale, np.array(ref), atol=1e-3)
        assert (wts[i, :k] == 1).all() and (wts[i, k:] == 0).all()
        own_lab = [lab for bx, lab in zip(data[i, :counts[i]], labels[i, :counts[i]])
                   if any(np.array_equal(bx, r) for r in ref[:nown])]
        np.testing.assert_array_equal(out.labels[i, :nown], own_lab)


def test_mix_boxes_ragged_and_bad():
    from gpuaug.targets import Boxes

    rng = np.random.default_rng(35)
    n, h, w = 4, 10, 10
    x = _batch(rng, n, h, w)
    data, counts, labels = _random_boxes(rng, n, 3, h, w)
    rag = Boxes([data[i, :counts[i]] for i in range(n)], labels=[labels[i, :counts[i]] for i in range(n)])
    for cls in (gpuaug.MixUp, gpuaug.CutMix):
        a = cls(1.0, seed=36)
        _, _, pb, pw = a(x, boxes=Boxes(data, counts=counts, labels=labels))
        _, _, rb, rw = a(x, boxes=rag, params=a.last_params)
        assert isinstance(rb.data, list) and isinstance(rw, list)
        for i in range(n):
            np.testing.assert_array_equal(rb.data[i], pb.data[i, :pb.counts[i]])
            np.testing.assert_array_equal(rb.labels[i], pb.labels[i, :pb.counts[i]])
            np.testing.assert_array_equal(rw[i], pw[i, :pb.counts[i]])
        with pytest.raises(ValueError, match="boxes: holds 3 samples; the images are 4"):
            a(x, boxes=Boxes(data[:3]))
        with pytest.raises(ValueError, match="labels: got None"):
            a(x)


@gpu
def test_mix_boxes_gpu_matches_cpu():
    import cupy
    from gpuaug.targets import Boxes

    rng = np.random.default_rng(37)
    x = _batch(rng, 16, 32, 32)
    data, counts, labels = _random_boxes(rng, 16, 6, 32, 32)
    for cls in (gpuaug.MixUp, gpuaug.CutMix):
        a = cls(1.0, seed=38)
        _, _, gb, gw = a(cupy.asarray(x), boxes=Boxes(cupy.asarray(data), counts=cupy.asarray(counts),
                                                      labels=cupy.asarray(labels)))
        _, _, cb, cw = a(x, boxes=Boxes(data, counts=counts, labels=labels), params=a.last_params)
        np.testing.assert_array_equal(cupy.asnumpy(gb.counts), cb.counts)
        np.testing.assert_allclose(cupy.asnumpy(gb.data), cb.data, atol=1e-4)
        np.testing.assert_array_equal(cupy.asnumpy(gb.labels), cb.labels)
        np.testing.assert_allclose(cupy.asnumpy(gw), cw, atol=1e-6)


# -- the GPU call path on host stand-ins ---------------------------------------------------------

class _DevArray(np.ndarray):
    """A host array standing in for a CuPy array (device 0, ``data.ptr``, the CUDA array
    interface), so that MixUp/CutMix take their GPU path; the kernels run under emulation."""

    @property
    def data(self):
        import types

        return types.SimpleNamespace(ptr=self.ctypes.data)

    @property
    def device(self):
        import types

        return types.SimpleNamespace(id=0)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ctypes.data, False), "version": 3}


def _dev(a):
    return np.asarray(a).view(_DevArray)


@pytest.fixture()
def gpu_path(monkeypatch):
    """A stand-in CuPy (host arrays), staged uploads as host copies and the mixing kernels
    under emulation; yields the launch and upload logs."""
    import sys
    import types

    _emu(monkeypatch)
    import gpuaug.kernels._cuda as kc

    cp = types.ModuleType("cupy")
    cp.float32, cp.int32, cp.int64 = np.float32, np.int32, np.int64
    cp.ndarray = _DevArray
    cp.asarray = lambda a, dtype=None: a if isinstance(a, _DevArray) and dtype is None else _dev(np.asarray(a, dtype))
    cp.ascontiguousarray = lambda a, dtype=None: _dev(np.array(a, dtype=dtype, order="C"))
    cp.empty_like = lambda a: _dev(np.full_like(np.asarray(a), 0xAB if a.dtype == np.uint8 else np.nan))
    cp.empty = lambda shape, dtype: _dev(np.full(shape, np.nan, dtype))
    cp.arange = lambda *a: _dev(np.arange(*a))

    class _Device:
        def __init__(self, i):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cp.cuda = types.SimpleNamespace(Device=_Device, runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                    get_current_stream=lambda: types.SimpleNamespace(ptr=0))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    log = {"launches": [], "uploads": 0}
    emu_get = kc.get_function

    def get_function(filename, name):
        fn = emu_get(filename, name)

        def launch(grid, block, args):
            log["launches"].append(name)
            fn(grid, block, tuple(0 if a is None else a for a in args))
        return launch

    def upload(*arrays):
        log["uploads"] += 1
        return [_dev(np.ascontiguousarray(a)) for a in arrays]

    monkeypatch.setattr(kc, "get_function", get_function)
    monkeypatch.setattr(kc, "upload", upload)
    monkeypatch.setattr(kc, "side_ring", lambda nbytes: None)  # the staged upload (see the ring's own test)
    yield log


class _HostRing:
    """kernels/_cuda.SideRing's interface on the host stand-ins: the table as a device stand-in."""

    def __init__(self, nbytes):
        self.sends, self.freed = 0, []

    def send(self, table, stream):
        self.sends += 1
        return self.sends, _dev(table.copy())

    def sent(self, slot, stream):
        self.freed.append(slot)


def test_gpu_path_records_through_the_side_ring(gpu_path, monkeypatch):
    """With a side ring the records reach the launch through it (no staged upload), and the
    slot is handed back behind the launch; the results are the NumPy twin's."""
    import gpuaug.kernels._cuda as kc

    rings = []
    monkeypatch.setattr(kc, "side_ring", lambda nbytes: rings.append(_HostRing(nbytes)) or rings[-1])
    rng = np.random.default_rng(44)
    x = _batch(rng, 6, 8, 16)
    ids = rng.integers(0, 5, 6)
    for cls in (gpuaug.MixUp, gpuaug.CutMix):
        m = cls(0.6, num_classes=5, seed=45)
        for call in range(3):
            gpu_path["uploads"] = 0
            y, s = m(_dev(x), _dev(ids))
            ry, rs = m(x, ids, params=m.last_params)
            np.testing.assert_array_equal(np.asarray(y), ry)
            np.testing.assert_array_equal(np.asarray(s), rs)
            assert gpu_path["uploads"] == 0
        assert rings[-1].sends == 3 and rings[-1].freed == [1, 2, 3]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_gpu_path_on_host_standins(gpu_path, layout):
    """MixUp/CutMix's whole GPU path (label checks and conversions, records, one upload, the
    launch plan, one launch) on host stand-ins = the NumPy twin, for every label form: int64 /
    int32 / uint8 ids, float32 / float64 / strided soft labels, host labels with device
    images, device labels with host images; strided and empty batches."""
    rng = np.random.default_rng(40)
    for h, w, dtype in ((8, 16, "uint8"), (5, 7, "uint8"), (4, 8, "float32"), (4, 8, "float16")):
        x = _batch(rng, 6, h, w, dtype=dtype, layout=layout)
        ids = rng.integers(0, 5, 6)
        soft = rng.random((6, 9))
        forms = [("int64 ids", ids), ("int32 ids", ids.astype(np.int32)), ("uint8 ids", ids.astype(np.uint8)),
                 ("float32 soft", soft.astype(np.float32)), ("float64 soft", soft),
                 ("strided soft", soft.astype(np.float32)[:, ::2])]
        for cls in (gpuaug.MixUp, gpuaug.CutMix):
            if cls is gpuaug.MixUp and dtype == "float16":
                continue
            m = cls(0.6, num_classes=5, seed=41)
            for what, labels in forms:
                gpu_path["launches"].clear()
                gpu_path["uploads"] = 0
                y, s = m(_dev(x), _dev(labels), layout=layout)
                assert isinstance(y, _DevArray) and isinstance(s, _DevArray) and s.dtype == np.float32, what
                assert len(gpu_path["launches"]) == 1 and gpu_path["uploads"] == 1, (what, gpu_path)
                ry, rs = m(x, labels, params=m.last_params, layout=layout)
                np.testing.assert_array_equal(np.asarray(y), ry, err_msg=f"{cls.__name__} {dtype} {what}")
                np.testing.assert_array_equal(np.asarray(s), rs, err_msg=f"{cls.__name__} {dtype} {what}")
            # host labels with device images; device labels with host images
            y, s = m(_dev(x), ids, layout=layout)
            assert type(s) is np.ndarray
            ry, rs = m(x, ids, params=m.last_params, layout=layout)
            np.testing.assert_array_equal(np.asarray(y), ry)
            np.testing.assert_array_equal(s, rs)
            y, s = m(x, _dev(ids), layout=layout)
            assert type(y) is np.ndarray and isinstance(s, _DevArray)
            ry, rs = m(x, ids, params=m.last_params, layout=layout)
            np.testing.assert_array_equal(y, ry)
            np.testing.assert_allclose(np.asarray(s), rs, atol=1e-6)
            # a strided batch (made contiguous first) and an empty one
            big = _batch(rng, 6, h, w + 1, dtype=dtype, layout="NHWC")[:, :, :w]
            y, s = m(_dev(big), _dev(ids))
            ry, rs = m(big, ids, params=m.last_params)
            np.testing.assert_array_equal(np.asarray(y), ry)
            y, s = m(_dev(x[:0]), _dev(ids[:0]), layout=layout)
            assert y.shape == x[:0].shape and s.shape == (0, 5)


def test_pickle_after_a_gpu_path_call(gpu_path):
    """A mixer that has launched (its launch plans hold kernels) still pickles, and the copy
    continues the same draws."""
    import pickle

    rng = np.random.default_rng(42)
    x = _batch(rng, 4, 8, 16)
    m = gpuaug.MixUp(0.5, num_classes=3, seed=43)
    m(_dev(x), _dev(np.array([0, 1, 2, 0])))
    assert m._plans
    m2 = pickle.loads(pickle.dumps(m))
    assert m2._plans == {}
    np.testing.assert_array_equal(m.draw(4, (8, 16)).lam, m2.draw(4, (8, 16)).lam)
