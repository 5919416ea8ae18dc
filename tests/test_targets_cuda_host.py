"""kernels/targets.cu compiled as host C++ (tests/cuda_emu.py) and run on the CPU against the
NumPy twin: the box kernel's corner maths, clipping, drop rule, ballot compaction (more than one
pass of a warp, counts below the span, empty samples), the keypoint kernel, and the device glue
of gpuaug/targets/_apply.py (flattening, uploads, argument order, gpuaug_target_both's split of
blocks) with NumPy standing in for CuPy and 256-thread blocks as in production.

The emulator has no warp intrinsics: ``__ballot_sync`` is emulated with a per-warp barrier
(every lane of a warp calls it equally often in these kernels)."""
import numpy as np
import pytest

import cuda_emu
from gpuaug.targets import Boxes, Keypoints
from gpuaug.targets._apply import _map_boxes_host, _points_numpy, mask_blocks, target_matrices

pytestmark = pytest.mark.skipif(cuda_emu.available() is not None, reason=f"{cuda_emu.available()}")

_WARP = r"""
#include <atomic>
static int emu_votes[1024];
static std::atomic<int> emu_wcount[32], emu_wgen[32];
static inline void emu_warp_barrier(int w) {
  const int g = emu_wgen[w].load();
  if (emu_wcount[w].fetch_add(1) == 31) {
    emu_wcount[w].store(0);
    emu_wgen[w].fetch_add(1);
  } else {
    while (emu_wgen[w].load() == g) std::this_thread::yield();
  }
}
static inline unsigned __ballot_sync(unsigned, bool p) {
  const int t = threadIdx.x, w = t >> 5;
  emu_votes[t] = p ? 1 : 0;
  emu_warp_barrier(w);
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= (unsigned)emu_votes[w * 32 + i] << i;
  emu_warp_barrier(w);
  return r;
}
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
static inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
static inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }
static inline double __dsub_rn(double a, double b) { volatile double r = a - b; return r; }
static inline float __frcp_rn(float a) { volatile float r = 1.0f / a; return r; }
"""

NAMES = ["gpuaug_target_boxes<float>", "gpuaug_target_boxes<double>", "gpuaug_target_points<double>",
         "gpuaug_target_points<float>", "gpuaug_target_both<float, float>", "gpuaug_target_both<double, double>",
         "gpuaug_iou_crop_select", "gpuaug_target_masks<unsigned char, false>",
         "gpuaug_target_masks<unsigned char, true>", "gpuaug_target_masks<int, false>", "gpuaug_target_masks<int, true>",
         "gpuaug_target_all<float, float, unsigned char, false>", "gpuaug_target_all<float, float, unsigned char, true>",
         "gpuaug_target_all<double, float, unsigned char, true>"]


@pytest.fixture(scope="module")
def emu():
    saved = cuda_emu.PRELUDE
    cuda_emu.PRELUDE = saved + _WARP
    try:
        yield cuda_emu.Emulator(["targets.cu"], NAMES)
    finally:
        cuda_emu.PRELUDE = saved


def _mats(n, rng, h, w):
    m = np.zeros((n, 3, 3))
    ang = np.deg2rad(rng.uniform(-60, 60, n))
    s = rng.uniform(0.7, 1.4, n)
    m[:, 0, 0], m[:, 0, 1], m[:, 1, 0], m[:, 1, 1] = s * np.cos(ang), s * np.sin(ang), -s * np.sin(ang), s * np.cos(ang)
    m[:, 0, 2], m[:, 1, 2] = rng.uniform(-5, 5, n) + w / 4, rng.uniform(-5, 5, n)
    m[:, 2, :2] = rng.uniform(-0.004, 0.004, (n, 2))
    m[:, 2, 2] = 1.0
    return m


@pytest.mark.parametrize("fmt", ["xyxy", "xywh", "cxcywh"])
@pytest.mark.parametrize("mv", [None, 0.0, 0.5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_keep", [False, True])
def test_box_kernel_equals_numpy_twin(emu, fmt, mv, dtype, with_keep):
    rng = np.random.default_rng(1)
    n, m, h, w = 5, 45, 30, 40  # 45 boxes: two ballot passes
    x1, y1 = rng.uniform(-10, w, (n, m)), rng.uniform(-10, h, (n, m))
    bw, bh = rng.uniform(0, 20, (n, m)), rng.uniform(0, 15, (n, m))
    data = {"xyxy": np.stack([x1, y1, x1 + bw, y1 + bh], -1), "xywh": np.stack([x1, y1, bw, bh], -1),
            "cxcywh": np.stack([x1 + bw / 2, y1 + bh / 2, bw, bh], -1)}[fmt].astype(dtype)
    counts = np.array([45, 0, 33, 32, 1], np.int32)
    sizes = np.array([[h, w]] * n)
    mats3 = _mats(n, rng, h, w)
    boxes = Boxes(data, fmt, counts=counts, min_visibility=mv)
    mats = target_matrices(mats3, sizes, sizes, True, False)
    lims = sizes[:, ::-1].astype(np.float64).copy()
    keep = rng.random((n, m)) < 0.6 if with_keep else None
    host = _map_boxes_host(boxes, mats, lims, {"xyxy": 0, "xywh": 1, "cxcywh": 2}[fmt], mv or 0.0, mv is not None,
                           keep)
    if with_keep:  # the twin honours keep: rows it drops are gone
        plain = _map_boxes_host(boxes, mats, lims, {"xyxy": 0, "xywh": 1, "cxcywh": 2}[fmt], mv or 0.0,
                                mv is not None)
        assert (host.counts <= plain.counts).all() and host.counts.sum() < plain.counts.sum()
        assert keep[np.arange(n)[:, None].repeat(m, 1)[host.index >= 0], host.index[host.index >= 0]].all()
    out = np.full_like(data, np.nan)
    index = np.full((n, m), -7, np.int32)
    cnt = np.full(n, -7, np.int32)
    starts = np.arange(n, dtype=np.int64) * m
    spans = np.full(n, m, np.int32)
    fn = emu.get_function("targets.cu", f"gpuaug_target_boxes<{'float' if dtype == np.float32 else 'double'}>")
    kin = keep.astype(np.uint8) if with_keep else index
    fn((n,), (32,), (data, out, index, cnt, starts, counts, spans, mats, lims, kin, np.int32(n),
                     np.int32({"xyxy": 0, "xywh": 1, "cxcywh": 2}[fmt]), float(mv or 0.0), np.int32(mv is not None),
                     np.int32(with_keep)))
    np.testing.assert_array_equal(cnt, host.counts)
    np.testing.assert_array_equal(index, host.index)  # every slot written: kept rows, then -1
    np.testing.assert_allclose(out, host.data, atol=1e-4 if dtype == np.float32 else 1e-9)


def test_point_kernel_equals_numpy_twin(emu):
    rng = np.random.default_rng(2)
    n, k, h, w = 4, 21, 20, 30
    pts = np.stack([rng.uniform(-5, w + 5, (n, k)), rng.uniform(-5, h + 5, (n, k))], -1)
    vis = rng.random((n, k)) < 0.8
    m3 = _mats(n, rng, h, w)
    m3[0, 2, :2] = [-0.05, 0.0]  # sends part of sample 0 beyond infinity
    mats = target_matrices(m3, [[h, w]] * n, [[h, w]] * n, False, False)
    lims = np.tile([-0.5, w - 0.5, -0.5, h - 0.5], (n, 1)).astype(np.float64)
    want, wvis = _points_numpy(pts, vis, mats, lims)
    out = np.zeros_like(pts)
    vout = np.full((n, k), 9, np.uint8)
    fn = emu.get_function("targets.cu", "gpuaug_target_points<double>")
    fn((1,), (128,), (pts, out, vis.astype(np.uint8), vout, mats, lims, np.int32(n), np.int32(k)))
    np.testing.assert_array_equal(vout.astype(bool), wvis)
    np.testing.assert_allclose(out, want, atol=1e-9, equal_nan=True)
    assert np.isnan(want).any()  # the lost points are covered
    kp = Keypoints(pts, vis)
    assert kp.visibility.shape == (n, k)


class _HostPtr:
    """A stand-in cupy MemoryPointer: a host buffer and a byte offset."""

    def __init__(self, buf, off):
        self.buf, self.off = buf, off

    def __add__(self, k):
        return _HostPtr(self.buf, self.off + int(k))


class _HostBuf(np.ndarray):
    """A NumPy array whose ``.data`` is a :class:`_HostPtr` (what cupy.ndarray(memptr=) reads)."""

    @property
    def data(self):
        return _HostPtr(self.view(np.ndarray), 0)


class _FakeCupy:
    """What _apply.py's device path calls on CuPy, on NumPy arrays."""

    int32, bool_, uint8 = np.int32, np.bool_, np.uint8
    ascontiguousarray = staticmethod(np.ascontiguousarray)
    concatenate = staticmethod(np.concatenate)
    asarray = staticmethod(np.asarray)
    zeros = staticmethod(np.zeros)
    empty_like = staticmethod(lambda a: np.full_like(a, np.nan))  # poisoned: every element must be written
    asnumpy = staticmethod(np.asarray)

    @staticmethod
    def empty(shape, dtype):  # poisoned (77 in every byte): every element must be written
        return np.full(shape, 77, dtype).view(_HostBuf) if np.dtype(dtype) != np.bool_ else np.zeros(shape, bool)

    @staticmethod
    def ndarray(shape, dtype, memptr):
        return np.ndarray(shape, dtype, buffer=memptr.buf, offset=memptr.off)


@pytest.fixture
def glue(emu, monkeypatch):
    """gpuaug.targets._apply's device path on the emulator."""
    import gpuaug.kernels._cuda as K
    from gpuaug.targets import _apply

    monkeypatch.setattr(_apply, "cupy_module", lambda: _FakeCupy)
    monkeypatch.setattr(K, "upload", lambda *arrays: [np.ascontiguousarray(a) for a in arrays])
    monkeypatch.setattr(K, "constants", lambda dev=None: _FakeConstants.cache)
    monkeypatch.setattr(K, "get_function", lambda f, name: emu.get_function(f, name))
    monkeypatch.setattr(_FakeConstants, "cache", _FakeConstants())
    return _apply


class _FakeConstants:
    """kernels._cuda's device constant cache on the host: a key's copy is made once (``made``
    counts the misses) and handed back while the key repeats."""

    cache = None

    def __init__(self):
        self.d, self.made = {}, []

    def get(self, key, host):
        if key not in self.d:
            self.made.append(key)
            self.d[key] = np.array(host() if callable(host) else host)
        return self.d[key]


@pytest.mark.parametrize("ragged", [False, True])
def test_device_glue_boxes_and_keypoints_in_one_launch(glue, ragged):
    rng = np.random.default_rng(4)
    n, m, k, h, w = 11, 37, 17, 24, 32  # 11 warps of boxes: two 256-thread blocks, then points
    x1, y1 = rng.uniform(-8, w, (n, m)), rng.uniform(-8, h, (n, m))
    data = np.stack([x1, y1, x1 + rng.uniform(0, 15, (n, m)), y1 + rng.uniform(0, 12, (n, m))], -1).astype(np.float32)
    counts = rng.integers(0, m + 1, n).astype(np.int32)
    pts = np.stack([rng.uniform(-2, w + 2, (n, k)), rng.uniform(-2, h + 2, (n, k))], -1).astype(np.float32)
    vis = rng.random((n, k)) < 0.7
    mats = _mats(n, rng, h, w)
    sizes = np.array([[h, w]] * n)
    if ragged:
        boxes = Boxes([data[i, :counts[i]] for i in range(n)], min_visibility=0.3)
    else:
        boxes = Boxes(data, counts=counts, min_visibility=0.3)
    kp = Keypoints(pts, vis)
    want_b, want_k = glue.map_targets(boxes, kp, mats, sizes, sizes)  # NumPy twin
    launches = []
    real = glue._launch

    def spy(db, dp):
        launches.append((db is not None, dp is not None))
        return real(db, dp)

    glue._launch = spy
    try:
        bs = glue._box_setup(boxes, mats, sizes, sizes, True)
        ps = glue._point_setup(kp, mats, sizes, sizes, True)
        db, dp = glue._DeviceBoxes(*bs), glue._DevicePoints(*ps)
        glue._launch(db, dp)
        got_b, got_k = db.result(), dp.result()
    finally:
        glue._launch = real
    assert launches == [(True, True)]
    if ragged:
        assert [len(a) for a in got_b.data] == [len(a) for a in want_b.data]
        for a, b_, ia, ib in zip(got_b.data, want_b.data, got_b.index, want_b.index):
            np.testing.assert_allclose(a, b_, atol=1e-4)
            np.testing.assert_array_equal(ia, ib)
    else:
        np.testing.assert_array_equal(got_b.counts, want_b.counts)
        np.testing.assert_array_equal(got_b.index, want_b.index)
        np.testing.assert_allclose(got_b.data, want_b.data, atol=1e-4)
    np.testing.assert_allclose(got_k.data, want_k.data, atol=1e-4)
    np.testing.assert_array_equal(got_k.visibility, want_k.visibility)


@pytest.mark.parametrize("ragged", [False, True])
def test_iou_crop_select_kernel_equals_numpy_twin(glue, ragged, monkeypatch):
    """gpuaug_iou_crop_select through safe_crops' device path (emulated) == the NumPy twin:
    windows and kept rows, with samples that take a crop in the first trials, after several
    rounds, never (no boxes), and more than 32 boxes (lanes loop)."""
    import contextlib

    import gpuaug._stream
    from gpuaug.targets import safe_crops

    monkeypatch.setattr(safe_crops, "cupy_module", lambda: _FakeSafeCupy)
    monkeypatch.setattr(gpuaug._stream, "on_stream", lambda s: contextlib.nullcontext())
    rng = np.random.default_rng(9)
    n, m = 10, 37
    sizes = np.stack([rng.integers(20, 80, n), rng.integers(20, 80, n)], 1)
    x1, y1 = rng.uniform(-5, 60, (n, m)), rng.uniform(-5, 60, (n, m))
    d = np.stack([x1, y1, x1 + rng.uniform(1, 30, (n, m)), y1 + rng.uniform(1, 30, (n, m))], -1)
    counts = rng.integers(0, m + 1, n).astype(np.int32)
    counts[0], counts[1] = 0, m
    keys = rng.integers(0, 2 ** 63, n, dtype=np.int64)
    opts = (0.0, 0.5, 0.9, 0.95, 1.0)
    b = Boxes([d[i, :counts[i]] for i in range(n)]) if ragged else Boxes(d, counts=counts)
    want_w, want_in = safe_crops.iou_crop_windows(b, sizes, keys, sampler_options=opts, trials=6, rounds=4)
    dev = _DevBoxes(b)
    got_w, got_in = safe_crops.iou_crop_windows(dev, sizes, keys, sampler_options=opts, trials=6, rounds=4)
    np.testing.assert_array_equal(got_w, want_w)
    if ragged:
        for g, w_ in zip(got_in, want_in):
            np.testing.assert_array_equal(g, w_)
    else:
        np.testing.assert_array_equal(got_in, want_in)
    assert (want_w != np.stack([np.zeros(n), np.zeros(n), sizes[:, 0], sizes[:, 1]], 1)).any(axis=1).sum() >= 3


class _FakeSafeCupy(_FakeCupy):
    float64, uint8, inf = np.float64, np.uint8, np.inf
    stack, where, arange, zeros = (staticmethod(np.stack), staticmethod(np.where), staticmethod(np.arange),
                                   staticmethod(np.zeros))
    asnumpy = staticmethod(np.asarray)

    @staticmethod
    def empty(shape, dtype):
        return np.full(shape, -77, dtype)


class _DevBoxes(Boxes):
    """Host boxes that take safe_crops' device path (the emulator reads host memory)."""

    def __init__(self, b):
        self.__dict__.update(b.__dict__)

    @property
    def device(self):
        return True


def _stage_maps(n, rng, h, w, persp):
    m = _mats(n, rng, h, w)
    if not persp:
        m[:, 2] = [0, 0, 1]
    m[0] = np.eye(3)  # an identity sample: every source pixel lands on itself
    return m


@pytest.mark.parametrize("dtype,persp,constant", [(np.uint8, False, True), (np.uint8, True, False),
                                                  (np.int32, False, False), (np.int32, True, True)])
def test_mask_kernel_equals_the_nearest_warp(emu, dtype, persp, constant):
    """gpuaug_target_masks == gpuaug.warp_affine / warp_perspective (nearest, inverse map, the CPU
    twin) on the mask planes: the maps, the rounding, both borders, int32 labels, odd widths
    (the last, shorter run of a row) and outputs of another size."""
    from gpuaug.policy import _fused as F
    from gpuaug.targets import Masks
    from gpuaug.targets._policy import _stage_masks

    rng = np.random.default_rng(12)
    n, k, h, w, oh, ow = 3, 2, 13, 18, 37, 71  # 5 runs of 16 pixels a row, the last 7; 7 blocks
    lab = rng.integers(0, 250 if dtype == np.uint8 else 2 ** 30, (n, k, h, w)).astype(dtype)
    masks = Masks(lab, onehot=True, fill=7)
    m = _stage_maps(n, rng, h, w, persp)
    want = _stage_masks(masks, m, np.array([[oh, ow]] * n), constant, None, "cpu").data
    inv = np.ascontiguousarray(F._inverse(m)[0], np.float32)
    out = np.full((n, k, oh, ow), 99, dtype)
    ctype = "int" if dtype == np.int32 else "unsigned char"
    fn = emu.get_function("targets.cu", f"gpuaug_target_masks<{ctype}, {'true' if persp else 'false'}>")
    fn((mask_blocks(n * k, oh, ow),), (256,), (lab, out, inv, np.int32(n * k), np.int32(k), np.int32(h), np.int32(w),
                                         np.int32(oh), np.int32(ow), np.int32(7), np.int32(constant)))
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(out[0, :, :h, :min(w, ow)], lab[0, :, :min(h, oh), :min(w, ow)][:, :h])


@pytest.mark.parametrize("persp,with_boxes,with_points", [(False, True, True), (True, True, False),
                                                          (False, False, True)])
def test_device_glue_one_launch_for_a_stage(glue, monkeypatch, persp, with_boxes, with_points):
    """map_stage (gpuaug_target_all: boxes, keypoints and masks of a policy stage in one upload
    and one launch) == map_targets + the masks' warp, on the emulator."""
    from gpuaug.policy import _fused as F
    from gpuaug.targets import Masks
    from gpuaug.targets._policy import _stage_masks

    rng = np.random.default_rng(13)
    n, m, k, h, w, oh, ow = 9, 37, 5, 14, 20, 12, 17
    mats = _stage_maps(n, rng, h, w, persp)
    x1, y1 = rng.uniform(-4, w, (n, m)), rng.uniform(-4, h, (n, m))
    data = np.stack([x1, y1, x1 + rng.uniform(0, 9, (n, m)), y1 + rng.uniform(0, 9, (n, m))], -1).astype(np.float32)
    counts = rng.integers(0, m + 1, n).astype(np.int32)
    keep = rng.random((n, m)) < 0.8
    boxes = Boxes(data, counts=counts, min_visibility=0.2, labels=rng.integers(0, 9, (n, m))) if with_boxes else None
    kp = (Keypoints(np.stack([rng.uniform(0, w, (n, k)), rng.uniform(0, h, (n, k))], -1).astype(np.float32))
          if with_points else None)
    masks = Masks(rng.integers(0, 200, (n, h, w)).astype(np.uint8))
    sizes, out = np.array([[h, w]] * n), np.array([[oh, ow]] * n)
    want_b, want_k = glue.map_targets(boxes, kp, mats, sizes, out, keep=keep if with_boxes else None)
    want_m = _stage_masks(masks, mats, out, True, None, "cpu").data
    import contextlib

    import gpuaug._stream

    monkeypatch.setattr(gpuaug._stream, "on_stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(glue, "_fused_masks_ok", lambda *a: True)  # host arrays stand in for device ones
    launches = []
    real = glue._launch

    def spy(db, dp, dm=None):
        launches.append(dm is not None)
        return real(db, dp, dm)

    monkeypatch.setattr(glue, "_launch", spy)
    got = glue.map_stage(boxes, kp, masks, mats, F._inverse(mats)[0], sizes, out, True,
                         keep=keep if with_boxes else None)
    assert launches == [True]
    gb, gk, gm = got
    np.testing.assert_array_equal(np.asarray(gm.data), want_m)
    if with_boxes:
        np.testing.assert_array_equal(gb.counts, want_b.counts)
        np.testing.assert_array_equal(gb.index, want_b.index)
        np.testing.assert_array_equal(gb.labels, want_b.labels)
        np.testing.assert_allclose(gb.data, want_b.data, atol=1e-4)
    if with_points:
        np.testing.assert_allclose(gk.data, want_k.data, atol=1e-6)
        np.testing.assert_array_equal(gk.visibility, want_k.visibility)



def test_device_glue_constants_follow_the_shape(glue, monkeypatch):
    """The rows that depend only on the shape (limits, row starts, spans, counts of a padded
    batch without counts) come from the device's constant cache, keyed by what they depend
    on: a new count of samples, of box rows, an output size or a convention makes new ones,
    a repeat makes none; every launch equals the NumPy twin."""
    import contextlib

    import gpuaug._stream
    from gpuaug.policy import _fused as F
    from gpuaug.targets import Masks
    from gpuaug.targets._policy import _stage_masks

    monkeypatch.setattr(gpuaug._stream, "on_stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(glue, "_fused_masks_ok", lambda *a: True)
    cache = _FakeConstants.cache
    rng = np.random.default_rng(21)
    h, w = 14, 20
    made = []
    for n, m, oh, ow, coords in [(6, 9, 12, 17, "pixel"), (6, 9, 12, 17, "pixel"), (6, 11, 12, 17, "pixel"),
                                 (5, 11, 12, 17, "pixel"), (5, 11, 13, 17, "pixel"), (5, 11, 13, 17, "continuous")]:
        mats = _stage_maps(n, rng, h, w, False)
        x1, y1 = rng.uniform(-4, w, (n, m)), rng.uniform(-4, h, (n, m))
        data = np.stack([x1, y1, x1 + rng.uniform(0, 9, (n, m)), y1 + rng.uniform(0, 9, (n, m))], -1)
        boxes = Boxes(data.astype(np.float32), min_visibility=0.2)
        kp = Keypoints(np.stack([rng.uniform(0, w, (n, 4)), rng.uniform(0, h, (n, 4))], -1).astype(np.float32),
                       coords=coords)
        masks = Masks(rng.integers(0, 200, (n, h, w)).astype(np.uint8))
        sizes = np.broadcast_to(np.array([h, w]), (n, 2))
        out = np.broadcast_to(np.array([oh, ow]), (n, 2))
        before = len(cache.made)
        gb, gk, gm = glue.map_stage(boxes, kp, masks, mats, F._inverse(mats)[0], sizes, out, True)
        made.append(cache.made[before:])
        wb, wk = glue.map_targets(boxes, kp, mats, sizes, out)
        np.testing.assert_array_equal(gb.counts, wb.counts)
        np.testing.assert_array_equal(gb.index, wb.index)
        np.testing.assert_allclose(gb.data, wb.data, atol=1e-4)
        np.testing.assert_allclose(gk.data, wk.data, atol=1e-5)
        np.testing.assert_array_equal(gk.visibility, wk.visibility)
        np.testing.assert_array_equal(np.asarray(gm.data), _stage_masks(masks, mats, out, True, None, "cpu").data)
    kinds = [sorted(k[0].split(".")[-1] + ("." + k[-1] if k[0].endswith("rows") else "") for k in ks) for ks in made]
    assert kinds[0] == ["box_lims", "point_lims", "rows.spans", "rows.starts"]
    assert kinds[1] == []                                   # the same shape again: nothing new
    assert kinds[2] == ["rows.spans", "rows.starts"]        # more box rows
    assert kinds[3] == ["box_lims", "point_lims", "rows.spans", "rows.starts"]  # fewer samples
    assert kinds[4] == ["box_lims", "point_lims"]           # another output size
    assert kinds[5] == ["point_lims"]                       # keypoints in another convention
