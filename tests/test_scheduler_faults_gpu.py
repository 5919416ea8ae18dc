"""gpuaug.Scheduler under faults on a real GPU (marked `gpu`; skipped without one).

The CPU fault tests (test_scheduler_faults.py) with CudaDevice: after an exception in the
source or the augment (also a KeyboardInterrupt), an early break, a consumer that raises
holding its iterator, changing shapes and a double/concurrent close, the error reaches
the consumer, no thread is left, and memory is measured back where it started:
- the scheduler's own pinned (cudaHostAlloc) and device (cudaMalloc) bytes, counted by a
  wrapper around CudaDevice;
- CuPy's memory pool: used bytes;
- cudaMemGetInfo: device memory in use outside CuPy's pool (so a staging buffer kept
  alive by a stray reference shows), within half a batch.
Batches are ~3 MB, so one leaked buffer is well above the tolerance.
"""
import gc
import threading

import numpy as np
import pytest

import gpuaug
from gpuaug.scheduler import CudaDevice
from test_scheduler_faults import Boom, run_consumer, stacks

pytestmark = pytest.mark.gpu

SHAPE = (16, 256, 256, 3)  # 3 MiB


def _cp():
    import cupy

    return cupy


class CountingCuda(CudaDevice):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._acct_lock = threading.Lock()
        self.pinned = self.device = self.pinned_n = self.device_n = 0

    def _add(self, kind, nbytes, n):
        with self._acct_lock:
            setattr(self, kind, getattr(self, kind) + nbytes)
            setattr(self, kind + "_n", getattr(self, kind + "_n") + n)

    def alloc_pinned(self, nbytes):
        buf = super().alloc_pinned(nbytes)
        self._add("pinned", buf.nbytes, 1)
        return buf

    def free_pinned(self, buf):
        n = buf.nbytes
        super().free_pinned(buf)
        self._add("pinned", -n, -1)

    def alloc_device(self, nbytes):
        buf = super().alloc_device(nbytes)
        self._add("device", buf.nbytes, 1)
        return buf

    def free_device(self, buf):
        n = buf.nbytes
        super().free_device(buf)
        self._add("device", -n, -1)

    def usage(self):
        return (self.pinned, self.pinned_n, self.device, self.device_n)


class GpuWatch:
    """Threads, the scheduler's allocations, CuPy's pool and cudaMemGetInfo before a test."""

    def __init__(self, dev):
        cp = _cp()
        self.dev = dev
        gc.collect()
        cp.cuda.Device().synchronize()
        self.threads = set(threading.enumerate())
        self.pool_used = cp.get_default_memory_pool().used_bytes()
        self.outside = self._outside()

    @staticmethod
    def _outside():
        cp = _cp()
        free, total = cp.cuda.runtime.memGetInfo()
        return total - free - cp.get_default_memory_pool().total_bytes()

    def assert_back(self):
        cp = _cp()
        gc.collect()
        cp.cuda.Device().synchronize()
        left = [t.name for t in threading.enumerate() if t not in self.threads and t.is_alive()]
        assert left == [], f"threads left: {left}\n{stacks()}"
        assert self.dev.usage() == (0, 0, 0, 0)
        assert cp.get_default_memory_pool().used_bytes() == self.pool_used
        grew = self._outside() - self.outside
        assert grew < int(np.prod(SHAPE)) // 2, f"{grew} bytes of device memory outside CuPy's pool not given back"


def host_batches(n, shape=SHAPE, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(n)]


def augment(b):
    return gpuaug.brightness(gpuaug.flip(b), 1.25)


@pytest.fixture(scope="module")
def warm():
    """Kernels compiled and modules loaded before any memory is measured."""
    cp = _cp()
    x = host_batches(1)[0]
    augment(cp.asarray(x))
    s = gpuaug.Scheduler([(x, 0)] * 4, augment, device=CountingCuda(0))
    for _ in s:
        pass
    s.close()
    cp.cuda.Device().synchronize()


def consume(s, got, check=None):
    cp = _cp()
    for images, label in s:
        if check is not None:
            cp.testing.assert_array_equal(images, check(label))
        got.append(label)


@pytest.mark.parametrize("kind", ["error", "interrupt"])
@pytest.mark.parametrize("where", ["source", "augment"])
def test_exception_reaches_consumer_memory_back(warm, where, kind):
    cp = _cp()
    xs = host_batches(8)
    dev = CountingCuda(0)
    w = GpuWatch(dev)
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
    # the test's own hold on the exception: its traceback's frames hold the failed batch
    exc.__traceback__ = None
    del err
    w.assert_back()


@pytest.mark.parametrize("how", ["break", "raise-holding-iterator-then-close"])
def test_consumer_stops_memory_back(warm, how):
    xs = host_batches(8)
    dev = CountingCuda(0)
    w = GpuWatch(dev)
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
        del err
    w.assert_back()


def test_changing_shapes_and_close_twice_memory_back(warm):
    cp = _cp()
    rng = np.random.default_rng(1)
    shapes = [(4, 64, 64, 3), SHAPE, (2, 32, 48, 3), (8, 300, 200, 3), (4, 64, 64, 3), SHAPE]
    xs = [rng.integers(0, 256, sh, dtype=np.uint8) for sh in shapes]
    dev = CountingCuda(0)
    w = GpuWatch(dev)
    s = gpuaug.Scheduler(list(zip(xs, range(len(xs)))), augment, depth=2, device=dev)
    got = []
    _, err, _ = run_consumer(consume, s, got, lambda i: augment(cp.asarray(xs[i])))
    assert err is None and got == list(range(len(xs)))
    assert s.stats().device_reallocs >= 1
    s.close()
    s.close()
    it = iter(s)
    next(it)
    closers = [threading.Thread(target=s.close, daemon=True) for _ in range(3)]
    for t in closers:
        t.start()
    for t in closers:
        t.join(30)
    del it
    w.assert_back()
