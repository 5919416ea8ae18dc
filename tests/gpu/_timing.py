"""Timing helpers shared by the GPU bench scripts under tests/gpu/ (run as scripts: this folder
is on their sys.path)."""
from __future__ import annotations

import time

#: Inclusive nanoseconds per wrapped function ("<owner>.<name>" -> total), filled by :func:`wrap`.
TOTALS: dict = {}


def wrap(owner, name):
    """Replace ``owner.name`` by a timer adding its inclusive time to ``TOTALS`` (about 0.2 us
    per call added): where a call's host time goes, without a profiler's distortion."""
    f = getattr(owner, name)
    label = f"{getattr(owner, '__name__', owner)}.{name}"

    def timed(*a, **k):
        t0 = time.perf_counter_ns()
        try:
            return f(*a, **k)
        finally:
            TOTALS[label] = TOTALS.get(label, 0) + time.perf_counter_ns() - t0
    setattr(owner, name, timed)


def torch_event_ms(fn, iters, warmup):
    """Median ms per call between CUDA events around each call on PyTorch's current stream
    (gaps included: host-bound peers such as kornia are timed as a training loop sees them)."""
    from gpuaug.bench.clocks import torch_ms

    return torch_ms(fn, iters, warmup, cuda=True)


def dev_host_loop(f, spin, iters=200, top=14):
    """Device ms (10 calls queued behind a spin kernel: events time the device work only), host us
    per call (wall time while a long spin holds the stream), loop ms (``iters`` back-to-back calls,
    one sync) and a cProfile excerpt of the loop, for a CuPy-stream callable ``f``; ``spin`` is a
    RawKernel(unsigned long long ns). Returns (dict, profile text)."""
    import cProfile
    import io
    import pstats
    import time

    import cupy as cp
    import numpy as np

    for _ in range(5):
        f()
    cp.cuda.Device().synchronize()
    s0, s1 = cp.cuda.Event(), cp.cuda.Event()
    devs = []
    for _ in range(7):
        spin((1,), (1,), (np.uint64(30_000_000),))
        s0.record()
        for _ in range(10):
            f()
        s1.record()
        s1.synchronize()
        devs.append(cp.cuda.get_elapsed_time(s0, s1) / 10)
    hosts = []
    for _ in range(5):
        spin((1,), (1,), (np.uint64(400_000_000),))
        t0 = time.perf_counter()
        for _ in range(20):
            f()
        hosts.append((time.perf_counter() - t0) / 20 * 1e6)
        cp.cuda.Device().synchronize()
    loops = []
    for _ in range(3):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            f()
        cp.cuda.Device().synchronize()
        loops.append((time.perf_counter() - t0) / iters * 1e3)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(iters):
        f()
    cp.cuda.Device().synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return {"dev_ms": float(np.median(devs)), "host_us": float(np.median(hosts)),
            "loop_ms": float(np.median(loops))}, s.getvalue()
