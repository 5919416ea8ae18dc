"""The scheduler's staging resources: streams, the pinned host ring and the device input
slots, kept by a :class:`Resources` from run to run."""
from __future__ import annotations

import threading

from gpuaug.scheduler._device import Device


class Resources:
    """Streams and buffers of a scheduler; kept across epochs with ``keep_buffers``."""

    def __init__(self, dev: Device, depth, copy_stream, compute_stream):
        self.dev, self.depth = dev, depth
        self.pinned = [None] * depth
        self.dbufs = [None] * depth
        self.pinned_reallocs = self.device_reallocs = 0
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
            self.dev.free_pinned(buf)
            self.pinned[s] = None
        self.pinned[s] = self.dev.alloc_pinned(nbytes)
        return self.pinned[s]

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

    def free(self, keep_registration=False):
        """Give back buffers and streams; ``keep_registration``: leave a ``pin_source`` array
        page-locked (between epochs: registering 0.9 GB again every epoch cut pin_source from
        42 to 12 GB/s on the H100; close() unregisters it)."""
        with self._freeing:
            self._free(keep_registration)

    def _free(self, keep_registration=False):
        dev = self.dev
        for i, b in enumerate(self.pinned):
            if b is not None:
                dev.free_pinned(b)
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

