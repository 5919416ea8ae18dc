"""The scheduler's staging ring on the CPU (FakeDevice): pinned slots kept from epoch to
epoch and pooled across schedulers, counted allocations, and every batch checksummed.

A FakeDevice made with ``pinned_pool_bytes`` has a pinned pool of its own, as every CUDA
device has one per process; its copies check that a slot is not refilled while a copy
from it is pending (``dev.errors``), and it poisons new memory (0xAB / 0xCD) so an
unwritten byte would change a checksum.

These tests are about the batch-sized ring, so array sources run with staging="batch"
(chunked staging, the default for them, is tested in test_scheduler_chunks.py).
"""
import functools
import threading
import zlib

import numpy as np
import pytest

import gpuaug
from gpuaug.scheduler import ArraySource, FakeDevice, free_pinned_pool, set_pinned_pool_limit
from gpuaug.scheduler._pinned import PinnedPool, _env_limit
from test_scheduler import our_threads

Scheduler = functools.partial(gpuaug.Scheduler, staging="batch")
POOL = 1 << 30


def data(n=23, h=5, w=6, c=3, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, c), dtype=np.uint8)


def aug(b):
    return b[:, ::-1] ^ np.uint8(0x5A)


def crcs(batches):
    return [zlib.crc32(np.ascontiguousarray(b).tobytes()) for b in batches]


def expected(x, s, epoch):
    """Checksums of the batches of ``epoch`` as the scheduler must deliver them."""
    from gpuaug.scheduler import epoch_batches

    idx = epoch_batches(len(x), s.batch_size, epoch=epoch, shuffle=s.shuffle, seed=s._seed)
    return crcs(aug(x[i]) for i in idx)


def run_epoch(s):
    got = crcs(np.array(images, copy=True) for images, _ in s)
    return got


def assert_all_back(dev):
    """Once the pool's idle buffers are freed, nothing is left and no rule was broken."""
    dev.pool.clear()
    assert dev.errors == []
    assert dev.pinned_live == 0 and dev.pinned_allocs == dev.pinned_frees
    assert dev.device_live == 0 and dev.device_allocs == dev.device_frees
    assert dev.streams_live == 0 and our_threads() == []


@pytest.mark.parametrize("shuffle", [False, True])
def test_ring_kept_across_epochs(shuffle):
    x = data()
    dev = FakeDevice(copy_ms=0.3, compute_ms=0.2, pinned_pool_bytes=POOL)
    s = Scheduler(x, aug, batch_size=4, depth=3, workers=3, device=dev, shuffle=shuffle, seed=7)
    epochs = 4
    for e in range(epochs):
        assert run_epoch(s) == expected(x, s, e), f"epoch {e}"
        # the ring (3 slots) was made in epoch 0 and only reused since
        assert dev.pinned_allocs == 3 and dev.pinned_frees == 0
        assert s._res.pinned_allocs == 3
        # between epochs: the ring stays, device slots and streams are given back
        assert dev.pinned_live == 3 * 4 * 5 * 6 * 3
        assert dev.device_live == 0 and dev.streams_live == 0
        assert our_threads(pipeline_only=True) == []
    assert dev.device_allocs == 3 * epochs  # keep_buffers=False: device slots per epoch, as before
    s.close()
    assert dev.pinned_frees == 0 and dev.pool.idle_bytes == dev.pinned_live  # ring -> pool
    assert_all_back(dev)


def test_without_a_pool_the_ring_is_freed_every_epoch():
    x = data(12)
    dev = FakeDevice(copy_ms=0.2)
    s = Scheduler(x, aug, batch_size=4, depth=2, workers=2, device=dev)
    for e in range(3):
        assert run_epoch(s) == expected(x, s, e)
        assert dev.pinned_live == 0
    assert dev.pinned_allocs == dev.pinned_frees == 2 * 3


def test_keep_buffers_with_a_pool_allocates_once():
    x = data()
    dev = FakeDevice(copy_ms=0.2, pinned_pool_bytes=POOL)
    s = Scheduler(x, aug, batch_size=5, depth=2, device=dev, keep_buffers=True)
    for e in range(3):
        assert run_epoch(s) == expected(x, s, e)
    assert dev.pinned_allocs == 2 and dev.device_allocs == 2
    s.close()
    assert_all_back(dev)


def test_pool_shared_by_schedulers_of_the_same_geometry():
    x = data(20)
    dev = FakeDevice(copy_ms=0.2, pinned_pool_bytes=POOL)
    s1 = Scheduler(x, aug, batch_size=4, depth=3, device=dev)
    assert run_epoch(s1) == expected(x, s1, 0)
    s1.close()
    assert dev.pinned_allocs == 3 and dev.pool.idle_bytes == 3 * x[:4].nbytes
    # same geometry, and a smaller one (at least half a slot): every slot from the pool
    for bs in (4, 3):
        y = data(17, seed=bs)
        s2 = Scheduler(y, aug, batch_size=bs, depth=3, device=dev, shuffle=True, seed=1)
        assert run_epoch(s2) == expected(y, s2, 0)
        s2.close()
        assert dev.pinned_allocs == 3, bs
    # larger batches: new buffers (the small ones stay idle in the pool)
    z = data(24, seed=9)  # three full batches of 8
    s3 = Scheduler(z, aug, batch_size=8, depth=3, device=dev)
    assert run_epoch(s3) == expected(z, s3, 0)
    s3.close()
    assert dev.pinned_allocs == 6 and dev.pool.reused == 6
    assert_all_back(dev)


def test_pool_limit_frees_what_does_not_fit():
    x = data(12)
    slot = x[:4].nbytes
    dev = FakeDevice(pinned_pool_bytes=2 * slot)  # room for two idle slots of three
    s = Scheduler(x, aug, batch_size=4, depth=3, device=dev)
    assert run_epoch(s) == expected(x, s, 0)
    assert run_epoch(s) == expected(x, s, 1)  # the ring is kept between epochs regardless
    assert dev.pinned_allocs == 3 and dev.pinned_frees == 0
    s.close()
    assert dev.pinned_frees == 1 and dev.pool.idle_bytes == 2 * slot == dev.pinned_live
    dev.pool.set_limit(slot)  # shrinking frees the excess at once
    assert dev.pinned_frees == 2 and dev.pool.idle_bytes == slot
    assert_all_back(dev)


def test_concurrent_schedulers_never_share_a_buffer():
    dev = FakeDevice(copy_ms=0.3, compute_ms=0.1, compute_jitter_ms=0.5, pinned_pool_bytes=POOL)
    xs = [data(31, seed=i) for i in range(3)]
    res, errs = {}, []

    def go(i):
        try:
            s = Scheduler(xs[i], aug, batch_size=4, depth=2, workers=2, device=dev, shuffle=True, seed=i)
            out = []
            for e in range(3):
                out.append(run_epoch(s) == expected(xs[i], s, e))
                s.close()  # the ring goes to the shared pool, another scheduler may take it
            res[i] = out
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    th = [threading.Thread(target=go, args=(i,)) for i in range(3)]
    for t in th:
        t.start()
    for t in th:
        t.join(60)
    assert errs == [] and res == {i: [True] * 3 for i in range(3)}
    assert dev.pinned_allocs <= 3 * 2 * 3
    assert dev.pool.reused >= 1  # some epoch got its ring from the pool
    assert_all_back(dev)


def test_failed_epoch_then_a_clean_one_reuses_the_ring():
    x = data(40)
    dev = FakeDevice(copy_ms=0.2, pinned_pool_bytes=POOL)
    calls = []

    def flaky(b):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("boom")
        return aug(b)

    s = Scheduler(x, flaky, batch_size=4, depth=3, device=dev)
    with pytest.raises(RuntimeError, match="boom"):
        run_epoch(s)
    assert dev.errors == [] and dev.pinned_allocs == 3
    assert run_epoch(s) == expected(x, s, 1)
    assert dev.pinned_allocs == 3
    s.close()
    assert_all_back(dev)


def test_iterable_growing_batches_give_small_slots_to_the_pool():
    rng = np.random.default_rng(3)
    shapes = [(2, 4, 4, 3), (2, 4, 4, 3), (6, 8, 8, 3), (6, 8, 8, 3), (2, 4, 4, 3)]
    xs = [rng.integers(0, 256, sh, dtype=np.uint8) for sh in shapes]
    dev = FakeDevice(copy_ms=0.2, pinned_pool_bytes=POOL)
    s = Scheduler(list(xs), aug, depth=2, device=dev)
    assert run_epoch(s) == crcs(aug(v) for v in xs)
    assert s.stats().pinned_reallocs == 2
    s.close()
    assert dev.pool.idle_bytes == dev.pinned_live  # the outgrown slots too, under the limit
    assert_all_back(dev)


# ---------------------------------------------------------------------------------------
# the pool itself and its settings
# ---------------------------------------------------------------------------------------
def test_pinned_pool_best_fit_and_counters():
    dev = FakeDevice()
    pool = PinnedPool(10_000)
    a, fresh_a = pool.take(dev, 1000)
    b, fresh_b = pool.take(dev, 3000)
    assert fresh_a and fresh_b and dev.pinned_allocs == 2
    pool.give(a)
    pool.give(b)
    c, fresh = pool.take(dev, 900)
    assert c is a and not fresh  # the smallest that fits
    d, fresh = pool.take(dev, 1400)  # b is more than twice as large: a new one
    assert fresh and d is not b
    assert (pool.allocs, pool.reused) == (3, 1)
    for buf in (c, d):
        pool.give(buf)
    assert pool.idle_bytes == 1000 + 3000 + 1400
    assert pool.clear() == 5400 and dev.pinned_live == 0 and dev.pinned_frees == 3


def test_pool_limit_settings_errors_name_the_argument(monkeypatch):
    with pytest.raises(ValueError, match="nbytes"):
        set_pinned_pool_limit(-1)
    with pytest.raises(ValueError, match="nbytes"):
        set_pinned_pool_limit(1.5)
    with pytest.raises(ValueError, match="nbytes"):
        PinnedPool(True)
    monkeypatch.setenv("GPUAUG_PINNED_POOL_BYTES", "lots")
    with pytest.raises(ValueError, match="GPUAUG_PINNED_POOL_BYTES"):
        _env_limit()
    monkeypatch.setenv("GPUAUG_PINNED_POOL_BYTES", "1234")
    assert _env_limit() == 1234
    old = set_pinned_pool_limit(1 << 20)
    try:
        assert set_pinned_pool_limit(old) == 1 << 20
    finally:
        set_pinned_pool_limit(old)
    assert free_pinned_pool() == 0  # no CUDA pool was used on this machine


# ---------------------------------------------------------------------------------------
# how an array source fills a slot
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["consecutive", "shuffled", "strided", "blocks"])
def test_array_source_read_in_one_call(monkeypatch, kind):
    x = data(300, 3, 4, 2)
    rng = np.random.default_rng(5)
    idx = {"consecutive": np.arange(40, 140), "shuffled": rng.permutation(300)[:100],
           "strided": np.arange(1, 300, 3)[:100],
           "blocks": np.concatenate([np.arange(a, a + 20) for a in (200, 10, 90, 250, 150)])}[kind]
    copies = []
    real = np.copyto
    monkeypatch.setattr(np, "copyto", lambda *a, **k: (copies.append(1), real(*a, **k))[1])
    out = np.full((len(idx), 3, 4, 2), 0xAB, np.uint8)
    ArraySource(x).read(idx, out)
    np.testing.assert_array_equal(out, x[idx])
    # at most one memcpy per run of consecutive indices, and a single gather (no per-sample
    # Python, one GIL release) when there are many runs
    assert len(copies) == {"consecutive": 1, "shuffled": 0, "strided": 0, "blocks": 5}[kind]


def test_array_source_read_strided_source_not_gathered(monkeypatch):
    """A source that is not C-contiguous is read run by run: np.take would first copy all
    of it (every chunk)."""
    x = data(200, 3, 4, 2)[:, ::-1]
    idx = np.random.default_rng(2).permutation(200)[:50]
    monkeypatch.setattr(np, "take", lambda *a, **k: pytest.fail("np.take on a strided source"))
    out = np.empty((50, 3, 4, 2), np.uint8)
    ArraySource(x).read(idx, out)
    np.testing.assert_array_equal(out, x[idx])


def test_array_source_read_bad_index():
    x = data(30)
    out = np.empty((10,) + x.shape[1:], np.uint8)
    with pytest.raises(IndexError, match="indices"):
        ArraySource(x).read(np.array([0, 2, 4, 6, 8, 10, 12, 14, 16, 30]), out)


@pytest.mark.parametrize("shuffled", [False, True])
def test_array_source_read_releases_the_gil(shuffled):
    """The fill of a chunk runs without the GIL: with a 0.5 s switch interval, a thread
    holding the GIL through its copies would keep this one from running until they end."""
    import sys
    import time

    shape = (1000, 96, 96, 3)  # 28 MB
    x = np.frombuffer(np.random.default_rng(0).bytes(int(np.prod(shape))), np.uint8).reshape(shape)
    idx = np.random.default_rng(1).permutation(1000) if shuffled else np.arange(1000)
    out = np.empty_like(x)
    src = ArraySource(x)
    started, done = threading.Event(), []

    def fill():  # several fills: this thread gets a core during one of them on a busy machine
        started.set()
        for _ in range(8):
            src.read(idx, out)
        done.append(1)

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    try:
        t = threading.Thread(target=fill)
        t.start()
        started.wait()
        spins = 0
        while not done:
            spins += 1
            if spins % 50 == 0:
                time.sleep(0)  # hands the GIL over if the filling thread asks for it back
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert np.array_equal(out, x[idx])
    assert spins > 100, f"this thread ran {spins} steps while the copy ran"


def test_next_batch_prepared_while_the_workers_fill():
    """A free worker prepares the next batch (a source's describe/labels) while the others
    still fill the current one, instead of once every chunk is handed out (then the other
    workers sat idle through it: one chunk per worker). Sleeps stand for the work; the
    order of events is checked, not the time: batch k + 1's preparation begins before
    the last chunk of batch k does."""
    import itertools
    import time

    from gpuaug.scheduler import Layout, Source

    wait, order, lock = 0.01, [], threading.Lock()
    seq = itertools.count()

    class Slow(Source):
        def __len__(self):
            return 24

        def describe(self, idx):
            with lock:
                order.append(("prep", int(idx[0]) // 2, next(seq)))
            time.sleep(wait)
            return Layout.uniform((len(idx), 1024, 1024, 4), np.uint8)  # 4 MiB a sample

        def read(self, idx, out):
            with lock:
                order.append(("fill", int(idx[0]) // 2, next(seq)))
            time.sleep(wait)
            out[:, :2, 0, 0] = np.asarray(idx, np.uint8)[:, None]

    dev = FakeDevice()
    s = Scheduler(Slow(), lambda b: b, batch_size=2, workers=2, depth=3, device=dev)
    got = [np.array(b[:, 0, 0, 0]) for b, _ in s]  # two chunks per batch (8 MiB)
    assert [g.tolist() for g in got] == [[2 * k, 2 * k + 1] for k in range(12)]
    assert dev.errors == []
    prep = {k: q for what, k, q in order if what == "prep"}
    last_fill = {}
    for what, k, q in order:
        if what == "fill":
            last_fill[k] = max(last_fill.get(k, -1), q)
    early = [k for k in range(11) if prep[k + 1] < last_fill[k]]
    assert len(early) >= 8, f"batches prepared before the previous one's last chunk began: {early}"


def test_pool_frees_idle_buffers_when_an_allocation_fails():
    class Tight(FakeDevice):
        """Pinned memory for at most ``cap`` bytes at once."""

        cap = 2500

        def alloc_pinned(self, nbytes):
            if self.pinned_live + nbytes > self.cap:
                raise MemoryError("out of pinned memory")
            return super().alloc_pinned(nbytes)

    dev = Tight()
    pool = PinnedPool(10_000)
    a, _ = pool.take(dev, 2000)
    pool.give(a)  # idle: 2000 of the 2500
    b, fresh = pool.take(dev, 900)  # a is too large for it (< half): a new one... after freeing a
    assert fresh and dev.pinned_frees == 1 and pool.idle_bytes == 0
    with pytest.raises(MemoryError):
        pool.take(dev, 2500)  # nothing idle to free
    pool.give(b)
    assert pool.clear() == 900 and dev.pinned_live == 0
