"""gpuaug.Scheduler on the CPU: ordering, recycling, errors, shutdown, sources, telemetry.

Every test drives the real scheduler through FakeDevice (NumPy "device" memory, a thread
per stream, simulated copy/compute time, allocation counters, and rule checks in
``dev.errors``). GPU behaviour is in test_scheduler_gpu.py.
"""
import json
import subprocess
import sys
import threading
import time
import traceback

import numpy as np
import pytest

import gpuaug
from gpuaug.scheduler import (ArraySource, FakeDevice, ImageFiles, ImageFolder, IterableSource,
                              Source, ascii_timeline, chrome_trace, decode_image, epoch_batches,
                              summarize)
from gpuaug.scheduler.telemetry import BatchTiming, intersection, merge

Scheduler = gpuaug.Scheduler


def data(n=23, h=5, w=6, c=3, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, c), dtype=np.uint8)


def aug(b):
    """A non-trivial augment: every element must be read and written."""
    return b[:, ::-1] ^ np.uint8(0x5A)


def ref_aug(b):
    return b[:, ::-1] ^ np.uint8(0x5A)


def our_threads(pipeline_only=False):
    """The scheduler's threads (workers, copy, compute) and the FakeDevice's stream threads."""
    prefix = ("gpuaug-worker", "gpuaug-copy", "gpuaug-compute") if pipeline_only else ("gpuaug",)
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def assert_clean(dev):
    """No rule broken, nothing left allocated, no thread left."""
    assert dev.errors == []
    assert dev.pinned_live == 0 and dev.pinned_allocs == dev.pinned_frees
    assert dev.device_live == 0 and dev.device_allocs == dev.device_frees
    assert dev.streams_live == 0 and dev.registered == 0
    assert our_threads() == []


def collect(sched, copy=True):
    out = []
    for images, labels in sched:
        out.append((np.array(images, copy=True) if copy else images, labels))
    return out


# ---------------------------------------------------------------------------------------
# ordering: every batch once, in order
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("depth,workers,batch_size", [(1, 1, 4), (2, 1, 5), (3, 2, 4), (4, 3, 1), (3, 4, 23)])
def test_every_batch_once_in_order(depth, workers, batch_size):
    x = data()
    dev = FakeDevice(copy_ms=0.5, compute_ms=0.3)
    s = Scheduler(x, aug, batch_size=batch_size, labels=np.arange(len(x)), depth=depth,
                  workers=workers, device=dev)
    got = collect(s)
    assert len(got) == len(s) == -(-len(x) // batch_size)
    np.testing.assert_array_equal(np.concatenate([g for g, _ in got]), ref_aug(x))
    np.testing.assert_array_equal(np.concatenate([lab for _, lab in got]), np.arange(len(x)))
    assert [b.images for b in s.timings()] == [len(g) for g, _ in got]
    assert_clean(dev)


def test_default_augment_is_a_copy_and_batches_own_memory():
    x = data(12)
    dev = FakeDevice(copy_ms=1)
    s = Scheduler(x, batch_size=2, depth=2, device=dev)
    kept = [images for images, _ in s]  # keep every batch without copying it
    np.testing.assert_array_equal(np.concatenate(kept), x)
    assert_clean(dev)


def test_stress_jittered_timing():
    x = data(300, 3, 4, 1, seed=1)
    dev = FakeDevice(copy_ms=0.2, compute_ms=0.1, compute_jitter_ms=1.0, seed=3)
    s = Scheduler(x, aug, batch_size=2, depth=3, workers=3, device=dev)
    out = []
    for i, (images, _) in enumerate(s):
        if i % 17 == 0:
            time.sleep(0.003)  # a slow consumer now and then: the ring fills up
        out.append(np.array(images))
    np.testing.assert_array_equal(np.concatenate(out), ref_aug(x))
    assert_clean(dev)


# ---------------------------------------------------------------------------------------
# shuffling, sharding, drop_last
# ---------------------------------------------------------------------------------------
def test_shuffle_reproducible_and_per_epoch():
    x = data(40)
    lab = np.arange(40)

    def epoch(seed, epoch=None):
        s = Scheduler(x, None, batch_size=6, labels=lab, shuffle=True, seed=seed, device=FakeDevice())
        if epoch is not None:
            s.set_epoch(epoch)
        return s

    def run(s):
        got = collect(s)
        labels = np.concatenate([g for _, g in got])
        np.testing.assert_array_equal(np.concatenate([g for g, _ in got]), x[labels])  # labels follow images
        return labels

    a, b = run(epoch(7)), run(epoch(7))
    np.testing.assert_array_equal(a, b)
    assert sorted(a.tolist()) == list(range(40)) and not np.array_equal(a, lab)
    assert not np.array_equal(run(epoch(8)), a)
    s = epoch(7)
    e0, e1 = run(s), run(s)  # the epoch advances by itself
    np.testing.assert_array_equal(e0, a)
    assert not np.array_equal(e1, e0)
    np.testing.assert_array_equal(run(epoch(7, epoch=1)), e1)  # ... or is set


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("num_shards", [1, 2, 3])
def test_shards_partition(num_shards, shuffle, drop_last):
    n, bs = 29, 4
    x = data(n)
    seen, counts = [], []
    for sid in range(num_shards):
        s = Scheduler(x, None, batch_size=bs, labels=np.arange(n), shuffle=shuffle, seed=3,
                      shard_id=sid, num_shards=num_shards, drop_last=drop_last, device=FakeDevice())
        got = collect(s)
        labs = [lab for _, lab in got]
        assert len(got) == len(s)
        for g, lab in got:
            np.testing.assert_array_equal(g, x[lab])
        if drop_last:
            assert all(len(lab) == bs for lab in labs)
        counts.append(len(got))
        seen.append(np.concatenate(labs) if labs else np.array([], int))
    allv = np.concatenate(seen)
    assert len(set(allv.tolist())) == len(allv)  # disjoint
    if drop_last:
        assert len(set(counts)) == 1  # every shard the same number of batches
        per = n // num_shards
        assert all(len(v) == per // bs * bs for v in seen)
    else:
        assert sorted(allv.tolist()) == list(range(n))  # a partition


def test_epoch_batches():
    assert [b.tolist() for b in epoch_batches(10, 3, shard_id=1, num_shards=2)] == [[1, 3, 5], [7, 9]]
    assert [b.tolist() for b in epoch_batches(10, 3, drop_last=True)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    a = epoch_batches(10, 10, shuffle=True, seed=1, epoch=0)[0]
    b = epoch_batches(10, 10, shuffle=True, seed=1, epoch=1)[0]
    assert sorted(a) == sorted(b) == list(range(10)) and not np.array_equal(a, b)


def test_iterable_sharding_and_drop_last():
    batches = [np.full((3 if i < 6 else 1, 2, 2, 1), i, np.uint8) for i in range(7)]
    got = [[int(b[0, 0, 0, 0]) for b, _ in Scheduler(batches, device=FakeDevice(), shard_id=s, num_shards=2)]
           for s in range(2)]
    assert got == [[0, 2, 4, 6], [1, 3, 5]]
    got = [int(b[0, 0, 0, 0]) for b, _ in Scheduler(batches, device=FakeDevice(), drop_last=True)]
    assert got == [0, 1, 2, 3, 4, 5]  # the last, short batch is dropped
    got = [int(b[0, 0, 0, 0]) for b, _ in Scheduler(batches[:1], device=FakeDevice(), drop_last=True)]
    assert got == [0]


# ---------------------------------------------------------------------------------------
# recycling: slots reused only after their release events
# ---------------------------------------------------------------------------------------
def _owner(dev, arr):
    (buf,) = dev._owners([arr])
    return id(buf)


def test_device_slot_reused_only_after_release():
    """An augment returning its input (a view of the device slot): the consumer holds the
    slot itself, so its next copy must start after the consumer released it."""
    x = data(30)
    depth = 3
    dev = FakeDevice(copy_ms=1, compute_ms=0.5)
    s = Scheduler(x, lambda b: b, batch_size=2, depth=depth, workers=2, device=dev, recycle="manual")
    held, release_t, owner = [], {}, {}
    for batch in s:
        images, _ = batch
        owner[batch.index] = _owner(dev, images)
        expect = x[2 * batch.index:2 * batch.index + 2]
        np.testing.assert_array_equal(images, expect)
        held.append((batch, expect))
        if len(held) == depth:  # hold as many as the ring allows, then give the oldest back
            time.sleep(0.01)  # the pipeline would overwrite a held slot now if it could
            b0, e0 = held.pop(0)
            np.testing.assert_array_equal(b0.images, e0)
            release_t[b0.index] = time.perf_counter()
            b0.release()
    for b, e in held:
        np.testing.assert_array_equal(b.images, e)
        release_t[b.index] = time.perf_counter()
        b.release()
    # copies into a slot, in time order: batch slot, slot + depth, ...
    copies = {}
    for kind, bufs, t0, _ in sorted(dev.log, key=lambda e: e[2]):
        if kind == "copy":
            copies.setdefault(bufs[0], []).append(t0)
    by_buf = {}
    for k in sorted(owner):
        by_buf.setdefault(owner[k], []).append(k)
    assert len(by_buf) == depth
    for buf, ks in by_buf.items():
        starts = copies[buf]
        assert len(starts) == len(ks)
        for prev_k, start in zip(ks, starts[1:]):
            assert start >= release_t[prev_k], f"batch {prev_k}'s slot was rewritten before its release"
    assert_clean(dev)


@pytest.mark.parametrize("aliased", [False, True])
def test_consumer_on_its_own_stream(aliased):
    """The consumer works on a (fake) stream of its own, not the host: its work is ordered
    after each batch's event, and its release events gate the reuse of slots/outputs."""
    x = data(40, 4, 4, 3)
    dev = FakeDevice(copy_ms=0.5, compute_ms=0.5)
    consumer = dev.new_stream("consumer")
    s = Scheduler(x, (lambda b: b) if aliased else aug, batch_size=2, depth=2, device=dev,
                  stream=consumer)
    sums = []
    for images, _ in s:
        # the consumer's "kernel": a checksum, then poison (a race would show in later sums)
        dev.launch(consumer, lambda a: (sums.append(int(a.astype(np.int64).sum())), a.fill(0xEE)), images)
    dev.sync_stream(consumer)
    dev.free_stream(consumer)
    want = [int((x[i:i + 2] if aliased else ref_aug(x[i:i + 2])).astype(np.int64).sum())
            for i in range(0, 40, 2)]
    assert sums == want
    assert_clean(dev)


def test_manual_recycle_holding_too_many_raises():
    dev = FakeDevice()
    s = Scheduler(data(20), aug, batch_size=2, depth=2, device=dev, recycle="manual")
    it = iter(s)
    held = [next(it), next(it)]
    with pytest.raises(RuntimeError, match="batch 0 is still held"):
        next(it)
    assert [b.index for b in held] == [0, 1]
    assert_clean(dev)


def test_manual_recycle_release_keeps_going():
    x = data(20)
    dev = FakeDevice(copy_ms=0.5)
    s = Scheduler(x, aug, batch_size=2, depth=2, device=dev, recycle="manual")
    out = []
    for batch in s:
        out.append(np.array(batch.images))
        s.release(batch)
        batch.release()  # twice is harmless
    np.testing.assert_array_equal(np.concatenate(out), ref_aug(x))
    assert_clean(dev)


def test_rule_checks_catch_a_device_that_ignores_events():
    """Negative control: with waits and event syncs switched off the FakeDevice reports
    the refilled staging slots, so the clean runs above mean something."""

    class Broken(FakeDevice):
        def wait(self, stream, event):
            pass

        def synchronize(self, event):
            pass

    dev = Broken(copy_ms=5)
    s = Scheduler(data(24), None, batch_size=2, depth=2, workers=2, device=dev)
    for _ in s:
        pass
    s.close()
    assert any("changed between enqueue and copy" in e for e in dev.errors)


# ---------------------------------------------------------------------------------------
# errors reach the consumer with their traceback
# ---------------------------------------------------------------------------------------
class Boom(Exception):
    pass


def exploding_batches():
    for i in range(10):
        if i == 3:
            raise Boom("source broke at 3")
        yield np.full((2, 3, 3, 3), i, np.uint8), i


def test_exception_in_iterable_source():
    dev = FakeDevice(copy_ms=0.5)
    s = Scheduler(exploding_batches, None, device=dev)
    got = []
    with pytest.raises(Boom, match="source broke at 3") as ei:
        for images, label in s:
            got.append(label)
    assert got == [0, 1, 2]  # everything before the failure arrives, in order
    frames = [f.name for f in traceback.extract_tb(ei.value.__traceback__)]
    assert "exploding_batches" in frames
    assert any("batch 3" in n for n in getattr(ei.value, "__notes__", ["batch 3"]))
    assert_clean(dev)


def test_exception_in_augment():
    calls = []

    def bad_augment(b):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("augment broke")
        return aug(b)

    dev = FakeDevice(copy_ms=0.5)
    s = Scheduler(data(20), bad_augment, batch_size=4, device=dev)
    got = []
    with pytest.raises(ValueError, match="augment broke") as ei:
        for images, _ in s:
            got.append(images)
    assert len(got) == 1
    assert "bad_augment" in [f.name for f in traceback.extract_tb(ei.value.__traceback__)]
    assert_clean(dev)


class BadReads(ArraySource):
    def read(self, indices, out):
        if 13 in indices:
            raise OSError("cannot read sample 13")
        super().read(indices, out)


def test_exception_in_indexed_read():
    x = data(30)
    dev = FakeDevice()
    s = Scheduler(BadReads(x), None, batch_size=4, workers=3, device=dev)
    got = []
    with pytest.raises(OSError, match="sample 13"):
        for images, _ in s:
            got.append(np.array(images))
    np.testing.assert_array_equal(np.concatenate(got), x[:12])
    assert_clean(dev)


# ---------------------------------------------------------------------------------------
# shutdown: break, close(), exhaustion, keep_buffers
# ---------------------------------------------------------------------------------------
def test_break_stops_workers_and_frees_memory():
    dev = FakeDevice(copy_ms=2, compute_ms=1)
    s = Scheduler(data(60), aug, batch_size=2, depth=3, workers=3, device=dev)
    for i, _ in enumerate(s):
        if i == 2:
            assert dev.pinned_live > 0 and len(our_threads()) > 0
            break
    assert_clean(dev)
    assert len(s.timings()) == 3


def test_close_mid_epoch():
    dev = FakeDevice(copy_ms=2)
    s = Scheduler(data(60), aug, batch_size=2, device=dev)
    it = iter(s)
    next(it)
    next(it)
    s.close()
    assert_clean(dev)
    with pytest.raises(RuntimeError, match="closed"):
        next(it)
    assert_clean(dev)


def test_context_manager_and_new_epoch_restart():
    dev = FakeDevice()
    with Scheduler(data(20), aug, batch_size=2, device=dev) as s:
        it = iter(s)
        next(it)
        assert len(collect(s)) == 10  # a new iteration closes the old one
    assert_clean(dev)


def test_keep_buffers_between_epochs():
    x = data(12)
    dev = FakeDevice()
    s = Scheduler(x, aug, batch_size=4, depth=2, device=dev, keep_buffers=True)
    for _ in range(3):
        got = collect(s)
        np.testing.assert_array_equal(np.concatenate([g for g, _ in got]), ref_aug(x))
        assert dev.pinned_live > 0 and our_threads(pipeline_only=True) == []
        assert dev.streams_live == 2 + len(s._res.stager_streams())  # kept, with the buffers (chunks: one per worker)
    assert dev.pinned_allocs == (2 if s.staging == "batch" else 2 * len(s._res.stagers)) and dev.device_allocs == 2  # allocated once, for all epochs
    s.close()
    assert_clean(dev)


def test_blocked_consumer_then_gc_frees():
    dev = FakeDevice()
    s = Scheduler(data(40), aug, batch_size=2, device=dev)
    it = iter(s)
    next(it)
    del it  # an abandoned iterator is finalised like a break
    assert_clean(dev)


# ---------------------------------------------------------------------------------------
# sources
# ---------------------------------------------------------------------------------------
def test_iterable_with_changing_shapes_and_labels_untouched():
    rng = np.random.default_rng(5)
    shapes = [(2, 4, 4, 3), (5, 9, 7, 3), (1, 3, 3, 3), (5, 9, 7, 3), (8, 16, 16, 3), (2, 4, 4, 3)]
    batches = [rng.integers(0, 256, sh, dtype=np.uint8) for sh in shapes]
    tags = [{"batch": i} for i in range(len(shapes))]
    dev = FakeDevice(copy_ms=0.5)
    s = Scheduler(list(zip(batches, tags)), aug, depth=2, device=dev)
    got = collect(s)
    assert len(got) == len(shapes)
    for (g, lab), b, t in zip(got, batches, tags):
        np.testing.assert_array_equal(g, ref_aug(b))
        assert lab is t  # labels are passed through untouched
    st = s.stats()
    assert st.pinned_reallocs >= 1 and st.device_reallocs >= 1  # grown when a batch got larger
    assert st.pinned_reallocs <= 4 and dev.pinned_allocs == 2 + st.pinned_reallocs
    assert_clean(dev)


def test_iterable_varshape_batches():
    rng = np.random.default_rng(6)
    batches = [[rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]
               for sizes in ([(5, 7), (9, 3)], [(4, 4)], [(11, 13), (1, 1), (6, 2)])]
    dev = FakeDevice()
    s = Scheduler(lambda: iter(batches), lambda xs: [a[::-1] for a in xs], device=dev, depth=2)
    for _ in range(2):  # a callable source gives a fresh iterator each epoch
        got = [[np.array(a) for a in imgs] for imgs, _ in s]
        for g, b in zip(got, batches):
            assert len(g) == len(b)
            for ga, ba in zip(g, b):
                np.testing.assert_array_equal(ga, ba[::-1])
    assert_clean(dev)


def test_iterable_accepts_array_likes_and_lists_of_batches():
    class CPUTensor:  # the NumPy array protocol, as a PyTorch CPU tensor has
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    x = data(6)
    dev = FakeDevice()
    got = collect(Scheduler(IterableSource([CPUTensor(x[:3]), CPUTensor(x[3:])]), device=dev))
    np.testing.assert_array_equal(np.concatenate([g for g, _ in got]), x)
    assert_clean(dev)


def test_memmap_source(tmp_path):
    x = data(17)
    path = tmp_path / "x.npy"
    np.save(path, x)
    mm = np.load(path, mmap_mode="r")
    dev = FakeDevice()
    s = Scheduler(mm, aug, batch_size=5, shuffle=True, seed=1, labels=np.arange(17), device=dev)
    for g, lab in collect(s):
        np.testing.assert_array_equal(g, ref_aug(x[lab]))
    assert_clean(dev)


@pytest.mark.parametrize("shuffle", [False, True])
def test_pin_source_copies_straight_from_the_array(shuffle):
    x = data(21)
    dev = FakeDevice(copy_ms=0.2)
    s = Scheduler(x, aug, batch_size=4, labels=np.arange(21), shuffle=shuffle, seed=2,
                  pin_source=True, device=dev)
    it = iter(s)
    first = next(it)
    assert dev.registered == 1 and dev.pinned_allocs == 0  # no staging ring
    got = [(np.array(first.images), first.labels)] + collect_iter(it)
    for g, lab in got:
        np.testing.assert_array_equal(g, ref_aug(x[lab]))
    assert sum(len(lab) for _, lab in got) == 21
    # the array stays page-locked between epochs (registered once), until close()
    assert dev.registered == 1
    second = collect_iter(iter(s))
    assert sum(len(lab) for _, lab in second) == 21 and dev.registered == 1
    s.close()
    assert_clean(dev)


def collect_iter(it):
    return [(np.array(a), b) for a, b in it]


def _write_images(root, rng, fmt="PNG"):
    from PIL import Image

    files, labels = [], []
    for ci, cls in enumerate(["cat", "dog"]):
        (root / cls).mkdir(parents=True)
        for i in range(3 + ci):
            arr = rng.integers(0, 256, (10 + 3 * i, 12 + i, 3), dtype=np.uint8)
            p = root / cls / f"{i}.{fmt.lower()}"
            Image.fromarray(arr).save(p, format=fmt)
            files.append(str(p))
            labels.append(ci)
    return files, labels


def test_image_folder_uniform_and_varshape(tmp_path):
    files, labels = _write_images(tmp_path, np.random.default_rng(0))
    dev = FakeDevice()
    src = ImageFolder(tmp_path, size=(8, 9))
    assert src.classes == ["cat", "dog"] and len(src) == 7
    got = collect(Scheduler(src, None, batch_size=3, workers=3, device=dev))
    imgs = np.concatenate([g for g, _ in got])
    assert imgs.shape == (7, 8, 9, 3) and imgs.dtype == np.uint8
    np.testing.assert_array_equal(np.concatenate([lab for _, lab in got]), labels)
    for img, f in zip(imgs, files):
        np.testing.assert_array_equal(img, decode_image(f, (8, 9)))
    # varshape: a list of HWC images at their own size, straight from the path
    got = [(list(imgs), lab) for imgs, lab in Scheduler(str(tmp_path), lambda xs: [a.copy() for a in xs],
                                                        batch_size=4, device=dev)]
    flat = [np.array(a) for imgs, _ in got for a in imgs]
    assert [a.shape for a in flat] == [decode_image(f).shape for f in files]
    for a, f in zip(flat, files):
        np.testing.assert_array_equal(a, decode_image(f))
    assert_clean(dev)


def test_image_files_jpeg_draft(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(1)
    paths = []
    for i in range(4):
        p = tmp_path / f"{i}.jpg"
        Image.fromarray(rng.integers(0, 256, (64, 80, 3), dtype=np.uint8)).save(p, quality=90)
        paths.append(p)
    dev = FakeDevice()
    s = Scheduler(ImageFiles(paths, labels=[3, 1, 4, 1], size=(16, 20)), None, batch_size=2,
                  device=dev)
    got = collect(s)
    assert [g.shape for g, _ in got] == [(2, 16, 20, 3)] * 2
    assert np.concatenate([lab for _, lab in got]).tolist() == [3, 1, 4, 1]
    np.testing.assert_array_equal(got[0][0][0], decode_image(paths[0], (16, 20)))
    gray = ImageFiles(paths, size=(16, 20), mode="L")
    assert collect(Scheduler(gray, None, batch_size=4, device=dev))[0][0].shape == (4, 16, 20, 1)
    assert_clean(dev)


def test_custom_source_subclass():
    class Squares(Source):
        def __len__(self):
            return 9

        def describe(self, indices):
            from gpuaug.scheduler import Layout

            return Layout.uniform((len(indices), 2, 2, 1), np.float32)

        def read(self, indices, out):
            out[...] = np.asarray(indices, np.float32)[:, None, None, None] ** 2

        def labels(self, indices):
            return list(indices)

    got = collect(Scheduler(Squares(), None, batch_size=4, device=FakeDevice()))
    assert [g[:, 0, 0, 0].tolist() for g, _ in got] == [[0, 1, 4, 9], [16, 25, 36, 49], [64]]


def test_out_ring_of_caller_buffers():
    x = data(10)
    outs = [np.zeros((2, 5, 6, 3), np.uint8) for _ in range(2)]
    dev = FakeDevice(copy_ms=0.3)
    s = Scheduler(x, aug, batch_size=2, device=dev, out=outs)
    for i, (images, _) in enumerate(s):
        assert images is outs[i % 2]  # the caller's own buffer comes back
        np.testing.assert_array_equal(images, ref_aug(x[2 * i:2 * i + 2]))
    with pytest.raises(ValueError, match="out buffer has shape"):
        collect(Scheduler(data(10, 7, 6), aug, batch_size=2, device=FakeDevice(), out=outs))
    assert_clean(dev)


# ---------------------------------------------------------------------------------------
# telemetry
# ---------------------------------------------------------------------------------------
def test_stats_timeline_ascii_match_fake_timings(tmp_path):
    copy_ms, compute_ms, n = 20.0, 6.0, 8
    x = data(2 * n, 8, 8, 3)
    dev = FakeDevice(copy_ms=copy_ms, compute_ms=compute_ms)
    s = Scheduler(x, aug, batch_size=2, depth=3, workers=2, device=dev, staging="batch")  # one copy stream, fills before copies
    collect(s)
    tm = s.timings()
    assert [b.index for b in tm] == list(range(n))
    cd = [b.copy[1] - b.copy[0] for b in tm]
    kd = [b.compute[1] - b.compute[0] for b in tm]
    # never shorter than simulated; longer only by scheduling noise (a loaded CI machine)
    assert min(cd) >= copy_ms * 0.9e-3 and np.median(cd) <= copy_ms * 5e-3
    assert min(kd) >= compute_ms * 0.9e-3 and np.median(kd) <= compute_ms * 5e-3
    for b in tm:
        assert b.compute[0] >= b.copy[1] - 1e-4  # augment k starts after copy k ends
        assert b.wait is not None and b.fill and all(f[2] <= b.copy[0] + 1e-4 for f in b.fill)
        assert b.nbytes == x[:2].nbytes and b.images == 2
    for a, b in zip(tm, tm[1:]):
        assert b.copy[0] >= a.copy[1] - 1e-4  # one copy stream: copies in order, no overlap
    st = s.stats()
    assert st.batches == n and st.images == 2 * n and st.bytes == x.nbytes
    # the copies were the bottleneck: the copy stream stays busy, augments hide behind copies
    assert st.copy_busy > 0.6
    assert st.overlap > 0.6
    copies, computes = merge(b.copy for b in tm), merge(b.compute for b in tm)
    assert st.overlap == pytest.approx(intersection(copies, computes) / min(st.copy_s, st.compute_s))
    assert st.span_s == pytest.approx(max(b.compute[1] for b in tm) - tm[0].copy[0])
    assert st.wall_s >= st.span_s
    assert abs(st.compute_s - sum(b.compute[1] - b.compute[0] for b in tm)) < 1e-9
    assert abs(st.images_per_s * st.wall_s - st.images) < 1e-6
    assert st.wall_s >= n * copy_ms * 0.9e-3
    assert s.stats(warmup=2).batches == n - 2
    # Chrome trace
    path = s.timeline(tmp_path / "trace.json")
    trace = json.loads(open(path).read())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert sum(e["name"].startswith("copy b") for e in spans) == n
    assert sum(e["name"].startswith("augment a") for e in spans) == n
    c3 = next(e for e in spans if e["name"] == "copy b3")
    assert c3["ts"] == pytest.approx(tm[3].copy[0] * 1e6) and c3["dur"] == pytest.approx(
        (tm[3].copy[1] - tm[3].copy[0]) * 1e6)
    assert trace["otherData"]["stats"]["batches"] == n
    # ASCII
    text = s.print_timeline(width=120, count=n)
    lines = text.splitlines()
    assert lines[0].startswith("copy") and lines[1].startswith("compute")
    t0 = tm[0].copy[0]
    scale = 119 / (max(b.compute[1] for b in tm) - t0)
    for b in tm:  # a label is drawn inside its interval when it fits
        for lane, label, (s0, s1) in ((0, f"b{b.index}", b.copy), (1, f"a{b.index}", b.compute)):
            if (s1 - s0) * scale >= len(label) + 3:
                col = lines[lane].index(label) - 8
                assert (s0 - t0) * scale - 1 <= col <= (s1 - t0) * scale + 1


def test_summarize_exact():
    bs = [BatchTiming(0, 4, 100, (0.0, 2.0), (2.0, 3.0), wait=(0.0, 3.0)),
          BatchTiming(1, 4, 100, (2.0, 4.0), (4.0, 5.0), wait=(3.0, 5.0)),
          BatchTiming(2, 4, 100, (4.0, 6.0), (6.0, 7.0), wait=(5.0, 7.0))]
    st = summarize(bs)
    assert st.span_s == 7.0 and st.copy_s == 6.0 and st.compute_s == 3.0
    assert st.copy_busy == pytest.approx(6 / 7) and st.compute_busy == pytest.approx(3 / 7)
    assert st.overlap == pytest.approx(2 / 3)  # a0, a1 overlap b1, b2; a2 overlaps nothing
    assert st.wall_s == 7.0 and st.images_per_s == pytest.approx(12 / 7)
    assert st.gb_per_s == pytest.approx(300 / 7 / 1e9) and st.copy_gb_per_s == pytest.approx(50 / 1e9)
    assert st.host_wait_s == 7.0
    st2 = summarize(bs, warmup=1)
    assert st2.batches == 2 and st2.wall_s == 4.0  # from the delivery of the warm-up batch
    assert "overlap 67%" in str(st)
    assert summarize([]).batches == 0
    assert merge([(0, 1), (0.5, 2), (3, 4)]) == [(0, 2), (3, 4)]
    assert intersection([(0, 2), (3, 4)], [(1, 3.5)]) == pytest.approx(1.5)


def test_ascii_timeline_exact():
    bs = [BatchTiming(1, 1, 1, (0.0, 8.0), (8.0, 12.0)),
          BatchTiming(2, 1, 1, (8.0, 16.0), (16.0, 20.0))]
    text = ascii_timeline(bs, width=21, waits=False)
    lines = text.splitlines()
    assert lines[0] == "copy    |==b1===|==b2===|"
    assert lines[1] == "compute         |a1=|   |a2=|"
    assert "20000.00 ms" in lines[2]


def test_chrome_trace_threads():
    bs = [BatchTiming(0, 1, 1, (0.0, 1.0), (1.0, 2.0), fill=[(0, -1.0, 0.0), (1, -1.0, -0.5)], wait=(0.0, 2.0))]
    tr = chrome_trace(bs, device="cuda:0")
    names = {e["args"]["name"] for e in tr["traceEvents"] if e["ph"] == "M"}
    assert {"copy stream (H2D)", "compute stream (augment)", "worker 0 (fill)", "worker 1 (fill)",
            "consumer wait", "GPU (cuda:0)"} <= names
    assert sum(e["ph"] == "X" for e in tr["traceEvents"]) == 5


def test_progress_bar_without_tqdm(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    collect(Scheduler(data(6), None, batch_size=2, device=FakeDevice(), progress=True))
    assert "3/3 batches" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# arguments and import
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw,err,match", [
    (dict(depth=0), ValueError, "depth"),
    (dict(workers=0), ValueError, "workers"),
    (dict(output="jax"), ValueError, "output"),
    (dict(recycle="never"), ValueError, "recycle"),
    (dict(shard_id=2, num_shards=2), ValueError, "shard_id"),
    (dict(shuffle=True, num_shards=2), ValueError, "seed"),
    (dict(batch_size=None), ValueError, "batch_size"),
    (dict(augment=3), TypeError, "augment"),
])
def test_bad_arguments(kw, err, match):
    args = dict(batch_size=2, device=FakeDevice())
    args.update(kw)
    aug_ = args.pop("augment", None)
    with pytest.raises(err, match=match):
        Scheduler(data(4), aug_, **args)


def test_bad_arguments_iterable():
    with pytest.raises(ValueError, match="shuffle"):
        Scheduler([data(2)], shuffle=True, device=FakeDevice())
    with pytest.raises(ValueError, match="batch_size"):
        Scheduler([data(2)], batch_size=2, device=FakeDevice())
    with pytest.raises(ValueError, match="pin_source"):
        Scheduler([data(2)], pin_source=True, device=FakeDevice())
    with pytest.raises(ValueError, match="labels"):
        ArraySource(data(4), labels=[1, 2])
    with pytest.raises(TypeError, match="stream"):
        collect(Scheduler(data(4), batch_size=2, device=FakeDevice(), stream=7))


def test_op_name_as_augment_and_len():
    s = Scheduler(data(10), "flip", batch_size=4, device=FakeDevice())
    assert s.augment is gpuaug.flip and len(s) == 3
    got = collect(s)
    np.testing.assert_array_equal(np.concatenate([g for g, _ in got]), data(10)[:, :, ::-1])
    assert len(Scheduler([data(2)] * 5, device=FakeDevice(), shard_id=1, num_shards=2)) == 2
    with pytest.raises(TypeError):
        len(Scheduler(iter([data(2)]), device=FakeDevice()))


def test_import_is_lazy():
    code = ("import sys, gpuaug; S = gpuaug.Scheduler; import gpuaug.scheduler;"
            "bad = [m for m in ('cupy', 'numba', 'torch') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert "Scheduler" in dir(gpuaug)


def test_docstring_examples():
    import doctest

    import gpuaug.scheduler._core
    import gpuaug.scheduler._device
    import gpuaug.scheduler._epochs
    import gpuaug.scheduler._pinned
    import gpuaug.scheduler.sources

    for mod in (gpuaug.scheduler._core, gpuaug.scheduler._device, gpuaug.scheduler._epochs,
                gpuaug.scheduler._pinned, gpuaug.scheduler.sources):
        res = doctest.testmod(mod)
        assert res.failed == 0 and res.attempted > 0, mod.__name__


def test_no_gpu_error_names_fake_device():
    from conftest import HAS_GPU

    if HAS_GPU:
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="FakeDevice"):
        Scheduler(data(4), batch_size=2)
