"""The machine a figure was measured on: GPU status, device, library versions, usable backends.

Nothing here imports CuPy, Numba or DALI at import time; :func:`backend_status` does when called
(``gpuaug info``)."""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import platform

import numpy as np

from .config import MIB


# ----------------------------------------------------------------------------- environment
def gpu_status() -> tuple[bool, str]:
    """(usable, reason): whether CuPy sees a CUDA device, and why not (no driver, no device,
    driver too old: gpuaug._util.why_no_gpu)."""
    if importlib.util.find_spec("cupy") is None:
        return False, "CuPy is not installed (install gpuaug[cuda12] or gpuaug[cuda13])"
    from gpuaug._util import why_no_gpu

    why = why_no_gpu()
    if why is not None:
        return False, why
    import cupy

    return True, f"{cupy.cuda.runtime.getDeviceCount()} CUDA device(s)"


def _dist_version(*names) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _dist_prefix_version(prefix) -> str | None:
    for d in importlib.metadata.distributions():
        name = (d.metadata["Name"] or "").lower()
        if name.startswith(prefix):
            return f"{d.version} ({name})"
    return None


def versions() -> dict:
    """Versions of Python and every library a figure may depend on (None: not installed).

    Read from the installed distributions, so nothing is imported.
    """
    from gpuaug import __version__

    return {
        "python": platform.python_version(),
        "gpuaug": __version__,
        "numpy": _dist_version("numpy"),
        "numba": _dist_version("numba"),
        "numba_cuda": _dist_version("numba-cuda"),
        "cupy": _dist_prefix_version("cupy"),
        "dali": _dist_prefix_version("nvidia-dali"),
        "torch": _dist_version("torch"),
        "torchvision": _dist_version("torchvision"),
        "kornia": _dist_version("kornia"),
        "cvcuda": _dist_prefix_version("cvcuda"),
        "opencv": _dist_prefix_version("opencv"),
        "matplotlib": _dist_version("matplotlib"),
    }


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _nvidia_smi_driver() -> str | None:
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except Exception:  # noqa: BLE001
        return None


def device_info(kind: str) -> dict:
    """What the figures were measured on: the GPU (kind "gpu") or this CPU (kind "cpu")."""
    if kind == "gpu":
        import cupy

        dev = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return {
            "kind": "gpu",
            "name": name,
            "index": int(dev.id),
            "compute_capability": f"{props['major']}.{props['minor']}",
            "memory_bytes": int(props["totalGlobalMem"]),
            "l2_bytes": int(props.get("l2CacheSize", 0)),
            "sm_count": int(props["multiProcessorCount"]),
            "driver": _nvidia_smi_driver(),
            "cuda_driver": _cuda_version(cupy.cuda.runtime.driverGetVersion()),
            "cuda_runtime": _cuda_version(cupy.cuda.runtime.runtimeGetVersion()),
            "cpu": _cpu_name(),
        }
    return {"kind": "cpu", "name": _cpu_name(), "index": None, "compute_capability": None,
            "memory_bytes": None, "l2_bytes": _cpu_cache_bytes(), "sm_count": os.cpu_count(),
            "driver": None, "cuda_driver": None, "cuda_runtime": None, "cpu": _cpu_name()}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_cache_bytes() -> int:
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            s = f.read().strip()
        return int(s[:-1]) * (1024 if s.endswith("K") else MIB if s.endswith("M") else 1)
    except (OSError, ValueError):
        return 32 * MIB


def backend_status() -> dict:
    """For each way of running gpuaug here: ``{"usable": bool, "why": str}``.

    Keys: cuda (CUDA C via CuPy/NVRTC), numba (Numba CUDA twin), cpu (Numba njit twin),
    dali_gpu, dali_cpu (the DALI operators). Imports CuPy/Numba/DALI, so call it only
    when that is wanted (``gpuaug info``).
    """
    out = {}
    gpu, why_gpu = gpu_status()
    if not gpu:
        out["cuda"] = {"usable": False, "why": why_gpu}
    else:
        try:
            import cupy

            k = cupy.RawKernel('extern "C" __global__ void gpuaug_probe(int* p) { if (p) *p = 1; }',
                               "gpuaug_probe")
            k((1,), (1,), (np.intp(0),))
            cupy.cuda.runtime.deviceSynchronize()
            out["cuda"] = {"usable": True, "why": f"CuPy {cupy.__version__}, NVRTC compiled and ran a kernel"}
        except Exception as e:  # noqa: BLE001
            out["cuda"] = {"usable": False, "why": f"NVRTC/CuPy failed: {type(e).__name__}: {str(e)[:160]}"}
    if importlib.util.find_spec("numba") is None:
        out["numba"] = {"usable": False, "why": "Numba is not installed"}
        out["cpu"] = {"usable": False, "why": "Numba is not installed"}
    else:
        sim = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
        try:
            from numba import cuda

            if sim:
                out["numba"] = {"usable": False, "why": "NUMBA_ENABLE_CUDASIM=1: only Numba's CUDA "
                                "simulator (NumPy inputs, tiny sizes, for tests)"}
            elif cuda.is_available():
                out["numba"] = {"usable": True, "why": f"numba-cuda sees {len(cuda.gpus)} GPU(s)"}
            else:
                reason = why_gpu if not gpu else "numba.cuda.is_available() is False"
                try:
                    cuda.gpus  # noqa: B018 - raises with the driver's reason
                except Exception as e:  # noqa: BLE001
                    reason = f"{type(e).__name__}: {str(e)[:160]}"
                out["numba"] = {"usable": False, "why": reason}
        except Exception as e:  # noqa: BLE001
            out["numba"] = {"usable": False, "why": f"numba.cuda failed to import: {type(e).__name__}: {e}"}
        out["cpu"] = {"usable": True, "why": f"Numba {_dist_version('numba')} njit on "
                      f"{os.cpu_count()} CPU threads"}
    if importlib.util.find_spec("nvidia") is None or importlib.util.find_spec("nvidia.dali") is None:
        out["dali_gpu"] = out["dali_cpu"] = {"usable": False, "why": "NVIDIA DALI is not installed"}
    else:
        v = _dist_prefix_version("nvidia-dali")
        out["dali_cpu"] = {"usable": True, "why": f"DALI {v}: CPU pipelines"}
        out["dali_gpu"] = ({"usable": True, "why": f"DALI {v} with a GPU"} if gpu else
                           {"usable": False, "why": f"DALI {v} is installed, but {why_gpu}"})
        try:  # which path gpuaug.dali's GPU ops take (builds the C++ plugin on first use)
            st = importlib.import_module("gpuaug.dali._native").status()
            out["dali_native"] = ({"usable": True, "why": f"native DALI operator for {len(st['ops'])} ops "
                                   f"({st['library']}); other ops: python_function"} if st["active"] else
                                  {"usable": False, "why": f"gd ops use python_function: {st['reason']}"})
        except Exception as e:  # noqa: BLE001
            out["dali_native"] = {"usable": False, "why": f"{type(e).__name__}: {str(e)[:200]}"}
    return out
