"""One pass of the scheduler over its source (an epoch): the threads, batch records, telemetry.

Pipeline of one epoch (a *run*), batch ``k`` flowing left to right::

    workers (threads)        copier thread            compute thread           consumer
    fill pinned slot k%D --> H2D on the copy stream --> augment on the compute --> next()
    (NumPy memcpy, GIL        into device slot k%D,     stream after waiting     waits on its own
     released; a batch is     events copy0/copy1        copy1; events            stream for comp1
     split into chunks)                                 comp0/comp1

The workers prepare batches in order (one at a time: the source's describe/labels, a
pinned slot) and fill their chunks in parallel (an array source: one NumPy copy or gather
per chunk, the GIL released for all of it); a free worker prepares batch k + 1 while the
others still fill batch k, when its slot is free. The pinned ring stays from epoch to
epoch (see :mod:`gpuaug.scheduler._staging`).

Resources and the event each waits for before it is reused (D = ``depth``):

- pinned slot ``s``: refilled for batch k only after the copy of its last user (k - D)
  has *completed* (host waits on that batch's copy1 event);
- device slot ``s``: rewritten by the copy of batch k only after the augment of its last
  user has completed (the copy stream waits on that batch's comp1 event) - or, when the
  augment returned a view of its input, after the consumer released that batch;
- output of batch k - D (and ``out[k % L]``): dropped/rewritten only after the consumer
  released it; the compute stream waits on the release event recorded on the
  consumer's stream, so the memory pool cannot hand it to a new kernel too early.

In-memory array sources are staged in chunks by default (``staging="chunks"``): no
batch-sized pinned ring. The preparing worker takes the batch's device slot (waiting, on
the host, only for the *enqueue* of its last user's augment; each worker stream then waits
for that augment on the device); each worker gathers its share of the batch, about
``chunk_bytes`` at a time, into one of its own two pinned chunk buffers and queues the H2D
of that chunk straight into the device slot on its own stream (a
:class:`~gpuaug.scheduler._staging.ChunkStager`; a buffer is refilled once its event says
the copy out of it completed), then records an event after its share. The copy thread
makes the copy stream wait on those events and records copy1 there, which the compute
stream waits on, on the device as before. A chunk stays in the CPU caches between the
gather and the DMA; the batch path moved every byte through host memory about three
times (H100: a 4 MiB-chunk ring outside the scheduler 41 GB/s, whole-batch staging 23-26).

File sources decoded on the GPU (``ImageFiles(..., decode="gpu")``) skip the pinned ring:
the workers read the files' bytes (at most ``depth`` batches ahead of the decode), the copy
thread decodes each batch with one batched nvImageCodec call on the copy stream (at most
``depth`` batches ahead of the augment), and the compute thread makes the dense batch with
one ``resized_crop`` launch before the augment. Samples a source skips (``on_error="skip"``)
are cut out of their batch once it is filled (rows moved down, labels cut).

Every device call goes through a :class:`~gpuaug.scheduler._device.Device`, so all of
this is tested on the CPU with a FakeDevice.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import time
import warnings
from collections import OrderedDict, deque
from typing import TYPE_CHECKING

import numpy as np

from gpuaug.scheduler import telemetry as T
from gpuaug.scheduler._decode import UNDECODABLE, ImageDecodeError
from gpuaug.scheduler._epochs import epoch_batches, shard_iter, shard_drop_last_iter
from gpuaug.scheduler._records import (DeviceBatch, _check_result, _copy_batch, _copy_into, _host_batch,
                                      _Progress, _Rec, _split_item)
from gpuaug.scheduler.sources import Layout, Source, layout_of

if TYPE_CHECKING:
    from gpuaug.scheduler._core import Scheduler

# An in-memory batch is split into at most one chunk per worker, each >= 4 MiB: few lock
# round trips and Python steps per batch (was up to 2 per worker of >= 1 MiB). (A copy with
# non-temporal stores was tried on the H100: 6.9 vs 6.5 GB/s, within noise; not kept.)
_CHUNK_BYTES = 4 << 20


class _Stop(Exception):
    pass


class _Run:
    """One pass over the source (an epoch): threads, batch records, telemetry."""

    def __init__(self, sched: "Scheduler", epoch):
        self.s, self.dev, self.res = sched, sched.device, sched._res
        self.depth = sched.depth
        # One lock; one condition per kind of waiter, so a state change wakes only the
        # threads that wait for it (idle workers, the preparer waiting for a pinned slot,
        # the copier, the compute thread, the consumer) instead of all of them.
        self.lock = threading.Lock()
        # GPU decoding: nvImageCodec's batched decode hands the GIL back and forth once or twice
        # per image, and each time another thread runs Python it waits out the interpreter's
        # switch interval (5 ms): 256 JPEGs took 17 ms alone, 44 ms in the Scheduler beside its
        # own worker and compute threads, and 3 s beside one spinning thread (H100,
        # tests/gpu/decode_contention.py). So the scheduler's own threads stand aside while it
        # runs: file reads, the decode and the decoded batches' finish + augment take turns.
        self.decode_gate = threading.Lock()
        self.cv_work, self.cv_slot, self.cv_copy, self.cv_comp, self.cv_cons = (
            threading.Condition(self.lock) for _ in range(5))
        self.stopping = self.closed = False
        self.failure = None            # (k, exception) of the first batch that failed
        self.recs = OrderedDict()
        self.filling = OrderedDict()   # k -> rec with chunks left to fill
        self.pslot_user = [None] * self.depth
        self.dslot_user = [None] * self.depth
        self.prep_next, self.preparing, self.prep_done = 0, False, False
        self.copy_enq = self.compute_enq = self.delivered = -1
        self.timings = deque(maxlen=sched.max_timings)
        self._harvesting = threading.Lock()
        self._closing = threading.Lock()  # one close() at a time (a watchdog and the consumer)
        self.live = 0                     # threads still running their loop
        self.orphaned = False             # closed with threads still running: the last one out cleans up
        self.finished = False             # _finish has run (buffers given back)
        self.chunked = sched.staging == "chunks"
        src = sched.source
        self.epoch = epoch
        if isinstance(src, Source):
            self.batches = self._epoch_batches(epoch)
            self.total = len(self.batches)
            self.it = None
        else:
            self.batches, self.total = None, None
            it = iter(src)
            if sched.drop_last:
                self.it = shard_drop_last_iter(it, sched.shard_id, sched.num_shards)
            elif sched.num_shards > 1:
                self.it = shard_iter(it, sched.shard_id, sched.num_shards)
            else:
                self.it = it
        with self.dev.context():
            copy_s, _ = self.res.streams()
            if sched.pin_source:
                self.res.register(src.images)
            self.origin = self.dev.new_event()
            self.dev.record(self.origin, copy_s)
            self.dev.synchronize(self.origin)
        self.host0 = time.perf_counter()  # host clock aligned with the origin event
        if hasattr(src, "begin"):  # e.g. start decoding processes before any thread of ours runs
            src.begin()
        self.progress = _Progress(self.total, "gpuaug") if sched.progress else None
        self.threads = [threading.Thread(target=self._thread_main, args=(self._worker, i),
                                         name=f"gpuaug-worker-{i}", daemon=True) for i in range(sched.workers)]
        self.threads += [threading.Thread(target=self._thread_main, args=(self._copier,), name="gpuaug-copy",
                                          daemon=True),
                         threading.Thread(target=self._thread_main, args=(self._computer,), name="gpuaug-compute",
                                          daemon=True)]
        self.live = len(self.threads)
        started = 0
        try:
            for t in self.threads:
                t.start()
                started += 1
        except BaseException as e:
            with self.lock:
                self.live -= len(self.threads) - started
            # close() joins only the threads that started (joining the others would raise
            # "cannot join thread before it is started" and hide this error).
            total, self.threads = len(self.threads), self.threads[:started]
            if hasattr(e, "add_note"):
                e.add_note(f"(gpuaug.Scheduler started only {started} of its {total} threads; "
                           f"workers={sched.workers})")
            self.close()
            raise

    def _epoch_batches(self, epoch):
        s = self.s
        return epoch_batches(len(s.source), s.batch_size, epoch=epoch, shuffle=s.shuffle, seed=s._seed,
                             shard_id=s.shard_id, num_shards=s.num_shards, drop_last=s.drop_last)

    def _thread_main(self, fn, *args):
        try:
            fn(*args)
        finally:
            with self.lock:
                self.live -= 1
                last = self.live == 0 and self.orphaned
            if last:  # close() could not wait for this thread: clean up after the run here
                self._finish(free=True)

    # ---- helpers ----------------------------------------------------------------------
    def _limit(self):
        return self.failure[0] if self.failure is not None else float("inf")

    def _fail(self, k, exc, where):
        if hasattr(exc, "add_note"):
            exc.add_note(f"(raised in gpuaug.Scheduler's {where} while processing batch {k})")
        with self.lock:
            if self.failure is None or k < self.failure[0]:
                self.failure = (k, exc)
            self._wake_all()

    def _wake_all(self):
        for cv in (self.cv_work, self.cv_slot, self.cv_copy, self.cv_comp, self.cv_cons):
            cv.notify_all()

    def _wait(self, cv, pred, k):
        """With the lock held, wait on ``cv`` until ``pred()``; raise _Stop when stopping or
        when batch k (or an earlier one) failed."""
        while not pred():
            if self.stopping or k >= self._limit():
                raise _Stop
            cv.wait()
        if self.stopping or k >= self._limit():
            raise _Stop

    # ---- workers: prepare batches in order, fill their chunks in parallel ----------------
    def _worker(self, wid):
        self.dev.activate()
        while True:
            with self.lock:
                job = None
                while job is None:
                    if self.stopping:
                        return
                    lim = self._limit()
                    can_prep = not self.preparing and not self.prep_done and self.prep_next < lim
                    if can_prep and self._prepare_now():
                        self.preparing = True
                        job = ("prepare", self.prep_next)
                        break
                    for rec in self.filling.values():
                        if rec.k < lim and rec.next_chunk < len(rec.chunks):
                            job = ("fill", rec, rec.next_chunk)
                            rec.next_chunk += 1
                            break
                    if job is not None:
                        break
                    if can_prep:
                        self.preparing = True
                        job = ("prepare", self.prep_next)
                        break
                    if (self.prep_done or self.prep_next >= lim) and not any(
                            r.k < lim and r.next_chunk < len(r.chunks) for r in self.filling.values()):
                        return
                    self.cv_work.wait()
            if job[0] == "prepare":
                k = job[1]
                try:
                    self._prepare(k)
                except _Stop:
                    with self.lock:
                        self.preparing = False
                        self.cv_work.notify_all()
                    return
                except BaseException as e:  # noqa: BLE001 - handed to the consumer
                    with self.lock:
                        self.preparing = False
                        self.prep_done = True
                    self._fail(k, e, "source reader (worker thread)")
            else:
                _, rec, ci = job
                try:
                    self._fill(wid, rec, ci)
                except BaseException as e:  # noqa: BLE001
                    self._fail(rec.k, e, "source reader (worker thread)")

    def _prepare_now(self):
        """(Lock held) Whether a free worker should prepare the next batch before taking a
        chunk to fill: when at most one batch has chunks left to hand out and the next
        batch's slot is free now (its last copy has completed). Preparing only once no
        chunk was left made every batch wait for its own preparation: one chunk per worker,
        so the workers but one sat idle through it."""
        if sum(1 for r in self.filling.values() if r.next_chunk < len(r.chunks)) > 1:
            return False
        if self.chunked:  # the device slot is taken at preparation
            prev = self.dslot_user[self.prep_next % self.depth]
            return prev is None or (self.compute_enq >= prev.k and (not prev.aliased or prev.released))
        prev = self.pslot_user[self.prep_next % self.depth]
        return prev is None or (self.copy_enq >= prev.k and "copy1" in prev.ev
                                and self.dev.done(prev.ev["copy1"]))

    def _prepare(self, k):
        s = self.s
        if self.batches is not None:
            if k >= self.total:
                with self.lock:
                    self.prep_done, self.preparing = True, False
                    self.cv_work.notify_all()
                return
            idx, skipped = self.batches[k], []
            screen = getattr(s.source, "screen", None)
            if screen is not None:  # unreadable headers left out (on_error="skip") or raised
                idx, skipped = screen(idx)
            kind = None
            if getattr(s.source, "device_decode", False):
                layout, kind = None, "decode"
            else:
                layout = s.source.describe(idx)
            labels, x = s.source.labels(idx), None
            rows = s.source.rows(idx) if s.pin_source and kind != "decode" else None
            if kind != "decode":
                kind = "direct" if rows is not None else ("chunks" if self.chunked else "pinned")
        else:
            it = self.it
            if it is None:  # closed
                raise _Stop
            try:
                item = next(it)
            except StopIteration:
                with self.lock:
                    self.prep_done, self.preparing, self.total = True, False, k
                    self._wake_all()
                return
            x, labels = _split_item(item)
            idx = rows = None
            skipped = []
            if self.dev.is_device_array(x):
                kind, layout = "device", None
                n_dev = len(x)
            else:
                x = _host_batch(x)
                layout, kind = layout_of(x), "pinned"
        if self.stopping:  # closed while the source was reading: take no slot
            raise _Stop
        rec = _Rec(k, layout, labels, kind)
        rec.idx, rec.x, rec.rows = idx, x, rows
        rec.skipped = list(skipped)
        if kind == "device":
            rec.n = n_dev
        if kind == "decode":  # workers read the files; the copy thread decodes on the GPU
            slot = k % self.depth  # at most `depth` batches of file bytes read ahead
            with self.lock:
                prev = self.pslot_user[slot]
                if prev is not None:
                    self._wait(self.cv_slot, lambda: self.copy_enq >= prev.k, k)
            self.pslot_user[slot] = rec
            n = rec.n = len(idx)
            rec.encoded = [None] * n
            if getattr(s.source, "decodes_in_processes", False):
                rec.chunks = []  # the decoding processes read the files themselves
            else:
                per = max(1, -(-n // (2 * s.workers)))
                rec.chunks = [(a, min(a + per, n)) for a in range(0, n, per)]
            rec.left = len(rec.chunks)
        if kind == "pinned":
            slot = k % self.depth
            with self.lock:
                prev = self.pslot_user[slot]
                if prev is not None:
                    self._wait(self.cv_slot, lambda: self.copy_enq >= prev.k, k)
            if prev is not None:
                self.dev.synchronize(prev.ev["copy1"])  # the slot's last copy has finished
            buf = self.res.pinned_slot(slot, layout.nbytes)
            self.pslot_user[slot] = rec
            rec.buf = buf.array
            rec.flat = buf.array[:layout.nbytes]
            rec.host = layout.host_views(buf.array)
            rec.nbytes = layout.nbytes
            n = layout.n
            if s.source_heavy:  # decoding: small jobs balance the workers
                per = max(1, -(-n // (4 * s.workers))) if getattr(s.source, "batch_reads", False) else 1
            else:
                per = max(1, -(-n // max(1, min(s.workers, layout.nbytes // _CHUNK_BYTES))))
            rec.chunks = [(a, min(a + per, n)) for a in range(0, n, per)]
            rec.left = len(rec.chunks)
        elif kind == "direct":
            rec.nbytes = layout.nbytes
        elif kind == "chunks":
            self._prepare_chunks(rec, k, layout)
        with self.lock:
            self.recs[k] = rec
            self.prep_next, self.preparing = k + 1, False
            if rec.chunks:
                self.filling[k] = rec
            else:
                rec.filled = True
                self.cv_copy.notify_all()
            self.cv_work.notify_all()

    def _prepare_chunks(self, rec, k, layout):
        """Batch ``k`` staged in chunks: its device slot now (once the last user's augment was
        queued: the worker streams wait for it on the device), one job per worker."""
        slot, dev = k % self.depth, self.dev
        with self.lock:
            prev = self.dslot_user[slot]
            if prev is not None:
                # compute_enq and release both notify cv_copy
                self._wait(self.cv_copy, lambda: self.compute_enq >= prev.k
                           and (not prev.aliased or prev.released), k)
        free_ev = None
        if prev is not None:
            free_ev = prev.ev["release"] if prev.aliased else prev.ev["comp1"]
        dbuf = self.res.device_slot(slot, layout.nbytes,
                                    before_free=(lambda: dev.synchronize(free_ev)) if free_ev is not None else None)
        self.dslot_user[slot] = rec
        rec.dbuf, rec.free_ev = dbuf, free_ev
        rec.nbytes = layout.nbytes
        rec.dev_in = layout.device_views(dev, dbuf)
        rec.ev0 = dev.new_event()  # copy0: recorded by the first job before its first chunk
        rec.chunk_evs = []
        n = layout.n
        jobs = max(1, min(self.s.workers, -(-layout.nbytes // self.s.chunk_bytes)))
        per = -(-n // jobs) if n else 1
        rec.chunks = [(a, min(a + per, n)) for a in range(0, n, per)]
        rec.left = len(rec.chunks)

    def _fill_chunks(self, wid, rec, ci, a, b):
        """Worker ``wid``'s share (samples a..b) of batch ``rec``: gathered into its pinned chunk
        buffers in turn, each chunk copied to the device slot on the worker's stream."""
        dev, src, lay = self.dev, self.s.source, rec.layout
        row = lay.sample_nbytes(0) if lay.n else 0
        st = self.res.stager(wid)
        rows = st.prepare(self.s.chunk_bytes, row)
        stream = st.stream
        if rec.free_ev is not None:
            dev.wait(stream, rec.free_ev)  # the slot's last augment (or the consumer) is done with it
        if ci == 0:
            dev.record(rec.ev0, stream)
        shape = tuple(lay.shape[1:])
        for c0 in range(a, b, rows):
            c1 = min(c0 + rows, b)
            if self.stopping or rec.k >= self._limit():
                break
            i, buf = st.next_buffer()
            flat = buf[:(c1 - c0) * row]
            src.read(rec.idx[c0:c1], flat.view(lay.dtype).reshape((c1 - c0,) + shape))
            dev.copy_h2d(rec.dbuf, c0 * row, flat, stream)
            st.copied(i)
        done = dev.new_event()
        dev.record(done, stream)
        with self.lock:
            rec.chunk_evs.append(done)

    def _fill(self, wid, rec, ci):
        a, b = rec.chunks[ci]
        t0 = time.perf_counter()
        bad = None
        if rec.kind == "chunks":
            self._fill_chunks(wid, rec, ci, a, b)
        elif rec.kind == "decode":
            with self.decode_gate:
                datas, bad = self.s.source.read_encoded(rec.idx[a:b])
            rec.encoded[a:b] = datas
        elif rec.idx is not None:
            bad = self.s.source.read(rec.idx[a:b], rec.host[a:b])
        elif isinstance(rec.x, list):
            for i in range(a, b):
                np.copyto(rec.host[i], rec.x[i])
        else:
            np.copyto(rec.host[a:b], rec.x[a:b])
        t1 = time.perf_counter()
        bad = [(a + j, p, r) for j, p, r in bad] if isinstance(bad, list) and bad else []
        with self.lock:
            rec.fill.append((wid, t0 - self.host0, t1 - self.host0))
            rec.bad += bad
            rec.left -= 1
            last = rec.left == 0
        if not last:
            return
        if rec.bad:  # every chunk is in: close the gaps of the skipped samples
            self._compact(rec)
        with self.lock:
            rec.filled, rec.x = True, None
            self.filling.pop(rec.k, None)
            self.cv_copy.notify_all()

    def _compact(self, rec):
        """Leave the skipped samples out of a filled batch: rows moved down (uniform), the
        layout, labels and indices cut to the samples kept."""
        gone = {p for p, _, _ in rec.bad}
        rec.skipped += [(path, reason) for _, path, reason in sorted(rec.bad, key=lambda t: t[0])]
        keep = [j for j in range(rec.n) if j not in gone]
        if rec.kind == "decode":
            rec.encoded = [rec.encoded[j] for j in keep]
        else:
            lay = rec.layout
            if lay.shape is not None:
                for dst, src in enumerate(keep):
                    if dst != src:
                        np.copyto(rec.host[dst], rec.host[src])
                new = Layout.uniform((len(keep),) + tuple(lay.shape[1:]), lay.dtype)
            else:  # varshape: the kept samples stay where they are
                new = Layout(lay.dtype, None, tuple(lay.shapes[j] for j in keep),
                             tuple(lay.offsets[j] for j in keep), lay.nbytes)
            rec.layout, rec.nbytes = new, new.nbytes
            rec.flat = rec.buf[:new.nbytes]
            rec.host = new.host_views(rec.buf)
        rec.n = len(keep)
        if rec.idx is not None:
            rec.idx = np.asarray(rec.idx)[keep]
        if rec.labels is not None:
            rec.labels = np.asarray(rec.labels)[keep] if not isinstance(rec.labels, list) else [
                rec.labels[j] for j in keep]
        rec.bad = []

    # ---- copier: H2D on the copy stream -------------------------------------------------
    def _copier(self):
        dev = self.dev
        dev.activate()
        copy_s = self.res.copy
        k = 0
        try:
            while True:
                with self.lock:
                    try:
                        self._wait(self.cv_copy, lambda: (k in self.recs and self.recs[k].filled)
                                   or (self.total is not None and k >= self.total), k)
                    except _Stop:
                        return
                    if self.total is not None and k >= self.total:
                        return
                    rec = self.recs[k]
                    slot = k % self.depth
                    prev = self.dslot_user[slot] if rec.kind in ("pinned", "direct") else None
                    try:
                        if rec.kind == "decode":  # at most `depth` decoded batches ahead of the augment
                            self._wait(self.cv_copy, lambda: self.compute_enq >= k - self.depth, k)
                        if prev is not None:
                            self._wait(self.cv_copy, lambda: self.compute_enq >= prev.k, k)
                            if prev.aliased:  # the consumer reads the slot itself
                                self._wait(self.cv_copy, lambda: prev.released, k)
                    except _Stop:
                        return
                try:
                    ev = {n: dev.new_event() for n in ("copy0", "copy1")}
                    if rec.kind == "chunks":  # the workers copied it: the copy stream joins them
                        ev["copy0"] = rec.ev0
                        for e in rec.chunk_evs:
                            dev.wait(copy_s, e)
                        rec.chunk_evs = None
                    elif rec.kind == "device":
                        dev.record(ev["copy0"], copy_s)
                        rec.dev_in = dev.launch(copy_s, dev.as_device_array, rec.x)
                        rec.x = None
                    elif rec.kind == "decode":
                        dev.record(ev["copy0"], copy_s)
                        with self.decode_gate:
                            self._decode(rec, copy_s)
                    else:
                        free_ev = None
                        if prev is not None:
                            free_ev = prev.ev["release"] if prev.aliased else prev.ev["comp1"]
                            dev.wait(copy_s, free_ev)
                        dbuf = self.res.device_slot(
                            slot, rec.nbytes,
                            before_free=(lambda: dev.synchronize(free_ev)) if free_ev is not None else None)
                        self.dslot_user[slot] = rec
                        rec.dbuf = dbuf
                        dev.record(ev["copy0"], copy_s)
                        if rec.kind == "pinned":
                            dev.copy_h2d(dbuf, 0, rec.flat, copy_s)
                        else:
                            off = 0
                            for r in rec.rows:
                                dev.copy_h2d(dbuf, off, r, copy_s)
                                off += r.nbytes
                            rec.rows = None
                        rec.dev_in = rec.layout.device_views(dev, dbuf)
                    dev.record(ev["copy1"], copy_s)
                except BaseException as e:  # noqa: BLE001
                    self._fail(k, e, "copy thread")
                    return
                with self.lock:
                    rec.ev.update(ev)
                    self.copy_enq = k
                    self.cv_slot.notify_all()
                    self.cv_comp.notify_all()
                k += 1
        except BaseException as e:  # noqa: BLE001 - never leave the consumer waiting
            self._fail(k, e, "copy thread")

    # ---- compute: augment on the compute stream -----------------------------------------
    def _augment(self, k, rec, x, pre, aug, outs, comp_s):
        """The compute thread's launch of batch ``k``'s augment (after ``pre``, the decoded
        batch's finish); returns its output."""
        dev, s = self.dev, self.s
        if rec.n == 0:  # every sample of the batch was skipped: delivered empty
            y = x
        elif outs:
            target = outs[k % len(outs)]
            if s.augment is not None and s._augment_takes_out:
                y = dev.launch(comp_s, lambda v: aug(v, out=target), x)
            else:
                y = dev.launch(comp_s, lambda v: _copy_into(
                    target, aug(v) if s.augment or pre else v), x)
            rec.export = s.out[k % len(outs)]
        else:
            y = _check_result(dev.launch(comp_s, aug, x))
        return y

    def _computer(self):
        dev, s = self.dev, self.s
        dev.activate()
        comp_s = self.res.compute
        fn = s.augment if s.augment is not None else _copy_batch
        outs = s._out_views
        k = 0
        try:
            while True:
                with self.lock:
                    try:
                        self._wait(self.cv_comp, lambda: self.copy_enq >= k
                                   or (self.total is not None and k >= self.total), k)
                        if self.copy_enq < k:
                            return
                        rec = self.recs[k]
                        held = [self.recs[j] for j in {k - self.depth, k - len(outs) if outs else -1}
                                if j >= 0 and j in self.recs]
                        self._wait(self.cv_comp, lambda: all(h.released for h in held), k)
                    except _Stop:
                        return
                try:
                    for h in held:
                        dev.wait(comp_s, h.ev["release"])
                    old = self.recs.get(k - self.depth)
                    if old is not None:
                        old.output = old.export = None  # after the wait: pool reuse is ordered
                    ev = {n: dev.new_event() for n in ("comp0", "comp1")}
                    dev.wait(comp_s, rec.ev["copy1"])
                    dev.record(ev["comp0"], comp_s)
                    x = rec.dev_in
                    pre = rec.finish
                    aug = fn if pre is None else (lambda v, _f=fn, **kw: _f(pre(v), **kw))
                    t_l0 = time.perf_counter()
                    gate = self.decode_gate if pre is not None else contextlib.nullcontext()
                    with gate:
                        y = self._augment(k, rec, x, pre, aug, outs, comp_s)
                    rec.launch = (t_l0 - self.host0, time.perf_counter() - self.host0)
                    dev.record(ev["comp1"], comp_s)
                    rec.output = y
                    rec.aliased = rec.dbuf is not None and self._overlaps(y, rec.dbuf)
                    rec.dev_in = rec.finish = None
                except BaseException as e:  # noqa: BLE001
                    self._fail(k, e, "augment (compute thread)")
                    return
                with self.lock:
                    rec.ev.update(ev)
                    self.compute_enq = k
                    self.cv_copy.notify_all()
                    self.cv_cons.notify_all()
                k += 1
        except BaseException as e:  # noqa: BLE001
            self._fail(k, e, "compute thread")

    def _decode(self, rec, copy_s):
        """GPU decoding of a batch's file bytes (copy thread, copy stream): one batched call;
        a file the decoder refuses is raised or skipped by the source's ``on_error``."""
        src = self.s.source
        if getattr(src, "decodes_in_processes", False):
            return self._decode_in_processes(rec, copy_s)
        enc, rec.encoded = rec.encoded, None
        datas = [d for d, _ in enc]
        rec.nbytes = sum(len(d) for d in datas)
        boxes = regions = None
        if datas:
            boxes, regions = src.plan_decode([hw for _, hw in enc], self.dev.decode_supports_roi(src.mode))
        imgs = list(self.dev.decode_images(datas, src.mode, copy_s, regions)) if datas else []
        failed = [j for j, im in enumerate(imgs) if im is None]
        if failed and boxes is not None:
            boxes = boxes[[j for j, im in enumerate(imgs) if im is not None]]
        for j in failed:
            err = ImageDecodeError(src.files[rec.idx[j]], UNDECODABLE)
            rec.bad.append((j, *src._skip_or_raise(err)))
        if failed:
            rec.encoded = imgs
            self._compact(rec)
            imgs, rec.encoded = rec.encoded, None
        rec.dev_in = imgs
        rec.finish = functools.partial(src.finish, boxes=boxes)

    def _decode_in_processes(self, rec, copy_s):
        """``decode="gpu", gpu_processes=N``: batches k .. k + ahead go to the decoding processes
        (in batch order, each with its crop seed); batch k's dense result is copied out on
        the copy stream.

        Near the epoch's end the window runs on into the *next* epoch's first batches (its
        order is known: ``epoch_batches`` of epoch + 1), as DALI's readers do: the next
        epoch's run finds them decoded instead of waiting for its first batch from idle
        processes (~50-90 ms an epoch, 5.8 ms a step of a 16-batch epoch in the training
        loop on the H200). The crop seeds are drawn in the same order as without it. A next
        run of another epoch (``set_epoch``) or another scheduler drops them (keys are
        (scheduler, epoch, batch))."""
        src, k = self.s.source, rec.k
        pd = src.gpu_process_decoder(getattr(self.dev, "id", 0))
        me = (id(self.s), self.epoch)
        if k == 0:  # drop what is in flight for anything but this epoch (a run left early, another epoch)
            pd.drain(keep=lambda key: key[:2] == me)
        last = self.total
        nxt = max(getattr(self, "_next_submit", 0), k)
        while nxt < min(k + pd.ahead, last):
            if not pd.pending(me + (nxt,)):  # submitted ahead by the previous epoch's run
                pd.submit(me + (nxt,), [src.files[i] for i in self.batches[nxt]], src.batch_seed())
            nxt += 1
        self._next_submit = nxt
        more = k + pd.ahead - last  # room left in the window: the next epoch's first batches
        if nxt == last and more > 0:
            nb = getattr(self, "_after", None)
            if nb is None:
                nb = self._after = self._epoch_batches(self.epoch + 1)
            j = getattr(self, "_next_after", 0)
            while j < min(more, len(nb)):
                pd.submit((id(self.s), self.epoch + 1, j), [src.files[i] for i in nb[j]], src.batch_seed())
                j += 1
            self._next_after = j
        dense, errs = pd.fetch(me + (k,), copy_s)
        for j, reason in enumerate(errs):
            if reason is not None:
                rec.bad.append((j, *src._skip_or_raise(ImageDecodeError(src.files[rec.idx[j]], reason))))
        if rec.bad:
            self._compact(rec)
        rec.encoded = None
        rec.dev_in = dense
        rec.finish = None

    def _overlaps(self, y, dbuf):
        lo, hi = dbuf.ptr, dbuf.ptr + dbuf.nbytes
        for a in (y if isinstance(y, (list, tuple)) else [y]):
            try:
                a0, a1 = self.dev.extent(a)
            except Exception:  # noqa: BLE001 - unknown array type: assume it aliases (safe)
                return True
            if a0 < hi and lo < a1:
                return True
        return False

    # ---- consumer ----------------------------------------------------------------------
    def next(self):
        s, dev = self.s, self.dev
        k = self.delivered + 1
        if s.recycle == "next" and k > 0:
            self.release(k - 1, None)
        t0 = time.perf_counter()
        with self.lock:
            while True:
                if self.failure is not None and self.failure[0] <= k:
                    raise self.failure[1]
                if self.stopping:
                    raise RuntimeError("this epoch's iterator was closed (close() was called or a new "
                                       "iteration over the scheduler started)")
                if self.compute_enq >= k:
                    rec = self.recs[k]
                    # own references: a close() from another thread may clear rec meanwhile
                    output, export, done = rec.output, rec.export, rec.ev["comp1"]
                    break
                if self.total is not None and k >= self.total:
                    raise StopIteration
                for j in {k - self.depth, k - len(s._out_views) if s._out_views else -1}:
                    r = self.recs.get(j) if j >= 0 else None
                    if r is not None and r.delivered and not r.released:
                        raise RuntimeError(
                            f"batch {j} is still held, so batch {k} cannot be made: with "
                            f"recycle='manual' call batch.release() when done with a batch, keep "
                            f"fewer than depth={self.depth} batches (or len(out)) unreleased, or "
                            "use recycle='next'")
                self.cv_cons.wait()
        with dev.context():
            cs = dev.consumer_stream(s.stream, s.output)
            dev.wait(cs, done)  # a host consumer (FakeDevice.HOST) blocks here
            t1 = time.perf_counter()
            images = export if export is not None else dev.export(output, s.output, cs)
        rec.wait = (t0 - self.host0, t1 - self.host0)
        rec.delivered = True
        self.delivered = k
        if self.progress is not None:
            self.progress.update(rec.n)
        return DeviceBatch(images, rec.labels, k, self)

    def release(self, k, stream):
        rec = self.recs.get(k)
        if rec is None or rec.released or self.closed and not rec.delivered:
            return
        with self.dev.context():
            ev = self.dev.new_event()
            self.dev.record(ev, self.dev.consumer_stream(stream if stream is not None else self.s.stream,
                                                         self.s.output))
        with self.lock:
            if rec.released:
                return
            rec.ev["release"] = ev
            rec.released = True
            self.cv_copy.notify_all()
            self.cv_comp.notify_all()
        self.harvest()

    # ---- telemetry -----------------------------------------------------------------------
    def harvest(self):
        with self._harvesting:  # the consumer and Scheduler.timings() may both call it
            self._harvest()

    def _harvest(self):
        dev = self.dev
        with self.lock:
            recs = [r for r in self.recs.values() if r.delivered and not r.harvested]
        for r in recs:
            names = ("copy0", "copy1", "comp0", "comp1")
            if any(n not in r.ev or not dev.done(r.ev[n]) for n in names):
                continue
            o = self.origin
            t = [dev.elapsed_ms(o, r.ev[n]) / 1e3 for n in names]
            self.timings.append(T.BatchTiming(r.k, r.n, r.nbytes, (t[0], t[1]), (t[2], t[3]),
                                              list(r.fill), r.wait, r.launch, list(r.skipped)))
            r.harvested = True
        with self.lock:  # forget batches nobody can still need
            keep_from = self.delivered - 2 * self.depth - len(self.s._out_views) - 2
            for j in [j for j, r in self.recs.items() if j < keep_from and r.harvested and r.released]:
                del self.recs[j]

    # ---- shutdown --------------------------------------------------------------------------
    #: seconds close() waits for the threads (a source blocked in a read) before leaving the
    #: clean-up to the last of them
    JOIN_TIMEOUT_S = 30.0

    def close(self):
        """Stop the threads and give every buffer back. True when done now; False when some
        thread is still running (a source blocked in a read, or close() called from one of
        the run's own threads, e.g. by the GC): the last thread out finishes the clean-up
        and frees the run's resources, which the scheduler then no longer uses."""
        me = threading.current_thread()
        own = me in self.threads
        with self.lock:
            self.stopping = True
            self._wake_all()
        # A run's own thread never waits for another closer (which may be joining it).
        if not self._closing.acquire(blocking=not own):
            return False
        try:
            if self.closed:
                return not self.orphaned
            alive = []
            try:
                if not own:
                    deadline = time.monotonic() + self.JOIN_TIMEOUT_S
                    for t in self.threads:
                        t.join(timeout=max(0.0, deadline - time.monotonic()))
            finally:  # also when the join is interrupted (a second Ctrl-C)
                with self.lock:
                    self.closed = True
                    if self.live > 0:
                        self.orphaned = True
                        alive = [t.name for t in self.threads if t.is_alive() and t is not me]
                self.it = None  # the source's iterator is not needed any more (its frame may hold files)
            if self.orphaned:
                if alive and not own:
                    warnings.warn(f"gpuaug.Scheduler: threads {alive} did not stop within "
                                  f"{self.JOIN_TIMEOUT_S:g} s (a source blocked?); the last of them "
                                  "frees the staging buffers when it ends", RuntimeWarning, stacklevel=3)
                return False
            # under _closing: a second close() returns only once the buffers are given back
            self._finish(free=not self.s.keep_buffers, keep_pinned=True)
            return True
        finally:
            self._closing.release()

    def _finish(self, free, keep_pinned=False):
        """After every thread has ended: release held batches, wait for the streams, drop the
        batch records, free the buffers (``free``; the pinned ring stays with ``keep_pinned``
        when the device pools pinned memory). Runs once."""
        with self.lock:
            if self.finished:
                return
            self.finished = True
        for r in list(self.recs.values()):
            if r.delivered and not r.released:
                self.release(r.k, None)
        dev = self.dev
        with dev.context():
            for st in self.res.stager_streams():  # chunk copies into the device slots
                dev.sync_stream(st)
            if self.res.copy is not None:
                dev.sync_stream(self.res.copy)
                dev.sync_stream(self.res.compute)
            self.harvest()
            for r in self.recs.values():
                if "release" in r.ev and self.res.compute is not None:
                    dev.wait(self.res.compute, r.ev["release"])
                r.output = r.export = r.dev_in = r.host = r.flat = r.x = None
        self.recs.clear()
        self.filling.clear()
        self.pslot_user = self.dslot_user = None
        # the consumer has the exception; its traceback's frames hold the failed batch's views
        # (device memory): the scheduler, which outlives the epoch, must not keep it
        self.failure = None
        if self.progress is not None:
            self.progress.close()
        if free:
            with dev.context():
                self.res.free(keep_registration=True, keep_pinned=keep_pinned)

