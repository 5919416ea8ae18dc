"""The host path: pinned uploads that never wait on a busy stream, no pageable uploads, device
parameters against host parameters for every op, no per-sample Python loops.

CPU tests drive the staging arena with a stand-in CuPy (streams, events and pinned memory
are faked; the logic under test is which chunk an upload lands in and when the host waits);
GPU tests (marked ``gpu``) run every registry op with its parameters on the host and on the
device and check that no call copies from pageable memory.
"""
import sys
import types

import numpy as np
import pytest

import gpuaug
from tests.test_determinism import example

OPS = sorted(gpuaug.registry)


# -- the staging arena, with a stand-in CuPy -----------------------------------------------

class _Event:
    def __init__(self, block=False, disable_timing=True):
        self.done = False
        self.synced = 0

    def record(self, stream=None):  # (re-)recorded: pending until the stream reaches it
        self.stream = stream
        self.done = False

    def synchronize(self):
        self.synced += 1
        self.done = True


class _Pinned:
    _next = 1 << 20

    def __init__(self, size):
        self.buf = bytearray(size)
        self.ptr = _Pinned._next
        _Pinned._next += size + 4096

    def __buffer__(self, flags):  # np.frombuffer
        return memoryview(self.buf)


class _Ptr:
    def __init__(self, copies):
        self.copies = copies

    def copy_from_host_async(self, ptr, n, s):
        self.copies.append((ptr, n))

    def __add__(self, o):
        return self


class _Dev:
    def __init__(self, n):
        self.copies = []
        self.data = _Ptr(self.copies)

    def __getitem__(self, sl):
        return self

    def view(self, dtype):
        return self

    def reshape(self, shape):
        return self


def _fake_cupy(stream_ptr):
    cp = types.ModuleType("cupy")
    events = []

    def event(**kw):
        e = _Event()
        events.append(e)
        return e
    cp.cuda = types.SimpleNamespace(Event=event, alloc_pinned_memory=_Pinned,
                                    get_current_stream=lambda: types.SimpleNamespace(ptr=stream_ptr[0]))
    cp.empty = lambda n, dtype: _Dev(n)
    cp.ndarray = lambda shape, dtype, memptr=None: (shape, dtype)
    cp.events = events
    return cp


@pytest.fixture()
def staging(monkeypatch):
    if sys.version_info < (3, 12):  # bytearray-backed fake pinned memory via the buffer protocol
        monkeypatch.setattr(_Pinned, "__array_interface__", property(
            lambda self: {"shape": (len(self.buf),), "typestr": "|u1", "version": 3,
                          "data": np.frombuffer(self.buf, np.uint8).__array_interface__["data"]}),
            raising=False)
    stream = [7]
    cp = _fake_cupy(stream)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    from gpuaug.kernels import _cuda
    monkeypatch.setattr(np, "frombuffer", _frombuffer(np.frombuffer))
    st = _cuda._Staging()
    st.CHUNK = 4096
    st.MAX_BYTES = 4 * 4096
    return st, cp, stream


def _frombuffer(orig):
    def fb(buf, dtype=float, count=-1, offset=0):
        if isinstance(buf, _Pinned):
            buf = buf.buf
        return orig(buf, dtype, count, offset)
    return fb


def test_staging_packs_uploads_into_one_chunk(staging):
    st, cp, _ = staging
    for i in range(10):
        st.upload([np.full((4, 6), i, np.int64)])
    assert st.stats == {"uploads": 10, "bytes": 10 * 256, "chunks": 1, "waits": 0}


def test_staging_grows_instead_of_waiting_on_a_busy_stream(staging):
    st, cp, _ = staging
    for _ in range(3 * 16):  # 16 uploads of 256 bytes fill a 4096-byte chunk
        st.upload([np.zeros(32, np.float64)])
    assert st.stats["chunks"] == 3 and st.stats["waits"] == 0
    assert not any(e.synced for e in cp.events)  # no event was waited on


def test_staging_reuses_a_chunk_once_its_copies_are_done(staging):
    st, cp, _ = staging
    for _ in range(16):
        st.upload([np.zeros(32, np.float64)])
    for e in cp.events:
        e.done = True
    for _ in range(16):  # the next upload retires the full chunk and takes it again
        st.upload([np.zeros(32, np.float64)])
    assert st.stats["chunks"] == 1 and st.stats["waits"] == 0
    st.upload([np.zeros(32, np.float64)])  # now busy again: a second chunk, still no wait
    assert st.stats["chunks"] == 2 and st.stats["waits"] == 0


def test_staging_waits_only_past_its_memory_bound(staging):
    st, cp, _ = staging
    for _ in range(4 * 16 + 1):  # MAX_BYTES is 4 chunks
        st.upload([np.zeros(32, np.float64)])
    assert st.stats["chunks"] == 4 and st.stats["waits"] == 1


def test_staging_chunk_read_by_two_streams_waits_for_both(staging):
    st, cp, stream = staging
    st.upload([np.zeros(32, np.float64)])
    stream[0] = 9
    st.upload([np.zeros(32, np.float64)])
    chunk = st._cur
    assert sorted(p for p, _ in chunk["events"]) == [7, 9]
    chunk["events"][1][1].done = True  # stream 9 done, stream 7 not: the chunk is still busy
    assert not st._done(chunk)


def test_staging_bytes_land_where_the_copy_reads(staging):
    st, cp, _ = staging
    a = np.arange(12, dtype=np.int64)
    b = np.arange(5, dtype=np.float32) + 0.5
    st.upload([a, b])
    got = st._cur["host"][:512]
    assert got[:a.nbytes].tobytes() == a.tobytes()
    assert got[256:256 + b.nbytes].tobytes() == b.tobytes()


# -- no per-sample Python loops for uniform batches -----------------------------------------

def test_uniform_batch_sizes_and_shapes_without_loops():
    from gpuaug._batch import Same, as_batch, max_over, same_size
    b = as_batch(np.zeros((300, 5, 7, 3), np.uint8))
    hs, ws = b.sizes()
    assert hs.tolist() == [5] * 300 and ws.tolist() == [7] * 300
    assert isinstance(b.uniform((2, 3)), Same) and same_size(b.uniform((2, 3))) == (2, 3)
    assert max_over(b.shapes, lambda h, w: h * w) == 35
    assert same_size([(2, 3)] * 4) == (2, 3) and same_size([(2, 3), (2, 4)]) is None
    v = as_batch([np.zeros((4, 6, 3), np.uint8), np.zeros((5, 2, 3), np.uint8)])
    assert [a.tolist() for a in v.sizes()] == [[4, 5], [6, 2]]
    assert max_over(v.shapes, lambda h, w: h * w) == 24


def test_descriptor_table_cache_tells_dtypes_apart():
    """Two views at one address with the same shape and byte strides but different element
    sizes (a uint8 view taking every other byte, a contiguous float16 array) have different
    element strides: the cached tables must differ (they once collided)."""
    from gpuaug._batch import as_batch, descriptor_table
    buf = np.zeros(5 * 7 * 3 * 2 * 2, np.uint8)
    u8 = buf.reshape(5, 7, 3, 4)[..., ::2]                 # (5, 7, 3, 2) uint8, byte strides (84, 12, 4, 2)
    f16 = buf.view(np.float16)[:5 * 7 * 3 * 2].reshape(5, 7, 3, 2)  # byte strides (84, 12, 4, 2)
    assert u8.shape == f16.shape and u8.strides == f16.strides
    assert u8.__array_interface__["data"][0] == f16.__array_interface__["data"][0]
    t8 = descriptor_table(as_batch(u8, channels=(1, 2, 3, 4)))
    t16 = descriptor_table(as_batch(f16, channels=(1, 2, 3, 4)))
    assert t8[0, 3:].tolist() == [12, 4, 2] and t16[0, 3:].tolist() == [6, 2, 1]


def test_cpu_pool_threads_are_not_named_like_scheduler_threads():
    from gpuaug.kernels.numba import fused
    fused._pool().submit(lambda: None).result()
    import threading
    assert not [t.name for t in threading.enumerate() if t.name.startswith("gpuaug")]


def _per_sample_rows(weights):
    """The parameter rows as they were built before: one Python step per sample."""
    kmax = max(len(w) for w in weights)
    p = np.zeros((len(weights), 1 + kmax))
    for i, w in enumerate(weights):
        p[i, 0] = len(w)
        p[i, 1:1 + len(w)] = w
    return p


def test_separable_rows_bit_identical_to_per_sample_taps(monkeypatch):
    from gpuaug.ops.gaussian_blur import gaussian_kernel_size, gaussian_weight_rows, gaussian_weights
    from gpuaug.ops.box_blur import box_blur
    rng = np.random.default_rng(5)
    for trial in range(60):
        n = int(rng.integers(1, 80))
        sig = rng.uniform(0.1, 12, n) if trial % 3 else np.full(n, rng.uniform(0.1, 12))
        k = gaussian_kernel_size(sig, np.uint8) if trial % 2 else rng.choice([1, 3, 5, 11, 31, 63, 129, 255], n)
        want = _per_sample_rows([gaussian_weights(int(ki), float(si)) for ki, si in zip(k, sig)])
        got = gaussian_weight_rows(k, sig)
        assert got.shape == want.shape and np.array_equal(got, want), trial
    # box_blur's rows, as its launcher receives them
    import gpuaug.ops.box_blur as B
    seen = []
    k = rng.choice([1, 3, 5, 7, 31], 40)
    monkeypatch.setattr(B, "run_custom", lambda b, params, **kw: seen.append(params))
    box_blur(np.zeros((40, 4, 4, 3), np.uint8), k)
    want = _per_sample_rows([np.full(int(ki), 1.0 / int(ki)) for ki in k])
    assert np.array_equal(seen[0], want)


# -- on the GPU -------------------------------------------------------------------------------

def _device_kwargs(name, kw):
    from tests.test_bad_input import host_only
    import cupy as cp
    keep = host_only(name)
    per = {p.name for p in gpuaug.registry[name].params if p.per_sample}
    return {k: cp.asarray(v) if k in per and k not in keep and isinstance(v, np.ndarray) else v
            for k, v in kw.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("name", OPS)
def test_device_parameters_match_host_parameters(name):
    """Every op, its per-sample parameters as CUDA arrays against the same values on the host."""
    import cupy as cp
    rng = np.random.default_rng(3)
    n, h, w = 37, 29, 45
    x = cp.asarray(rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8))
    kw = example(name, rng, n, h, w)
    dkw = _device_kwargs(name, kw)
    if all(dkw[k] is kw[k] for k in kw):
        pytest.skip(f"{name} has no per-sample parameter that may live on the device")
    fn = gpuaug.registry[name].func
    want = cp.asnumpy(fn(x, **kw)).astype(np.float64)
    got = cp.asnumpy(fn(x, **dkw)).astype(np.float64)
    assert got.shape == want.shape
    # Derived values (cos/sin, inverses) come from CUDA's maths for device parameters and
    # NumPy's for host ones: an ulp can move a pixel across a rounding boundary.
    bad = np.abs(got - want) > 1
    assert bad.mean() < 1e-3, f"{name}: {bad.sum()} of {bad.size} elements differ by more than 1"


def _pageable_guard(monkeypatch, cp):
    """Make every CuPy host->device conversion of a NumPy array raise."""
    calls = []
    for fname in ("asarray", "array", "ascontiguousarray"):
        orig = getattr(cp, fname)

        def guard(a, *args, _orig=orig, _f=fname, **kw):
            if isinstance(a, np.ndarray) and a.ndim > 0:
                calls.append((_f, a.shape))
            return _orig(a, *args, **kw)
        monkeypatch.setattr(cp, fname, guard)
    return calls


@pytest.mark.gpu
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("where", ["host", "device"])
def test_no_op_uploads_from_pageable_memory(name, where, monkeypatch):
    """Host parameters and descriptor tables reach the device through the pinned staging
    area only (counted), never through cupy.asarray of a NumPy array (a pageable copy)."""
    import cupy as cp
    from gpuaug.kernels._cuda import staging
    rng = np.random.default_rng(4)
    n, h, w = 16, 24, 32
    x = cp.asarray(rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8))
    kw = example(name, rng, n, h, w)
    if where == "device":
        kw = _device_kwargs(name, kw)
    fn = gpuaug.registry[name].func
    fn(x, **kw)  # compile outside the guard
    before = dict(staging().stats)
    calls = _pageable_guard(monkeypatch, cp)
    fn(x, **kw)
    assert calls == [], f"{name}: pageable uploads {calls}"
    assert staging().stats["uploads"] >= before["uploads"]


@pytest.mark.gpu
def test_uploads_do_not_wait_behind_a_busy_stream():
    """200 op calls queued behind a 0.5 s spin kernel: the host never waits for the device
    (the spin is still running after the calls, and the staging area counted no wait)."""
    import cupy as cp
    from gpuaug.kernels._cuda import staging
    spin = cp.RawKernel(r'''extern "C" __global__ void spin(unsigned long long ns) {
        unsigned long long t0 = clock64(); while (clock64() - t0 < ns) {} }''', "spin")
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.integers(0, 256, (64, 64, 64, 3), dtype=np.uint8))
    mean, std = (120.0, 110.0, 100.0), (50.0, 60.0, 70.0)
    for _ in range(3):  # seen, made and checked: the plans' kernels (by-value builds too) compiled
        gpuaug.normalize(x, mean, std)
        gpuaug.flip(x, horizontal=rng.random(64) < 0.5)
        cp.cuda.Device().synchronize()
    waits = staging().stats["waits"]
    spin((1,), (1,), (np.uint64(1_000_000_000),))
    done = cp.cuda.Event()
    done.record()
    for _ in range(100):
        gpuaug.normalize(x, mean, std)
        gpuaug.flip(x, horizontal=rng.random(64) < 0.5)
    assert not done.done, "the host waited for the spin kernel"
    assert staging().stats["waits"] == waits
    cp.cuda.Device().synchronize()


@pytest.mark.gpu
def test_scalar_calls_in_a_loop_upload_nothing():
    """Same shapes, same scalars: descriptor tables and parameters come from the constant
    cache after the first call (no staged upload at all), with the same bits out."""
    import cupy as cp
    from gpuaug.kernels._cuda import staging
    rng = np.random.default_rng(5)
    x = cp.asarray(rng.integers(0, 256, (8, 32, 48, 3), dtype=np.uint8))
    calls = [lambda: gpuaug.normalize(x, (120.0, 110.0, 100.0), (50.0, 60.0, 70.0)),
             lambda: gpuaug.center_crop(x, (16, 16)),
             lambda: gpuaug.gaussian_blur(x, sigma=1.5),
             lambda: gpuaug.color_jitter(x, brightness=1.1, contrast=0.9, saturation=1.2),
             lambda: gpuaug.rotate(x, 10.0),
             lambda: gpuaug.flip(x)]
    for call in calls:
        want = call()
        keep = [call() for _ in range(2)]  # outputs kept alive: new addresses, new tables once
        del keep
        before = staging().stats["uploads"]
        for _ in range(5):
            got = call()
            del got
        got = call()
        assert staging().stats["uploads"] == before
        cp.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_constant_cache_on_a_second_stream_waits_for_the_first_upload():
    """A constant made on a stream held up by a spin kernel, then used at once on a second
    stream: the second stream waits for it on the device, and the result is right."""
    import cupy as cp
    from gpuaug.kernels._cuda import constants
    spin = cp.RawKernel(r'''extern "C" __global__ void spin(unsigned long long ns) {
        unsigned long long t0 = clock64(); while (clock64() - t0 < ns) {} }''', "spin")
    rng = np.random.default_rng(6)
    x = cp.asarray(rng.integers(0, 256, (4, 16, 16, 3), dtype=np.uint8))
    gains = float(rng.uniform(0.5, 1.5))  # a scalar no earlier test used: a new constant
    x5 = cp.concatenate([x, x[:1]])  # 5 samples: another parameter matrix, made now and waited for
    want = cp.asnumpy(gpuaug.registry["brightness"].func(x5, gains)[:4])
    cp.cuda.Device().synchronize()
    a, b = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    brightness = gpuaug.registry["brightness"].func  # the op itself, without launch plans
    with a:
        spin((1,), (1,), (np.uint64(200_000_000),))
        brightness(x, gains)  # makes the parameter matrix behind the spin
    keys = set(constants()._d)
    with b:
        got = brightness(x, gains)
    new = set(constants()._d) - keys
    assert all(k[0] == "table" for k in new), new  # the parameters came from the cache (the
    # output, allocated on stream b, may have a new address and so a new table)
    b.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(got), want)


def test_staging_re_records_completed_events_instead_of_creating_them(staging):
    st, cp, _ = staging
    for _ in range(10):
        for _ in range(16):  # one chunk's worth, then everything completes
            st.upload([np.zeros(32, np.float64)])
        for e in cp.events:
            e.done = True
    assert st.stats["chunks"] == 1
    assert len(cp.events) <= 17  # one per upload in flight, not one per upload made (160)


# -- the kernel launcher: arguments packed once per signature ---------------------------------

class _FakeArray:
    def __init__(self, ptr):
        self.data = types.SimpleNamespace(ptr=ptr)


def _launcher(monkeypatch):
    import ctypes

    from gpuaug.kernels import _cuda

    launches = []

    def launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        ptrs = (ctypes.c_uint64 * 8).from_address(params)
        launches.append(dict(f=f, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem, stream=stream,
                             slots=[ptrs[i] for i in range(8)]))

    monkeypatch.setattr(_cuda, "_LAUNCH", launch)
    monkeypatch.setattr(_cuda, "_ARRAY", _FakeArray)
    monkeypatch.setattr(_cuda, "_STREAM", lambda: types.SimpleNamespace(ptr=77))
    monkeypatch.setattr(_cuda, "_SPECS", {})
    return _cuda.Kernel(types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=1234))), launches


def test_kernel_launch_packs_each_argument_into_its_slot(monkeypatch):
    import ctypes

    k, launches = _launcher(monkeypatch)
    args = (_FakeArray(0xABC0), None, np.int32(-7), np.uint32(2 ** 32 - 1), np.float32(1.5),
            np.int64(-2 ** 40), 3, 0.25)
    k((5, 6), (32, 8), args, shared_mem=4096)
    (got,) = launches
    assert got["f"] == 1234 and got["grid"] == (5, 6, 1) and got["block"] == (32, 8, 1)
    assert got["smem"] == 4096 and got["stream"] == 77

    def read(i, ctype):
        return ctype.from_address(got["slots"][i]).value
    assert read(0, ctypes.c_uint64) == 0xABC0 and read(1, ctypes.c_uint64) == 0
    assert read(2, ctypes.c_int32) == -7 and read(3, ctypes.c_uint32) == 2 ** 32 - 1
    assert read(4, ctypes.c_float) == 1.5 and read(5, ctypes.c_int64) == -2 ** 40
    assert read(6, ctypes.c_int64) == 3 and read(7, ctypes.c_double) == 0.25
    assert all(s % 8 == 0 for s in got["slots"])  # every slot aligned for any scalar type


def test_kernel_launch_reuses_the_signature_and_sees_new_values(monkeypatch):
    import ctypes

    from gpuaug.kernels import _cuda

    k, launches = _launcher(monkeypatch)
    for i in range(3):
        k((1,), (256,), (_FakeArray(4096 * (i + 1)), np.int32(i)))
    assert len(_cuda._SPECS) == 1
    assert [ctypes.c_uint64.from_address(g["slots"][0]).value for g in launches[-1:]] == [3 * 4096]
    assert ctypes.c_int32.from_address(launches[-1]["slots"][1]).value == 2


def test_kernel_launch_hands_unknown_argument_types_to_cupy(monkeypatch):
    k, launches = _launcher(monkeypatch)
    seen = []

    class Raw:
        kernel = types.SimpleNamespace(ptr=1)

        def __call__(self, grid, block, args, shared_mem=0, **kw):
            seen.append((grid, block, args, shared_mem))
    object.__setattr__(k, "raw", Raw())
    odd = np.complex64(1j)
    k((1,), (1,), (odd,), shared_mem=8)
    assert seen == [((1,), (1,), (odd,), 8)] and not launches


# -- the constant cache: tables and scalar parameters uploaded once ---------------------------

def test_param_item_keys_only_matrices_whose_rows_are_bit_identical():
    from gpuaug._params import param_item

    key, p = param_item(np.tile([1.5, -2.0], (8, 1)), 8)
    assert key is not None and p.dtype == np.float32 and p.shape == (8, 2) and p.flags.c_contiguous
    assert param_item(np.arange(16.0).reshape(8, 2), 8)[0] is None  # per-sample values travel each call
    zero, negzero = param_item(np.zeros((4, 1)), 4)[0], param_item(np.full((4, 1), -0.0), 4)[0]
    assert zero != negzero  # -0.0 is not +0.0 to a kernel (1 / x): bits, not ==
    mixed = np.zeros((4, 1))
    mixed[2] = -0.0
    assert param_item(mixed, 4)[0] is None
    assert param_item(np.full((4, 1), np.nan), 4)[0] is not None  # one NaN pattern: still one matrix
    assert param_item(np.ones((4, 2)), 4)[0] != param_item(np.ones((2, 4)), 2)[0]  # shape is in the key


class _CStream:
    def __init__(self, ptr):
        self.ptr = ptr
        self.waited = []

    def wait_event(self, ev):
        self.waited.append(ev)


@pytest.fixture()
def constants(monkeypatch):
    from gpuaug.kernels import _cuda

    cur = [_CStream(7)]
    syncs = []
    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(
        Event=lambda **kw: _Event(), get_current_stream=lambda: cur[0],
        Device=lambda: types.SimpleNamespace(synchronize=lambda: syncs.append(1)))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    uploads = []

    def upload(*arrays):
        uploads.append(arrays)
        return [("dev", a.tobytes()) for a in arrays]
    monkeypatch.setattr(_cuda, "upload", upload)
    monkeypatch.setattr(_cuda, "staging", lambda dev=None: types.SimpleNamespace(upload=lambda a: upload(*a)))
    return _cuda._Constants(), cur, uploads, syncs


def test_constants_upload_a_key_once(constants):
    cache, cur, uploads, _ = constants
    a = np.arange(6, dtype=np.int64)
    first = cache.get(("t", 1), a)
    assert cache.get(("t", 1), a) is first and len(uploads) == 1
    assert cache.get(("t", 2), a + 1) == ("dev", (a + 1).tobytes()) and len(uploads) == 2
    assert cache.stats == {"hits": 1, "made": 2, "drops": 0}


def test_constants_another_stream_waits_on_the_device_until_the_upload_is_done(constants):
    cache, cur, uploads, _ = constants
    cache.get("k", np.zeros(3))
    ev = cache._d["k"][1]
    cur[0] = other = _CStream(9)
    cache.get("k", np.zeros(3))
    assert other.waited == [ev]  # a device-side wait, not a host one
    ev.done = True
    cache.get("k", np.zeros(3))
    assert other.waited == [ev] and cache._d["k"][1] is None  # done: no more waits, ever
    assert len(uploads) == 1


def test_constants_same_stream_never_waits(constants):
    cache, cur, _, _ = constants
    for _ in range(3):
        cache.get("k", np.zeros(3))
    assert cur[0].waited == []


def test_constants_drop_everything_after_a_sync_past_the_limit(constants):
    cache, _, uploads, syncs = constants
    cache.LIMIT = 4
    for i in range(4):
        cache.get(i, np.full(2, i))
    assert not syncs
    cache.get(99, np.zeros(2))
    assert syncs == [1] and set(cache._d) == {99} and cache.stats["drops"] == 1


def test_stage_keyed_items_from_the_cache_the_rest_in_one_upload(constants, monkeypatch):
    from gpuaug.kernels import _cuda

    cache, _, uploads, _ = constants
    monkeypatch.setattr(_cuda, "constants", lambda dev=None: cache)
    t, p, q = np.arange(4), np.ones(2), np.zeros(3)
    out = _cuda.stage(("tab", t), (None, p), (None, q))
    assert out == [("dev", t.tobytes()), ("dev", p.tobytes()), ("dev", q.tobytes())]
    assert [len(u) for u in uploads] == [2, 1]  # the fresh pair together, then the keyed one
    _cuda.stage(("tab", t), (None, p))
    assert [len(u) for u in uploads] == [2, 1, 1]  # the table came from the cache


def test_table_item_keys_dense_batches_by_address_shape_strides_and_itemsize():
    from gpuaug._batch import _table_key, as_batch, table_item

    x = np.zeros((2, 4, 5, 3), np.uint8)
    key, t = table_item(as_batch(x))
    assert key[0] == "table" and key[2:] == (x.shape, x.strides, 1) and t.shape == (2, 6)
    assert table_item(as_batch(x.view(np.uint8)[:, :, ::2]))[0] != key
    assert _table_key(as_batch([np.zeros((3, 3, 1), np.uint8), np.zeros((4, 2, 1), np.uint8)])) is None


@pytest.mark.parametrize("shape,layout", [((3, 5, 7, 3), "NHWC"), ((3, 3, 5, 7), "NCHW"),
                                          ((5, 7, 4), "NHWC"), ((1, 5, 7), "NCHW")])
def test_as_batch_seen_arrays_parse_as_the_first_time(shape, layout):
    """The second as_batch of a same-shaped array takes the memo: every field as parsed."""
    from gpuaug._batch import _SEEN, _parse, as_batch

    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    _SEEN.clear()
    first = as_batch(x, layout)
    again = as_batch(x.copy(), layout)
    ref = _parse(x, layout, "x", ("uint8", "float16", "float32"), (1, 3, 4))
    for b in (first, again):
        assert (b.device, b.varshape, b.single, b.layout, b.dtype, b.channels) == \
            (ref.device, ref.varshape, ref.single, ref.layout, ref.dtype, ref.channels)
        assert list(b.shapes) == list(ref.shapes) and b.nhwc.shape == ref.nhwc.shape
    np.testing.assert_array_equal(again.nhwc, ref.nhwc)
    assert len(_SEEN) == 1


def test_as_batch_memo_does_not_let_bad_arrays_through():
    from gpuaug._batch import as_batch

    as_batch(np.zeros((2, 4, 4, 3), np.uint8))
    with pytest.raises(ValueError, match="channels"):
        as_batch(np.zeros((2, 4, 4, 3), np.uint8), channels=(1,))  # same shape, other rule
    with pytest.raises(TypeError, match="dtype"):
        as_batch(np.zeros((2, 4, 4, 3), np.int32))
    with pytest.raises(ValueError, match="layout"):
        as_batch(np.zeros((2, 4, 4, 3), np.uint8), "NWHC")


@pytest.mark.parametrize("shape,layout,kw", [
    ((3, 5, 7, 3), "NHWC", {}), ((3, 3, 5, 7), "NCHW", {}), ((5, 7, 4), "NHWC", {}),
    ((3, 5, 7, 3), "NHWC", {"dtype": "float32", "layout": "NCHW"}),
    ((3, 5, 7, 3), "NHWC", {"channels": 1}), ((1, 5, 7), "NCHW", {"dtype": np.float16, "layout": "NHWC"})])
def test_alloc_memo_gives_the_output_of_the_first_call(shape, layout, kw):
    from gpuaug._batch import _ALLOCS, as_batch

    b = as_batch(np.zeros(shape, np.uint8), layout)
    _ALLOCS.clear()
    outs = [b.alloc(None, b.uniform((4, 6)), **kw) for _ in range(2)]
    assert len(_ALLOCS) == 1
    (r0, d0), (r1, d1) = outs
    assert r0.shape == r1.shape and r0.dtype == r1.dtype and r0 is not r1
    assert (d0.layout, d0.dtype, d0.channels, d0.nhwc.shape, list(d0.shapes)) == \
        (d1.layout, d1.dtype, d1.channels, d1.nhwc.shape, list(d1.shapes))
    assert d1.arrays[0] is r1 and np.shares_memory(d1.nhwc, r1)


def test_per_sample_tuples_are_memoised_read_only_and_still_checked():
    from gpuaug._params import per_sample

    a = per_sample((0.5, 0.25, 0.125), 4, "mean", shape=(3,))
    b = per_sample((0.5, 0.25, 0.125), 4, "mean", shape=(3,))
    assert a is b and not a.flags.writeable and a.shape == (4, 3)
    np.testing.assert_array_equal(a, np.tile([0.5, 0.25, 0.125], (4, 1)))
    assert per_sample((0.5, 0.25, 0.125), 5, "mean", shape=(3,)).shape == (5, 3)  # n is in the key
    with pytest.raises(ValueError, match="std"):  # checks still run for each new tuple
        per_sample((1.0, 0.0, 1.0), 4, "std", shape=(3,), low=0, low_open=True)
    with pytest.raises(ValueError, match="std"):
        per_sample((1.0, 0.0, 1.0), 4, "std", shape=(3,), low=0, low_open=True)
    with pytest.raises(ValueError, match="finite"):
        per_sample((1.0, float("nan"), 1.0), 4, "mean", shape=(3,))


def test_parallel_cpu_kernels_run_small_inputs_serially():
    """Below SmallSerial.SMALL elements a prange kernel runs its serial build (same results);
    larger inputs take the parallel one. The two builds have their own cache names."""
    import numba

    from gpuaug.kernels.numba._dual import SmallSerial

    def twice(a, b):
        for i in numba.prange(a.size):
            b[i] = 2 * a[i]
    twice.__qualname__ = "twice[cpu-par-test]"
    k = SmallSerial(numba.njit(parallel=True)(twice))
    small, big = np.arange(10.0), np.arange(float(SmallSerial.SMALL))
    out_s, out_b = np.empty_like(small), np.empty_like(big)
    k(small, out_s)
    assert k._serial is not None and not k.dispatcher.signatures  # the parallel build untouched
    k(big, out_b)
    assert k.dispatcher.signatures  # now compiled, for the big input
    np.testing.assert_array_equal(out_s, 2 * small)
    np.testing.assert_array_equal(out_b, 2 * big)
    assert k._serial.py_func.__qualname__ == "twice[cpu-kernel-test]"
    assert k.__name__ == "twice"  # the dispatcher's attributes


def test_constants_bounded_in_bytes_too(constants):
    cache, _, _, syncs = constants
    cache.LIMIT_BYTES = 3 * 80
    for i in range(3):
        cache.get(i, np.zeros(10))  # 80 bytes each
    assert not syncs and cache._bytes == 240
    cache.get(3, np.zeros(10))
    assert syncs == [1] and set(cache._d) == {3} and cache._bytes == 80
    cache.clear()
    assert not cache._d and cache._bytes == 0 and syncs == [1, 1]


def test_staging_one_array_comes_back_in_its_own_shape(staging):
    st, cp, _ = staging
    shapes = []
    cp.empty = lambda shape, dtype: shapes.append((shape, np.dtype(dtype))) or _Dev(shape)
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    (got,) = st.upload([a])
    assert shapes == [((3, 2), np.dtype(np.float32))]  # one device array, no byte buffer + view
    assert got.copies == [(st._cur["mem"].ptr, a.nbytes)]
    assert st._cur["host"][:a.nbytes].tobytes() == a.tobytes()


def test_per_sample_range_checks_with_and_without_nan():
    """per_sample's low/high checks (one min and one max when no NaN can be there, element-wise
    otherwise) refuse exactly what the element-wise rule refuses."""
    from gpuaug._params import per_sample

    nan = float("nan")
    with pytest.raises(ValueError, match=">= 0"):
        per_sample(np.array([nan, -5.0]), 2, "v", finite=False, low=0)  # NaN does not hide -5
    np.testing.assert_array_equal(per_sample(np.array([nan, 5.0]), 2, "v", finite=False, low=0), [nan, 5.0])
    with pytest.raises(ValueError, match="finite"):
        per_sample(np.array([nan, 5.0]), 2, "v", low=0)
    with pytest.raises(ValueError, match="> 0"):
        per_sample(np.array([1.0, -0.0]), 2, "v", low=0, low_open=True)  # -0.0 <= 0
    with pytest.raises(ValueError, match="<= 1"):
        per_sample(np.array([[0.5, 1.0], [0.0, 1.0 + 1e-12]]), 2, "v", shape=(2,), low=0, high=1)
    with pytest.raises(ValueError, match=">= 1"):
        per_sample(np.array([3, 0]), 2, "k", integer=True, low=1)
    got = per_sample(np.array([0.0, 1.0]), 2, "v", low=0, high=1)
    assert got.dtype == np.float64 and got.tolist() == [0.0, 1.0]
    assert per_sample(np.zeros((0,)), 0, "v", low=1).shape == (0,)


def test_as_stored_equals_clip_of_floor_bit_for_bit():
    """as_stored's uint8 rule on the host (add, floor, maximum, minimum in place) is
    np.clip(np.floor(v + 0.5), 0, 255) bit for bit: halves, the bounds, signed zeros, NaN, infinities."""
    from gpuaug.ops._launch import as_stored
    rng = np.random.default_rng(8)
    v = np.concatenate([rng.uniform(-300, 600, 2000), [-0.5, -0.49999, 0.5, 254.5, 255.49, 255.5, -0.0, 0.0,
                                                       np.nan, np.inf, -np.inf, 2.4999999999, -1e300]])
    want = np.clip(np.floor(v + 0.5), 0, 255)
    got = as_stored(v, np.uint8)
    assert got is not v and np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    f16 = as_stored(v[:50], np.float16)
    assert np.array_equal(f16, v[:50].astype(np.float16).astype(np.float64), equal_nan=True)


def test_grid_mask_host_rows_equal_the_general_formula(monkeypatch):
    """grid_mask's host rows (written in place, rounded to float32 together) are the general
    path's columns (each rounded on its own) bit for bit, scalars and per-sample values alike."""
    import gpuaug.ops.grid_mask as G
    seen = []
    monkeypatch.setattr(G, "run", lambda b, kernels, params, **kw: seen.append(params))
    rng = np.random.default_rng(9)
    n = 23
    f32 = (lambda v: np.asarray(v, np.float64).astype(np.float32).astype(np.float64))
    x = np.zeros((n, 4, 4, 3), np.uint8)
    for tile, ratio, angle, shift in ((rng.uniform(0.5, 40, n), rng.uniform(0, 1, n), rng.uniform(-400, 400, n),
                                       rng.uniform(-9, 9, (n, 2))), (7.3, 0.5, 33.3, (1.25, -2.0)), (1e-30, 1.0, 0.0, (0, 0)),
                                      (rng.integers(1, 40, n), rng.uniform(0, 1, n).astype(np.float32),
                                       rng.integers(-400, 400, n).astype(np.int16), rng.integers(-9, 9, (n, 2)))):
        G.grid_mask(x, tile, ratio, angle, shift)
        t, r, a = (np.broadcast_to(np.asarray(v, np.float64), (n,)) for v in (tile, ratio, angle))
        s = np.broadcast_to(np.asarray(shift, np.float64), (n, 2))
        rad = a * (np.pi / 180.0)
        t32 = f32(t)
        want = np.column_stack([f32(np.cos(rad)), f32(np.sin(rad)), f32(s), t32, f32(r * t32)])
        got = seen.pop()
        assert got.dtype == np.float64 and np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
    with pytest.raises(ValueError, match="tile"):
        G.grid_mask(x, np.full(n, 1e-50), 0.5)


def test_salt_and_pepper_host_rows_equal_the_general_columns(monkeypatch):
    """salt_and_pepper's host rows (written in place) are the general path's columns bit for
    bit: the two thresholds split into 16-bit halves, the seed's chunks, the salt value, the
    sample index."""
    import gpuaug.ops.salt_and_pepper as S
    from gpuaug._params import column_stack
    from gpuaug.ops._launch import seed_columns
    seen = []
    monkeypatch.setattr(S, "run_custom", lambda b, params, **kw: seen.append(params))
    rng = np.random.default_rng(10)
    n = 19
    edges = np.array([0.0, 1.0, 0.5, 1 - 2 ** -53, 2 ** -32, 2 ** -33, 3 * 2 ** -33, 0.1, 1 / 3, 65535 / 2 ** 32])
    for dtype, prob, sv, seed in ((np.uint8, rng.uniform(0, 1, n), rng.uniform(0, 1, n), 2 ** 63 - 5),
                                  (np.float32, 0.25, 1.0, 0), (np.uint8, 1.0, rng.uniform(0, 1, n), 12345),
                                  (np.uint8, np.resize(edges, n), np.resize(edges[::-1], n), 2 ** 64 - 1),
                                  (np.uint8, np.resize(edges, n).astype(np.float32), np.resize([1, 0, 1], n).astype(np.uint8),
                                   3)):
        S.salt_and_pepper(np.zeros((n, 4, 4, 3), dtype), prob, sv, seed)
        pr, s_ = (np.broadcast_to(np.asarray(v, np.float64), (n,)) for v in (prob, sv))
        tn, ts = np.floor(pr * 2.0 ** 32), np.floor(pr * s_ * 2.0 ** 32)
        want = column_stack([*S._split(tn, np), *S._split(ts, np), seed_columns(seed, n),
                             np.full(n, 255.0 if dtype == np.uint8 else 1.0), np.arange(n, dtype=np.float64)], n)
        got = seen.pop()
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))


def test_resample_params_host_rows_equal_the_general_columns():
    """resample_params for host columns (written into a copy of kept constant rows) equals the
    column_stack of its columns bit for bit, for int and float columns, and the kept rows stay
    as they were."""
    from gpuaug._params import column_stack
    from gpuaug.ops.resize import resample_params
    rng = np.random.default_rng(12)
    n = 17
    for cols in ((np.zeros(n), np.zeros(n), rng.integers(1, 500, n), rng.integers(1, 500, n)),
                 tuple(rng.uniform(0, 300, (4, n)).astype(np.float32).astype(np.float64))):
        for size, mode in (((224, 224), 1), ((7, 311), 2)):
            oh, ow = size
            t, l_, h, w = cols
            want = column_stack([t, l_, h / oh, w / ow, h, w] + [np.full(n, v, np.float64) for v in (oh, ow, mode, 0, 0, 0)], n)
            got = resample_params(t, l_, h, w, size, mode, n)
            assert np.array_equal(got, want)
            got[:] = -1
            assert np.array_equal(resample_params(t, l_, h, w, size, mode, n), want)


def test_gaussian_noise_host_rows_equal_the_general_columns(monkeypatch):
    """gaussian_noise's host rows (written in place) are the general path's columns bit for bit."""
    import gpuaug.ops.gaussian_noise as G
    from gpuaug._params import column_stack
    from gpuaug.ops._launch import float32_exact, seed_columns
    seen = []
    monkeypatch.setattr(G, "run_custom", lambda b, params, **kw: seen.append(params))
    rng = np.random.default_rng(13)
    n = 21
    edges = np.resize([1e39, -1e39, 1 / 3, 0.1, -0.0, 1e-46, 3.4028235677973366e38, 2.5], n)
    for mean, std, seed in ((rng.uniform(-5, 5, n), rng.uniform(0, 20, n), 2 ** 64 - 1), (0.1, 3.3, 7),
                            (edges, np.abs(edges), 0)):
        with np.errstate(over="ignore"):
            G.gaussian_noise(np.zeros((n, 4, 4, 3), np.uint8), mean, std, seed)
        with np.errstate(over="ignore"):
            mu, sd = (float32_exact(np.broadcast_to(np.asarray(v, np.float64), (n,)).copy()) for v in (mean, std))
        want = column_stack([mu, sd, seed_columns(seed, n), np.arange(n, dtype=np.float64)], n)
        got = seen.pop()
        assert got.flags.c_contiguous and np.array_equal(got.view(np.uint64), want.view(np.uint64))


def test_odd_sizes_with_allowed_sizes_refuses_the_others():
    """odd_sizes(allowed=...) looks sizes up in a table of the allowed ones: every size outside
    them (even, negative, too large, between) is refused with its message, the allowed pass."""
    from gpuaug.ops._launch import odd_sizes
    assert odd_sizes(np.array([3, 5, 5, 3]), 4, allowed=(3, 5)).tolist() == [3, 5, 5, 3]
    for bad in (4, 1, 7, -3, 0, 2 ** 40):
        with pytest.raises(ValueError, match=f"got {bad}; expected one of 3, 5"):
            odd_sizes(np.array([3, bad, 5]), 3, allowed=(3, 5))


def test_float32_at_least_host_equals_the_where_form():
    """float32_at_least on the host (only the values rounded down move up) equals the
    element-wise where() form bit for bit, on halves, exact floats, huge values and infinities."""
    from gpuaug.ops._launch import float32_at_least
    rng = np.random.default_rng(14)
    v = np.concatenate([rng.uniform(-300, 300, 3000), np.arange(-5, 5, 0.5), [3.5e38, -3.5e38, np.inf, -np.inf,
                                                                               1e-50, -1e-50, 0.0, -0.0]])
    with np.errstate(over="ignore"):
        f = v.astype(np.float32)
        want = np.where(f.astype(np.float64) < v, np.nextafter(f, np.float32(np.inf)), f).astype(np.float64)
        got = float32_at_least(v)
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
    for x in (0.7, 0.3, 128.0):  # one threshold (a 0-d array: the policies' form)
        one = float32_at_least(np.asarray(x))
        assert one.shape == () and float(one) >= x and float(one) == float(np.float32(one))


@pytest.mark.parametrize("name", ["solarize", "posterize"])
def test_two_column_rows_equal_the_general_columns(monkeypatch, name):
    """solarize's and posterize's host rows (written in place) equal the column_stack of the
    general path's columns bit for bit, for every dtype."""
    import importlib

    from gpuaug._params import column_stack
    from gpuaug._util import dtype_max
    from gpuaug.ops._launch import float32_at_least
    mod = importlib.import_module(f"gpuaug.ops.{name}")
    seen = []
    monkeypatch.setattr(mod, "run", lambda b, kernels, params, **kw: seen.append(params))
    rng = np.random.default_rng(15)
    n = 13
    for dtype in (np.uint8, np.float16, np.float32):
        x = np.zeros((n, 4, 4, 3), dtype)
        if name == "solarize":
            v = rng.uniform(0, 255 if dtype == np.uint8 else 1, n)
            mod.solarize(x, v)
            want = column_stack([float32_at_least(v), np.full(n, dtype_max(dtype))], n)
        else:
            v = rng.integers(1, 9, n)
            mod.posterize(x, v)
            want = column_stack([v.astype(np.float64), np.full(n, float(dtype != np.uint8))], n)
        got = seen.pop()
        assert got.flags.c_contiguous and np.array_equal(got, want)
