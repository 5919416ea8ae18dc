"""Every device call the scheduler makes, behind one small interface.

The scheduler never touches CUDA directly: it allocates pinned and device memory,
records and waits on events, enqueues copies and runs the augmentation through a
:class:`Device`. Two implementations:

- :class:`CudaDevice`: CuPy on a real GPU (``cudaHostAlloc``, ``cudaMemcpyAsync``,
  ``cudaEventRecord`` / ``cudaStreamWaitEvent``, CuPy's current stream for the augment);
- :class:`FakeDevice`: NumPy on the CPU. Each stream is a thread that runs its queue
  in order, copies take simulated time, events complete when their stream reaches them,
  and every allocation and free is counted. It also checks the rules the scheduler must
  keep (a pinned buffer is not rewritten while a copy from it is pending, a device buffer
  is not written while an augment reads it, nothing is used after it was freed) and
  lists what broke them in ``errors``. The CPU tests drive the scheduler with it.

A *stream* and an *event* are opaque objects of the implementation; buffers are
:class:`HostBuffer` / :class:`DeviceBuffer`.
"""
from __future__ import annotations

import contextlib
import ctypes
import queue
import threading
import time
import weakref
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuaug._batch import extent
from gpuaug._util import is_cuda_array


@dataclass(eq=False)
class HostBuffer:
    """Page-locked host memory: ``array`` is a 1-D uint8 NumPy view of ``nbytes`` bytes."""

    ptr: int
    nbytes: int
    array: np.ndarray


@dataclass(eq=False)
class DeviceBuffer:
    """Device memory of ``nbytes`` bytes at ``ptr``; ``mem`` keeps the allocation alive."""

    ptr: int
    nbytes: int
    mem: Any = None


def _iter_arrays(x):
    if isinstance(x, (list, tuple)):
        for v in x:
            yield from _iter_arrays(v)
    elif x is not None:
        yield x


class Device:
    """The device calls of the scheduler (see module docstring). All methods are abstract.

    Threads: ``activate`` is called once at the start of every scheduler thread.
    """

    name = "device"

    def activate(self):
        """Make this device current in the calling thread (the scheduler's own threads)."""
        raise NotImplementedError

    def context(self):
        """A context manager making this device current for a block (the caller's thread)."""
        raise NotImplementedError

    # memory ------------------------------------------------------------------------
    def alloc_pinned(self, nbytes: int) -> HostBuffer:
        raise NotImplementedError

    def free_pinned(self, buf: HostBuffer):
        raise NotImplementedError

    def pinned_pool(self):
        """The :class:`~gpuaug.scheduler._pinned.PinnedPool` that keeps this device's idle
        pinned buffers, or None: no pool, and a scheduler frees its ring every epoch."""
        return None

    def register_host(self, array: np.ndarray):
        """Page-lock an existing host array in place (so copies from it are async DMA)."""
        raise NotImplementedError

    def unregister_host(self, handle):
        raise NotImplementedError

    def alloc_device(self, nbytes: int) -> DeviceBuffer:
        raise NotImplementedError

    def free_device(self, buf: DeviceBuffer):
        raise NotImplementedError

    def view(self, buf: DeviceBuffer, offset: int, shape, dtype):
        """A device array of ``shape``/``dtype`` at ``buf.ptr + offset`` (no copy)."""
        raise NotImplementedError

    def extent(self, array):
        """[lo, hi) device (or host, for a fake) addresses ``array`` touches."""
        raise NotImplementedError

    # streams and events ------------------------------------------------------------
    def new_stream(self, name: str):
        raise NotImplementedError

    def free_stream(self, stream):
        raise NotImplementedError

    def external_stream(self, handle):
        """Wrap a caller's stream (any handle gpuaug._stream.stream_ptr accepts)."""
        raise NotImplementedError

    def consumer_stream(self, given, output: str):
        """The stream the consumer works on: ``given``, else the framework's current one."""
        raise NotImplementedError

    def new_event(self):
        raise NotImplementedError

    def record(self, event, stream):
        raise NotImplementedError

    def wait(self, stream, event):
        """Make ``stream`` wait (on the device, not the host) for ``event``."""
        raise NotImplementedError

    def done(self, event) -> bool:
        raise NotImplementedError

    def synchronize(self, event):
        """Block the calling thread until ``event`` has completed."""
        raise NotImplementedError

    def sync_stream(self, stream):
        raise NotImplementedError

    def elapsed_ms(self, start, end) -> float:
        raise NotImplementedError

    # work ----------------------------------------------------------------------------
    def copy_h2d(self, dst: DeviceBuffer, offset: int, src: np.ndarray, stream):
        """Enqueue a copy of the C-contiguous host array ``src`` to ``dst.ptr + offset``."""
        raise NotImplementedError

    def decode_images(self, datas, mode, stream, regions=None):
        """Decode encoded images (bytes) to device HWC uint8 arrays ordered on ``stream``;
        None where one cannot be decoded. ``regions``: None, or per image (top, left,
        height, width): decode only that region."""
        raise NotImplementedError

    def decode_supports_roi(self, mode) -> bool:
        """Whether :meth:`decode_images` takes ``regions``."""
        return False

    def launch(self, stream, fn, *args):
        """Run ``fn(*args)`` with ``stream`` as the current stream; return its result."""
        raise NotImplementedError

    def is_device_array(self, x) -> bool:
        raise NotImplementedError

    def as_device_array(self, x):
        raise NotImplementedError

    def export(self, array, output: str, stream):
        """Hand ``array`` (or a list of arrays) to the consumer as ``output``."""
        raise NotImplementedError


# ------------------------------------------------------------------------------------
# CUDA (CuPy)
# ------------------------------------------------------------------------------------
class CudaDevice(Device):
    """A real GPU through CuPy. ``device_id``: the CUDA device ordinal.

    Pinned memory comes from ``cudaHostAlloc`` (not CuPy's pinned pool) so that
    freeing it really gives it back; device staging buffers from ``cudaMalloc`` (not
    the pool) because they live as long as the scheduler. Events block the waiting
    thread instead of spinning, so waiting workers leave their cores to the others.
    """

    def __init__(self, device_id: int = 0):
        import cupy

        self._cp = cupy
        self._rt = cupy.cuda.runtime
        self.id = int(device_id)
        n = self._rt.getDeviceCount()
        if not 0 <= self.id < n:
            raise ValueError(f"device: got {device_id!r}; this machine has {n} CUDA device(s) (0..{n - 1})")
        self.name = f"cuda:{self.id}"
        self._ext = {}  # stream handle -> CuPy wrapper, made once per handle
        self._decoders = {}  # mode -> nvImageCodec decoder, made at first use

    def _wrap(self, ptr):
        ext = self._ext.get(ptr)
        if ext is None:
            import warnings

            with warnings.catch_warnings():
                # CuPy 14 deprecates ExternalStream for Stream.from_external, which needs a
                # __cuda_stream__ object; a bare handle (pycuda, int) still needs this one
                warnings.simplefilter("ignore", DeprecationWarning)
                ext = self._ext[ptr] = self._cp.cuda.ExternalStream(ptr, self.id)
        return ext

    def activate(self):
        self._cp.cuda.Device(self.id).use()

    def context(self):
        return self._cp.cuda.Device(self.id)

    def alloc_pinned(self, nbytes):
        n = max(int(nbytes), 1)
        ptr = self._rt.hostAlloc(n, 0)
        arr = np.ctypeslib.as_array((ctypes.c_ubyte * n).from_address(ptr))
        return HostBuffer(ptr, n, arr)

    def free_pinned(self, buf):
        buf.array = None
        self._rt.freeHost(buf.ptr)

    def pinned_pool(self):
        from gpuaug.scheduler._pinned import cuda_pool

        return cuda_pool(self.id)  # one per device ordinal and process

    def _page_locked(self, ptr, n):
        """Whether [ptr, ptr + n) already lies in page-locked host memory (cudaHostAlloc,
        pycuda's pagelocked_empty, torch's pin_memory): registering it again would fail."""
        rt = self._rt
        try:
            return all(rt.pointerGetAttributes(p).type == rt.memoryTypeHost for p in (ptr, ptr + n - 1))
        except Exception:  # noqa: BLE001 - plain pageable memory (older runtimes raise)
            return False

    def register_host(self, array):
        ptr, n = array.ctypes.data, array.nbytes
        if n and self._page_locked(ptr, n):
            return None  # pinned already: copied from as it is, nothing to undo
        try:
            self._rt.hostRegister(ptr, n, 0)
        except self._rt.CUDARuntimeError:
            # read-only mappings (np.memmap mode "r") need cudaHostRegisterReadOnly (8)
            self._rt.hostRegister(ptr, n, 8)
        return ptr

    def unregister_host(self, handle):
        if handle is not None:
            self._rt.hostUnregister(handle)

    def alloc_device(self, nbytes):
        mem = self._cp.cuda.Memory(max(int(nbytes), 1))
        return DeviceBuffer(mem.ptr, max(int(nbytes), 1), mem)

    def free_device(self, buf):
        buf.mem = None  # views handed out keep their own reference

    def view(self, buf, offset, shape, dtype):
        cp = self._cp
        return cp.ndarray(tuple(shape), dtype, memptr=cp.cuda.MemoryPointer(buf.mem, int(offset)))

    def extent(self, array):
        if not isinstance(array, self._cp.ndarray):
            array = self.as_device_array(array)
        return extent(array, True)

    def new_stream(self, name):
        return self._cp.cuda.Stream(non_blocking=True)

    def free_stream(self, stream):
        pass  # CuPy destroys its own streams when the last reference goes

    def external_stream(self, handle):
        if isinstance(handle, self._cp.cuda.Stream):
            return handle
        from gpuaug._stream import stream_ptr

        return self._wrap(stream_ptr(handle))

    def consumer_stream(self, given, output):
        if given is not None:
            return self.external_stream(given)
        if output == "torch":
            import torch

            return self._wrap(torch.cuda.current_stream(self.id).cuda_stream)
        return self._cp.cuda.get_current_stream()

    def new_event(self):
        return self._cp.cuda.Event(block=True, disable_timing=False)

    def record(self, event, stream):
        event.record(stream)

    def wait(self, stream, event):
        stream.wait_event(event)

    def done(self, event):
        return event.done

    def synchronize(self, event):
        event.synchronize()

    def sync_stream(self, stream):
        stream.synchronize()

    def elapsed_ms(self, start, end):
        return self._cp.cuda.get_elapsed_time(start, end)

    def copy_h2d(self, dst, offset, src, stream):
        rt = self._rt
        rt.memcpyAsync(dst.ptr + int(offset), src.ctypes.data, src.nbytes, rt.memcpyHostToDevice, stream.ptr)

    def _decoder(self, mode):
        dec = self._decoders.get(mode)
        if dec is None:
            from gpuaug.scheduler._decode import GpuDecoder

            dec = self._decoders[mode] = GpuDecoder(self.id, mode)
        return dec

    def decode_supports_roi(self, mode):
        return self._decoder(mode).supports_roi

    def decode_images(self, datas, mode, stream, regions=None):
        imgs = self._decoder(mode).decode(datas, stream.ptr, regions)
        out = []
        with stream:  # the images are ordered on this stream: CuPy needs no sync to view them
            for im in imgs:
                if im is None:
                    out.append(None)
                    continue
                a = self._cp.asarray(im)  # __cuda_array_interface__; keeps the image alive
                out.append(a[..., None] if a.ndim == 2 else a)
        return out

    def launch(self, stream, fn, *args):
        with stream:
            return fn(*args)

    def is_device_array(self, x):
        if isinstance(x, (list, tuple)):
            return len(x) > 0 and all(is_cuda_array(v) for v in x)
        return is_cuda_array(x)

    def as_device_array(self, x):
        cp = self._cp
        if isinstance(x, (list, tuple)):
            return [self.as_device_array(v) for v in x]
        if isinstance(x, cp.ndarray):
            return x
        if hasattr(x, "__cuda_array_interface__"):
            return cp.asarray(x)
        return cp.from_dlpack(x)

    def export(self, array, output, stream):
        if isinstance(array, list):
            return [self.export(a, output, stream) for a in array]
        if output == "torch":
            import torch

            # With the consumer's stream current, the DLPack exchange needs no extra sync;
            # the caller has already made that stream wait for the batch's event.
            with stream:
                return torch.from_dlpack(array)
        return array if isinstance(array, self._cp.ndarray) else self.as_device_array(array)


# ------------------------------------------------------------------------------------
# Fake (CPU, for tests)
# ------------------------------------------------------------------------------------
class _FakeEvent:
    """An event: each record makes a new completion flag; waits capture the current one."""

    __slots__ = ("flag", "t", "name")

    def __init__(self, name=""):
        self.flag = None  # threading.Event of the latest record, None if never recorded
        self.t = None
        self.name = name


class _HostStream:
    """The consumer "stream" of a FakeDevice: the calling thread itself."""

    name = "host"

    def __repr__(self):
        return "<FakeDevice host stream>"


class _FakeStream:
    """A stream: a thread that runs queued callables in order."""

    def __init__(self, dev, name):
        self.dev = dev
        self.name = name
        self.q = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=f"gpuaug-fake-stream-{name}", daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            op = self.q.get()
            if op is None:
                return
            try:
                op()
            except BaseException as e:  # noqa: BLE001 - a broken op must not kill the stream
                self.dev.errors.append(f"stream {self.name}: {type(e).__name__}: {e}")

    def put(self, op):
        self.q.put(op)

    def __repr__(self):
        return f"<FakeDevice stream {self.name}>"


@dataclass
class FakeDevice(Device):
    """A CPU stand-in for a GPU (see module docstring).

    Args:
        copy_ms: simulated time of every host-to-device copy, plus ``nbytes / h2d_gbps``.
        h2d_gbps: simulated copy bandwidth in GB/s (None: only ``copy_ms``).
        compute_ms: simulated minimum time of every ``launch`` (the augment step).
        compute_jitter_ms: optional extra random time per launch (uniform in [0, x)).
        pinned_pool_bytes: None (default): no pinned pool, so a scheduler's ring is freed
            at every epoch's end; an int: a pool of this device's own keeping at most that
            many idle bytes (as every CUDA device has: the ring is kept from epoch to epoch
            and ``close()`` hands it to the pool), ``pool.clear()`` frees it.

    Counters: ``pinned_allocs``, ``pinned_frees``, ``pinned_live`` (bytes),
    ``device_allocs``, ``device_frees``, ``device_live``, ``registered``, ``streams_live``
    (all of them at once: :meth:`usage`);
    ``log``: ("copy" | "compute", buffer ids, start, end) in host seconds (the last
    ``max_log`` entries when it is set: long soak runs);
    ``errors``: broken rules (should stay empty).

    Example::

        >>> import numpy as np, gpuaug
        >>> from gpuaug.scheduler import FakeDevice
        >>> dev = FakeDevice(copy_ms=1, compute_ms=1)
        >>> s = gpuaug.Scheduler(np.zeros((8, 4, 4, 3), np.uint8), batch_size=4, device=dev)
        >>> [x.shape for x, _ in s]
        [(4, 4, 4, 3), (4, 4, 4, 3)]
    """

    copy_ms: float = 0.0
    h2d_gbps: float | None = None
    compute_ms: float = 0.0
    compute_jitter_ms: float = 0.0
    seed: int = 0
    name: str = "fake"
    pinned_allocs: int = 0
    pinned_frees: int = 0
    pinned_live: int = 0
    device_allocs: int = 0
    device_frees: int = 0
    device_live: int = 0
    registered: int = 0
    streams_live: int = 0
    errors: list = field(default_factory=list)
    log: list = field(default_factory=list)
    max_log: int | None = None
    pinned_pool_bytes: int | None = None

    HOST = _HostStream()

    def __post_init__(self):
        self._lock = threading.Lock()
        self._reading = {}   # id(DeviceBuffer) -> count of launches reading it
        self._buffers = {}   # id -> DeviceBuffer (live)
        self._pending = {}   # token -> host [lo, hi) of a copy enqueued and not yet run
        self._live_pinned = set()  # ids of HostBuffers allocated and not yet freed
        self._freed = []     # weak references to the memory of freed buffers (see freed_alive)
        self._rng = np.random.default_rng(self.seed)
        if self.max_log is not None:
            self.log = deque(self.log, maxlen=self.max_log)
        self.pool = None
        if self.pinned_pool_bytes is not None:
            from gpuaug.scheduler._pinned import PinnedPool

            self.pool = PinnedPool(self.pinned_pool_bytes)

    def usage(self):
        """What is allocated now: pinned and device bytes and buffers, streams, registrations."""
        with self._lock:
            return {"pinned_bytes": self.pinned_live, "pinned_buffers": len(self._live_pinned),
                    "device_bytes": self.device_live, "device_buffers": len(self._buffers),
                    "streams": self.streams_live, "registered": self.registered}

    def freed_alive(self):
        """Freed pinned/device buffers whose memory something still references (a view kept
        by the scheduler, or by the caller: on a GPU that memory would not be given back
        while the reference lives). Call ``gc.collect()`` first for an exact count."""
        with self._lock:
            self._freed = [r for r in self._freed if r() is not None]
            return len(self._freed)

    # memory ------------------------------------------------------------------------
    def activate(self):
        pass

    def context(self):
        return contextlib.nullcontext()

    def alloc_pinned(self, nbytes):
        n = max(int(nbytes), 1)
        arr = np.full(n, 0xAB, np.uint8)  # poison: an unwritten byte shows
        buf = HostBuffer(arr.ctypes.data, n, arr)
        with self._lock:
            self.pinned_allocs += 1
            self.pinned_live += n
            self._live_pinned.add(id(buf))
        return buf

    def pinned_pool(self):
        return self.pool

    def free_pinned(self, buf):
        with self._lock:
            lo, hi = buf.ptr, buf.ptr + buf.nbytes
            n = sum(1 for a, b in self._pending.values() if a < hi and lo < b)
            if n:
                self.errors.append(f"pinned buffer freed with {n} copies from it pending")
            if id(buf) not in self._live_pinned:
                self.errors.append("pinned buffer freed twice (or never allocated here)")
            self._live_pinned.discard(id(buf))
            self.pinned_frees += 1
            self.pinned_live -= buf.nbytes
            if buf.array is not None:
                self._freed.append(weakref.ref(buf.array))
        buf.array = None

    def register_host(self, array):
        with self._lock:
            self.registered += 1
        return id(array)

    def unregister_host(self, handle):
        with self._lock:
            self.registered -= 1

    def alloc_device(self, nbytes):
        n = max(int(nbytes), 1)
        arr = np.full(n, 0xCD, np.uint8)
        buf = DeviceBuffer(arr.ctypes.data, n, arr)
        with self._lock:
            self.device_allocs += 1
            self.device_live += n
            self._buffers[id(buf)] = buf
        return buf

    def free_device(self, buf):
        with self._lock:
            if id(buf) not in self._buffers:
                self.errors.append("device buffer freed twice")
                return
            if self._reading.get(id(buf)):
                self.errors.append("device buffer freed while an augment reads it")
            del self._buffers[id(buf)]
            self.device_frees += 1
            self.device_live -= buf.nbytes
            self._freed.append(weakref.ref(buf.mem))

    def view(self, buf, offset, shape, dtype):
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return buf.mem[offset:offset + n].view(dtype).reshape(shape)

    def extent(self, array):
        return extent(np.asarray(array), False)

    # streams and events ------------------------------------------------------------
    def new_stream(self, name):
        with self._lock:
            self.streams_live += 1
        return _FakeStream(self, name)

    def free_stream(self, stream):
        if isinstance(stream, _FakeStream):
            stream.put(None)
            stream.thread.join()
            with self._lock:
                self.streams_live -= 1

    def external_stream(self, handle):
        if isinstance(handle, (_FakeStream, _HostStream)):
            return handle
        raise TypeError(f"stream: got {type(handle).__name__}; a FakeDevice takes its own streams "
                        "(FakeDevice.new_stream) or FakeDevice.HOST")

    def consumer_stream(self, given, output):
        return self.HOST if given is None else self.external_stream(given)

    def new_event(self):
        return _FakeEvent()

    def record(self, event, stream):
        flag = threading.Event()
        event.flag = flag

        def fire():
            event.t = time.perf_counter()
            flag.set()

        if isinstance(stream, _HostStream):
            fire()
        else:
            stream.put(fire)

    def wait(self, stream, event):
        flag = event.flag
        if flag is None:  # CUDA: waiting on a never-recorded event is a no-op
            return
        if isinstance(stream, _HostStream):
            flag.wait()
        else:
            stream.put(flag.wait)

    def done(self, event):
        return event.flag is None or event.flag.is_set()

    def synchronize(self, event):
        if event.flag is not None:
            event.flag.wait()

    def sync_stream(self, stream):
        if isinstance(stream, _FakeStream):
            flag = threading.Event()
            stream.put(flag.set)
            flag.wait()

    def elapsed_ms(self, start, end):
        if not (self.done(start) and self.done(end)) or start.t is None or end.t is None:
            raise RuntimeError("elapsed_ms: an event has not completed")
        return (end.t - start.t) * 1e3

    # work ----------------------------------------------------------------------------
    def _owners(self, arrays):
        """Live device buffers that ``arrays`` (nested lists) overlap."""
        spans = [extent(np.asarray(a), False) for a in _iter_arrays(arrays)]
        out = []
        with self._lock:
            for buf in self._buffers.values():
                lo, hi = buf.ptr, buf.ptr + buf.nbytes
                if any(a < hi and lo < b for a, b in spans):
                    out.append(buf)
        return out

    def copy_h2d(self, dst, offset, src, stream):
        if not src.flags.c_contiguous:
            self.errors.append("copy_h2d: the host source is not C-contiguous")
        raw = src.reshape(-1).view(np.uint8)
        crc = zlib.crc32(raw)
        key = object()
        with self._lock:
            if id(dst) not in self._buffers:
                self.errors.append("copy_h2d into a freed device buffer")
            self._pending[key] = extent(raw, False)
        duration = self.copy_ms / 1e3 + (raw.nbytes / (self.h2d_gbps * 1e9) if self.h2d_gbps else 0.0)

        def op():
            t0 = time.perf_counter()
            if duration:
                time.sleep(duration)
            if zlib.crc32(raw) != crc:
                self.errors.append("copy_h2d: the host source changed between enqueue and copy "
                                   "(a staging slot was refilled too early)")
            with self._lock:
                if self._reading.get(id(dst)):
                    self.errors.append("copy_h2d: wrote a device buffer while an augment was reading it")
                if id(dst) not in self._buffers:
                    self.errors.append("copy_h2d: wrote a freed device buffer")
            dst.mem[offset:offset + raw.nbytes] = raw
            with self._lock:
                del self._pending[key]
                self.log.append(("copy", (id(dst),), t0, time.perf_counter()))

        stream.put(op)

    def decode_supports_roi(self, mode):
        return True

    def decode_images(self, datas, mode, stream, regions=None):
        """Decodes on the CPU (Pillow / simplejpeg) in place of nvImageCodec: None where that
        fails; ``regions`` cut out of the decoded images."""
        from gpuaug.scheduler._decode import ImageDecodeError, decode_bytes

        out = []
        for j, d in enumerate(datas):
            try:
                a = decode_bytes(d, None, mode, max_pixels=None)
                if regions is not None:
                    t, l, h, w = regions[j]
                    a = np.ascontiguousarray(a[t:t + h, l:l + w])
                out.append(a)
            except ImageDecodeError:
                out.append(None)
        with self._lock:
            self.decoded = getattr(self, "decoded", 0) + len(datas)
        return out

    def launch(self, stream, fn, *args):
        if isinstance(stream, _HostStream):
            return fn(*args)
        started, finished = threading.Event(), threading.Event()

        def barrier():
            started.set()
            finished.wait()

        stream.put(barrier)
        started.wait()  # everything queued before on the stream (incl. waits) has run
        owners = self._owners(args)
        with self._lock:
            for b in owners:
                self._reading[id(b)] = self._reading.get(id(b), 0) + 1
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            want = self.compute_ms / 1e3
            if self.compute_jitter_ms:
                want += float(self._rng.random()) * self.compute_jitter_ms / 1e3
            left = want - (time.perf_counter() - t0)
            if left > 0:
                time.sleep(left)
            with self._lock:
                for b in owners:
                    self._reading[id(b)] -= 1
                self.log.append(("compute", tuple(id(b) for b in owners), t0, time.perf_counter()))
            finished.set()

    def is_device_array(self, x):
        return False  # every NumPy input is a host batch here

    def as_device_array(self, x):
        if isinstance(x, (list, tuple)):
            return [self.as_device_array(v) for v in x]
        if not isinstance(x, np.ndarray):
            raise TypeError(f"a FakeDevice takes NumPy arrays as device arrays; got {type(x).__name__}")
        return x

    def export(self, array, output, stream):
        return array
