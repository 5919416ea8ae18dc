"""The scheduler benchmark of tests/gpu/scheduler_bench.sh (run by it; see its header for what
is measured). Writes $OUT/scheduler_bench.json, the traces and the timelines.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "..", ".."))

import dataclasses
import json
import os
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import cupy as cp
import numpy as np

import gpuaug
from gpuaug.scheduler import Scheduler

OUT = os.environ["OUT"]
N, H, W, C = 256, 224, 224, 3
BB = N * H * W * C
BATCHES = int(os.environ.get("BATCHES", 48))
WORKERS = int(os.environ.get("WORKERS", 8))
DEPTH = int(os.environ.get("DEPTH", 4))
WARMUP = 4
rt = cp.cuda.runtime
props = rt.getDeviceProperties(0)
res = {"device": props["name"].decode(), "cpus": os.cpu_count(), "batch_shape": [N, H, W, C],
       "batch_bytes": BB, "batches": BATCHES, "warmup": WARMUP, "runs": {}}
print(f"{res['device']}, {os.cpu_count()} CPUs; batch {N}x{H}x{W}x{C} uint8 = {BB / 1e6:.1f} MB, "
      f"{BATCHES} batches", flush=True)


def save():
    with open(os.path.join(OUT, "scheduler_bench.json"), "w") as f:
        json.dump(res, f, indent=1)


# ---- host data: BATCHES distinct batches ------------------------------------------------
t = time.perf_counter()
x = np.empty((BATCHES * N, H, W, C), np.uint8)
base = np.random.default_rng(0).integers(0, 256, (N, H, W, C), dtype=np.uint8)
for i in range(BATCHES):
    np.bitwise_xor(base, np.uint8(i), out=x[i * N:(i + 1) * N])
print(f"host array {x.nbytes / 1e9:.2f} GB made in {time.perf_counter() - t:.1f} s", flush=True)


# ---- 1. the ceiling: H2D alone ------------------------------------------------------------
def h2d_gbps(src_ptr, reps=30):
    d = cp.empty(BB, cp.uint8)
    s = cp.cuda.Stream(non_blocking=True)
    for _ in range(3):
        rt.memcpyAsync(d.data.ptr, src_ptr, BB, rt.memcpyHostToDevice, s.ptr)
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    e0.record(s)
    for _ in range(reps):
        rt.memcpyAsync(d.data.ptr, src_ptr, BB, rt.memcpyHostToDevice, s.ptr)
    e1.record(s)
    e1.synchronize()
    return BB * reps / cp.cuda.get_elapsed_time(e0, e1) / 1e6


pin_ptr = rt.hostAlloc(BB, 0)
pinned = np.ctypeslib.as_array((__import__("ctypes").c_ubyte * BB).from_address(pin_ptr))
pinned[:] = base.reshape(-1)
res["pinned_h2d_gbps"] = max(h2d_gbps(pin_ptr) for _ in range(3))
res["pageable_h2d_gbps"] = h2d_gbps(x[:N].ctypes.data, reps=10)
print(f"pinned H2D {res['pinned_h2d_gbps']:.1f} GB/s, pageable {res['pageable_h2d_gbps']:.1f} GB/s", flush=True)


# host memcpy into pinned memory: what the staging workers can reach
def host_copy_gbps(threads):
    src = x[N:2 * N].reshape(-1)
    edges = np.linspace(0, BB, threads + 1).astype(np.int64)
    parts = list(zip(edges[:-1], edges[1:]))

    def one(p):
        np.copyto(pinned[p[0]:p[1]], src[p[0]:p[1]])
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, parts))
        t = time.perf_counter()
        for _ in range(5):
            list(ex.map(one, parts))
        return BB * 5 / (time.perf_counter() - t) / 1e9


res["host_copy_gbps"] = {n: host_copy_gbps(n) for n in (1, 4, 8, 12)}
print("host memcpy into pinned memory, GB/s by threads:",
      {k: round(v, 1) for k, v in res["host_copy_gbps"].items()}, flush=True)
rt.freeHost(pin_ptr)
del pinned
save()

# ---- the augment alone ----------------------------------------------------------------------
d = cp.asarray(x[:N])
gpuaug.flip(d)  # compile
cp.cuda.Device().synchronize()
e0, e1 = cp.cuda.Event(), cp.cuda.Event()
e0.record()
for _ in range(20):
    gpuaug.flip(d)
e1.record()
e1.synchronize()
res["flip_ms"] = cp.cuda.get_elapsed_time(e0, e1) / 20
print(f"gpuaug.flip alone: {res['flip_ms']:.3f} ms per batch", flush=True)
del d

# ---- 2. the scheduler -------------------------------------------------------------------------
try:
    import torch  # noqa: F401
    has_torch = True
except Exception:
    has_torch = False

settings = [
    ("staged", dict(workers=WORKERS, depth=DEPTH), gpuaug.flip),
    ("staged_w12_d6", dict(workers=max(WORKERS, 12), depth=max(DEPTH, 6)), gpuaug.flip),
    ("pin_source", dict(depth=DEPTH, pin_source=True), gpuaug.flip),
    ("pin_source_copy_only", dict(depth=DEPTH, pin_source=True), None),
    ("staged_depth1_serial", dict(workers=WORKERS, depth=1), gpuaug.flip),
]
if has_torch:
    settings.append(("pin_source_torch", dict(depth=DEPTH, pin_source=True, output="torch"), gpuaug.flip))

timelines = []
for name, kw, aug in settings:
    try:
        s = Scheduler(x, aug, batch_size=N, **kw)
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        for images, _ in s:
            pass
        cp.cuda.Device().synchronize()
        total = time.perf_counter() - t
        st = s.stats(warmup=WARMUP)
        r = dataclasses.asdict(st)
        r.update(setting=kw | {"augment": getattr(aug, "__name__", "copy")}, total_wall_s=total,
                 pct_of_pinned=100 * st.gb_per_s / res["pinned_h2d_gbps"])
        res["runs"][name] = r
        print(f"\n[{name}] {kw}\n{st}\n=> {st.gb_per_s:.1f} GB/s = {r['pct_of_pinned']:.0f}% of pinned H2D, "
              f"overlap {st.overlap:.0%}", flush=True)
        s.timeline(os.path.join(OUT, f"scheduler_trace_{name}.json"))
        timelines.append(f"[{name}] {kw}\n" + s.print_timeline(width=110, first=WARMUP, count=8))
        s.close()
    except Exception:
        traceback.print_exc()
        res["runs"][name] = {"error": traceback.format_exc()}
    save()

# naive loop: pageable copy then the kernel, one stream
try:
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    for i in range(BATCHES):
        gpuaug.flip(cp.asarray(x[i * N:(i + 1) * N]))
    cp.cuda.Device().synchronize()
    wall = time.perf_counter() - t
    res["runs"]["naive_pageable_loop"] = {"gb_per_s": BATCHES * BB / wall / 1e9, "wall_s": wall,
                                          "pct_of_pinned": 100 * BATCHES * BB / wall / 1e9 / res["pinned_h2d_gbps"]}
    print(f"\n[naive_pageable_loop] {BATCHES * BB / wall / 1e9:.1f} GB/s", flush=True)
except Exception:
    traceback.print_exc()

# PyTorch DataLoader(pin_memory=True), non_blocking copies, the same kernel
if has_torch:
    try:
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Batches(Dataset):
            def __len__(self):
                return BATCHES

            def __getitem__(self, i):
                return torch.from_numpy(x[i * N:(i + 1) * N])

        for nw in (0, 4):
            dl = DataLoader(Batches(), batch_size=None, pin_memory=True, num_workers=nw)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for b in dl:
                gpuaug.flip(b.cuda(non_blocking=True))
            torch.cuda.synchronize()
            cp.cuda.Device().synchronize()
            wall = time.perf_counter() - t
            gbps = BATCHES * BB / wall / 1e9
            res["runs"][f"torch_dataloader_pin_w{nw}"] = {
                "gb_per_s": gbps, "wall_s": wall, "pct_of_pinned": 100 * gbps / res["pinned_h2d_gbps"]}
            print(f"[torch_dataloader_pin_w{nw}] {gbps:.1f} GB/s", flush=True)
    except Exception:
        traceback.print_exc()

with open(os.path.join(OUT, "scheduler_timeline.txt"), "w") as f:
    f.write("\n\n".join(timelines) + "\n")
save()

print("\nsummary (steady state, after", WARMUP, "warm-up batches):")
print(f"{'setting':24s} {'GB/s':>7s} {'% pinned':>9s} {'overlap':>8s} {'copy busy':>10s} {'compute busy':>13s} {'images/s':>10s}")
for name, r in res["runs"].items():
    if "error" in r:
        print(f"{name:24s} error")
        continue
    print(f"{name:24s} {r['gb_per_s']:7.1f} {r['pct_of_pinned']:8.0f}% "
          f"{r.get('overlap', float('nan')):8.0%} {r.get('copy_busy', float('nan')):10.0%} "
          f"{r.get('compute_busy', float('nan')):13.0%} {r.get('images_per_s', 0):10,.0f}")
best = max((r for r in res["runs"].values() if "overlap" in r), key=lambda r: r["gb_per_s"], default=None)
if best is not None:
    print(f"\nbest: {best['gb_per_s']:.1f} GB/s = {best['pct_of_pinned']:.0f}% of pinned "
          f"({res['pinned_h2d_gbps']:.1f} GB/s); target >= 90%: {'met' if best['pct_of_pinned'] >= 90 else 'NOT met'}")
print("\n" + "\n\n".join(timelines[:3]))
