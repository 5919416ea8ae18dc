"""gpuaug.Scheduler under faults, on the CPU (FakeDevice).

Faults: an exception (or a KeyboardInterrupt) raised by the source at batch k (iterable
source, an indexed source's read on a worker, its describe), by the augment, by the
device (pinned/device allocation, the copy), by the consumer's own loop body; a real
SIGINT while the consumer waits in ``next()``; a consumer that breaks early, drops the
iterator (refcount and cyclic GC, also a GC that runs inside a scheduler thread); a
source yielding batches of changing shape and dtype; ``close()`` twice, from two threads,
and from a watchdog while the consumer waits; a fault while the other threads are blocked
on a full ring; a source blocked past close()'s join timeout.

After each: the right exception reached the consumer (the same object; a KeyboardInterrupt
stays a KeyboardInterrupt), every batch before it arrived intact and in order, no thread is
left (``threading.enumerate()`` against the threads before the test) and FakeDevice's
accounting (pinned/device bytes and buffers, streams, registrations) is back where it
started, with no ordering rule broken (``dev.errors``).

No test can hang: every consumer runs in a thread joined with a deadline; a hang fails the
test and prints every thread's stack.
"""
import gc
import json
import subprocess
import sys
import threading
import time
import traceback
import warnings

import numpy as np
import pytest

import gpuaug
from gpuaug.scheduler import ArraySource, FakeDevice
from gpuaug.scheduler._run import _Run

Scheduler = gpuaug.Scheduler
DEADLINE = 30.0  # seconds a consumer may run before the test fails as hung


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------
class Boom(Exception):
    pass


def stacks():
    frames = sys._current_frames()
    out = []
    for t in threading.enumerate():
        f = frames.get(t.ident)
        out.append(f"--- thread {t.name}\n" + ("".join(traceback.format_stack(f)) if f is not None else ""))
    return "\n".join(out)


def run_consumer(fn, *args, deadline=DEADLINE):
    """Run ``fn(*args)`` in a thread; return ``(value, error, seconds)``. A hang fails the
    test (with every thread's stack) instead of hanging CI. The error (any BaseException,
    KeyboardInterrupt included) is returned, never re-raised here."""
    box = {}

    def target():
        t0 = time.perf_counter()
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e
        box["seconds"] = time.perf_counter() - t0

    t = threading.Thread(target=target, name="test-consumer", daemon=True)
    t.start()
    t.join(deadline)
    if t.is_alive():
        pytest.fail(f"the consumer did not finish within {deadline} s (a hang):\n{stacks()}")
    return box.get("value"), box.get("error"), box["seconds"]


class Watch:
    """Threads and FakeDevice accounting before the test, to compare with after."""

    def __init__(self, dev):
        self.dev = dev
        self.threads = set(threading.enumerate())
        self.usage = dev.usage()

    def extra_threads(self):
        return [t for t in threading.enumerate() if t not in self.threads and t.is_alive()]

    def assert_back(self, grace=0.0, refs=False):
        """No thread left, memory where it started, no rule broken. ``grace``: seconds to
        wait for threads that clean up after themselves (a run closed from its own thread).
        ``refs``: also no freed buffer still referenced (when the test holds no exception,
        whose frames would legitimately hold the failed batch)."""
        end = time.monotonic() + grace
        while (self.extra_threads() or self.dev.usage() != self.usage) and time.monotonic() < end:
            time.sleep(0.01)
        extra = self.extra_threads()
        for t in extra:  # a short join, so a thread just ending is not reported
            t.join(timeout=0.5)
        left = [t.name for t in self.extra_threads()]
        assert left == [], f"threads left: {left}\n{stacks()}"
        assert self.dev.usage() == self.usage
        assert self.dev.pinned_allocs == self.dev.pinned_frees and self.dev.device_allocs == self.dev.device_frees
        assert self.dev.errors == []
        if refs:
            gc.collect()
            assert self.dev.freed_alive() == 0, "freed buffers still referenced"


def host_batches(n, shape=(2, 3, 4, 3), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(n)]


def aug(b):
    """Reads and writes every element; the inverse is itself after a flip back."""
    return b[:, ::-1] ^ np.uint8(0x5A)


def consume(s, got, slow=0.0):
    """The consumer: copies of every (label, images) into ``got``."""
    for images, label in s:
        got.append((label, np.array(images, copy=True)))
        if slow:
            time.sleep(slow)
    return len(got)


def check_prefix(got, xs, k, labels=None):
    """Exactly batches 0..k-1, in order, each the augment of its host batch."""
    assert [lab for lab, _ in got] == (list(range(k)) if labels is None else labels[:k])
    for i, (_, img) in enumerate(got):
        np.testing.assert_array_equal(img, aug(xs[i]), err_msg=f"batch {i}")


def make_exc(kind, k):
    return KeyboardInterrupt(f"interrupted at batch {k}") if kind == "interrupt" else Boom(f"broke at batch {k}")


def check_error(err, raised, kind):
    assert err is not None, "no exception reached the consumer"
    assert raised and err is raised[0], f"the consumer got {err!r}, not the exception raised ({raised})"
    if kind == "interrupt":
        assert isinstance(err, KeyboardInterrupt)


# ---------------------------------------------------------------------------------------
# the source raises at batch k
# ---------------------------------------------------------------------------------------
class FailingArray(ArraySource):
    """An indexed source raising ``exc`` when batch k is read (worker) or described (prepare)."""

    def __init__(self, x, labels, k, bs, exc, where, raised):
        super().__init__(x, labels)
        self.first, self.exc, self.where, self.raised = k * bs, exc, where, raised

    def _maybe(self, indices, where):
        if where == self.where and self.first in np.asarray(indices).tolist():
            self.raised.append(self.exc)
            self.raised.append(time.perf_counter())
            raise self.exc

    def describe(self, indices):
        self._maybe(indices, "describe")
        return super().describe(indices)

    def read(self, indices, out):
        self._maybe(indices, "read")
        super().read(indices, out)


@pytest.mark.parametrize("slow", [0.0, 0.004], ids=["fast", "slow-consumer"])
@pytest.mark.parametrize("kind", ["error", "interrupt"])
@pytest.mark.parametrize("k", [0, 4])
@pytest.mark.parametrize("where", ["iterable", "read", "describe"])
def test_source_raises_at_batch_k(where, k, kind, slow):
    n, bs = 12, 2
    xs = host_batches(n, (bs, 3, 4, 3))
    exc, raised = make_exc(kind, k), []
    if where == "iterable":
        def gen():
            for i in range(n):
                if i == k:
                    raised.extend([exc, time.perf_counter()])
                    raise exc
                yield xs[i], i
        source, kw = gen, {}
    else:
        flat = np.concatenate(xs)
        source = FailingArray(flat, np.repeat(np.arange(n), bs), k, bs, exc, where, raised)
        kw = dict(batch_size=bs)
    dev = FakeDevice(copy_ms=0.3, compute_ms=0.2)
    w = Watch(dev)
    s = Scheduler(source, aug, depth=3, workers=3, device=dev, **kw)
    got = []
    _, err, _ = run_consumer(consume, s, got, slow)
    caught = time.perf_counter()
    check_error(err, raised, kind)
    if where == "iterable":
        check_prefix(got, xs, k)
    else:
        assert len(got) == k
        for i, (lab, img) in enumerate(got):
            assert lab.tolist() == [i] * bs
            np.testing.assert_array_equal(img, aug(xs[i]))
    assert caught - raised[1] < 5.0  # promptly: the batches before it, then the error
    note = " ".join(getattr(err, "__notes__", []))
    assert f"batch {k}" in note and "source reader" in note
    w.assert_back()


# ---------------------------------------------------------------------------------------
# the augment raises at batch k
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("slow", [0.0, 0.004], ids=["fast", "slow-consumer"])
@pytest.mark.parametrize("kind", ["error", "interrupt"])
@pytest.mark.parametrize("k", [0, 5])
def test_augment_raises_at_batch_k(k, kind, slow):
    xs = host_batches(12)
    exc, raised, calls = make_exc(kind, k), [], []

    def bad(b):
        calls.append(1)
        if len(calls) == k + 1:
            raised.extend([exc, time.perf_counter()])
            raise exc
        return aug(b)

    dev = FakeDevice(copy_ms=0.3, compute_ms=0.2)
    w = Watch(dev)
    s = Scheduler(list(zip(xs, range(12))), bad, depth=3, workers=2, device=dev)
    got = []
    _, err, _ = run_consumer(consume, s, got, slow)
    check_error(err, raised, kind)
    check_prefix(got, xs, k)
    assert "bad" in [f.name for f in traceback.extract_tb(err.__traceback__)]  # the augment's frame
    assert any("augment" in n and f"batch {k}" in n for n in err.__notes__)
    w.assert_back()


# ---------------------------------------------------------------------------------------
# the device fails: out of pinned or device memory, a failed copy
# ---------------------------------------------------------------------------------------
class FailingDevice(FakeDevice):
    """A FakeDevice whose ``fail`` call raises on its ``nth`` use (0-based)."""

    def __init__(self, fail, nth, **kw):
        super().__init__(**kw)
        self.fail, self.nth, self.calls, self.raised = fail, nth, 0, []

    def _tick(self, name):
        if name == self.fail:
            self.calls += 1
            if self.calls == self.nth + 1:
                e = MemoryError(f"{name}: out of memory") if name.startswith("alloc") else RuntimeError(
                    f"{name}: cudaErrorIllegalAddress")
                self.raised.append(e)
                raise e

    def alloc_pinned(self, nbytes):
        self._tick("alloc_pinned")
        return super().alloc_pinned(nbytes)

    def alloc_device(self, nbytes):
        self._tick("alloc_device")
        return super().alloc_device(nbytes)

    def copy_h2d(self, dst, offset, src, stream):
        self._tick("copy_h2d")
        return super().copy_h2d(dst, offset, src, stream)


@pytest.mark.parametrize("fail,nth,k", [("alloc_pinned", 3, 4), ("alloc_device", 3, 4), ("copy_h2d", 2, 2)])
def test_device_call_fails(fail, nth, k):
    """A pinned/device allocation fails when a larger batch needs a bigger slot (batch 4
    grows), or a copy fails: the consumer gets that error after batches 0..k-1."""
    shapes = [(2, 3, 4, 3)] * 4 + [(4, 6, 4, 3)] * 4
    rng = np.random.default_rng(1)
    xs = [rng.integers(0, 256, sh, dtype=np.uint8) for sh in shapes]
    dev = FailingDevice(fail, nth, copy_ms=0.2)
    w = Watch(dev)
    s = Scheduler(list(zip(xs, range(len(xs)))), aug, depth=3, workers=2, device=dev)
    got = []
    _, err, _ = run_consumer(consume, s, got)
    check_error(err, dev.raised, "error")
    check_prefix(got, xs, k)
    w.assert_back()


def test_pin_source_registration_fails():
    """cudaHostRegister refused (e.g. a memmap on a file system that cannot be page-locked):
    the error reaches the consumer at the start of the epoch and the streams made for the
    epoch are freed."""

    class NoRegister(FakeDevice):
        def register_host(self, array):
            raise OSError("cudaHostRegister: operation not supported")

    dev = NoRegister()
    w = Watch(dev)
    s = Scheduler(host_batches(1, (8, 3, 4, 3))[0], aug, batch_size=2, pin_source=True, device=dev)
    _, err, _ = run_consumer(consume, s, [])
    assert isinstance(err, OSError) and "cudaHostRegister" in str(err)
    w.assert_back()


# ---------------------------------------------------------------------------------------
# the consumer raises, breaks, drops its iterator
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("recycle", ["next", "manual"])
@pytest.mark.parametrize("how", ["for", "with", "held-then-close"])
def test_consumer_raises_after_batch_k(how, recycle):
    """The loop body raises after batch 3 (holding batches with recycle='manual'):
    - ``for``: a plain loop; the generator is dropped as the frame unwinds (no close needed);
    - ``with``: the scheduler's context manager closes it;
    - ``held-then-close``: the consumer keeps the iterator in a local, which the traceback
      keeps alive; close() after the error stops everything."""
    xs = host_batches(20)
    dev = FakeDevice(copy_ms=0.3, compute_ms=0.2)
    w = Watch(dev)
    s = Scheduler(list(zip(xs, range(20))), aug, depth=3, device=dev, recycle=recycle)
    got, held = [], []

    def body(batch):
        images, label = batch
        got.append((label, np.array(images)))
        if recycle == "manual":  # hold the last two batches
            held.append(batch)
            if len(held) > 2:
                held.pop(0).release()
        if label == 3:
            raise Boom("consumer broke after batch 3")

    def consumer():
        if how == "for":
            for batch in s:
                body(batch)
        elif how == "with":
            with s:
                for batch in s:
                    body(batch)
        else:
            it = iter(s)
            while True:
                body(next(it))

    _, err, _ = run_consumer(consumer)
    assert isinstance(err, Boom)
    check_prefix(got, xs, 4)
    if how == "held-then-close":
        s.close()
    w.assert_back()
    held.clear()
    del err  # the traceback held the consumer's frame
    # the scheduler is usable again: a new epoch delivers everything
    got = []

    def again():
        for batch in s:
            got.append((batch.labels, np.array(batch.images)))
            batch.release()

    _, err, _ = run_consumer(again)
    assert err is None
    check_prefix(got, xs, 20)
    w.assert_back(refs=True)


@pytest.mark.parametrize("how", ["break", "del", "cycle-gc", "cycle-gc-in-scheduler-thread"])
def test_consumer_stops_early(how):
    """The consumer stops after 2 batches and never calls close():
    - ``break`` out of a for loop; ``del`` of a half-used iterator;
    - ``cycle-gc``: the iterator sits in a reference cycle, freed by a gc.collect();
    - ``cycle-gc-in-scheduler-thread``: the same cycle collected by a GC that happens to
      run in the compute thread (the generator's finaliser then closes the run from one
      of its own threads: the last thread out frees everything)."""
    xs = host_batches(40)
    go = threading.Event()
    collected, calls = [], []

    def augment(b):
        calls.append(1)
        # batch 3's augment (it needs only batch 0 released) runs the GC once the cycle exists
        if how == "cycle-gc-in-scheduler-thread" and len(calls) == 4:
            go.wait(DEADLINE)
            collected.append(gc.collect())
        return aug(b)

    dev = FakeDevice(copy_ms=0.3, compute_ms=0.2)
    w = Watch(dev)
    s = Scheduler(list(zip(xs, range(40))), augment, depth=3, device=dev)
    unraisable = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = lambda u: unraisable.append(u)
    was_enabled = gc.isenabled()
    gc.disable()  # only the collections of this test
    try:
        def consumer():
            got = []
            if how == "break":
                for images, label in s:
                    got.append((label, np.array(images)))
                    if label == 1:
                        break
                return got
            it = iter(s)
            for _ in range(2):
                images, label = next(it)
                got.append((label, np.array(images)))
            if how == "del":
                del it
            else:
                cycle = [it]
                cycle.append(cycle)
                del it, cycle
                if how == "cycle-gc":
                    gc.collect()
                else:
                    go.set()  # the compute thread's next augment collects the cycle
            return got

        got, err, _ = run_consumer(consumer)
        assert err is None
        check_prefix(got, xs, 2)
        w.assert_back(grace=10.0 if how == "cycle-gc-in-scheduler-thread" else 0.0, refs=True)
        if how == "cycle-gc-in-scheduler-thread":
            assert collected and collected[0] > 0
        assert unraisable == [], [f"{u.exc_type.__name__}: {u.exc_value}" for u in unraisable]
    finally:
        go.set()
        sys.unraisablehook = old_hook
        if was_enabled:
            gc.enable()
    got = []
    _, err, _ = run_consumer(consume, s, got)  # usable again afterwards
    assert err is None
    check_prefix(got, xs, 40)
    w.assert_back(refs=True)


# ---------------------------------------------------------------------------------------
# changing shapes
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fail_at", [None, 5])
def test_changing_shapes_and_dtypes(fail_at):
    """Batches grow, shrink, change dtype and become varshape lists: every output right,
    slots regrown as needed; a failure right after a change still cleans up."""
    rng = np.random.default_rng(7)
    specs = [((2, 4, 4, 3), np.uint8), ((6, 9, 7, 3), np.uint8), ((1, 3, 3, 1), np.uint8),
             ((3, 5, 5, 3), np.float32), ("var", np.uint8), ((8, 16, 16, 3), np.uint8),
             ((2, 4, 4, 3), np.uint16), ("var", np.float32), ((6, 9, 7, 3), np.uint8)]
    xs = []
    for sh, dt in specs:
        if sh == "var":
            xs.append([(rng.random((h, w_, 3)) * 255).astype(dt) for h, w_ in ((5, 7), (9, 3), (2, 11))])
        else:
            xs.append((rng.random(sh) * 255).astype(dt))

    def f(b):
        if isinstance(b, list):
            return [a[::-1].copy() for a in b]
        return b[:, ::-1] * 2

    raised = []

    def gen():
        for i, x in enumerate(xs):
            if i == fail_at:
                raised.append(Boom(f"source broke at {i}, after a shape change"))
                raise raised[0]
            yield x, i

    dev = FakeDevice(copy_ms=0.3)
    w = Watch(dev)
    s = Scheduler(gen, f, depth=2, workers=2, device=dev)
    got = []

    def consumer():
        for images, label in s:
            got.append((label, [np.array(a) for a in images] if isinstance(images, list) else np.array(images)))

    _, err, _ = run_consumer(consumer)
    n = len(xs) if fail_at is None else fail_at
    if fail_at is None:
        assert err is None
    else:
        check_error(err, raised, "error")
    assert [lab for lab, _ in got] == list(range(n))
    for (_, g), x in zip(got, xs):
        want = f(x)
        if isinstance(x, list):
            assert len(g) == len(want)
            for a, b in zip(g, want):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
        else:
            assert g.dtype == want.dtype
            np.testing.assert_array_equal(g, want)
    if fail_at is None:
        assert s.stats().pinned_reallocs >= 1 and s.stats().device_reallocs >= 1
    w.assert_back()


# ---------------------------------------------------------------------------------------
# close(): twice, concurrently, from a watchdog
# ---------------------------------------------------------------------------------------
def test_close_twice_and_concurrently():
    xs = host_batches(30)
    dev = FakeDevice(copy_ms=0.5, compute_ms=0.5)
    w = Watch(dev)
    s = Scheduler(list(zip(xs, range(30))), aug, depth=3, device=dev)
    s.close()
    s.close()  # never started, twice
    it = iter(s)
    next(it)
    next(it)
    s.close()
    s.close()
    w.assert_back()
    with pytest.raises(RuntimeError, match="closed"):
        next(it)
    # two threads and the consumer's own finally close at once
    it = iter(s)
    next(it)
    errors = []

    def closer():
        try:
            s.close()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=closer, daemon=True) for _ in range(3)]
    for t in ts:
        t.start()
    del it
    for t in ts:
        t.join(DEADLINE)
    assert errors == [] and not any(t.is_alive() for t in ts)
    w.assert_back(refs=True)


def test_close_from_a_watchdog_while_the_consumer_waits():
    """close() from another thread while the consumer is blocked in next(): the consumer
    gets RuntimeError promptly; every batch it did get is right."""
    xs = host_batches(200)
    dev = FakeDevice(copy_ms=0.2, compute_ms=20)
    w = Watch(dev)
    s = Scheduler(list(zip(xs, range(200))), aug, depth=3, device=dev)
    got = []
    timer = threading.Timer(0.1, s.close)

    def consumer():
        for images, label in s:
            got.append((label, np.array(images)))
            if len(got) == 1:
                timer.start()  # the watchdog fires while the consumer waits for a later batch

    _, err, secs = run_consumer(consumer)
    timer.join()
    assert isinstance(err, RuntimeError) and "closed" in str(err)
    assert 0 < len(got) < 200 and secs < 10
    check_prefix(got, xs, len(got))
    w.assert_back()


# ---------------------------------------------------------------------------------------
# a fault while the ring is full (workers, copier and compute blocked)
# ---------------------------------------------------------------------------------------
def _wait_for(pred, what, timeout=10.0):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}\n{stacks()}")
        time.sleep(0.002)


@pytest.mark.parametrize("kind", ["error", "interrupt"])
@pytest.mark.parametrize("where", ["read", "augment"])
@pytest.mark.parametrize("staging", ["chunks", "batch"])
def test_fault_while_ring_is_full(where, kind, staging):
    """The consumer holds batch 0 and stops asking: the ring fills and the threads block
    (workers on a pinned slot, the copier on a device slot, compute on the release of
    batch 0). Then a read (worker) or the augment raises. The consumer resumes: the
    batches before the fault, then the fault."""
    bs, n, k = 2, 16, 3 if where == "read" else 1
    xs = host_batches(n, (bs, 3, 4, 3))
    flat = np.concatenate(xs)
    go = threading.Event()
    exc, raised = make_exc(kind, k), []

    class GatedRead(ArraySource):
        def read(self, indices, out):
            if where == "read" and k * bs in np.asarray(indices).tolist():
                go.wait(DEADLINE)
                raised.append(exc)
                raise exc
            super().read(indices, out)

    calls = []

    def augment(b):
        calls.append(1)
        if where == "augment" and len(calls) == k + 1:
            go.wait(DEADLINE)
            raised.append(exc)
            raise exc
        return aug(b)

    dev = FakeDevice(copy_ms=0.2)
    w = Watch(dev)
    s = Scheduler(GatedRead(flat, np.repeat(np.arange(n), bs)), augment, batch_size=bs, depth=2, workers=3,
                  device=dev, staging=staging)
    got = []
    state = {}

    def consumer():
        it = iter(s)
        images, lab = next(it)
        got.append((lab, np.array(images)))
        run = s._run
        # white box: the workers prepared as far as the ring allows, then blocked
        # (read: batch 2 copied, 3 in the gated read; augment: 1 in the gated augment, the
        # copier waiting to reuse its device slot for 3, a worker for a pinned slot for 5)
        # (chunks: a batch takes its device slot when prepared, so preparation stops at the
        # slot whose last user's augment is not queued: batch 4 (read) / 3 (augment))
        full = (4 if where == "read" else 5) if staging == "batch" else (4 if where == "read" else 3)
        _wait_for(lambda: run.prep_next >= full and run.copy_enq >= 2, "a full ring")
        time.sleep(0.05)
        state["threads"] = [t.name for t in run.threads if t.is_alive()]
        go.set()  # the fault, with every other thread blocked
        for images, lab in it:
            got.append((lab, np.array(images)))

    _, err, _ = run_consumer(consumer)
    check_error(err, raised, kind)
    assert len(state["threads"]) == 5  # all were still there, blocked, when it raised
    assert len(got) == k
    for i, (lab, img) in enumerate(got):
        assert lab.tolist() == [i] * bs
        np.testing.assert_array_equal(img, aug(xs[i]))
    w.assert_back()


# ---------------------------------------------------------------------------------------
# a source blocked longer than close() waits
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["iterable", "read"])
def test_source_blocked_past_join_timeout(where, monkeypatch):
    """close() gives up on a worker blocked in the source after JOIN_TIMEOUT_S (with a
    warning). The run keeps its buffers, which nothing frees them under the blocked worker;
    the scheduler takes new ones, so a new epoch runs meanwhile. When the source returns,
    the worker ends and frees the old run's buffers: nothing is left."""
    monkeypatch.setattr(_Run, "JOIN_TIMEOUT_S", 0.3)
    xs = host_batches(10)
    gate = threading.Event()
    blocked = threading.Event()
    epoch = [0]

    def gen():
        e = epoch[0]
        epoch[0] += 1
        for i in range(10):
            if e == 0 and i == 3:
                blocked.set()
                gate.wait(DEADLINE)
            yield xs[i], i

    class GatedRead(ArraySource):
        def read(self, indices, out):
            if epoch[0] == 0 and 6 in np.asarray(indices).tolist():
                blocked.set()
                gate.wait(DEADLINE)
            super().read(indices, out)

    if where == "iterable":
        source, kw = gen, {}
    else:
        source, kw = GatedRead(np.concatenate(xs), np.repeat(np.arange(10), 2)), dict(batch_size=2)
    dev = FakeDevice(copy_ms=0.2)
    w = Watch(dev)
    s = Scheduler(source, aug, depth=2, workers=2, device=dev, **kw)
    try:
        def first_epoch():
            it = iter(s)
            got = [next(it) for _ in range(2)]
            blocked.wait(DEADLINE)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                s.close()
                secs = time.perf_counter() - t0
            return got, caught, secs

        (got, caught, secs), err, _ = run_consumer(first_epoch)
        assert err is None
        assert 0.25 < secs < 5
        assert any("did not stop" in str(c.message) for c in caught)
        assert dev.usage()["pinned_buffers"] > 0  # still the blocked run's
        assert [t.name for t in w.extra_threads() if t.name.startswith("gpuaug-worker")]
        epoch[0] = 1
        got = []
        _, err, _ = run_consumer(consume, s, got)  # a new epoch while the old worker is blocked
        assert err is None and len(got) == 10
        if where == "iterable":
            check_prefix(got, xs, 10)
        else:
            for i, (lab, img) in enumerate(got):
                np.testing.assert_array_equal(img, aug(xs[i]))
    finally:
        gate.set()
    s.close()
    w.assert_back(grace=10.0, refs=True)  # the unblocked worker ends and frees the old buffers


# ---------------------------------------------------------------------------------------
# after a failure, a new epoch
# ---------------------------------------------------------------------------------------
def test_new_epoch_after_failure():
    xs = host_batches(10)
    epoch = [0]

    def gen():
        e = epoch[0]
        epoch[0] += 1
        for i, x in enumerate(xs):
            if e == 0 and i == 6:
                raise Boom("only in the first epoch")
            yield x, i

    dev = FakeDevice(copy_ms=0.2)
    w = Watch(dev)
    s = Scheduler(gen, aug, device=dev, keep_buffers=True)
    got = []
    _, err, _ = run_consumer(consume, s, got)
    assert isinstance(err, Boom)
    check_prefix(got, xs, 6)
    got = []
    _, err, _ = run_consumer(consume, s, got)
    assert err is None
    check_prefix(got, xs, 10)
    assert s.stats().batches == 10
    s.close()
    w.assert_back(refs=True)


# ---------------------------------------------------------------------------------------
# a real Ctrl-C (SIGINT to the main thread) while the consumer waits in next()
# ---------------------------------------------------------------------------------------
SIGINT_SCRIPT = r"""
import json, signal, sys, threading, time
import numpy as np
import gpuaug
from gpuaug.scheduler import FakeDevice

before = set(threading.enumerate())
dev = FakeDevice(copy_ms=0.2, compute_ms=150)   # the consumer mostly waits in next()
xs = [np.full((2, 3, 3, 3), i, np.uint8) for i in range(200)]
s = gpuaug.Scheduler(list(zip(xs, range(200))), lambda b: b + 1, depth=3, device=dev)
sent = []

first = threading.Event()

def interrupt():
    first.wait(60)
    time.sleep(0.2)  # the consumer is waiting for batch 1 or 2 (150 ms each)
    sent.append(time.perf_counter())
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

t = threading.Thread(target=interrupt)
t.start()
got, res = [], {}
try:
    for images, i in s:
        assert int(images[0, 0, 0, 0]) == i + 1
        got.append(i)
        first.set()
    res["caught"] = None
except KeyboardInterrupt:
    res["caught"] = "KeyboardInterrupt"
    res["latency_s"] = time.perf_counter() - sent[0]
t.join()
res["batches"] = got
res["ordered"] = got == list(range(len(got)))
res["threads_left"] = [x.name for x in threading.enumerate() if x not in before]
res["usage"] = dev.usage()
res["errors"] = dev.errors
print(json.dumps(res))
"""


def test_sigint_while_consumer_waits():
    out = subprocess.run([sys.executable, "-c", SIGINT_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["caught"] == "KeyboardInterrupt"
    assert res["latency_s"] < 3.0  # the consumer waited at most one 150 ms augment, then stopped
    assert 0 < len(res["batches"]) < 200 and res["ordered"]
    assert res["threads_left"] == []
    assert res["usage"] == {"pinned_bytes": 0, "pinned_buffers": 0, "device_bytes": 0, "device_buffers": 0,
                            "streams": 0, "registered": 0}
    assert res["errors"] == []


# ---------------------------------------------------------------------------------------
# after a failure the scheduler keeps no reference to the failed batch's memory
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["source", "augment", "device"])
def test_no_reference_kept_after_failure(where):
    """Once the consumer has dropped the exception, no freed pinned/device buffer is still
    referenced (FakeDevice.freed_alive): on a GPU, a view kept alive by the failed run (its
    exception's frames) would keep a staging buffer allocated until the next epoch."""
    xs = host_batches(12)
    calls = []

    def gen():
        for i, x in enumerate(xs):
            if where == "source" and i == 4:
                raise Boom("source")
            yield x, i

    def augment(b):
        calls.append(1)
        if where == "augment" and len(calls) == 5:
            y = aug(b)  # the frame holds the input view and an output
            raise Boom(f"augment {y.shape}")
        return aug(b)

    dev = FailingDevice("copy_h2d" if where == "device" else None, 4, copy_ms=0.2)
    s = Scheduler(gen, augment, depth=3, device=dev)
    got = []
    _, err, _ = run_consumer(consume, s, got)
    assert isinstance(err, (Boom, RuntimeError)) and len(got) == 4
    del err
    dev.raised.clear()
    gc.collect()
    assert dev.freed_alive() == 0
    assert s._run is not None  # the scheduler still has the failed run (its telemetry)
    assert dev.usage()["pinned_buffers"] == dev.usage()["device_buffers"] == 0
