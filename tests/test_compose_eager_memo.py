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
    """The launches and allocations of one call, its result (shape, dtype, address) and drawn rows."""
    ns.launches.clear()
    ns.Array.at(1 << 40)
    K.RECORDING[0] += general
    try:
        y = pol(x, seed=seed, layout=layout)
    finally:
        K.RECORDING[0] -= general
    d = pol._last
    return (list(ns.launches), (y.shape, y.dtype, y.data.ptr), (d.rows, d.buf.size, d.n, d.hw), pol._counter)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_warm_calls_launch_what_the_general_path_launches(std, name):
    make = POLICIES[name]
    warm, ref = make(3), make(3)
    batches = _batches(std.Array)
    runs = 0
    for rnd in range(3):
        for k, (x, layout) in enumerate(batches):
            seed = None if (k + rnd) % 2 else 100 * rnd + k
            got = _call(std, warm, x, layout, seed, 0)
            want = _call(std, ref, x, layout, seed, 1)
            assert got[0], "no launch recorded"
            assert got == want, f"batch {k} round {rnd}: the memo's call differs from the general path"
            runs += bool(got[0])
    assert runs == 3 * len(batches)
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
