"""The scheduler's staging resources: streams, the pinned host ring and the device input
slots, kept by a :class:`Resources` from run to run.

The pinned ring is kept from epoch to epoch whenever the device has a pinned pool (every
CUDA device; a FakeDevice made with ``pinned_pool_bytes``): an epoch's end frees the device
slots and streams (unless ``keep_buffers``) but not the ring, and ``close()`` hands the
ring to the pool (:mod:`gpuaug.scheduler._pinned`) for the next scheduler. A device
without a pool gets its ring freed at every epoch's end, as before the pool existed.
"""
from __future__ import annotations

import threading

from gpuaug.scheduler._device import Device


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
        self._freeing = threading.Lock()  # close() may run on two threads at once

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

