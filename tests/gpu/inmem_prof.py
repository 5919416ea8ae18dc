"""The Scheduler's in-memory staging path (issue 12 target 5): GB/s over an in-memory uint8
array with gpuaug.flip as the augment, for several worker counts and GIL switch intervals,
beside a plain memcpy (threads) and pinned H2D in the same process, and the trace of the
last configuration ($OUT/inmem_trace.json).

    python3 tests/gpu/inmem_prof.py
"""
from __future__ import annotations

import os
import sys
import threading
import time

import cupy as cp
import numpy as np

import gpuaug
from gpuaug import Scheduler

OUT = os.environ.get("OUT", "out")
os.makedirs(OUT, exist_ok=True)
B = 256
N = int(os.environ.get("BATCHES", "24"))


def memcpy_gbps(x, threads):
    dst = np.empty_like(x[:B * 4])
    src = x[:B * 4]
    parts = np.array_split(np.arange(len(src)), threads)

    def work(p):
        np.copyto(dst[p[0]:p[-1] + 1], src[p[0]:p[-1] + 1])
    ts = []
    for _ in range(3):
        th = [threading.Thread(target=work, args=(p,)) for p in parts]
        t0 = time.perf_counter()
        for t in th:
            t.start()
        for t in th:
            t.join()
        ts.append(time.perf_counter() - t0)
    return src.nbytes / min(ts) / 1e9


def h2d_gbps(x):
    pinned = cp.cuda.alloc_pinned_memory(x[:B].nbytes)
    h = np.frombuffer(pinned, np.uint8, x[:B].nbytes)
    h[:] = x[:B].reshape(-1)
    d = cp.empty(x[:B].nbytes, np.uint8)
    s = cp.cuda.Stream(non_blocking=True)
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        d.data.copy_from_host_async(pinned.ptr, h.nbytes, s)
        s.synchronize()
        ts.append(time.perf_counter() - t0)
    return h.nbytes / min(ts) / 1e9


def sched_gbps(x, workers, epochs=2, trace=None, **kw):
    s = Scheduler(x, gpuaug.flip, batch_size=B, workers=workers, **kw)
    try:
        for _ in range(epochs):
            t0 = time.perf_counter()
            n = 0
            for images, _ in s:
                n += images.nbytes
            cp.cuda.Device().synchronize()
            wall = time.perf_counter() - t0
        st = s.stats()
        if trace:
            s.timeline(trace)
        return n / wall / 1e9, st
    finally:
        s.close()


def main():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (N * B, 224, 224, 3), np.uint8)
    print(f"{x.nbytes / 1e9:.2f} GB in memory; memcpy 8 threads {memcpy_gbps(x, 8):.1f} GB/s, "
          f"14 threads {memcpy_gbps(x, 14):.1f} GB/s, pinned H2D {h2d_gbps(x):.1f} GB/s", flush=True)
    for kw in ({"keep_buffers": True}, {"keep_buffers": True, "pin_source": True}):
        for workers in (4, 8, 14):
            g, st = sched_gbps(x, workers, epochs=3, **kw)
            print(f"{kw}, {workers:2d} workers: {g:6.2f} GB/s  copy busy {st.copy_busy:.0%} "
                  f"compute busy {st.compute_busy:.0%} augment call {st.launch_mean_ms:.2f} ms", flush=True)
    for switch in [float(v) for v in os.environ.get("SWITCHES", "0.005").split(",")]:
        sys.setswitchinterval(switch)
        for workers in (2, 4, 8, 14):
            g, st = sched_gbps(x, workers, trace=os.path.join(OUT, "inmem_trace.json") if workers == 8 else None)
            print(f"switch {switch * 1e3:.1f} ms, {workers:2d} workers: {g:6.2f} GB/s  copy busy {st.copy_busy:.0%} "
                  f"compute busy {st.compute_busy:.0%} augment call {st.launch_mean_ms:.2f} ms "
                  f"fill {st.fill_gb_per_s:.1f} GB/s", flush=True)
    sys.setswitchinterval(0.005)


if __name__ == "__main__":
    main()
