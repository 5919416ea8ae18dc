"""One plain-Python source, two Numba targets: ``numba.njit`` (CPU) and ``numba.cuda.jit``.

Per-pixel maths is written once as ordinary module-level functions marked ``@dual``.
:func:`specialize` compiles such a function for one target; every ``@dual`` function it
calls (found among its globals) is compiled for the same target first and bound in its
place, so helpers can call helpers. Drivers (the loops over pixels) take the per-op
function through a global name given as a keyword, e.g. ``MAP=flip_map``.

Assumes: dual functions use only globals (no closures) and Numba-supported maths that
both targets accept (``math.*``, arithmetic, tuples, indexing of arrays passed in).
Nothing compiles at import: ``specialize`` wraps lazily, Numba compiles on first call.
"""
from __future__ import annotations

import types

_cache: dict = {}


def dual(fn):
    """Mark ``fn`` as shared maths, compiled per target on demand."""
    fn.__gpuaug_dual__ = True
    return fn


def cpu_parallel() -> bool:
    """Whether CPU kernels use Numba's thread pool (``prange``): ``GPUAUG_CPU_PARALLEL=1``.

    Off by default: a parallel kernel costs about 3x the compile time and milliseconds per
    call in thread-pool start-up on small machines, and the callers that need throughput
    (DALI's CPU pipelines, the scheduler's workers) already run samples on their own
    threads; the kernels release the GIL (``nogil``) so those threads overlap.
    """
    import os

    return os.environ.get("GPUAUG_CPU_PARALLEL", "0") not in ("", "0")


def _jit(fn, target, kind):
    if target == "cpu":
        import numba

        if kind == "kernel":
            return numba.njit(parallel=cpu_parallel(), nogil=True)(fn)
        return numba.njit(nogil=True)(fn)
    if target == "cuda":
        from numba import cuda

        return cuda.jit(fn) if kind == "kernel" else cuda.jit(device=True)(fn)
    raise ValueError(f"target: got {target!r}; expected 'cpu' or 'cuda'")


def specialize(fn, target, kind="device", **bind):
    """Compile ``fn`` for ``target`` ('cpu' or 'cuda') as a 'device' function or a 'kernel'.

    ``bind`` maps global names in ``fn`` to dual functions (or constants) to use.
    Memoised on (fn, target, kind, bind).
    """
    key = (fn, target, kind, tuple(sorted((k, id(v)) for k, v in bind.items())))
    hit = _cache.get(key)
    if hit is not None:
        return hit
    g = dict(fn.__globals__)
    g.update(bind)
    for name in fn.__code__.co_names:
        obj = g.get(name)
        if getattr(obj, "__gpuaug_dual__", False):
            g[name] = specialize(obj, target, "device")
    clone = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    clone.__qualname__ = f"{fn.__qualname__}[{target}]"
    compiled = _jit(clone, target, kind)
    _cache[key] = compiled
    return compiled
