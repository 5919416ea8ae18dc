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


def get_function(filename: str, name_expr: str):
    """The compiled kernel ``name_expr`` (a template instance) from ``kernels/<filename>``.

    Memoised per (device, file, name); the first call compiles with NVRTC.
    """
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    key = (dev, filename, name_expr)
    fn = _modules.get(key)
    if fn is None:
        with _lock:
            fn = _modules.get(key)
            if fn is None:
                mod = cupy.RawModule(code=source(filename), options=NVRTC_OPTIONS,
                                     name_expressions=[name_expr])
                fn = mod.get_function(name_expr)
                _modules[key] = fn
    return fn


def kernel_name(base: str, *template_args) -> str:
    """``kernel_name("gpuaug_flip", "uint8", 3)`` -> ``'gpuaug_flip<unsigned char, 3>'``."""
    args = [CTYPES.get(a, a) if isinstance(a, str) else str(int(a)) for a in template_args]
    return f"{base}<{', '.join(args)}>"


class _Staging:
    """A ring of pinned host buffers for the small per-call uploads (descriptor tables,
    per-sample parameters): one ``cudaMemcpyAsync`` from pinned memory per op call, so
    no op waits for the device. A slot is reused only after the event recorded behind
    its last copy has completed (a host wait on that one copy, never a device sync).
    """

    SLOTS = 32

    def __init__(self):
        self._slots = [None] * self.SLOTS  # (pinned memory, nbytes, event)
        self._next = 0
        self._lock = threading.Lock()

    def upload(self, arrays):
        """Copy host arrays to the device on the current stream; return CuPy arrays."""
        import cupy

        offs, total = [], 0
        arrays = [np.ascontiguousarray(a) for a in arrays]
        for a in arrays:
            offs.append(total)
            total += (a.nbytes + 255) // 256 * 256
        total = max(total, 256)
        with self._lock:
            i = self._next
            self._next = (i + 1) % self.SLOTS
            slot = self._slots[i]
            if slot is not None and slot[2] is not None:
                slot[2].synchronize()
            if slot is None or slot[1] < total:
                size = max(total, 1 << 16)
                slot = [cupy.cuda.alloc_pinned_memory(size), size, None]
                self._slots[i] = slot
            host = np.frombuffer(slot[0], np.uint8, total)
            for a, o in zip(arrays, offs):
                host[o:o + a.nbytes] = a.view(np.uint8).reshape(-1)
            dev = cupy.empty(total, np.uint8)
            stream = cupy.cuda.get_current_stream()
            dev.data.copy_from_host_async(slot[0].ptr, total, stream)
            ev = cupy.cuda.Event(block=False, disable_timing=True)
            ev.record(stream)
            slot[2] = ev
        return [dev[o:o + a.nbytes].view(a.dtype).reshape(a.shape) for a, o in zip(arrays, offs)]


_staging = {}


def upload(*arrays):
    """Host arrays -> device arrays, one async copy from pinned memory (current stream)."""
    import cupy

    dev = cupy.cuda.runtime.getDevice()
    st = _staging.get(dev)
    if st is None:
        st = _staging.setdefault(dev, _Staging())
    return st.upload(arrays)


def grid_2d(h: int, w: int, n: int, block=(32, 8)):
    """Grid and block for one thread per output pixel; z walks the samples."""
    return ((w + block[0] - 1) // block[0], (h + block[1] - 1) // block[1], min(n, 65535)), \
        (block[0], block[1], 1)


def check_compile(filename: str, name_exprs, arch: str = "compute_90") -> str:
    """Compile ``kernels/<filename>`` with NVRTC for ``arch`` without a GPU; return the PTX.

    Used by the CPU tests (and by hand) to catch CUDA C errors on machines with no GPU.
    Raises RuntimeError with NVRTC's log on failure.
    """
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(source(filename), filename, [], [])
    try:
        for ne in name_exprs:
            nvrtc.addNameExpression(prog, ne)
        try:
            nvrtc.compileProgram(prog, list(NVRTC_OPTIONS) + [f"-arch={arch}"])
        except Exception as e:
            raise RuntimeError(f"{filename}: NVRTC failed: {e}\n{nvrtc.getProgramLog(prog)}") from None
        return nvrtc.getPTX(prog).decode() if isinstance(nvrtc.getPTX(prog), bytes) else nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
