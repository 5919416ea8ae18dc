"""Shared checks and small helpers for the public functions.

Every error names the argument, the value it got and what would be accepted.
"""
from __future__ import annotations

import contextvars
import os
import sys

import numpy as np

#: The GPU of the batch the current op call works on (set by ``as_batch``; None for host
#: batches), so that ``per_sample`` can refuse parameters given as CUDA arrays on another GPU
#: without every op passing the device along. Ops run synchronously, one batch per call.
BATCH_DEVICE = contextvars.ContextVar("gpuaug_batch_device", default=None)

DTYPE_NAMES = {np.dtype(np.uint8): "uint8", np.dtype(np.float16): "float16",
               np.dtype(np.float32): "float32"}


def dtype_name(dtype) -> str:
    """``np.dtype(dtype).name`` ("uint8", "float32"...), looked up: NumPy builds the name in
    Python on every ``.name`` (several microseconds on an op's hot path)."""
    got = _NAMES.get(dtype)
    if got is None:
        got = np.dtype(dtype).name
        if len(_NAMES) < 256:
            _NAMES[dtype] = got
    return got


_NAMES: dict = dict(DTYPE_NAMES)


def kept_array(table, key, make, limit=64):
    """``make()`` (a NumPy array) made once per ``key`` in ``table`` and kept read-only (it is
    shared by every call with that key); the table is emptied past ``limit`` entries. For the
    constant parameter blocks ops rebuild per call otherwise."""
    got = table.get(key)
    if got is None:
        got = make()
        got.flags.writeable = False
        if len(table) >= limit:
            table.clear()
        table[key] = got
    return got


def dtype_max(dtype) -> float:
    """The top M of a dtype's value range, the one definition every op uses: 255 for uint8,
    1 for the floats (images in [0, 1])."""
    return 255.0 if np.dtype(dtype) == np.uint8 else 1.0


def check_choice(name, value, choices):
    """``value`` if it is one of ``choices``, else ValueError naming it; an array (NumPy, CUDA,
    DLPack) is refused with TypeError before any comparison (``in`` on an array raises NumPy's
    ambiguity error, or passes a 1-element array that later fails as a dict key)."""
    if not isinstance(value, (str, np.generic)) and (isinstance(value, np.ndarray) or hasattr(value, "__array__")
                                       or hasattr(value, "__cuda_array_interface__")
                                       or hasattr(value, "__dlpack__")):
        raise TypeError(f"{name}: got {type(value).__name__} {value!r}; expected one of "
                        f"{', '.join(map(repr, choices))} (one value, not an array)")
    if value not in choices:
        raise ValueError(f"{name}: got {value!r}; expected one of {', '.join(map(repr, choices))}")
    return value


def check_flag(name, value):
    """A host-side True/False argument (not per sample): bools only, so that a string such as
    "no" or a per-sample list passed by mistake is refused rather than read as truthy."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: got {value!r}; expected True or False")
    return bool(value)


def check_dtype_arg(name, dtype):
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d not in DTYPE_NAMES:
        raise TypeError(f"{name}: got {dtype!r}; expected one of uint8, float16, float32")
    return d


def is_cuda_array(x) -> bool:
    if isinstance(x, np.ndarray):
        return False
    cp = sys.modules.get("cupy")  # CuPy arrays first, without building __cuda_array_interface__
    if cp is not None and isinstance(x, getattr(cp, "ndarray", ())):
        return True
    if hasattr(x, "__cuda_array_interface__"):
        return True
    dl = getattr(x, "__dlpack_device__", None)
    if dl is not None:
        try:
            return int(dl()[0]) in (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
        except Exception:
            return False
    return False


def cupy_module():
    """Import CuPy or explain why the GPU path is unavailable."""
    try:
        import cupy
    except ImportError as e:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "this input is a CUDA array but CuPy is not installed; "
            "install gpuaug[cuda12] or gpuaug[cuda13]") from e
    return cupy


def simulator() -> bool:
    """True when Numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def gpu_available() -> bool:
    """True if CuPy can see a CUDA device (never raises)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


# CUresult codes that say what is missing (cuda.h).
_CU_NO_DEVICE, _CU_STUB_LIBRARY, _CU_INSUFFICIENT_DRIVER = 100, 34, 35


def _load_libcuda():
    """The NVIDIA driver's CUDA library (ctypes handle), or None when it cannot be loaded."""
    import ctypes

    for name in (("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def why_no_gpu(load_libcuda=None) -> str | None:
    """None when CuPy can use a CUDA device; else what is missing, in words.

    Tells apart: CuPy not installed, no NVIDIA driver (``libcuda`` cannot be loaded), a
    driver but no device, and a driver too old for CuPy's CUDA runtime. Never raises.
    ``load_libcuda`` (tests) replaces the loader of the driver library.

    >>> why_no_gpu()          # doctest: +SKIP
    'no NVIDIA driver: libcuda.so.1 cannot be loaded (install the NVIDIA driver)'
    """
    import ctypes

    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install gpuaug[cuda12] or gpuaug[cuda13])"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
        cupy_err = None if n > 0 else "device count 0"
    except Exception as e:  # noqa: BLE001 - any CUDA failure means "no usable GPU"
        cupy_err = f"{type(e).__name__}: {str(e)[:120]}"
    if cupy_err is None:
        return None
    lib = (load_libcuda or _load_libcuda)()
    if lib is None:
        return "no NVIDIA driver: libcuda.so.1 cannot be loaded (install the NVIDIA driver)"
    try:
        drv = ctypes.c_int(0)
        lib.cuDriverGetVersion(ctypes.byref(drv))
        rc = lib.cuInit(0)
        count = ctypes.c_int(0)
        if rc == 0:
            rc = lib.cuDeviceGetCount(ctypes.byref(count))
    except Exception as e:  # noqa: BLE001
        return f"the NVIDIA driver library loads but cannot be queried ({type(e).__name__}: {e}); CuPy: {cupy_err}"
    try:
        rt = int(cupy.cuda.runtime.runtimeGetVersion())
    except Exception:  # noqa: BLE001
        rt = 0
    if rc == _CU_STUB_LIBRARY:
        return "no NVIDIA driver: only the CUDA toolkit's stub libcuda is present (install the NVIDIA driver)"
    if rc == _CU_INSUFFICIENT_DRIVER or (drv.value and rt and drv.value // 1000 < rt // 1000):
        return (f"NVIDIA driver too old: it supports CUDA {_version(drv.value)}, CuPy's runtime is "
                f"CUDA {_version(rt) if rt else '?'} (update the driver, or install the CuPy for your "
                f"driver's CUDA: gpuaug[cuda12] / gpuaug[cuda13])")
    if rc == _CU_NO_DEVICE or (rc == 0 and count.value == 0):
        return (f"no CUDA device: the NVIDIA driver (CUDA {_version(drv.value)}) is installed but "
                f"reports no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)")
    return f"no usable CUDA device (driver CUDA {_version(drv.value)}, cuInit error {rc}; CuPy: {cupy_err})"
