"""Test setup: GPU detection, the CUDA simulator, and the `gpu` / `dali` markers.

Without a GPU, NUMBA_ENABLE_CUDASIM=1 is set before anything imports numba.cuda, so the
Numba CUDA twins run in Numba's simulator on tiny NumPy inputs. Tests marked `gpu` are
skipped with the reason no GPU was found; tests marked `dali` when DALI is missing.
"""
import os

import pytest


def _gpu_reason():
    try:
        import cupy
    except Exception as e:  # noqa: BLE001
        return f"CuPy is not importable ({type(e).__name__}: {e})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        return f"no CUDA device ({type(e).__name__}: {str(e)[:80]})"
    return None if n > 0 else "no CUDA device (device count 0)"


NO_GPU = _gpu_reason()
HAS_GPU = NO_GPU is None
if not HAS_GPU:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def _dali_reason():
    try:
        import nvidia.dali  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"NVIDIA DALI is not importable ({type(e).__name__})"
    return None


def pytest_collection_modifyitems(config, items):
    no_dali = None
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU: {NO_GPU}"))
        if "dali" in item.keywords:
            no_dali = no_dali if no_dali is not None else (_dali_reason() or "")
            if no_dali:
                item.add_marker(pytest.mark.skip(reason=f"needs DALI: {no_dali}"))


def pytest_report_header(config):
    sim = os.environ.get("NUMBA_ENABLE_CUDASIM", "0")
    return f"gpuaug: GPU {'yes' if HAS_GPU else 'no (' + NO_GPU + ')'}; NUMBA_ENABLE_CUDASIM={sim}"
