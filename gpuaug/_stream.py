"""Stream handles: whatever a caller passes as ``stream=``, turned into a raw handle.

Accepted: ``None`` (CuPy's current stream, which is also the stream DALI sets inside a
python_function), an ``int`` (a ``cudaStream_t`` value; 0 is the legacy default stream),
CuPy streams (``.ptr``), Numba streams (``.handle``), PyTorch streams
(``.cuda_stream``), pycuda streams (``.handle``) and any object with
``__cuda_stream__`` (the CUDA Python stream protocol, returning ``(version, handle)``).
"""
from __future__ import annotations

import threading as _threading


def stream_ptr(stream) -> int:
    """Return the raw ``cudaStream_t`` of ``stream`` as an int (see module docstring)."""
    if stream is None:
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    if isinstance(stream, bool):
        raise TypeError(f"stream: got {stream!r}; expected None, an int handle (a cudaStream_t, >= 0) "
                        "or a stream object")
    if isinstance(stream, int):
        if stream < 0:
            raise ValueError(f"stream: got {stream}; a stream handle is a non-negative int")
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        try:
            value = proto() if callable(proto) else proto
        except Exception as e:  # noqa: BLE001 - a broken protocol, named as docs/errors.md says
            raise TypeError(f"stream: __cuda_stream__ of {type(stream).__name__} raised "
                            f"{type(e).__name__}: {e}; expected (version, handle) with an int handle") from e
        try:
            h = int(value[1])
        except (TypeError, ValueError, IndexError):
            raise TypeError(f"stream: __cuda_stream__ of {type(stream).__name__} gave {value!r}; "
                            "expected (version, handle) with an int handle") from None
        if h < 0:  # the same rule as stream=-5
            raise ValueError(f"stream: __cuda_stream__ of {type(stream).__name__} gave handle {h}; "
                             "a stream handle is a non-negative int")
        return h
    for attr in ("ptr", "cuda_stream"):  # CuPy, PyTorch
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    handle = getattr(stream, "handle", None)  # pycuda (int), Numba (ctypes c_void_p)
    if handle is not None:
        handle = getattr(handle, "value", handle)
        if isinstance(handle, (int, type(None))) and not isinstance(handle, bool):
            return int(handle or 0)
        raise TypeError(f"stream: {type(stream).__name__}.handle is {handle!r}; expected an int "
                        "(a cudaStream_t) or a ctypes c_void_p")
    raise TypeError(
        f"stream: got {repr(stream)[:60]} (type {type(stream).__name__}); expected None, an int handle, "
        "a CuPy/Numba/PyTorch/pycuda stream or an object with __cuda_stream__")


def check_stream(stream) -> None:
    """Refuse a ``stream=`` that is not a stream handle, on every backend: the CPU backend
    ignores streams, but a wrong argument there is still a mistake worth reporting (and the
    same call on the GPU would fail). Imports nothing; does not touch the device."""
    if stream is not None:
        stream_ptr(stream)


class on_stream:
    """Make ``stream`` CuPy's current stream for the block (no synchronisation); ``None``
    leaves the current stream as it is. (A class, not a generator context manager: this runs
    on every op call, and the generator machinery cost a few microseconds there.)"""

    __slots__ = ("stream", "_ctx")

    def __init__(self, stream):
        self.stream = stream
        self._ctx = None

    def __enter__(self):
        import cupy

        if self.stream is None:
            return cupy.cuda.get_current_stream()
        s = self.stream if isinstance(self.stream, cupy.cuda.Stream) else \
            cupy.cuda.ExternalStream(stream_ptr(self.stream))  # Stream covers ExternalStream
        self._ctx = s
        return s.__enter__()

    def __exit__(self, *exc):
        if self._ctx is not None:
            ctx, self._ctx = self._ctx, None
            return ctx.__exit__(*exc)
        return False


class _Nothing:
    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NOTHING = _Nothing()
_GET_DEVICE = None


class _OnDevice:
    __slots__ = ("dev", "stream")

    def __init__(self, dev, stream):
        self.dev = dev
        self.stream = on_stream(stream)

    def __enter__(self):
        import cupy

        self.dev = cupy.cuda.Device(self.dev)
        self.dev.__enter__()
        try:
            return self.stream.__enter__()
        except BaseException:
            self.dev.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        try:
            self.stream.__exit__(*exc)
        finally:
            self.dev.__exit__(*exc)
        return False


def current_device() -> int:
    """The current CUDA device's id (CuPy's runtime ``getDevice``, looked up once)."""
    global _GET_DEVICE
    if _GET_DEVICE is None:
        from cupy_backends.cuda.api.runtime import getDevice

        _GET_DEVICE = getDevice
    return _GET_DEVICE()


def on_device(dev: int, stream):
    """``with cupy.cuda.Device(dev), on_stream(stream)``, as one context; nothing at all when
    ``dev`` is already current and ``stream`` is None (an op call's common case: entering
    both cost several microseconds of each call's host time)."""
    if stream is None and dev == current_device():
        return _NOTHING
    return _OnDevice(dev, stream)


# -- a second stream for work that may overlap the caller's ---------------------------------
#: CUDA priority of the side streams (lower is higher; None: the default priority). Read when a
#: thread's side stream for a device is first made.
SIDE_PRIORITY = None
_SIDES = _threading.local()


class Fork:
    """Work queued on a second stream that overlaps what the caller's stream ``main`` runs after
    the fork: :meth:`maybe` makes this thread's side stream of the current device wait (on the
    device) for everything queued on ``main`` so far; :meth:`join` makes ``main`` wait for
    everything queued on the side stream. Between the two, work on the side stream may read
    only what was queued on ``main`` before the fork, and arrays handed back to the caller must
    be allocated on ``main`` (CuPy's pool gives memory back to the stream that allocated it).

    A Policy call with targets uses it: the targets' launch runs beside the images' kernel
    instead of after it (gpuaug.targets._policy). No fork while ``main`` is being captured into
    a CUDA graph (:meth:`maybe` returns None)."""

    __slots__ = ("main", "side", "_join")

    def __init__(self, main, side, join_event):
        self.main, self.side, self._join = main, side, join_event

    @classmethod
    def maybe(cls, main):
        """A started fork from ``main`` (a CuPy stream), or None when ``main`` is capturing."""
        import cupy

        if main.is_capturing():
            return None
        dev = current_device()
        d = getattr(_SIDES, "d", None)
        if d is None:
            d = _SIDES.d = {}
        e = d.get(dev)
        if e is None:
            side = cupy.cuda.Stream(non_blocking=True) if SIDE_PRIORITY is None else \
                cupy.cuda.Stream(non_blocking=True, priority=SIDE_PRIORITY)
            e = d[dev] = (side, cupy.cuda.Event(block=False, disable_timing=True),
                          cupy.cuda.Event(block=False, disable_timing=True))
        side, start, join = e
        start.record(main)
        side.wait_event(start)  # waits for the record above, whatever is recorded on `start` later
        return cls(main, side, join)

    def join(self):
        """``main`` waits (on the device) for everything queued on the side stream so far."""
        self._join.record(self.side)
        self.main.wait_event(self._join)
