"""gpuaug.Scheduler under faults on a real GPU (marked `gpu`; skipped without one).

The CPU fault tests (test_scheduler_faults.py) with CudaDevice: after an exception in the
source or the augment (also a KeyboardInterrupt), an early break, a consumer that raises
holding its iterator, changing shapes and a double/concurrent close, the error reaches
the consumer, no thread is left, and no memory is kept.

How memory is measured (:func:`assert_no_leak`): each test's scenario runs once as a
warm-up (kernels compiled and loaded, the context's lazily made resources made), then
``RUNS`` times more, every run's scheduler and device kept alive to the end (memory one
of them still held would add up). After each run:
- the scheduler's own device (cudaMalloc) bytes, counted by a wrapper around CudaDevice
  (tests/gpu/soak.py's ``counting``), are 0; its pinned (cudaHostAlloc) bytes are 0 once
  it is closed (the ring is kept from epoch to epoch, and close() hands it to the pinned
  pool) and the pool's idle buffers are freed;
- CuPy's memory pool: used bytes as before the first run;
- cudaMemGetInfo: device memory in use outside CuPy's pool, taken after the pool gave its
  cached free blocks back (``free_all_blocks``), grows by less than half a batch from run
  to run (less than a batch over the first run, for a one-time allocation the warm-up did
  not make). A staging buffer kept alive by a stray reference adds a batch or more per run.

Why the pool's cached blocks must go first: CuPy's pool keeps a free list (an arena) per
stream, and every scheduler makes new copy/compute streams, so each run's augment outputs
are new cudaMalloc'd chunks in a new arena, cached after the run. The pool counts a chunk
at its size (3 MiB here), the driver commits whole 2 MiB pages (4 MiB), so without
``free_all_blocks`` "outside the pool" grows by the rounding of every new chunk: most
likely the 4 MiB - 2 KiB that the first version of these tests measured on an H200 after
runs that had given everything back (four 3 MiB chunks: the outputs in flight at depth 3
and the flip's temporary, 1 MiB of rounding each; less a few small parameter-upload chunks
that fit in pages already committed), the same in every test but one, where the new
stream probably got a dead one's handle and so its arena, with the chunks already there.

Batches are ~3 MiB, so one kept buffer is well above the tolerance;
test_leak_check_catches_a_kept_staging_buffer checks that it is.
"""
import gc
import importlib.util
import os
import threading

import numpy as np
import pytest

import gpuaug
from gpuaug.scheduler import CudaDevice, free_pinned_pool
from gpuaug.kernels._cuda import clear_constants
from test_scheduler_faults import Boom, run_consumer, stacks

pytestmark = pytest.mark.gpu

SHAPE = (16, 256, 256, 3)  # 3 MiB
BATCH = int(np.prod(SHAPE))
RUNS = 3  # measured runs after the warm-up


def _cp():
    import cupy

    return cupy


def _soak():
    """tests/gpu/soak.py, whose ``counting`` wrapper (a Device counting the scheduler's own
    pinned and device allocations) these tests share."""
    spec = importlib.util.spec_from_file_location(
        "_gpuaug_soak", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu", "soak.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_SOAK = _soak()
CountingCuda = _SOAK.counting(CudaDevice)
NOTHING_HELD = dict.fromkeys(_SOAK.ACCT, 0)


class KeepingCuda(CountingCuda):
    """Keeps the memory of the first device buffer it frees while counting it as freed:
    what a scheduler holding a view of a freed staging buffer would do (the leak check's
    own test)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.kept = []

    def free_device(self, buf):
        if not self.kept:
            self.kept.append(buf.mem)
        super().free_device(buf)


def _settle():
    cp = _cp()
    gc.collect()
    cp.cuda.Device().synchronize()


def device_outside():
    """Device memory in use outside CuPy's pool, once the pool has given its cached free
    blocks (of every stream's arena) back to the driver (see the module docstring)."""
    cp = _cp()
    _settle()
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    free, total = cp.cuda.runtime.memGetInfo()
    return total - free - pool.total_bytes()


def assert_no_leak(scenario, runs=RUNS):
    """Run ``scenario()`` once to warm up, then ``runs`` times; it makes its own device and
    scheduler, checks what the consumer got and returns ``(device, scheduler)``, which stay
    alive until the end. Checks threads, the device's accounting, the pool's used bytes
    and device memory outside the pool after each run (see the module docstring).
    Returns the outside-the-pool figures: after the warm-up, then after each run."""
    cp = _cp()
    scenario()  # warm-up: whatever it returns is dropped here
    _settle()
    free_pinned_pool()
    clear_constants()  # the ops' cached descriptor tables are not the scheduler's memory
    pool = cp.get_default_memory_pool()
    threads = set(threading.enumerate())
    pool_used = pool.used_bytes()
    outside = [device_outside()]
    kept = []
    for i in range(runs):
        dev, s = scenario()
        kept.append((dev, s))
        _settle()
        left = [t.name for t in threading.enumerate() if t not in threads and t.is_alive()]
        assert left == [], f"run {i}: threads left: {left}\n{stacks()}"
        held = {k: v for k, v in dev.acct.items() if k.startswith("device")}
        assert set(held.values()) == {0}, f"run {i}: the scheduler still holds device memory {dev.acct}"
        # the pinned ring stays with the scheduler from epoch to epoch; close() hands it to
        # the pool, whose idle buffers are then freed
        s.close()
        free_pinned_pool()
        clear_constants()
        assert dev.acct == NOTHING_HELD, f"run {i}: after close the scheduler still holds {dev.acct}"
        assert pool.used_bytes() == pool_used, \
            f"run {i}: CuPy pool used bytes {pool_used} before, {pool.used_bytes()} after"
        outside.append(device_outside())
    grew = [b - a for a, b in zip(outside, outside[1:])]
    msg = (f"device memory outside CuPy's pool after the warm-up and after each of {runs} runs: {outside}; "
           f"growth per run {grew} bytes (a batch is {BATCH}): not given back")
    assert grew[0] < BATCH, msg
    assert all(g < BATCH // 2 for g in grew[1:]), msg
    return outside


def host_batches(n, shape=SHAPE, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(n)]


def augment(b):
    return gpuaug.brightness(gpuaug.flip(b), 1.25)


def consume(s, got, check=None):
    cp = _cp()
    for images, label in s:
        if check is not None:
            cp.testing.assert_array_equal(images, check(label))
        got.append(label)


@pytest.mark.parametrize("kind", ["error", "interrupt"])
@pytest.mark.parametrize("where", ["source", "augment"])
def test_exception_reaches_consumer_memory_back(where, kind):
    cp = _cp()
    xs = host_batches(8)

    def scenario():
        dev = CountingCuda(0)
        exc = KeyboardInterrupt("at 5") if kind == "interrupt" else Boom("at 5")
        calls = []

        def gen():
            for i, x in enumerate(xs * 2):
                if where == "source" and i == 5:
                    raise exc
                yield x, i

        def aug(b):
            calls.append(1)
            if where == "augment" and len(calls) == 6:
                raise exc
            return augment(b)

        s = gpuaug.Scheduler(gen, aug, depth=3, workers=4, device=dev)
        got = []
        _, err, _ = run_consumer(consume, s, got, lambda i: augment(cp.asarray(xs[i % 8])))
        assert err is exc and got == [0, 1, 2, 3, 4]
        # the test's own hold on the exception (the scheduler keeps gen and aug, whose closures
        # hold it): its traceback's frames hold the failed batch
        exc.__traceback__ = None
        return dev, s

    assert_no_leak(scenario)


@pytest.mark.parametrize("how", ["break", "raise-holding-iterator-then-close"])
def test_consumer_stops_memory_back(how):
    xs = host_batches(8)

    def scenario():
        dev = CountingCuda(0)
        s = gpuaug.Scheduler(list(zip(xs * 3, range(24))), augment, depth=3, device=dev)

        def consumer():
            if how == "break":
                for images, i in s:
                    if i == 3:
                        break
                return None
            it = iter(s)
            for _ in range(3):
                next(it)
            raise Boom("consumer")

        _, err, _ = run_consumer(consumer)
        if how != "break":
            assert isinstance(err, Boom)
            s.close()
        else:
            assert err is None
        return dev, s  # err (its frames hold the iterator) goes with this frame

    assert_no_leak(scenario)


def test_changing_shapes_and_close_twice_memory_back():
    cp = _cp()
    rng = np.random.default_rng(1)
    # depth 2: slot 0 takes batches 0, 2, 4 and slot 1 batches 1, 3, 5; both grow (reallocs)
    shapes = [(2, 32, 48, 3), (4, 64, 64, 3), SHAPE, (8, 300, 200, 3), (4, 64, 64, 3), SHAPE]
    xs = [rng.integers(0, 256, sh, dtype=np.uint8) for sh in shapes]

    def scenario():
        dev = CountingCuda(0)
        s = gpuaug.Scheduler(list(zip(xs, range(len(xs)))), augment, depth=2, device=dev)
        got = []
        _, err, _ = run_consumer(consume, s, got, lambda i: augment(cp.asarray(xs[i])))
        assert err is None and got == list(range(len(xs)))
        st = s.stats()
        assert st.device_reallocs >= 1 and st.pinned_reallocs >= 1
        s.close()
        s.close()
        it = iter(s)
        next(it)
        closers = [threading.Thread(target=s.close, daemon=True) for _ in range(3)]
        for t in closers:
            t.start()
        for t in closers:
            t.join(30)
        assert not any(t.is_alive() for t in closers)
        del it
        return dev, s

    assert_no_leak(scenario)


def test_leak_check_catches_a_kept_staging_buffer():
    """assert_no_leak is strict enough: one 3 MiB staging buffer kept per run (by a device
    that counts it as freed) fails it, on the memory outside the pool."""
    xs = host_batches(4)

    def scenario():
        dev = KeepingCuda(0)
        s = gpuaug.Scheduler(list(zip(xs, range(4))), augment, depth=3, device=dev)
        assert [i for _, i in s] == [0, 1, 2, 3]
        assert len(dev.kept) == 1 and dev.kept[0].size >= BATCH
        return dev, s

    with pytest.raises(AssertionError, match="outside CuPy's pool"):
        assert_no_leak(scenario)
