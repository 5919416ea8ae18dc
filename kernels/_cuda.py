"""Loading, caching and launching the CUDA C kernels (CuPy RawModule / NVRTC).

Kernels are compiled on first use, per device, and cached in memory (and by CuPy on
disk); nothing compiles at import. Kernel names carry the library prefix and their
specialisation as template arguments: ``gpuaug_flip<unsigned char, 3>``.
"""
from __future__ import annotations

import os
import threading

import numpy as np

KERNEL_DIR = os.path.dirname(os.path.abspath(__file__))
#: CUDA C element type per dtype name (float16 is stored as raw bits, see common.cuh).
CTYPES = {"uint8": "unsigned char", "float16": "gpuaug::half", "float32": "float"}
NVRTC_OPTIONS = ("-std=c++17", f"-I{KERNEL_DIR}")

_modules: dict = {}
_lock = threading.Lock()


def source(name: str) -> str:
    with open(os.path.join(KERNEL_DIR, name)) as f:
        return f.read()


def get_function(filename: str, name_expr: str, options: tuple = ()):
    """The compiled kernel ``name_expr`` (a template instance) from ``kernels/<filename>``.

    Memoised per (device, file, name, options); the first call compiles with NVRTC
    (``options``: NVRTC options after the library's own, e.g. ``("--fmad=false",)``).
    """
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    key = (dev, filename, name_expr, options) if options else (dev, filename, name_expr)
    fn = _modules.get(key)
    if fn is None:
        with _lock:
            fn = _modules.get(key)
            if fn is None:
                mod = cupy.RawModule(code=source(filename), options=NVRTC_OPTIONS + tuple(options),
                                     name_expressions=[name_expr])
                fn = Kernel(mod.get_function(name_expr), (filename, name_expr, tuple(options)))
                _modules[key] = fn
    return fn


#: struct codes of the scalar kernel arguments, each stored in its own 8-byte slot
#: (``kernelParams[i]`` points at slot i; 8 bytes keep every type aligned). Python scalars
#: are passed as CuPy passes them: int as int64, float as float64, bool as bool.
_CODES = {np.int8: "b7x", np.uint8: "B7x", np.int16: "h6x", np.uint16: "H6x", np.int32: "i4x",
          np.uint32: "I4x", np.int64: "q", np.uint64: "Q", np.float32: "f4x", np.float64: "d",
          np.bool_: "?7x", int: "q", float: "d", bool: "?7x"}


class _ArgSpec:
    """How one signature (the tuple of argument types) is packed: a ``struct`` writing every
    value into its 8-byte slot, the positions of the arrays (passed as device pointers), and
    per thread a slot buffer plus the ``void*[]`` that points into it."""

    __slots__ = ("struct", "arrays", "n", "local")

    def __init__(self, types):
        import struct

        self.arrays = tuple(i for i, t in enumerate(types) if t is _ARRAY or t is type(None))
        self.struct = struct.Struct("=" + "".join("Q" if i in self.arrays else _CODES[t]
                                                  for i, t in enumerate(types)))
        self.n = len(types)
        self.local = threading.local()

    def buffers(self):
        """This thread's (slot buffer, address of the pointer array)."""
        got = getattr(self.local, "bufs", None)
        if got is None:
            slots = np.zeros(max(self.n, 1), np.uint64)
            ptrs = slots.ctypes.data + 8 * np.arange(max(self.n, 1), dtype=np.uint64)
            got = self.local.bufs = (slots, ptrs, int(ptrs.ctypes.data))
        return got


class _BlockSpec(_ArgSpec):
    """An :class:`_ArgSpec` whose argument ``index`` is the by-value parameter block: its
    ``kernelParams`` entry points at this thread's :func:`param_block` (the driver copies the
    block's bytes when the launch is queued), its slot is packed and unused."""

    __slots__ = ("index",)

    def __init__(self, types, index):
        super().__init__(types)
        self.index = index

    def buffers(self):
        got = getattr(self.local, "bufs", None)
        if got is None:
            slots, ptrs, addr = super().buffers()
            ptrs[self.index] = param_block().ctypes.data
            got = self.local.bufs = (slots, ptrs, addr)
        return got


#: Floats in the by-value parameter blocks (kernels/common.cuh GPUAUG_BYVAL): 2 KB, and 16 KB for
#: larger matrices (kernel arguments past 4 KB need a 12.1+ driver; by value needs 12.4+ anyway).
BLOCK_SIZES = (512, 4096)
PARAM_BLOCK_FLOATS = BLOCK_SIZES[-1]
_blocks = threading.local()


def byval_options(floats):
    """The NVRTC option of the by-value build with blocks of ``floats`` floats."""
    return (f"-DGPUAUG_BYVAL={int(floats)}",)


def block_floats(size):
    """The smallest block size that holds ``size`` values, or None."""
    for b in BLOCK_SIZES:
        if size <= b:
            return b
    return None


def param_block():
    """This thread's host parameter block (float32, PARAM_BLOCK_FLOATS): the bytes a by-value
    launch copies into its arguments (as many as its kernel's block holds). Filled just before
    the launches that read it."""
    got = getattr(_blocks, "block", None)
    if got is None:
        got = _blocks.block = np.zeros(PARAM_BLOCK_FLOATS, np.float32)
    return got


_PARAM_INFO = []  # [cuFuncGetParamInfo or None], looked up once


def _param_info():
    """The driver's ``cuFuncGetParamInfo`` (CUDA 12.4+ drivers) through ctypes, or None."""
    if not _PARAM_INFO:
        import ctypes

        try:
            f = ctypes.CDLL("libcuda.so.1").cuFuncGetParamInfo
            f.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                          ctypes.POINTER(ctypes.c_size_t))
            f.restype = ctypes.c_int
        except (OSError, AttributeError):
            f = None
        _PARAM_INFO.append(f)
    return _PARAM_INFO[0]


def param_sizes(fn):
    """The byte size of each argument of compiled kernel ``fn``, or None when the driver cannot
    tell (:func:`_param_info`)."""
    f = _param_info()
    if f is None:
        return None
    import ctypes

    off, size, sizes = ctypes.c_size_t(), ctypes.c_size_t(), []
    while len(sizes) < 256 and f(fn.raw.kernel.ptr, len(sizes), ctypes.byref(off), ctypes.byref(size)) == 0:
        sizes.append(size.value)
    return tuple(sizes)


def byval_supported() -> bool:
    """By-value parameter blocks can be used on the current device: compute capability 7.0 or
    later (``__grid_constant__``), a driver that reports kernel argument sizes, and not turned
    off with ``GPUAUG_BYVAL=0``."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    got = _BYVAL_OK.get(dev)
    if got is None:
        got = _BYVAL_OK[dev] = int(cupy.cuda.Device(dev).compute_capability) >= 70 and _param_info() is not None
    return got and os.environ.get("GPUAUG_BYVAL", "1") not in ("", "0")


_BYVAL_OK: dict = {}
_ARRAY = None  # cupy.ndarray, set on first launch (cupy is not imported at module import)
_SPECS: dict = {}


class Kernel:
    """A compiled kernel with CuPy's call signature, ``fn(grid, block, args, shared_mem=0)``,
    launched with one ``cuLaunchKernel`` on CuPy's current stream.

    CuPy's ``RawKernel.__call__`` converts every argument through its generic machinery
    (about 15-20 us per launch on the H100's host for a 9-argument kernel). Here the argument
    types of a call form a signature; its packing (one ``struct.pack_into`` into 8-byte slots,
    arrays as device pointers) is built once, so a launch costs a few microseconds. Anything
    the packer does not know (other argument types) goes through CuPy unchanged.
    Attributes (``max_dynamic_shared_size_bytes``...) are CuPy's.
    """

    __slots__ = ("raw", "_ptr", "source")

    def __init__(self, raw, source=None):
        object.__setattr__(self, "raw", raw)
        object.__setattr__(self, "_ptr", None)
        object.__setattr__(self, "source", source)  # (file, name, options) of get_function

    def byval(self, index, floats=BLOCK_SIZES[0]):
        """This kernel's by-value build (the same file and name compiled with
        :func:`byval_options` of ``floats``) when argument ``index`` is its parameter block of
        ``floats`` floats and every other argument is as here; else None (a kernel without the
        block there, a GPU before 7.0, a driver before 12.4, ``GPUAUG_BYVAL=0``)."""
        if self.source is None or not byval_supported():
            return None
        file, name, options = self.source
        mine = param_sizes(self)
        if any(o.startswith("-DGPUAUG_BYVAL") for o in options) or not mine or index >= len(mine) or mine[index] != 8:
            return None  # (a by-value build itself, or no device pointer there to replace)
        try:
            other = get_function(file, name, options + byval_options(floats))
        except Exception as e:  # noqa: BLE001 - a bug (tests compile every build): said, not hidden
            import warnings

            warnings.warn(f"gpuaug: {file} {name} does not build by value, so its calls upload their "
                          f"parameters instead ({type(e).__name__}: {str(e)[:200]})", RuntimeWarning, stacklevel=2)
            return None
        theirs = param_sizes(other)
        if not theirs or len(mine) != len(theirs):
            return None
        ok = all(a == b for i, (a, b) in enumerate(zip(mine, theirs)) if i != index)
        return other if ok and theirs[index] == 4 * floats else None

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def __setattr__(self, name, value):
        setattr(self.raw, name, value)

    def __call__(self, grid, block, args, *, shared_mem=0, **kw):
        if _LAUNCH is None:
            _init()
        if RECORDING[0]:
            log = getattr(_rec, "log", None)
            if log is not None:
                log.append(("launch", self, grid, block, shared_mem, args) if not kw else ("dirty", "kw"))
        types = tuple(map(type, args))
        spec = _SPECS.get(types)
        if spec is None:
            if kw or not all(t is _ARRAY or t is type(None) or t in _CODES for t in types):
                if RECORDING[0]:
                    _dirty("cupy launch")
                self.raw(grid, block, args, shared_mem=shared_mem, **kw)
                return
            spec = _SPECS.setdefault(types, _ArgSpec(types))
        elif kw:
            self.raw(grid, block, args, shared_mem=shared_mem, **kw)
            return
        vals = list(args)
        for i in spec.arrays:
            a = vals[i]
            vals[i] = 0 if a is None else a.data.ptr
        slots, _, params = spec.buffers()
        spec.struct.pack_into(slots, 0, *vals)
        ptr = self._ptr
        if ptr is None:
            ptr = self.raw.kernel.ptr
            object.__setattr__(self, "_ptr", ptr)
        g = (grid, 1, 1) if isinstance(grid, int) else tuple(grid) + (1, 1)
        b = (block, 1, 1) if isinstance(block, int) else tuple(block) + (1, 1)
        _LAUNCH(ptr, g[0], g[1], g[2], b[0], b[1], b[2], shared_mem, _STREAM().ptr, params, 0)


    def prepared(self, grid, block, types, shared_mem=0, block_index=None):
        """``go(args)``: this kernel launched on ``grid`` x ``block`` on the current stream with
        ``args`` of ``types`` (scalars and None; device pointers as ints), packed by one
        ``struct.pack_into``: what launch plans replay. None when a type is not packable.
        ``block_index``: that argument is the by-value parameter block (a :meth:`byval` build):
        the launch copies this thread's :func:`param_block`, and ``args[block_index]`` is unused."""
        if not all(t is type(None) or t in _CODES for t in types):
            return None
        if _LAUNCH is None:
            _init()
        key = types if block_index is None else (types, block_index)
        spec = _SPECS.get(key)
        if spec is None:
            spec = _SPECS.setdefault(key, _ArgSpec(types) if block_index is None else _BlockSpec(types, block_index))
        ptr = self.raw.kernel.ptr
        g = (grid, 1, 1) if isinstance(grid, int) else tuple(grid) + (1, 1)
        b = (block, 1, 1) if isinstance(block, int) else tuple(block) + (1, 1)
        g0, g1, g2, b0, b1, b2 = g[0], g[1], g[2], b[0], b[1], b[2]
        pack, buffers = spec.struct.pack_into, spec.buffers

        def go(args):
            slots, _, params = buffers()
            pack(slots, 0, *args)
            _LAUNCH(ptr, g0, g1, g2, b0, b1, b2, shared_mem, _STREAM().ptr, params, 0)
        return go


_LAUNCH = _STREAM = None


def _init():
    global _ARRAY, _LAUNCH, _STREAM
    import cupy
    from cupy_backends.cuda.api.driver import launchKernel

    _ARRAY, _STREAM, _LAUNCH = cupy.ndarray, cupy.cuda.get_current_stream, launchKernel


def kernel_name(base: str, *template_args) -> str:
    """``kernel_name("gpuaug_flip", "uint8", 3)`` -> ``'gpuaug_flip<unsigned char, 3>'``."""
    args = [CTYPES.get(a, a) if isinstance(a, str) else str(int(a)) for a in template_args]
    return f"{base}<{', '.join(args)}>"


class _Staging:
    """Pinned host memory for the small per-call uploads (descriptor tables, per-sample
    parameters): one ``cudaMemcpyAsync`` from pinned memory per op call, and the host never
    waits for the device while its queue is deep (a training step's kernels ahead of ours).

    Uploads are packed one after another into pinned chunks of ``CHUNK`` bytes. A chunk is
    reused once the event recorded behind its last copy has completed; while every chunk is
    still in flight a new one is allocated instead of waiting (the old 32-slot ring waited on
    the oldest copy, which stalled the host for the length of the queue: 5 ms per call for
    normalize behind a busy stream on the H100). Past ``MAX_BYTES`` of pinned memory it waits
    for the oldest chunk after all, so a runaway queue cannot pin unbounded host memory.
    ``stats`` counts uploads, bytes, chunks allocated and host waits (tests read it).
    """

    CHUNK = 1 << 20
    MAX_BYTES = 256 << 20

    def __init__(self):
        self._free = []          # chunks whose copies have completed
        self._busy = []          # retired chunks, oldest first
        self._cur = None         # chunk being filled
        self._off = 0
        self._pinned = 0
        self._lock = threading.Lock()
        self._events = []        # events no chunk waits on any more: re-recorded, not re-created
        self.stats = {"uploads": 0, "bytes": 0, "chunks": 0, "waits": 0}

    @staticmethod
    def _done(chunk):
        return all(ev.done for _, ev in chunk["events"])

    def _take(self, total):
        import cupy

        while self._busy and self._done(self._busy[0]):
            self._free.append(self._busy.pop(0))
        for i, c in enumerate(self._free):
            if c["size"] >= total:
                c = self._free.pop(i)
                self._events.extend(ev for _, ev in c["events"])  # completed: free to re-record
                c["events"] = []
                return c
        size = max(total, self.CHUNK)
        if self._busy and self._pinned + size > self.MAX_BYTES:
            chunk = self._busy.pop(0)
            for _, ev in chunk["events"]:
                ev.synchronize()
            self.stats["waits"] += 1
            self._events.extend(ev for _, ev in chunk["events"])
            chunk["events"] = []
            if chunk["size"] >= total:
                return chunk
            self._pinned -= chunk["size"]
        self._pinned += size
        self.stats["chunks"] += 1
        mem = cupy.cuda.alloc_pinned_memory(size)
        return {"mem": mem, "host": np.frombuffer(mem, np.uint8, size), "size": size, "events": []}

    def _reserve(self, total, stream):
        """(chunk, offset) of ``total`` free pinned bytes (call with the lock held)."""
        cur = self._cur
        if cur is not None and self._off + total > cur["size"]:
            self._busy.append(cur)
            cur = self._cur = None
        if cur is None:
            cur, self._off = self._take(total), 0
            self._cur = cur
        return cur, self._off

    def _sent(self, cur, base, total, stream):
        """Book the copy just queued from ``cur`` at ``base`` (call with the lock held): one
        event per stream that read the chunk, recorded behind its latest copy (events are per
        stream; recorded now, so a stream destroyed later does not matter)."""
        ev = self._events.pop() if self._events else new_event()
        ev.record(stream)
        evs = cur["events"]
        for i, (ptr, old) in enumerate(evs):
            if ptr == stream.ptr:
                evs[i] = (ptr, ev)
                self._events.append(old)  # superseded by ev (later on the same stream)
                break
        else:
            evs.append((stream.ptr, ev))
        self._off = base + total
        self.stats["uploads"] += 1
        self.stats["bytes"] += total

    def upload(self, arrays):
        """Copy host arrays to the device on the current stream; return CuPy arrays."""
        import cupy

        offs, total = [], 0
        arrays = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]
        for a in arrays:
            offs.append(total)
            total += (a.nbytes + 255) // 256 * 256
        total = max(total, 256)
        stream = cupy.cuda.get_current_stream()
        with self._lock:
            cur, base = self._reserve(total, stream)
            host = cur["host"]
            for a, o in zip(arrays, offs):
                host[base + o:base + o + a.nbytes] = a.reshape(-1).view(np.uint8)
            if len(arrays) == 1:  # one array: allocated in its own shape (one ndarray, not two)
                a = arrays[0]
                dev = one = cupy.empty(a.shape, a.dtype)
                if a.nbytes:
                    dev.data.copy_from_host_async(cur["mem"].ptr + base, a.nbytes, stream)
            else:
                one = None
                dev = cupy.empty(total, np.uint8)
                dev.data.copy_from_host_async(cur["mem"].ptr + base, total, stream)
            self._sent(cur, base, total, stream)
        if one is not None:
            return [one]
        # One ndarray constructor per result (slicing, view and reshape cost a few us each).
        return [cupy.ndarray(a.shape, a.dtype, memptr=dev.data + o) for a, o in zip(arrays, offs)]

    def upload_float32(self, params):
        """A 2-D host array of any real dtype -> its float32 device copy (current stream),
        converted while it is packed into pinned memory: the launch plans' per-call parameter
        upload (one NumPy copy, one cudaMemcpyAsync, one event)."""
        import cupy

        nbytes = params.size * 4
        total = max((nbytes + 255) // 256 * 256, 256)
        stream = cupy.cuda.get_current_stream()
        with self._lock:
            cur, base = self._reserve(total, stream)
            np.copyto(cur["host"][base:base + nbytes].view(np.float32).reshape(params.shape), params,
                      casting="unsafe")
            dev = cupy.empty(params.shape, np.float32)
            if nbytes:
                dev.data.copy_from_host_async(cur["mem"].ptr + base, nbytes, stream)
            self._sent(cur, base, total, stream)
        return dev


class SideRing:
    """Small per-call tables (a launch's per-sample records) sent to the device ahead of the
    launch, on a stream of the ring's own: ``SLOTS`` pinned and device slots of ``nbytes`` each,
    allocated once. :meth:`send` packs a table into the next slot, queues its copy on the ring's
    stream and makes the caller's stream wait for that copy (on the device); :meth:`sent`
    records, behind the launch that read the slot, the event that frees it. The copy then runs
    while the caller's stream is still busy with earlier work instead of sitting in its queue in
    front of the launch (a table of a few KB copied in the stream's order, and the switch back
    to the kernel, cost MixUp about 8 us of its 36 on the H200).

    A slot is taken again only once its event has completed, which the host checks and never
    waits for: when every slot is in flight, the stream is being captured into a graph, or
    launches are being recorded (:class:`record`), :meth:`send` returns None and the caller
    uploads as usual (:func:`upload`). Device memory of the ring's own, never CuPy's pool: the
    pool could hand the side stream memory that the caller's stream still reads."""

    SLOTS = 16

    def __init__(self, nbytes):
        import cupy

        self.nbytes = int(nbytes)
        self.stride = stride = max(256, (self.nbytes + 255) // 256 * 256)
        self.mem = cupy.cuda.alloc_pinned_memory(stride * self.SLOTS)
        self.host = np.frombuffer(self.mem, np.uint8, stride * self.SLOTS)
        self.dev = cupy.empty(stride * self.SLOTS, np.uint8)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.copied = [new_event() for _ in range(self.SLOTS)]
        self.done = [new_event() for _ in range(self.SLOTS)]
        self.state = [0] * self.SLOTS  # 0 free, 1 taken (sent, its launch not yet queued), 2 queued
        self.i = 0
        self.lock = threading.Lock()
        self.stats = {"sent": 0, "full": 0}
        self._cp = cupy

    def send(self, table, stream):
        """``(slot, device array)``: ``table`` (a C-contiguous host array of at most ``nbytes``)
        on its way to the device, ``stream`` waiting for it; or None (see the class)."""
        if RECORDING[0] or stream.is_capturing():
            return None
        with self.lock:
            i = self.i
            st = self.state[i]
            if st == 1 or st == 2 and not self.done[i].done:
                self.stats["full"] += 1
                return None
            self.i = (i + 1) % self.SLOTS
            self.state[i] = 1
        o = i * self.stride
        self.host[o:o + table.nbytes] = table.reshape(-1).view(np.uint8)
        cp = self._cp
        cp.cuda.runtime.memcpyAsync(self.dev.data.ptr + o, self.mem.ptr + o, table.nbytes,
                                    cp.cuda.runtime.memcpyHostToDevice, self.stream.ptr)
        self.copied[i].record(self.stream)
        stream.wait_event(self.copied[i])
        self.stats["sent"] += 1
        return i, cp.ndarray(table.shape, table.dtype, memptr=self.dev.data + o)

    def sent(self, slot, stream):
        """Behind the launch that reads ``slot`` (on ``stream``; also when the launch failed):
        the slot is free again once the stream has run it."""
        self.done[slot].record(stream)
        self.state[slot] = 2


def side_ring(nbytes):
    """A :class:`SideRing` for tables of up to ``nbytes`` on the current device (callers keep
    it, per device)."""
    return SideRing(nbytes)


def new_event():
    """A CUDA event for ordering only (no timing, no blocking sync)."""
    import cupy

    return cupy.cuda.Event(block=False, disable_timing=True)


_staging = {}


def _per_device(table, make, dev):
    """``table[dev]`` (default: the current device), made by ``make()`` on first use."""
    if dev is None:
        import cupy

        dev = cupy.cuda.runtime.getDevice()
    got = table.get(dev)
    if got is None:
        got = table.setdefault(dev, make())
    return got


def staging(dev=None) -> _Staging:
    """The pinned upload area of device ``dev`` (default: the current device)."""
    return _per_device(_staging, _Staging, dev)


def upload(*arrays):
    """Host arrays -> device arrays, one async copy from pinned memory (current stream)."""
    got = staging().upload(arrays)
    if RECORDING[0]:
        log("upload", got)
    return got


class _Constants:
    """Device copies of host arrays that are pure functions of a key: descriptor tables of
    dense batches (keyed by address, shape and strides) and per-sample parameter matrices whose
    rows are all equal (scalar arguments). A loop of calls on same-shaped batches then uploads
    nothing: CuPy's pool hands the same addresses back, so the keys repeat.

    An entry is made by one staged upload on the current stream, with an event behind it; a
    call on another stream waits for that event on the device (never on the host) until it
    has completed. Entries are never written after they are made. Past ``LIMIT`` entries or
    ``LIMIT_BYTES`` bytes the cache is dropped after a device synchronisation (a kernel on another stream may still
    read an entry, and CuPy's pool would hand its memory to the stream that made it).
    """

    LIMIT = 4096
    LIMIT_BYTES = 16 << 20

    def __init__(self):
        self._d = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.stats = {"hits": 0, "made": 0, "drops": 0}

    def clear(self):
        """Drop every entry, after a device synchronisation (see the class docstring)."""
        import cupy

        with self._lock:
            if self._d:
                cupy.cuda.Device().synchronize()
                self._d.clear()
                self._bytes = 0
                self.stats["drops"] += 1

    def hit(self, key):
        """The entry of ``key`` when its upload is known to be done (no stream need wait for it),
        else None: then :meth:`get` (a launch plan's table lookup, without get's stream lookup
        and closure). A hit whose upload event has completed forgets the event."""
        e = self._d.get(key)
        if e is None:
            return None
        if e[1] is not None:
            if not e[1].done:
                return None
            self._d[key] = (e[0], None, e[2])
        self.stats["hits"] += 1
        return e[0]

    def get(self, key, host):
        """The device copy of ``host`` (an array, or a callable making it, called on a miss only)."""
        import cupy

        stream = cupy.cuda.get_current_stream()
        e = self._d.get(key)
        if e is not None:
            arr, ev, sptr = e
            if ev is not None and sptr != stream.ptr:
                if ev.done:
                    self._d[key] = (arr, None, sptr)
                else:
                    stream.wait_event(ev)
            self.stats["hits"] += 1
            return arr
        if callable(host):
            host = host()
        if len(self._d) >= self.LIMIT or self._bytes + host.nbytes > self.LIMIT_BYTES:
            self.clear()
        with self._lock:
            (arr,) = staging().upload((host,))
            self._bytes += host.nbytes
            ev = cupy.cuda.Event(block=False, disable_timing=True)
            ev.record(stream)
            self._d[key] = (arr, ev, stream.ptr)
            self.stats["made"] += 1
        return arr


_constants = {}


def constants(dev=None) -> _Constants:
    """The constant cache of device ``dev`` (default: the current device)."""
    return _per_device(_constants, _Constants, dev)


#: Called by clear_constants() (gpuaug's launch plans hold constants too).
ON_CLEAR: list = []


def clear_constants():
    """Empty every device's constant cache, and whatever registered in ON_CLEAR (e.g. before
    counting CuPy's pool in a leak check: the cache holds a few KiB per distinct table or
    parameter matrix, at most ``_Constants.LIMIT_BYTES`` per device)."""
    import cupy

    for dev, c in list(_constants.items()):
        with cupy.cuda.Device(dev):
            c.clear()
    for f in ON_CLEAR:
        f()


def stage(*items):
    """Host arrays -> device arrays on the current stream. Each item is ``(key, host)``: a
    keyed one comes from the constant cache (uploaded the first time only), the others travel
    together in one staged copy."""
    keyed = [k is not None for k, _ in items]
    fresh = upload(*(h for (k, h), c in zip(items, keyed) if not c)) if not all(keyed) else []
    out, it = [], iter(fresh)
    cache = constants() if any(keyed) else None
    for (k, h), c in zip(items, keyed):
        out.append(cache.get(k, h) if c else next(it))
    if RECORDING[0]:
        log = getattr(_rec, "log", None)
        if log is not None:
            log.extend(("const", k, a, h) for (k, h), a in zip(items, out) if k is not None)
    return out


# -- recording a call's launches (gpuaug._plan replays them) ----------------------------------
#: Threads recording now (a cheap check on every launch); each keeps its log in _rec.log.
RECORDING = [0]
_rec = threading.local()
_rec_lock = threading.Lock()


class record:
    """``with record() as log``: this thread's launches (``("launch", kernel, grid, block,
    shared_mem, args)``), keyed constants (``("const", key, array, host array)``), fresh
    uploads (``("upload", arrays)``), the per-sample parameters a launch reads
    (``("params", array)``, from ``gpuaug._run.device_params``) and anything that cannot be
    replayed (``("dirty", why)``: launches through CuPy) land in ``log``."""

    def __enter__(self):
        self.log = _rec.log = []
        with _rec_lock:  # threads record at once (the scheduler's): the count must stay exact
            RECORDING[0] += 1
        return self.log

    def __exit__(self, *exc):
        with _rec_lock:
            RECORDING[0] -= 1
        _rec.log = None
        return False


def _dirty(why):
    log("dirty", why)


def log(*entry):
    """Add ``entry`` to this thread's recording log, if it records (see :class:`record`)."""
    got = getattr(_rec, "log", None)
    if got is not None:
        got.append(entry)


def grid_2d(h: int, w: int, n: int, block=(32, 8)):
    """Grid and block for one thread per output pixel; z walks the samples."""
    return ((w + block[0] - 1) // block[0], (h + block[1] - 1) // block[1], min(n, 65535)), \
        (block[0], block[1], 1)


def check_compile(filename: str, name_exprs, arch: str = "compute_90", options: tuple = ()) -> str:
    """Compile ``kernels/<filename>`` with NVRTC for ``arch`` without a GPU; return the PTX.

    Used by the CPU tests (and by hand) to catch CUDA C errors on machines with no GPU.
    ``options``: NVRTC options after the library's own (:func:`byval_options`: a by-value build).
    Raises RuntimeError with NVRTC's log on failure.
    """
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(source(filename), filename, [], [])
    try:
        for ne in name_exprs:
            nvrtc.addNameExpression(prog, ne)
        try:
            nvrtc.compileProgram(prog, list(NVRTC_OPTIONS) + list(options) + [f"-arch={arch}"])
        except Exception as e:
            raise RuntimeError(f"{filename}: NVRTC failed: {e}\n{nvrtc.getProgramLog(prog)}") from None
        return nvrtc.getPTX(prog).decode() if isinstance(nvrtc.getPTX(prog), bytes) else nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
