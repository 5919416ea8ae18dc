"""A registry op's Numba twins, for code that builds its own loop around them.

gpuaug's own launches (:func:`gpuaug._run.numba_function`) compile the twins into the generic
drivers of kernels/numba/_driver.py. The DALI ``numba_function`` adapter (gpuaug.dali._numba)
compiles them into a ``run_fn`` of its own instead; this module is what it calls, so the
layers stay dali_plugins -> gpuaug -> kernels (no private module of kernels/ imported from
above). Nothing compiles at import; Numba is imported on first use.

    >>> from gpuaug._registry import REGISTRY
    >>> twin(REGISTRY["flip"].kernels).__name__
    'flip_map'
"""
from __future__ import annotations

import importlib


def twin(kernels):
    """The op's ``@dual`` per-pixel function: MAP ``(y, x, sh, sw, p) -> (sy, sx)`` for a copy
    op, VALUE ``(src, n, y, x, c, p) -> float`` for a value op (``kernels``: the op's
    :class:`gpuaug._run.Kernels`, whose ``numba`` names the module under kernels/numba/ and the
    function)."""
    mod = importlib.import_module(f"gpuaug.kernels.numba.{kernels.numba[0]}")
    return getattr(mod, kernels.numba[1])


def cpu_loop(kernels):
    """The op's twin inside the generic CPU driver loop, as a plain njit function without a
    thread pool (the caller runs samples on its own threads): copy ops take ``(src, dst,
    params, fills)``, value ops ``(src, dst, params, lo, hi, rnd)``, on 4-D NHWC arrays."""
    from gpuaug.kernels.numba._driver import cpu_loop as loop

    return loop(kernels.kind, twin(kernels))


def device_function(kernels, target):
    """The op's twin compiled for ``target`` ('cpu' or 'cuda') as a device function, to call
    from code compiled for that target."""
    from gpuaug.kernels.numba._dual import specialize

    return specialize(twin(kernels), target, "device")


def store_function(target):
    """The drivers' ``store(v, lo, hi, rnd)`` compiled for ``target`` as a device function:
    ``v`` rounded half up and clamped to ``[lo, hi]`` when ``rnd`` (uint8 outputs), else ``v``."""
    from gpuaug.kernels.numba._driver import store
    from gpuaug.kernels.numba._dual import specialize

    return specialize(store, target, "device")
