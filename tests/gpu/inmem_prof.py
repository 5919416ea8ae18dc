"""The Scheduler's in-memory staging path against its limits (issue 12, target 5), one process.

An in-memory uint8 array (BATCHES x 256 x 224 x 224 x 3, default 96 batches = 3.7 GB),
augment gpuaug.flip. GB/s of images delivered, epoch 1 and epochs 2+ (mean) apart:

- Scheduler: default (4 workers), default shuffled, 8 workers, keep_buffers, pin_source,
  and a second scheduler of the same geometry (its ring from the process's pinned pool);
- the naive loop ``flip(cp.asarray(x[i:i + 256]))``;
- the limits: host memcpy with 4 and 8 threads (rows of x into reused destinations, as the
  staging copies), pinned H2D (one stream), memcpy 8 threads with an H2D running beside
  it (host memory bandwidth shared by the two halves of the staging path), and the staging
  path itself without the scheduler (N threads fill a pinned ring, H2D behind them): what
  the scheduler could reach on this host; the gap to it is the scheduler's own cost;
- a different design for comparison: staging through a small ring of pinned chunks (may
  stay in the CPU's cache), each sent to the device as soon as it is filled.

Target (issue 12): epochs 2+ >= 80% of min(host memcpy with the same workers, pinned H2D),
and never below the naive loop. Also the pinned allocations (cudaHostAlloc) made in each epoch: 0 after the first.
Writes $OUT/inmem_prof.json and the Chrome traces of the last epoch (chunks: inmem_trace_chunks.json, batch:
inmem_trace.json). Rows: staging="batch" (the default) and staging="chunks" side by side, and both with the
scheduler's events spinning instead of blocking (``ROWS=batch,spin`` picks rows by name).

    python3 tests/gpu/inmem_prof.py                 # BATCHES=24 EPOCHS=4 to change the size
"""
from __future__ import annotations

import json
import os
import platform
import sys
import threading
import time

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import gpuaug  # noqa: E402
from gpuaug import Scheduler  # noqa: E402
from gpuaug.scheduler._pinned import cuda_pool  # noqa: E402

OUT = os.environ.get("OUT", "out")
os.makedirs(OUT, exist_ok=True)
B = 256
N = int(os.environ.get("BATCHES", "96"))
EPOCHS = int(os.environ.get("EPOCHS", "4"))


def gbps(nbytes, s):
    return nbytes / s / 1e9


def memcpy_gbps(x, threads, beside=None, reps=2):
    """Rows of ``x`` copied batch by batch by ``threads`` threads, each into its own reused
    (already touched) batch-sized destination: the staging copy without the scheduler."""
    dst = [np.empty_like(x[:B]) for _ in range(threads)]
    for d in dst:
        d.fill(1)
    nb = len(x) // B

    def work(t):
        for k in range(t, nb, threads):
            np.copyto(dst[t], x[k * B:(k + 1) * B])

    best = 0.0
    for _ in range(reps):
        th = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        stop = threading.Event()
        side = threading.Thread(target=beside, args=(stop,)) if beside else None
        if side:
            side.start()
        t0 = time.perf_counter()
        for t in th:
            t.start()
        for t in th:
            t.join()
        dt = time.perf_counter() - t0
        if side:
            stop.set()
            side.join()
        best = max(best, gbps(nb * x[:B].nbytes, dt))
    return best


class H2D:
    """One batch in pinned memory copied to the device on a non-blocking stream."""

    def __init__(self, x):
        n = x[:B].nbytes
        self.pinned = cp.cuda.alloc_pinned_memory(n)
        h = np.frombuffer(self.pinned, np.uint8, n)
        h[:] = x[:B].reshape(-1)
        self.n, self.d = n, cp.empty(n, np.uint8)
        self.s = cp.cuda.Stream(non_blocking=True)

    def gbps(self, reps=20):
        self.s.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            self.d.data.copy_from_host_async(self.pinned.ptr, self.n, self.s)
        self.s.synchronize()
        return gbps(reps * self.n, time.perf_counter() - t0)

    def spin(self, stop):
        with cp.cuda.Device(0):
            while not stop.is_set():
                self.d.data.copy_from_host_async(self.pinned.ptr, self.n, self.s)
                self.s.synchronize()


def ideal_staging(x, threads=8, depth=3, reps=2):
    """The staging path without the scheduler (its upper bound on this host): ``threads``
    threads fill batch k's pinned slot (a share each, GIL released), then it is copied to
    the device on one stream while the next slot fills; slot k % depth is refilled once the
    copy of batch k - depth has completed. No augment."""
    n = x[:B].nbytes
    slots = [cp.cuda.alloc_pinned_memory(n) for _ in range(depth)]
    views = [np.frombuffer(m, np.uint8, n).reshape(x[:B].shape) for m in slots]
    dev = cp.empty(n, np.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    nb = len(x) // B
    parts = np.array_split(np.arange(B), threads)
    go, done = threading.Barrier(threads + 1), threading.Barrier(threads + 1)
    state = {"k": 0}

    def work(t):
        a, b = int(parts[t][0]), int(parts[t][-1]) + 1
        while True:
            go.wait()
            k = state["k"]
            if k < 0:
                return
            np.copyto(views[k % depth][a:b], x[k * B + a:k * B + b])
            done.wait()

    th = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(threads)]
    for t in th:
        t.start()
    best = 0.0
    for _ in range(reps):
        events = [None] * depth
        t0 = time.perf_counter()
        for k in range(nb):
            if events[k % depth] is not None:
                events[k % depth].synchronize()
            state["k"] = k
            go.wait()
            done.wait()
            dev.data.copy_from_host_async(slots[k % depth].ptr, n, stream)
            events[k % depth] = stream.record()
        stream.synchronize()
        best = max(best, gbps(nb * n, time.perf_counter() - t0))
    state["k"] = -1
    go.wait()
    return best


def chunked_staging(x, threads=8, chunk=4 << 20, per_thread=2, reps=2):
    """Staging through a small pinned ring instead of whole batches (a question for the
    design, not a path of the scheduler): each thread copies its chunks of ``x`` (every
    ``threads``-th ``chunk`` bytes) into one of its ``per_thread`` pinned chunk buffers and
    sends it to the device on its own stream right away. The ring (threads x per_thread x
    chunk) may stay in the last-level cache, so the DMA can read what the copy just wrote
    there: host memory then carries the source's reads only, where the batch ring sends
    every byte through it three times (read, write, DMA read)."""
    flat = x.reshape(-1)
    nchunks = flat.nbytes // chunk
    devsize = 64 * chunk
    dev = cp.empty(devsize, np.uint8)
    mem = [[cp.cuda.alloc_pinned_memory(chunk) for _ in range(per_thread)] for _ in range(threads)]
    views = [[np.frombuffer(m, np.uint8, chunk) for m in ms] for ms in mem]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(threads)]

    def work(t):
        evs = [None] * per_thread
        for i, c in enumerate(range(t, nchunks, threads)):
            j = i % per_thread
            if evs[j] is not None:
                evs[j].synchronize()  # this buffer's last copy has finished
            np.copyto(views[t][j], flat[c * chunk:(c + 1) * chunk])
            (dev.data + (c * chunk) % devsize).copy_from_host_async(mem[t][j].ptr, chunk, streams[t])
            evs[j] = streams[t].record()
        streams[t].synchronize()

    best = 0.0
    for _ in range(reps):
        th = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        t0 = time.perf_counter()
        for t in th:
            t.start()
        for t in th:
            t.join()
        best = max(best, gbps(nchunks * chunk, time.perf_counter() - t0))
    return best


def naive(x, epochs):
    out = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for i in range(0, len(x), B):
            y = gpuaug.flip(cp.asarray(x[i:i + B]))
        cp.cuda.Device().synchronize()
        out.append(gbps(x.nbytes, time.perf_counter() - t0))
        del y
    return out


def scheduler(x, epochs, trace=None, spin=False, **kw):
    """GB/s of each epoch of one Scheduler, its pinned allocations per epoch, last stats.
    ``spin``: the scheduler's events made without cudaEventBlockingSync (host waits spin
    instead of sleeping until the driver wakes the thread)."""
    from gpuaug.scheduler._device import CudaDevice

    pool = cuda_pool(0)
    made = CudaDevice.new_event
    if spin:
        CudaDevice.new_event = lambda self: self._cp.cuda.Event(block=False, disable_timing=False)
    try:
        return _scheduler(x, epochs, pool, trace, **kw)
    finally:
        CudaDevice.new_event = made


def _scheduler(x, epochs, pool, trace, **kw):
    s = Scheduler(x, gpuaug.flip, batch_size=B, **kw)
    rates, allocs = [], []
    try:
        for _ in range(epochs):
            a0 = pool.allocs
            t0 = time.perf_counter()
            n = 0
            for images, _ in s:
                n += images.nbytes
            cp.cuda.Device().synchronize()
            rates.append(gbps(n, time.perf_counter() - t0))
            allocs.append(pool.allocs - a0)
        st = s.stats()
        if trace:
            s.timeline(trace)
        return rates, allocs, st, s.workers
    finally:
        s.close()


def main():
    if os.environ.get("SWITCH_MS"):  # the interpreter's switch interval (GIL hand-over), default 5 ms
        sys.setswitchinterval(float(os.environ["SWITCH_MS"]) / 1e3)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (N * B, 224, 224, 3), np.uint8)
    gpuaug.flip(cp.asarray(x[:B]))  # compile the kernel once
    cp.cuda.Device().synchronize()
    h2d = H2D(x)
    limits = {f"memcpy_{t}": memcpy_gbps(x, t) for t in (4, 6, 8, 12)}
    limits["h2d"] = h2d.gbps()
    limits["memcpy_8_beside_h2d"] = memcpy_gbps(x, 8, beside=h2d.spin)
    limits["ideal_staging_4"] = ideal_staging(x, 4)
    limits["ideal_staging_8"] = ideal_staging(x, 8)
    for mib in (1, 4):
        limits[f"chunked_staging_{mib}MiB_8"] = chunked_staging(x, 8, mib << 20)
    target = 0.8 * min(limits["memcpy_8"], limits["h2d"])
    print(f"# {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, NumPy {np.__version__}, "
          f"CuPy {cp.__version__}, {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    print(f"# {N} batches of {B}x224x224x3 uint8 = {x.nbytes / 1e9:.2f} GB per epoch, {EPOCHS} epochs, "
          f"augment gpuaug.flip; GB/s of images delivered")
    print(f"host memcpy 4 threads {limits['memcpy_4']:.1f}, 8 threads {limits['memcpy_8']:.1f}, "
          f"8 threads beside an H2D {limits['memcpy_8_beside_h2d']:.1f}; pinned H2D {limits['h2d']:.1f}; "
          f"target per row: 80% of min(memcpy with the row's workers, H2D): 4 workers "
          f"{0.8 * min(limits['memcpy_4'], limits['h2d']):.1f}, 8 workers {target:.1f} GB/s", flush=True)
    print(f"staging without the scheduler (fill a pinned slot with N threads, H2D it while the next fills): "
          f"4 threads {limits['ideal_staging_4']:.1f}, 8 threads {limits['ideal_staging_8']:.1f} GB/s", flush=True)
    print(f"staging through a small pinned ring (8 threads, 2 chunk buffers each, H2D per chunk; not the "
          f"scheduler's design): 1 MiB chunks {limits['chunked_staging_1MiB_8']:.1f}, "
          f"4 MiB chunks {limits['chunked_staging_4MiB_8']:.1f} GB/s", flush=True)

    rows = {}
    nv = naive(x, EPOCHS)
    rows["naive loop"] = {"epoch1": nv[0], "epoch2+": float(np.mean(nv[1:])), "workers": 0}
    configs = [
        ("batch (default)", {"staging": "batch"}, os.path.join(OUT, "inmem_trace.json")),
        ("batch, spinning waits", {"staging": "batch", "spin": True}, None),
        ("batch 8 workers, spinning waits", {"staging": "batch", "workers": 8, "spin": True}, None),
        ("chunks, spinning waits", {"staging": "chunks", "spin": True}, None),
        ("chunks 8 workers, spinning waits", {"staging": "chunks", "workers": 8, "spin": True}, None),
        ("chunks", {"staging": "chunks"}, os.path.join(OUT, "inmem_trace_chunks.json")),
        ("chunks, 2nd scheduler (pool)", {"staging": "chunks"}, None),
        ("chunks shuffled", {"staging": "chunks", "shuffle": True, "seed": 0}, None),
        ("chunks 8 workers", {"staging": "chunks", "workers": 8}, None),
        ("chunks 8 workers shuffled", {"staging": "chunks", "workers": 8, "shuffle": True, "seed": 0}, None),
        ("chunks 8 workers 1 MiB", {"staging": "chunks", "workers": 8, "chunk_bytes": 1 << 20}, None),
        ("chunks 8 workers 8 MiB", {"staging": "chunks", "workers": 8, "chunk_bytes": 8 << 20}, None),
        ("chunks keep_buffers", {"staging": "chunks", "keep_buffers": True}, None),
        ("batch, 2nd scheduler (pool)", {"staging": "batch"}, None),
        ("batch shuffled", {"staging": "batch", "shuffle": True, "seed": 0}, None),
        ("batch 8 workers", {"staging": "batch", "workers": 8}, None),
        ("batch 8 workers shuffled", {"staging": "batch", "workers": 8, "shuffle": True, "seed": 0}, None),
        ("batch keep_buffers", {"staging": "batch", "keep_buffers": True}, None),
        ("batch 6 workers", {"staging": "batch", "workers": 6}, None),
        ("batch 8 workers depth 5", {"staging": "batch", "workers": 8, "depth": 5}, None),
        ("batch 8 workers depth 8", {"staging": "batch", "workers": 8, "depth": 8}, None),
        ("batch 12 workers depth 6", {"staging": "batch", "workers": 12, "depth": 6}, None),
        ("pin_source", {"pin_source": True}, None),
    ]
    print(f"{'path':32s} {'workers':>7s} {'epoch 1':>8s} {'epoch 2+':>8s} {'of target':>9s}  cudaHostAlloc "
          f"per epoch | epochs 2+: copy busy, compute busy, augment call, fill GB/s")
    print(f"{'naive loop':32s} {'-':>7s} {nv[0]:8.2f} {np.mean(nv[1:]):8.2f} {np.mean(nv[1:]) / target:9.0%}")
    only = [r for r in os.environ.get("ROWS", "").split(",") if r]
    for name, kw, trace in configs:
        if only and not any(r in name for r in only):
            continue
        rates, allocs, st, workers = scheduler(x, EPOCHS, trace=trace, **kw)
        # the target: 80% of min(host memcpy with the same workers, pinned H2D)
        target = 0.8 * min(limits[f"memcpy_{workers}"] if f"memcpy_{workers}" in limits else limits["memcpy_8"],
                           limits["h2d"])
        r2 = float(np.mean(rates[1:]))
        rows[name] = {"epoch1": rates[0], "epoch2+": r2, "epochs": rates, "pinned_allocs": allocs, "target": target,
                      "workers": workers, "copy_busy": st.copy_busy, "compute_busy": st.compute_busy,
                      "launch_mean_ms": st.launch_mean_ms, "fill_gb_per_s": st.fill_gb_per_s}
        ok = "ok" if r2 >= target and r2 >= rows["naive loop"]["epoch2+"] else "MISSED"
        print(f"{name:32s} {workers:7d} {rates[0]:8.2f} {r2:8.2f} {r2 / target:9.0%}  {allocs} {ok} | "
              f"{st.copy_busy:.0%} {st.compute_busy:.0%} {st.launch_mean_ms:.2f} ms {st.fill_gb_per_s:.1f}",
              flush=True)
    with open(os.path.join(OUT, "inmem_prof.json"), "w") as f:
        json.dump({"batches": N, "batch": B, "epochs": EPOCHS, "limits": limits, "target": target, "rows": rows},
                  f, indent=1)


if __name__ == "__main__":
    main()
