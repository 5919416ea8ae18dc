"""The scheduler's staging resources: streams, the pinned host ring and the device input
slots, kept by a :class:`Resources` from run to run.

The pinned ring is kept from epoch to epoch whenever the device has a pinned pool (every
CUDA device; a FakeDevice made with ``pinned_pool_bytes``): an epoch's end frees the device
slots and streams (unless ``keep_buffers``) but not the ring, and ``close()`` hands the
ring to the pool (:mod:`gpuaug.scheduler._pinned`) for the next scheduler. A device
without a pool gets its ring freed at every epoch's end, as before the pool existed.

Chunked staging (``staging="chunks"``, the default for in-memory array sources) uses no
batch-sized ring: each worker has a :class:`ChunkStager` (its own stream and two pinned
chunk buffers, kept like the ring) and copies its share of a batch chunk by chunk
straight into the batch's device slot.
"""
from __future__ import annotations

import threading

from gpuaug.scheduler._device import Device


class ChunkStager:
    """One staging worker's small pinned ring: ``nbuf`` pinned buffers of about
    ``chunk_bytes`` each, one stream for their H2D copies, and one event per buffer recorded
    after the copy out of it. A buffer is refilled only once its event has completed (the
    worker thread waits on the host for it: the copy out of the *other* buffer overlaps
    that wait and the fill). Rows are the unit: a buffer holds ``rows`` whole samples
    (at least one, so a sample larger than ``chunk_bytes`` gets a buffer of its size).
    """

    NBUF = 2

    def __init__(self, res, wid):
        self.res, self.wid = res, wid
        self.bufs = [None] * self.NBUF
        self.events = [None] * self.NBUF   # None: never recorded (the buffer is free)
        self.stream = None
        self.turn = 0
        self.rows = 0
        self.row_bytes = 0

    def prepare(self, chunk_bytes, row_bytes):
        """Size the buffers for samples of ``row_bytes`` (once per row size) and make the stream."""
        dev = self.res.dev
        if self.stream is None:
            self.stream = dev.new_stream(f"stage{self.wid}")
        if row_bytes != self.row_bytes:
            self.rows = max(1, chunk_bytes // max(row_bytes, 1))
            self.row_bytes = row_bytes
        need = self.rows * row_bytes
        for i, b in enumerate(self.bufs):
            if b is not None and b.nbytes >= need:
                continue
            if b is not None:
                self.free_buffer(i)
                self.res.count("pinned_reallocs")
            self.bufs[i] = self.res.take_pinned(need)
        return self.rows

    def next_buffer(self):
        """The next buffer to fill (a uint8 array), once the copy out of it has completed."""
        i = self.turn
        self.turn = (i + 1) % self.NBUF
        ev = self.events[i]
        if ev is not None:
            self.res.dev.synchronize(ev)
        return i, self.bufs[i].array

    def copied(self, i):
        """Record buffer ``i``'s event after its copy was queued on the stream."""
        dev = self.res.dev
        if self.events[i] is None:
            self.events[i] = dev.new_event()
        dev.record(self.events[i], self.stream)

    def free_buffer(self, i):
        ev = self.events[i]
        if ev is not None:
            self.res.dev.synchronize(ev)
        self.res._drop_pinned(self.bufs[i])
        self.bufs[i] = None

    def free(self, keep_pinned):
        dev = self.res.dev
        if self.stream is not None:
            dev.sync_stream(self.stream)
        if not keep_pinned:
            for i, b in enumerate(self.bufs):
                if b is not None:
                    self.free_buffer(i)
        if self.stream is not None:
            dev.free_stream(self.stream)
            self.stream = None


class Resources:
    """Streams and buffers of a scheduler: the pinned ring kept across epochs when the device
    pools pinned memory, everything with ``keep_buffers``. Counters: ``pinned_reallocs`` /
    ``device_reallocs`` (a slot grown), ``pinned_allocs`` (ring buffers made, not taken
    from the pool)."""

    def __init__(self, dev: Device, depth, copy_stream, compute_stream):
        self.dev, self.depth = dev, depth
        self.pinned = [None] * depth
        self.dbufs = [None] * depth
        self.pinned_reallocs = self.device_reallocs = self.pinned_allocs = 0
        self.pool = dev.pinned_pool()
        self._given = (copy_stream, compute_stream)
        self.copy = self.compute = None
        self.registered = None
        self.stagers = []   # ChunkStager per worker (staging="chunks"), made on first use
        self._freeing = threading.Lock()  # close() may run on two threads at once
        self._counting = threading.Lock()

    def streams(self):
        if self.copy is None:
            c, k = self._given
            self.copy = self.dev.external_stream(c) if c is not None else self.dev.new_stream("copy")
            self.compute = self.dev.external_stream(k) if k is not None else self.dev.new_stream("compute")
        return self.copy, self.compute

    def pinned_slot(self, s, nbytes):
        buf = self.pinned[s]
        if buf is not None and buf.nbytes >= nbytes:
            return buf
        if buf is not None:
            self.pinned_reallocs += 1
            self._drop_pinned(buf)
            self.pinned[s] = None
        if self.pool is None:
            self.pinned[s] = self.dev.alloc_pinned(nbytes)
            self.pinned_allocs += 1
        else:
            self.pinned[s], fresh = self.pool.take(self.dev, nbytes)
            self.pinned_allocs += fresh
        return self.pinned[s]

    def stager(self, wid):
        """Worker ``wid``'s :class:`ChunkStager` (made on first use; workers never share one)."""
        with self._freeing:
            while len(self.stagers) <= wid:
                self.stagers.append(ChunkStager(self, len(self.stagers)))
            return self.stagers[wid]

    def stager_streams(self):
        return [st.stream for st in self.stagers if st.stream is not None]

    def take_pinned(self, nbytes):
        """A pinned buffer of at least ``nbytes`` from the pool (else allocated)."""
        if self.pool is None:
            buf, fresh = self.dev.alloc_pinned(nbytes), 1
        else:
            buf, fresh = self.pool.take(self.dev, nbytes)
        self.count("pinned_allocs", fresh)
        return buf

    def count(self, name, n=1):
        with self._counting:  # the workers' stagers count at once
            setattr(self, name, getattr(self, name) + n)

    def _drop_pinned(self, buf):
        """A ring buffer no copy reads any more: to the pool, else freed."""
        if self.pool is not None:
            self.pool.give(buf)
        else:
            self.dev.free_pinned(buf)

    def device_slot(self, s, nbytes, before_free=None):
        buf = self.dbufs[s]
        if buf is not None and buf.nbytes >= nbytes:
            return buf
        if buf is not None:
            self.device_reallocs += 1
            if before_free is not None:
                before_free()
            self.dev.free_device(buf)
            self.dbufs[s] = None
        self.dbufs[s] = self.dev.alloc_device(nbytes)
        return self.dbufs[s]

    def register(self, array):
        if self.registered is None:
            self.registered = (self.dev.register_host(array), array)

    def free(self, keep_registration=False, keep_pinned=False):
        """Give back buffers and streams (every copy from the ring must have completed);
        ``keep_registration``: leave a ``pin_source`` array page-locked (between epochs:
        registering 0.9 GB again every epoch cut pin_source from 42 to 12 GB/s on the H100;
        close() unregisters it); ``keep_pinned``: keep the pinned ring, when the device
        pools pinned memory (between epochs: cudaHostAlloc page-locks every page, ~20 ms
        per 38.5 MB slot on the H100)."""
        with self._freeing:
            self._free(keep_registration, keep_pinned and self.pool is not None)

    def _free(self, keep_registration=False, keep_pinned=False):
        dev = self.dev
        for st in self.stagers:  # first: their streams may still copy into the device slots
            st.free(keep_pinned)
        for i, b in enumerate(self.pinned):
            if b is not None and not keep_pinned:
                self._drop_pinned(b)
                self.pinned[i] = None
        for i, b in enumerate(self.dbufs):
            if b is not None:
                dev.free_device(b)
                self.dbufs[i] = None
        if self.registered is not None and not keep_registration:
            dev.unregister_host(self.registered[0])
            self.registered = None
        if self.copy is not None:
            for s, given in zip((self.copy, self.compute), self._given):
                if given is None:
                    dev.free_stream(s)
            self.copy = self.compute = None

