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
    """Whether CPU kernels use Numba's thread pool (``prange``): on unless
    ``GPUAUG_CPU_PARALLEL=0``.

    On by default: a call on a NumPy batch (the common caller) then uses every core, 1.4-2x
    on 2 cores for a (64, 224, 224, 3) batch (bench/results/2026-11-25-cpu). Set 0
    where the caller already runs one thread per core (scheduler workers, DataLoader
    workers, many DALI CPU threads; the kernels release the GIL, so those threads
    overlap), where other processes keep the cores busy (a parallel kernel waits for its
    slowest thread, up to a scheduler time slice), or in short-lived processes: a parallel
    kernel compiles 1.5-3x slower (once per machine with the disk cache) and each call pays
    the thread pool's start (tens of us).
    """
    import os

    return os.environ.get("GPUAUG_CPU_PARALLEL", "1") not in ("", "0")


def disk_cache() -> bool:
    """Whether the njit twins use Numba's on-disk cache (``cache=True``): on unless
    ``GPUAUG_NUMBA_CACHE=0``.

    A process's first call of a CPU op costs about 0.3-2 s of Numba compilation (more on a
    busy machine); with the cache, later processes load the machine code instead (tens of
    ms). Numba writes it to ``__pycache__`` beside kernels/numba/, or to its user-wide cache
    directory when that is read-only (``NUMBA_CACHE_DIR`` moves it).
    """
    import os

    return os.environ.get("GPUAUG_NUMBA_CACHE", "1") not in ("", "0")


def _fingerprint(fn, g) -> str:
    """A digest of the code ``fn`` runs with globals ``g``: its bytecode and constants, the
    simple constants among its globals, and (recursively) the same for every dual function
    or bound function it calls.

    Numba's cache checks only the timestamp of the file that defines the cached function.
    A driver in _driver.py runs maths bound from another file (``MAP=flip_map``), so the
    digest goes into the cache entry's name: editing any function in the chain, or binding
    another one, gives a new entry instead of stale machine code.
    """
    import hashlib

    import numpy as np

    h = hashlib.sha1()
    seen = set()

    def visit_code(code, glb):
        if code in seen:
            return
        seen.add(code)
        h.update(code.co_code)
        h.update(repr(code.co_names).encode())
        for c in code.co_consts:  # nested code objects by content (their repr holds an address)
            if isinstance(c, types.CodeType):
                visit_code(c, glb)
            else:
                h.update(repr(c).encode())
        for name in code.co_names:
            obj = glb.get(name)
            obj = getattr(obj, "py_func", obj)  # a Numba dispatcher: its Python source
            if isinstance(obj, types.FunctionType):
                visit_code(obj.__code__, obj.__globals__)
            elif isinstance(obj, (bool, int, float, str, tuple)):
                h.update(f"{name}={obj!r}".encode())
            elif isinstance(obj, np.ndarray):  # a global table: Numba freezes its values
                h.update(f"{name}:{obj.dtype}{obj.shape}".encode() + obj.tobytes())

    def visit(f, glb):
        visit_code(f.__code__, glb)

    visit(fn, g)
    return h.hexdigest()[:12]


def _jit(fn, target, kind):
    if target == "cpu":
        import numba

        if kind == "kernel":
            if cpu_parallel():
                return SmallSerial(numba.njit(parallel=True, nogil=True, cache=disk_cache())(fn))
            return numba.njit(nogil=True, cache=disk_cache())(fn)
        return numba.njit(nogil=True, cache=disk_cache())(fn)
    if target == "cuda":
        from numba import cuda

        return cuda.jit(fn) if kind == "kernel" else cuda.jit(device=True)(fn)
    raise ValueError(f"target: got {target!r}; expected 'cpu' or 'cuda'")


class SmallSerial:
    """A parallel (``prange``) CPU kernel that runs small inputs through a serial build of the
    same function: below :attr:`SMALL` elements in its first two array arguments (source and
    destination, for every kernel here). Waking Numba's pool costs tens of microseconds, and on
    busy cores a parallel region waits for its slowest thread up to a scheduler time slice (an
    8x4x4x3 flip took 0.5-2.6 ms on a loaded 2-core machine with the pool); setting the pool's
    thread count to 1 around the call still cost ~5 us (two set_num_threads). Each build
    compiles on first use only, with its own cache entry (qualname ``...-par-`` vs
    ``...-kernel-``). Anything else (attributes, ``py_func``) is the parallel dispatcher's.
    """

    SMALL = 1 << 16
    __slots__ = ("dispatcher", "_serial")

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self._serial = None

    def serial(self):
        """The serial build (made on first use)."""
        if self._serial is None:
            import numba

            fn = self.dispatcher.py_func
            clone = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                                       fn.__closure__)
            clone.__qualname__ = fn.__qualname__.replace("-par-", "-kernel-")
            self._serial = numba.njit(nogil=True, cache=disk_cache())(clone)
        return self._serial

    def __call__(self, *args):
        size = 0
        for a in args[:2]:
            size += getattr(a, "size", 0)
        if size < self.SMALL:
            return (self._serial or self.serial())(*args)
        return self.dispatcher(*args)

    def builds(self):
        """The Numba dispatchers made so far (parallel, and serial once used)."""
        return [self.dispatcher] + ([self._serial] if self._serial is not None else [])

    def __getattr__(self, name):
        return getattr(self.dispatcher, name)


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
    # The qualname names the cache entry (see _fingerprint): one per binding and code version.
    # Numba's cache key leaves out the compile flags: parallel goes into the name as well.
    flags = "par" if (target == "cpu" and kind == "kernel" and cpu_parallel()) else kind
    clone.__qualname__ = f"{fn.__qualname__}[{target}-{flags}-{_fingerprint(fn, g)}]"
    compiled = _jit(clone, target, kind)
    _cache[key] = compiled
    return compiled
