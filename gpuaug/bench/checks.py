"""Correctness before timing: each GPU backend against the CPU twin, on the op's example
parameters; the CPU references may be computed in worker processes."""
from __future__ import annotations

import os

import numpy as np

from .config import TOLERANCES


def compare(got, ref) -> tuple[bool, float]:
    """(within tolerance, max abs error) of ``got`` against the reference ``ref`` (host arrays).

    uint8 within 1; float16 2e-3 and float32 1e-5 (absolute + relative); NaN only where
    the reference has NaN.
    """
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return False, float("inf")
    g, r = got.astype(np.float64), ref.astype(np.float64)
    nan_g, nan_r = np.isnan(g), np.isnan(r)
    if np.any(nan_g != nan_r):
        return False, float("inf")
    ok = ~nan_r
    if not np.any(ok):
        return True, 0.0
    err = np.abs(g[ok] - r[ok])
    atol, rtol = TOLERANCES.get(ref.dtype.name, (1.0, 0.0) if ref.dtype.kind in "iu" else (1e-5, 1e-5))
    passed = bool(np.all(err <= atol + rtol * np.abs(r[ok])))
    return passed, float(err.max())


def _to_host(a):
    if isinstance(a, np.ndarray):
        return a
    if isinstance(a, (list, tuple)):
        return [_to_host(x) for x in a]
    import cupy

    return cupy.asnumpy(a)


def describe_params(kwargs) -> dict:
    """Short text per parameter for the report (per-sample arrays by shape and range)."""
    out = {}
    for k, v in kwargs.items():
        a = np.asarray(v) if not isinstance(v, str) else None
        if a is None or a.dtype == object:
            out[k] = repr(v)[:60]
        elif a.ndim == 0:
            out[k] = repr(a.item())
        elif a.size <= 4:
            out[k] = repr(a.tolist())
        else:
            if a.dtype == bool:
                rng = f"{int(a.sum())} of {a.size} true"
            else:
                rng = f"in [{a.min():.4g}, {a.max():.4g}]"
            out[k] = f"{a.dtype}{list(a.shape)} {rng}"
    return out


def example_kwargs(spec, seed, n, h, w) -> dict:
    """The op's own example parameters (``OpSpec.example``) for a batch of ``n`` h x w images."""
    return spec.example(np.random.default_rng(seed), n, h, w) if spec.example else {}


def cpu_reference(spec, x, kwargs, layout):
    """The CPU twin's result (``backend="cpu"``) on a host copy of ``x``."""
    return spec.func(_to_host(x), **kwargs, layout=layout, backend="cpu")


def check_backend(spec, backend, x, kwargs, layout, ref=None) -> tuple[bool, float]:
    """Run ``spec`` on ``backend`` and compare with the CPU twin on the same data (host copy);
    ``ref``: that CPU result, if already computed.

    Returns (within tolerance, max abs error); see :func:`compare` for the tolerances.
    """
    got = _to_host(spec.func(x, **kwargs, layout=layout, backend=backend))
    if ref is None:
        ref = cpu_reference(spec, x, kwargs, layout)
    return compare(got, ref)


def prepare_call(spec, backend, inputs, kwargs, layout, xp):
    """A zero-argument callable running ``spec`` on the next input buffer into the matching
    preallocated output (``out=``), plus the first output and whether ``out=`` was accepted.

    The first two calls happen here (so a compile is not timed twice as a warm-up miss).
    The callable is what ``gpuaug.<op>`` is: the op behind its launch plans (gpuaug._plan),
    which replay scalar-argument calls into ``out=`` too.
    """
    from gpuaug._plan import planned_op

    func = planned_op(spec.name, spec.func)
    common = {"layout": layout, "backend": backend}
    y0 = func(inputs[0], **kwargs, **common)
    outs = [y0] + [xp.empty_like(y0) for _ in range(len(inputs) - 1)]
    try:
        func(inputs[1 % len(inputs)], **kwargs, out=outs[1 % len(outs)], **common)
        use_out = True
    except TypeError:
        use_out = False
    state = [0]

    def call():
        j = state[0] % len(inputs)
        state[0] += 1
        if use_out:
            return func(inputs[j], **kwargs, out=outs[j], **common)
        return func(inputs[j], **kwargs, **common)

    return call, y0, use_out


def _ref_job(op, x, kwargs, layout):
    from gpuaug import registry

    return cpu_reference(registry[op], x, kwargs, layout)


def _ref_worker_init(threads):
    os.environ["NUMBA_NUM_THREADS"] = str(threads)


_POOL = {}


def reference_pool(workers: int):
    """A process pool (spawned, reused across cases) for the CPU references, or None.

    Compiling every op's CPU twin is the longest serial part of a GPU run; in worker
    processes it overlaps with the GPU work.
    """
    if workers <= 0:
        return None
    pool = _POOL.get(workers)
    if pool is None:
        import atexit
        import concurrent.futures as cf
        import multiprocessing as mp

        threads = max(1, (os.cpu_count() or 2) // workers)
        pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                      initializer=_ref_worker_init, initargs=(threads,))
        atexit.register(pool.shutdown, wait=False, cancel_futures=True)
        _POOL[workers] = pool
    return pool


def check_samples(cfg) -> int:
    """How many samples the checks use: ``check_batch``, at most ``check_bytes`` of input."""
    per_image = cfg.height * cfg.width * cfg.channels * np.dtype(cfg.dtype).itemsize
    return int(max(1, min(cfg.check_batch, cfg.batch, cfg.check_bytes // per_image)))


def unsupported_reason(spec, cfg) -> str | None:
    """Why ``spec`` cannot run the case ``cfg`` (dtype, layout, channels), or None."""
    return _unsupported(spec, cfg)


def _unsupported(spec, cfg) -> str | None:
    if cfg.dtype not in tuple(spec.dtypes):
        return f"dtype {cfg.dtype} not supported (supports {', '.join(spec.dtypes)})"
    if cfg.layout not in tuple(spec.layouts):
        return f"layout {cfg.layout} not supported (supports {', '.join(spec.layouts)})"
    if cfg.channels not in tuple(spec.channels):
        return f"{cfg.channels} channels not supported (supports {', '.join(map(str, spec.channels))})"
    return None
