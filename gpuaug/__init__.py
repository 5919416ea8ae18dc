"""gpuaug: image augmentation as hand-written CUDA kernels, on batches already on the GPU.

Every op takes a batch (NHWC or NCHW, uint8/float16/float32, NumPy or any CUDA array, or a
list of HWC images of different sizes) and per-sample parameters, and runs as one launch
per batch: CUDA C by default on the GPU, a Numba CUDA twin (``backend="numba"``), or the
Numba CPU twin for NumPy input. ``gpuaug.registry`` maps each op name to its spec.

    >>> import numpy as np, gpuaug
    >>> batch = np.zeros((8, 32, 32, 3), np.uint8)
    >>> gpuaug.flip(batch, horizontal=[True, False] * 4).shape
    (8, 32, 32, 3)

Nothing is compiled or imported from CUDA libraries at import time.
"""
from gpuaug._registry import REGISTRY as registry

__version__ = "0.1.0"


def __getattr__(name):
    # Ops are looked up in the registry on first use, so importing gpuaug stays cheap.
    if name in ("geometry", "targets"):
        import importlib

        return importlib.import_module(f"gpuaug.{name}")
    if name == "Scheduler":  # imported on first use: it pulls in threads, not CUDA
        from gpuaug.scheduler import Scheduler

        return Scheduler
    if name == "random" or name[:1].isupper():  # gpuaug.random; Compose and its transforms
        import importlib

        mod = importlib.import_module("gpuaug.random" if name == "random" else "gpuaug.policy")
        if name == "random" or name in mod.__all__:
            return mod if name == "random" else getattr(mod, name)
    if name in registry:
        # Behind its launch plans: a repeated call with the same shapes and scalar arguments
        # replays its launches (see gpuaug._plan); the op itself is registry[name].func.
        fn = registry[name].call
        globals()[name] = fn  # later lookups skip this hook (a few us per op call)
        return fn
    raise AttributeError(f"module 'gpuaug' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(registry) | {"geometry", "targets", "Scheduler", "random", "Compose"})


__all__ = ["registry", "__version__"]
