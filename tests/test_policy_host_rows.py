"""The automatic policies' and MixUp/CutMix's host side (issue 13's host cost): the fast draws,
the rows gathered from memoised tables, the op-class lookup tables and the launch logic give
exactly what the previous implementation gave (tests/ref_policy_host.py keeps it verbatim):
the same draws from the same generator state, the same (K, N, 9) float32 rows bit for bit, the
same statistics/table/fused launches; and the whole GPU call path, on host stand-ins for CuPy
with the CUDA C kernels under host emulation, equals the NumPy twin."""
from __future__ import annotations

import types

import numpy as np
import pytest

import gpuaug
import ref_policy_host as REF
from gpuaug.policy import auto as A
from helpers import gpu
from gpuaug.policy import mixing as M
from gpuaug.policy.auto import AutoParams, apply_ops

_REF_DRAW = {A.RandAugment: REF.rand_augment_draw, A.TrivialAugmentWide: REF.trivial_augment_draw,
             A.AutoAugment: REF.auto_augment_draw, A.AugMix: REF.augmix_draw}


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _policy(kind, rng, interp):
    if kind == "ra":
        nb = int(rng.integers(1, 40))
        return A.RandAugment(int(rng.integers(0, 7)), int(rng.integers(0, nb)), nb, interpolation=interp)
    if kind == "ta":
        return A.TrivialAugmentWide(int(rng.integers(1, 40)), interpolation=interp)
    if kind == "aa":
        return A.AutoAugment(["imagenet", "cifar10", "svhn"][int(rng.integers(0, 3))], interpolation=interp)
    return A.AugMix(int(rng.integers(1, 11)), int(rng.integers(1, 5)), int(rng.integers(-1, 5)),
                    float(rng.uniform(0.1, 3.0)), bool(rng.integers(0, 2)), interpolation=interp)


@pytest.mark.parametrize("kind", ["ra", "ta", "aa", "augmix"])
def test_draws_and_rows_equal_the_previous_implementation(kind):
    """Over random settings, batch sizes (0 included), image sizes, interpolations and seeds:
    the same draws (ops, magnitudes, extras, and the generator left in the same state), rows
    gathered from the tables = the old step_rows of those draws = the new step_rows; the steps'
    reduction codes read from the ops = those read from the rows."""
    rng = np.random.default_rng({"ra": 1, "ta": 2, "aa": 3, "augmix": 4}[kind])
    for case in range(60):
        interp = ("nearest", "bilinear")[case % 2]
        pol = _policy(kind, rng, interp)
        n = int(rng.choice([0, 1, 2, 7, 33, 256]))
        h, w = (int(v) for v in rng.integers(1, 500, 2))
        seed = int(rng.integers(0, 2 ** 63))
        g_old, g_new = np.random.default_rng(seed), np.random.default_rng(seed)
        old = _REF_DRAW[type(pol)](pol, g_old, n, h, w)
        new, table, idx = pol._draw_idx(g_new, n, h, w)
        what = (case, repr(pol), n, h, w, interp)
        assert g_old.bit_generator.state == g_new.bit_generator.state, what
        assert _same(old.ops, new.ops) and _same(old.magnitudes, new.magnitudes), what
        assert old.extra.keys() == new.extra.keys(), what
        for k in old.extra:
            assert _same(old.extra[k], new.extra[k]), (what, k)
        ref_rows = REF.all_rows(old, h, w, interp == "bilinear")
        assert _same(table.rows.take(idx.T, axis=0), ref_rows), what
        k_steps = new.ops.shape[1]
        gen = A.step_rows(new.ops.T.ravel(), new.magnitudes.T.ravel(), h, w, interp == "bilinear")
        assert _same(gen.reshape(k_steps, n, 9), ref_rows), what
        assert A._step_codes(new.ops) == A._step_codes(None, ref_rows), what
        # the public draw gives the same as _draw_idx
        assert _same(pol.draw(n, (h, w), seed=seed).magnitudes, new.magnitudes), what


def test_many_bins_draw_without_tables():
    """Past _TABLE_MAX_BINS magnitude bins no table is made: the same draws as before, rows
    built per call (and nothing remembered)."""
    rng = np.random.default_rng(12)
    x = rng.integers(0, 256, (5, 9, 7, 3), dtype=np.uint8)
    for pol in (A.RandAugment(2, 700, A._TABLE_MAX_BINS + 500), A.TrivialAugmentWide(A._TABLE_MAX_BINS + 1)):
        old = _REF_DRAW[type(pol)](pol, np.random.default_rng(3), 5, 9, 7)
        new, table, idx = pol._draw_idx(np.random.default_rng(3), 5, 9, 7)
        assert table is None and idx is None
        assert _same(old.ops, new.ops) and _same(old.magnitudes, new.magnitudes)
        pol._rng = np.random.default_rng(3)
        y = pol(x)
        assert pol._memo is None and _same(pol.last_params.magnitudes, old.magnitudes)
        np.testing.assert_array_equal(y, apply_ops(x, old))


def test_step_rows_equals_the_previous_implementation_on_any_values():
    """The generic rows (replays, Compose runs, apply_ops): random op ids, out-of-range ids
    included (no class), magnitudes of any size and sign, signed zeros."""
    rng = np.random.default_rng(5)
    for case in range(200):
        n = int(rng.integers(0, 300))
        h, w = (int(v) for v in rng.integers(1, 400, 2))
        ops = rng.integers(-2, 18, n)
        mags = rng.normal(0, 40, n) * rng.integers(0, 2, n)
        mags[rng.random(n) < 0.1] *= -0.0
        pick = rng.random(n) < 0.1  # table values, and beyond every table
        mags[pick] = rng.choice([0.3, -0.99, 135.0, 8.0, 9.0, 255.0, 1e6, -1e6, -0.0], int(pick.sum()))
        for bil in (False, True):
            assert _same(A.step_rows(ops, mags, h, w, bil), REF.step_rows(ops, mags, h, w, bil)), (case, bil)
    # list and int32 / float32 input
    assert _same(A.step_rows([1, 10, 11, 13], np.float32([0.25, 3.7, 99.5, 0]), 7, 5),
                 REF.step_rows([1, 10, 11, 13], np.float32([0.25, 3.7, 99.5, 0]), 7, 5))


def test_tables():
    """The tables' layout the draws rely on: AutoAugment's 10 bins, read-only entries, entry 0
    Identity with magnitude +0.0 (what a skipped op gets)."""
    for kind, nb in (("auto", 10), ("rand", 31), ("trivial", 31), ("augmix", 10), ("augmix_all", 10)):
        t = A._table(kind, nb, 224, 224, False)
        assert t.bins == nb and t.mag.shape == (15 * nb * 2,) and t.rows.shape == (15 * nb * 2, 9)
        assert not t.rows.flags.writeable and not t.mag.flags.writeable
        assert t.mag[0] == 0 and not np.signbit(t.mag[0]) and not t.rows[0].any()
    assert A._table("rand", 31, 224, 224, False) is A._table("rand", 31, 224, 224, False)
    assert list(A._table("augmix_all", 10, 8, 8, True).ids) == [1, 2, 3, 4, 5, 10, 11, 12, 13, 6, 7, 8, 9]


def test_replay_memo_only_for_unchanged_draws():
    """A replay of last_params (and Compose's run after its sample) gathers the remembered
    rows; edited params, another batch size or image size build their rows again; the memo is
    not pickled. Outputs equal apply_ops' (generic rows) each time."""
    import pickle

    rng = np.random.default_rng(6)
    x = rng.integers(0, 256, (6, 9, 11, 3), dtype=np.uint8)
    for pol in (gpuaug.RandAugment(3, 12, seed=1), gpuaug.AugMix(seed=2), gpuaug.AutoAugment(seed=3)):
        y = pol(x)
        p = pol.last_params
        assert pol._recall(x, p) is not None
        np.testing.assert_array_equal(pol(x, params=p), y)
        q = AutoParams(p.ops.copy(), p.magnitudes.copy(), dict(p.extra))
        assert pol._recall(x, q) is not None  # equal values: the same rows
        q.magnitudes[0, 0] = 0.123
        q.ops[1, 0] = 14
        assert pol._recall(x, q) is None
        ref = pol._apply(x, q, None, None) if isinstance(pol, gpuaug.AugMix) else \
            apply_ops(x, q, interpolation=pol.interpolation)
        np.testing.assert_array_equal(pol(x, params=q), ref)
        p.magnitudes[2, 0] = -p.magnitudes[2, 0] if p.magnitudes[2, 0] else -0.0  # in place: a new sign bit
        assert pol._recall(x, p) is None
        assert pol._recall(x[:5], pol.last_params) is None and pol._recall(x[:, :8], pol.last_params) is None
        assert pickle.loads(pickle.dumps(pol))._memo is None
    # Compose: its run after its sample gathers the remembered rows; a replay of its
    # last_params with the memo dropped builds them: the same output
    ra = gpuaug.RandAugment(2, 9)
    c = gpuaug.Compose([ra], seed=4)
    y1 = c(x)
    assert ra._memo is not None
    ra._memo = None
    np.testing.assert_array_equal(c(x, params=c.last_params), y1)


@pytest.mark.parametrize("cls", [M.MixUp, M.CutMix])
def test_mix_draws_and_records_equal_the_previous_implementation(cls):
    rng = np.random.default_rng(7)
    ref = REF.mixup_draw if cls is M.MixUp else REF.cutmix_draw
    for case in range(80):
        mix = cls(float(rng.choice([0.2, 0.8, 1.0, 2.5])), num_classes=10)
        n = int(rng.choice([0, 1, 2, 5, 64, 256]))
        h, w = (int(v) for v in rng.integers(1, 400, 2))
        seed = int(rng.integers(0, 2 ** 63))
        g_old, g_new = np.random.default_rng(seed), np.random.default_rng(seed)
        partner, lam, boxes, order = ref(mix, g_old, n, h, w)
        p = mix._draw(g_new, n, h, w)
        assert g_old.bit_generator.state == g_new.bit_generator.state
        assert _same(p.partner, partner) and _same(p.lam, lam) and _same(p.order, order)
        assert (p.boxes is None and boxes is None) or _same(p.boxes, boxes)
        lam32 = np.asarray(p.lam, np.float32)
        assert _same(M._records(p.partner, lam32, p.boxes, p.order), REF.records(partner, lam32, boxes, order))
        assert _same(M._records(p.partner, lam32, p.boxes, None), REF.records(partner, lam32, boxes, None))


# -- the GPU call path on host stand-ins, kernels under host emulation -------------------------

class _Mem:
    """A stand-in cupy MemoryPointer: a host root buffer and a byte offset."""

    device_id = 0

    def __init__(self, root, off):
        self.root, self.off = root, off

    def __add__(self, k):
        return _Mem(self.root, self.off + int(k))

    @property
    def ptr(self):
        return self.root.ctypes.data + self.off

    def memset_async(self, value, size, stream=None):
        self.root[self.off:self.off + size] = value


def _dev_class():
    import cuda_emu

    class Dev(cuda_emu.DeviceView):
        """A stand-in CuPy array: a NumPy view into a host root buffer (not an ndarray, so the
        policies take their GPU path; a DeviceView, so the emulator passes its address)."""

        __cuda_array_interface__ = {"version": 3}

        def __init__(self, shape, dtype, memptr):  # cupy.ndarray(shape, dtype, memptr=...)
            root, off = memptr.root, memptr.off
            self.view = np.ndarray(shape, dtype, buffer=root, offset=off)
            self._root, self._off = root, off
            self.flags, self.itemsize, self.shape = self.view.flags, self.view.itemsize, self.view.shape
            v = self.view
            self.dtype, self.ndim, self.nbytes, self.size = v.dtype, v.ndim, v.nbytes, v.size
            self.device = types.SimpleNamespace(id=0)

        @property
        def data(self):
            return _Mem(self._root, self._off)

        @classmethod
        def alloc(cls, shape, dtype, fill):
            shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            return cls(shape, dtype, _Mem(np.full(nbytes + 64, fill, np.uint8), 0))

        def __getitem__(self, key):
            v = self.view[key]
            return Dev(v.shape, v.dtype, _Mem(self._root, v.ctypes.data - self._root.ctypes.data))

        def __setitem__(self, key, value):
            self.view[key] = value.view if isinstance(value, Dev) else value

    return Dev


@pytest.fixture()
def auto_gpu(monkeypatch):
    """A stand-in CuPy, staged uploads as host copies, the fused/statistics kernels of
    kernels/auto_augment.cu under host emulation and Equalize's table kernel as NumPy; yields
    (Dev class, launch log)."""
    import sys

    import cuda_emu

    if cuda_emu.available():
        pytest.skip(f"CUDA C emulation needs g++ with C++20: {cuda_emu.available()}")
    names = [f"gpuaug_autoaug_fused<{c}, {k}>" for c in (1, 3) for k in (1, 2, 3, 4)] + \
        [f"gpuaug_autoaug_stats_fused<{c}, {k}>" for c in (1, 3) for k in (0, 1, 2, 3)] + \
        [f"gpuaug_autoaug_apply<{c}>" for c in (1, 3)] + [f"gpuaug_augmix_fused<3, {d}>" for d in (2, 3)]
    emu = cuda_emu.patch(monkeypatch, ["auto_augment.cu"], names)
    import gpuaug._stream as st
    import gpuaug.kernels._cuda as kc

    Dev = _dev_class()
    cp = types.ModuleType("cupy")
    cp.ndarray = Dev
    cp.uint32, cp.uint64, cp.float32, cp.uint8 = np.uint32, np.uint64, np.float32, np.uint8
    cp.empty = lambda shape, dtype: Dev.alloc(shape, dtype, 0xAB)
    cp.zeros = lambda shape, dtype: Dev.alloc(shape, dtype, 0)
    cp.empty_like = lambda a: Dev.alloc(a.shape, a.dtype, 0xAB)

    def ascontiguous(a, dtype=None):
        d = Dev.alloc(a.shape, dtype or a.dtype, 0)
        d.view[...] = a.view
        return d
    cp.ascontiguousarray = ascontiguous
    cp.asarray = lambda a: a
    cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0,
                                                           getDeviceProperties=lambda d: {"multiProcessorCount": 132}),
                                    get_current_stream=lambda: types.SimpleNamespace(ptr=0))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(st, "_GET_DEVICE", lambda: 0)
    log = []

    def lut_kernel(grid, block, args):
        hist, lut, lp, c, is_float = args
        n = grid[0] // int(c)
        hh = hist.view.reshape(-1)[:n * int(c) * 256].reshape(n, int(c), 256)
        tab = lut.view.reshape(-1)[:n * int(lp)].reshape(n, int(lp))
        tab[:, :int(c) * 256] = A._luts_from_hist(hh).reshape(n, -1)
        tab[:, int(c) * 256] = float(is_float)

    def get_function(filename, name):
        if name == "gpuaug_equalize_lut":
            fn = lut_kernel
        else:
            fn = emu.get_function(filename, name)

        def launch(grid, block, args):
            log.append(name)
            fn(grid, block, args)
        return launch

    def upload(*arrays):
        out = []
        for a in arrays:
            d = Dev.alloc(a.shape, a.dtype, 0)
            d.view[...] = a
            out.append(d)
        return out

    monkeypatch.setattr(kc, "get_function", get_function)
    monkeypatch.setattr(kc, "upload", upload)
    yield Dev, log


def _to_dev(Dev, a):
    d = Dev.alloc(a.shape, a.dtype, 0)
    d.view[...] = a
    return d


@pytest.mark.parametrize("per", [1, 4])
def test_gpu_path_on_host_standins(auto_gpu, monkeypatch, per):
    """Every policy's whole GPU call (fresh draw, replay of last_params, edited params) on host
    stand-ins, its kernels emulated, equals the NumPy twin of the same params bit for bit; the
    launches are the ones the drawn ops need: per chunk of ``STEPS_PER_LAUNCH`` steps (1, the
    default, and 4), a statistics launch for each step in which some sample reduces, a table
    launch where one draws Equalize, one launch (gpuaug_autoaug_apply for a chunk of one step,
    gpuaug_autoaug_fused for more)."""
    monkeypatch.setattr(A, "STEPS_PER_LAUNCH", per)
    Dev, log = auto_gpu
    rng = np.random.default_rng(8)
    x = rng.integers(0, 256, (12, 17, 19, 3), dtype=np.uint8)  # > 255 pixels: Equalize is not the identity
    x[1] = 77
    x[2] = x[2] // 3 + 60
    x[4] = (x[4].astype(np.float64) ** 2 / 255).astype(np.uint8)
    cases = [gpuaug.RandAugment(2, 9, seed=1), gpuaug.RandAugment(6, 20, seed=2),  # 6 steps: chunks of 4 and 2
             gpuaug.TrivialAugmentWide(seed=3), gpuaug.TrivialAugmentWide(interpolation="bilinear", seed=4),
             gpuaug.AutoAugment("imagenet", seed=5), gpuaug.AutoAugment("svhn", seed=6),
             gpuaug.AugMix(seed=7), gpuaug.AugMix(chain_depth=2, mixture_width=2, seed=8),
             gpuaug.RandAugment(0, 3, seed=9)]
    for pol in cases:
        for call in range(2):
            log.clear()
            y = pol(_to_dev(Dev, x))
            p = pol.last_params
            ref = pol._apply(x, p, None, None)  # NumPy twin (AugMix: its float32 mixing)
            assert isinstance(y, Dev), repr(pol)
            np.testing.assert_array_equal(y.view, ref, err_msg=repr(pol))
            if not isinstance(pol, gpuaug.AugMix):
                np.testing.assert_array_equal(ref, apply_ops(x, p, interpolation=pol.interpolation))
                codes = A._step_codes(p.ops)
                k = len(codes)
                fused = [m for m in log if m.startswith("gpuaug_autoaug_fused")]
                single = [m for m in log if m.startswith("gpuaug_autoaug_apply")]
                chunks = [min(per, k - a) for a in range(0, k, per)]
                assert len(fused) == sum(kk > 1 for kk in chunks), (repr(pol), log)
                assert len(single) == sum(kk == 1 for kk in chunks), (repr(pol), log)
                assert k or not log, (repr(pol), log)
                assert sum(m.startswith("gpuaug_autoaug_stats") for m in log) == sum(c > 0 for c in codes), log
                assert log.count("gpuaug_equalize_lut") == sum(c == 2 for c in codes), log
            np.testing.assert_array_equal(pol(_to_dev(Dev, x), params=p).view, ref)  # replay (remembered rows)
            q = AutoParams(p.ops.copy(), p.magnitudes.copy(), dict(p.extra))
            if q.ops.size:
                q.ops[0, 0], q.magnitudes[0, 0] = 13, 0.0
                q.ops[3, -1], q.magnitudes[3, -1] = 5, -17.5
            np.testing.assert_array_equal(pol(_to_dev(Dev, x), params=q).view, pol._apply(x, q, None, None))
            # every step reduces, with Equalize at every step (every chain position for AugMix)
            for j in range(q.ops.shape[1]):
                for r, (op, m) in enumerate(((13, 0.0), (12, 0.0), (8, 0.6))):
                    q.ops[(j + r) % len(x), j], q.magnitudes[(j + r) % len(x), j] = op, m
            log.clear()
            np.testing.assert_array_equal(pol(_to_dev(Dev, x), params=q).view, pol._apply(x, q, None, None))
            assert log.count("gpuaug_equalize_lut") == q.ops.shape[1], log
    # one HWC image, and out=
    ra = gpuaug.RandAugment(2, 9, seed=10)
    y1 = ra(_to_dev(Dev, x[3]))
    np.testing.assert_array_equal(y1.view, apply_ops(x[3], ra.last_params))
    out = Dev.alloc(x.shape, np.uint8, 0xAB)
    got = ra(_to_dev(Dev, x), out=out)
    assert got is out
    np.testing.assert_array_equal(out.view, apply_ops(x, ra.last_params))


def test_kernel_memo_follows_get_function(monkeypatch):
    """_kernel memoises per get_function in use: a swapped get_function (as the emulation tests
    do) is asked again, and the names are the kernels' template instances."""
    import gpuaug.kernels._cuda as kc

    asked = []
    monkeypatch.setattr(kc, "get_function", lambda f, name: asked.append((f, name)) or name)
    assert A._kernel(0, "fused", 3, 2) == "gpuaug_autoaug_fused<3, 2>"
    assert A._kernel(0, "fused", 3, 2) == "gpuaug_autoaug_fused<3, 2>"
    assert A._kernel(0, "stats", 1, 3) == "gpuaug_autoaug_stats_fused<1, 3>"
    assert A._kernel(0, "augmix", 3, 3) == "gpuaug_augmix_fused<3, 3>"
    assert A._kernel(0, "lut") == "gpuaug_equalize_lut"
    assert asked == [("auto_augment.cu", "gpuaug_autoaug_fused<3, 2>"),
                     ("auto_augment.cu", "gpuaug_autoaug_stats_fused<1, 3>"),
                     ("auto_augment.cu", "gpuaug_augmix_fused<3, 3>"), ("equalize.cu", "gpuaug_equalize_lut")]
    monkeypatch.setattr(kc, "get_function", lambda f, name: "other")
    assert A._kernel(0, "fused", 3, 2) == "other"


@gpu
def test_gpu_calls_equal_the_numpy_twin_gpu():
    """On a GPU: fresh calls (rows gathered from the tables, reductions read from the ops, the
    statistics views made by ndarray constructors), replays of last_params and edited params in
    which every step reduces with Equalize equal the NumPy twin bit for bit."""
    import cupy

    rng = np.random.default_rng(11)
    for shape in ((16, 23, 29, 3), (9, 31, 17, 1)):
        x = rng.integers(0, 256, shape, dtype=np.uint8)
        x[0] = x[0] // 3 + 60
        xd = cupy.asarray(x)
        for pol in (gpuaug.RandAugment(2, 9, seed=1), gpuaug.RandAugment(6, 20, seed=2),
                    gpuaug.TrivialAugmentWide(seed=3), gpuaug.AutoAugment("imagenet", seed=4), gpuaug.AugMix(seed=5),
                    gpuaug.AugMix(chain_depth=2, mixture_width=2, seed=6)):
            for _ in range(2):
                y = pol(xd)
                p = pol.last_params
                np.testing.assert_array_equal(cupy.asnumpy(y), pol._apply(x, p, None, None), err_msg=repr(pol))
                np.testing.assert_array_equal(cupy.asnumpy(pol(xd, params=p)), cupy.asnumpy(y))
            q = AutoParams(p.ops.copy(), p.magnitudes.copy(), dict(p.extra))
            for j in range(q.ops.shape[1]):
                for r, (op, m) in enumerate(((13, 0.0), (12, 0.0), (8, 0.6))):
                    q.ops[(j + r) % len(x), j], q.magnitudes[(j + r) % len(x), j] = op, m
            np.testing.assert_array_equal(cupy.asnumpy(pol(xd, params=q)), pol._apply(x, q, None, None),
                                          err_msg=repr(pol))
