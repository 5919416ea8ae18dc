"""Shared checks and small helpers for the public functions.

Every error names the argument, the value it got and what would be accepted.
"""
from __future__ import annotations

import contextvars
import os

import numpy as np

#: The GPU of the batch the current op call works on (set by ``as_batch``; None for host
#: batches), so that ``per_sample`` can refuse parameters given as CUDA arrays on another GPU
#: without every op passing the device along. Ops run synchronously, one batch per call.
BATCH_DEVICE = contextvars.ContextVar("gpuaug_batch_device", default=None)

DTYPE_NAMES = {np.dtype(np.uint8): "uint8", np.dtype(np.float16): "float16",
               np.dtype(np.float32): "float32"}


def dtype_name(dtype) -> str:
    return DTYPE_NAMES[np.dtype(dtype)]


def check_choice(name, value, choices):
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
