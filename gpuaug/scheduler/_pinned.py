"""A pool of idle page-locked host buffers, so staging rings outlive epochs and schedulers.

``cudaHostAlloc`` is slow: it maps and page-locks every page (about 20 ms per 38.5 MB
slot on the H100 host, 60 ms for a ring of three, which a 24-batch epoch could not
amortise). So a scheduler keeps its pinned ring from epoch to epoch, and ``close()``
hands the ring to its device's :class:`PinnedPool` instead of freeing it; the next
scheduler on the same device (same or smaller batches) takes the buffers from there.

The pool holds only *idle* buffers (none of them in use by a scheduler), at most
``limit`` bytes of them per device and process; a buffer that would go over the limit
is freed at once. The limit of the CUDA devices' pools: ``GPUAUG_PINNED_POOL_BYTES``
in the environment (bytes; default 1 GiB), or :func:`set_pinned_pool_limit`;
:func:`free_pinned_pool` frees every idle buffer now (e.g. before forking a process
that needs the memory, or in a test counting allocations). A ``FakeDevice`` has a
pool of its own only when made with ``pinned_pool_bytes``.
"""
from __future__ import annotations

import os
import threading

#: Idle pinned bytes a CUDA device's pool keeps per process, unless set otherwise.
DEFAULT_LIMIT = 1 << 30
# A pooled buffer is handed out for a request at least this fraction of its size: a tiny
# batch does not take (and hold) a ring-sized buffer another scheduler will want.
_MIN_FILL = 0.5


def _env_limit():
    v = os.environ.get("GPUAUG_PINNED_POOL_BYTES")
    if v is None or v == "":
        return DEFAULT_LIMIT
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"GPUAUG_PINNED_POOL_BYTES: got {v!r}; expected an int >= 0 (bytes)") from None
    if n < 0:
        raise ValueError(f"GPUAUG_PINNED_POOL_BYTES: got {v!r}; expected an int >= 0 (bytes)")
    return n


def _check_limit(nbytes):
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"nbytes: got {nbytes!r}; expected an int >= 0 (idle pinned bytes kept per device)")
    return nbytes


class PinnedPool:
    """Idle pinned host buffers of one device (see module docstring). Thread-safe.

    ``take(dev, nbytes)`` returns ``(buffer, fresh)``: a
    :class:`~gpuaug.scheduler._device.HostBuffer` of at least ``nbytes`` (an idle one, best
    fit, or a new one from ``dev.alloc_pinned``: ``fresh``);
    ``give(buf)`` takes it back (kept while under ``limit``, else freed through the device
    that allocated it). Counters: ``allocs`` (new buffers), ``reused`` (handed out again),
    ``freed``; ``idle_bytes``.
    """

    def __init__(self, limit=DEFAULT_LIMIT):
        self.limit = _check_limit(limit)
        self._lock = threading.Lock()
        self._idle = []      # HostBuffers nobody uses
        self._owner = {}     # HostBuffer -> the Device that allocated it (frees it)
        self.idle_bytes = 0
        self.allocs = self.reused = self.freed = 0

    def take(self, dev, nbytes):
        nbytes = max(int(nbytes), 1)
        with self._lock:
            fit = [b for b in self._idle if nbytes <= b.nbytes and nbytes >= _MIN_FILL * b.nbytes]
            if fit:
                buf = min(fit, key=lambda b: b.nbytes)
                self._idle.remove(buf)
                self.idle_bytes -= buf.nbytes
                self.reused += 1
                return buf, False
        try:
            buf = dev.alloc_pinned(nbytes)  # outside the lock: slow (it page-locks the memory)
        except Exception:
            if not self.clear():  # out of pinned memory: idle buffers first, then once more
                raise
            buf = dev.alloc_pinned(nbytes)
        with self._lock:
            self._owner[buf] = dev
            self.allocs += 1
        return buf, True

    def give(self, buf):
        """Take ``buf`` back (the caller has made sure no copy from it is pending)."""
        with self._lock:
            if buf.nbytes + self.idle_bytes <= self.limit:
                self._idle.append(buf)
                self.idle_bytes += buf.nbytes
                return
            owner = self._owner.pop(buf)
            self.freed += 1
        owner.free_pinned(buf)

    def set_limit(self, nbytes):
        """Change the limit; idle buffers over the new one are freed (largest first)."""
        with self._lock:
            self.limit = _check_limit(nbytes)
            drop = []
            for b in sorted(self._idle, key=lambda b: -b.nbytes):
                if self.idle_bytes <= self.limit:
                    break
                drop.append(b)
                self._idle.remove(b)
                self.idle_bytes -= b.nbytes
        self._free(drop)

    def clear(self):
        """Free every idle buffer; returns the bytes freed."""
        with self._lock:
            drop, self._idle, self.idle_bytes = self._idle, [], 0
        self._free(drop)
        return sum(b.nbytes for b in drop)

    def _free(self, bufs):
        for b in bufs:
            with self._lock:
                owner = self._owner.pop(b)
                self.freed += 1
            owner.free_pinned(b)

    def forget(self):
        """Drop every reference without freeing (a forked child: the memory is the parent's)."""
        with self._lock:
            self._idle, self._owner, self.idle_bytes = [], {}, 0


# The CUDA devices' pools, one per device ordinal (pinned memory from cudaHostAlloc without
# the portable flag counts as pinned for the allocating device's context only).
_CUDA_POOLS: dict = {}
_CUDA_LOCK = threading.Lock()
_cuda_limit = None  # None: from the environment at first use


def cuda_pool(device_id):
    """The process-wide pool of CUDA device ``device_id``."""
    global _cuda_limit
    with _CUDA_LOCK:
        pool = _CUDA_POOLS.get(device_id)
        if pool is None:
            if _cuda_limit is None:
                _cuda_limit = _env_limit()
            pool = _CUDA_POOLS[device_id] = PinnedPool(_cuda_limit)
        return pool


def set_pinned_pool_limit(nbytes):
    """Set how many idle pinned bytes the CUDA devices' pools keep (per device and process;
    default 1 GiB, or ``GPUAUG_PINNED_POOL_BYTES``); returns the previous limit. 0: a
    scheduler's ring is freed by ``close()`` (it is still kept from epoch to epoch).

    >>> import gpuaug.scheduler as gs
    >>> old = gs.set_pinned_pool_limit(256 << 20); _ = gs.set_pinned_pool_limit(old)
    """
    global _cuda_limit
    nbytes = _check_limit(nbytes)
    with _CUDA_LOCK:
        old = _cuda_limit if _cuda_limit is not None else _env_limit()
        _cuda_limit = nbytes
        pools = list(_CUDA_POOLS.values())
    for p in pools:
        p.set_limit(nbytes)
    return old


def free_pinned_pool():
    """Free the idle pinned buffers of every CUDA device's pool now; returns the bytes freed."""
    with _CUDA_LOCK:
        pools = list(_CUDA_POOLS.values())
    return sum(p.clear() for p in pools)


def _after_fork_in_child():
    for p in list(_CUDA_POOLS.values()):
        p.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
