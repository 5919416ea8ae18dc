"""Compose's memo of warm device-drawn calls (``compose._Eager``, issue 13's host path): a warm
call makes the same allocations and the same launches, bit for bit, as the general path.

On host stand-ins (bench/host_compose.py's ``standins``: CuPy arrays that are addresses, the
real ``Kernel`` argument packing, the real constant cache), every launch of a call is
recorded as (kernel, grid, block, shared memory, stream, packed argument bytes). Two policies
of one seed are called on the same batches in the same order, each call from the same
allocator address: one with its memos, one on the general path (as while launches are
recorded). Batches of other shapes, batch sizes, dtypes, layouts, input alignments and
addresses are interleaved, with and without seeds, so a memo keyed too loosely (another
batch's grid, table, kernel or packed/unpacked reduction) or a changed random stream (key,
counter) fails here."""
import os
import sys
import weakref

import numpy as np
import pytest

import gpuaug
from gpuaug.kernels import _cuda as K
from gpuaug.policy import compose as C

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
try:
    import host_compose as HC
finally:
    sys.path.pop(0)

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
POLICIES = {
    "bench": HC.device_policy,  # one stage, the gray_sum reduction, dense launch
    "no-contrast": lambda seed: gpuaug.Compose([
        gpuaug.RandomVerticalFlip(), gpuaug.RandomRotation(30), gpuaug.RandomGrayscale(0.5),
        gpuaug.ToDtype("float32", scale=True)], seed=seed, draws="device"),
    "two-stages-two-contrasts": lambda seed: gpuaug.Compose([
        gpuaug.RandomRotation(20), gpuaug.ColorJitter(0.3, 0.3), gpuaug.RandomAffine(5),
        gpuaug.ColorJitter(0, 0.4), gpuaug.Normalize(0.5, 0.5)], seed=seed, draws="device"),
    "pre-colour-fused-sum": lambda seed: gpuaug.Compose([
        gpuaug.RandomGrayscale(0.5), gpuaug.ColorJitter(0.2, 0.3), gpuaug.RandomResizedCrop(8),
        gpuaug.ToLayout("NCHW")], seed=seed, draws="auto"),
}


@pytest.fixture
def std(monkeypatch):
    ns = HC.standins(monkeypatch.setattr, monkeypatch.setitem)
    ns.record = True
    # uploads (the constant cache's descriptor tables) from their own addresses: the calls
    # below restart the allocator at one address each, as a pool would never overlap live arrays
    region, upload = [1 << 50], K._Staging.upload

    def own_region(self, arrays):
        nxt = ns.Array._next
        saved, nxt[0] = nxt[0], region[0]
        try:
            return upload(self, arrays)
        finally:
            region[0], nxt[0] = nxt[0], saved
    monkeypatch.setattr(K._Staging, "upload", own_region)
    return ns


def _batches(A):
    """(array, layout): shapes, batch sizes, dtypes, layouts, alignments and addresses."""
    def at(addr, shape, dtype=np.uint8, strides=None):
        A.at(addr)
        return A(shape, dtype, strides=strides)
    a = at(1 << 30, (6, 64, 64, 3))
    return [
        (a, "NHWC"),
        (at(2 << 30, (4, 64, 64, 3)), "NHWC"),                   # other n
        (at(3 << 30, (6, 13, 17, 3)), "NHWC"),                   # other size
        (at(4 << 30, (6, 3, 13, 17)), "NCHW"),                   # other layout (descriptor tables)
        (at(5 << 30, (6, 13, 17, 3), np.float32), "NHWC"),       # other dtype
        # 8 bytes off: the packed reduction's head moves (items 256 -> 271: two partial sums, not one)
        (at((6 << 30) + 8, (6, 64, 64, 3)), "NHWC"),
        (at(7 << 30, (6, 13, 17, 3), strides=(1024, 60, 3, 1)), "NHWC"),  # padded rows: not dense
        (at(8 << 30, (6, 64, 64, 3)), "NHWC"),                   # a's geometry at another address
        (a, "NHWC"),
    ]


def _call(ns, pol, x, layout, seed, general):
    """The launches of one call, its result (shape, dtype, address), drawn rows and counter, with
    addresses inside the call's draw buffer written relative to it (a warm call may reuse the
    previous call's buffer, the general path allocates one after the outputs); and the buffer."""
    ns.launches.clear()
    ns.Array.at(1 << 40)
    K.RECORDING[0] += general
    try:
        y = pol(x, seed=seed, layout=layout)
    finally:
        K.RECORDING[0] -= general
    d = pol._last
    lo, hi = d.buf.data.ptr, d.buf.data.ptr + 8 * d.buf.size

    def rel(packed):
        v = np.frombuffer(packed, np.uint64).copy()
        inside = (v >= lo) & (v < hi)
        v[inside] = (v[inside] - np.uint64(lo)) | np.uint64(1 << 63)
        return v.tobytes()
    launches = [r[:-1] + (rel(r[-1]),) for r in ns.launches]
    return (launches, (y.shape, y.dtype, y.data.ptr), (d.rows - lo, d.buf.size, d.n, d.hw), pol._counter), d.buf


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_warm_calls_launch_what_the_general_path_launches(std, name):
    make = POLICIES[name]
    warm, ref = make(3), make(3)
    batches = _batches(std.Array)
    runs, reused, prev, seen = 0, 0, None, set()
    for rnd in range(3):
        for k, (x, layout) in enumerate(batches):
            seed = None if (k + rnd) % 2 else 100 * rnd + k
            key = C._eager_key(x, layout)
            got, buf = _call(std, warm, x, layout, seed, 0)
            want, ref_buf = _call(std, ref, x, layout, seed, 1)
            assert got[0], "no launch recorded"
            assert got == want, f"batch {k} round {rnd}: the memo's call differs from the general path"
            runs += 1
            # a warm call reuses the previous call's buffer when it is free (nobody read
            # last_params here) and of this call's size; the general path never does
            was = prev() if prev is not None else None
            assert (buf is was) == (key in seen and was is not None and was.size == got[2][1]), (k, rnd)
            assert ref_buf is not buf
            reused += buf is was
            prev = weakref.ref(buf)  # (a reference would keep the buffer from being reused)
            del buf, ref_buf, was
            seen.add(key)
    assert runs == 3 * len(batches) and reused >= 3
    # one memo per geometry the batches have (a and the last two share one): made once, reused
    keys = {C._eager_key(x, layout) for x, layout in batches}
    assert set(warm._eager) == keys and not ref._eager


def test_memo_used_once_warm_and_not_for_other_calls(std, monkeypatch):
    """The first call on a geometry makes the memo; later calls run it; calls with out=, while
    launches are recorded or after the policy was switched to host draws take the general path
    (the memo's run is not called); the device calls advance the one call counter."""
    pol = HC.device_policy(seed=5)
    x = std.Array((4, 10, 12, 3), np.uint8)
    runs = []
    real = C._Eager.run
    monkeypatch.setattr(C._Eager, "run", lambda self, *a: runs.append(1) or real(self, *a))
    pol(x)
    assert not runs and len(pol._eager) == 1
    y = pol(x)
    assert runs == [1] and y.shape == (4, 3, 10, 12) and pol._counter == 2
    out = std.Array((4, 3, 10, 12), np.float32)
    assert pol(x, out=out) is out and runs == [1] and pol._counter == 3
    K.RECORDING[0] += 1
    try:
        pol(x)
    finally:
        K.RECORDING[0] -= 1
    assert runs == [1] and pol._counter == 4
    pol.draws = "host"  # a policy switched to host draws never runs the memo
    std.launches.clear()
    pol(x)
    assert runs == [1] and pol._counter == 4 and "gpuaug_policy_draw" not in [r[0] for r in std.launches]
    pol.draws = "device"
    pol(x)
    assert runs == [1, 1] and pol._counter == 5


def test_buffer_reused_only_when_free_and_on_the_same_stream(std, monkeypatch):
    """A warm call writes its draws into the previous call's buffer only when nothing else holds
    it (a last_params read, a kept reference) and the call runs on the previous call's stream."""
    import types

    pol = HC.device_policy(seed=2)
    x = std.Array((4, 10, 12, 3), np.uint8)
    pol(x)
    pol(x)
    b1 = pol._last.buf
    pol(x)
    assert pol._last.buf is not b1  # b1 (here) held it
    b2 = pol._last.buf
    del b1, b2
    b3 = pol._last.buf
    del b3
    d = pol._last
    pol(x)
    assert pol._last.buf is d.buf  # free: reused
    del d
    cp = sys.modules["cupy"]
    other = types.SimpleNamespace(ptr=12345)
    monkeypatch.setattr(cp.cuda, "get_current_stream", lambda: other)
    monkeypatch.setattr(K, "_STREAM", cp.cuda.get_current_stream)
    d = pol._last
    b = id(d.buf)
    del d
    pol(x)
    assert id(pol._last.buf) != b and pol._last.stream is other  # another stream: a new buffer
    d = pol._last
    pol(x)
    assert pol._last.buf is d.buf


def test_memo_not_pickled():
    pol = HC.device_policy(seed=1)
    pol._eager[("key",)] = object()
    state = pol.__getstate__()
    assert state["_eager"] == {}
    import pickle
    q = pickle.loads(pickle.dumps(pol))
    assert q._eager == {}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(POLICIES))
def test_gpu_warm_calls_equal_the_general_path(name):
    """On the GPU: a warm call (the memo) gives the general path's output and parameters bit
    for bit, with a seed and with the call counter, on aligned and misaligned inputs."""
    import cupy as cp

    xh = np.random.default_rng(4).integers(0, 256, (5, 64 * 64 * 3 + 16), dtype=np.uint8)
    base = cp.asarray(xh)
    for x in (base[:, :64 * 64 * 3].reshape(5, 64, 64, 3), base[:, 8:8 + 64 * 64 * 3].reshape(5, 64, 64, 3)):
        warm, ref = POLICIES[name](11), POLICIES[name](11)
        for seed in (None, 3, None):
            y = warm(x, seed=seed)
            p = warm.last_params
            K.RECORDING[0] += 1
            try:
                z = ref(x, seed=seed)
            finally:
                K.RECORDING[0] -= 1
            q = ref.last_params
            assert y.dtype == z.dtype and y.shape == z.shape and bool((y == z).all()), (name, seed)
            for a, b in zip(p.values, q.values):
                assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
        assert len(warm._eager) == 1 and not ref._eager


@pytest.mark.gpu
def test_gpu_reused_buffer_gives_the_general_paths_bits():
    """On the GPU: warm calls whose last_params nobody reads write their draws into the previous
    call's buffer (the same address, not a new allocation) and still give the general path's
    output and parameters, call after call of the counter."""
    import cupy as cp

    x = cp.asarray(np.random.default_rng(5).integers(0, 256, (6, 64, 64, 3), dtype=np.uint8))
    warm, ref = HC.device_policy(seed=9), HC.device_policy(seed=9)
    for call in range(4):
        before = warm._last.buf.data.ptr if call >= 2 else None
        y = warm(x)
        K.RECORDING[0] += 1
        try:
            z = ref(x)
        finally:
            K.RECORDING[0] -= 1
        assert bool((y == z).all()), call
        if before is not None:
            assert warm._last.buf.data.ptr == before, "the free buffer was not reused"
    p, q = warm.last_params, ref.last_params
    for a, b in zip(p.values, q.values):
        assert all(np.array_equal(a[k], b[k]) for k in a)
