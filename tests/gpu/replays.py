"""Per bench call of each op (``gpuaug bench``'s call: example per-sample values, out=, 4 inputs in
turn): loop us per call and what the call took from gpuaug._plan (its ``stats`` counters per
call: run() plan replays, op plan replays, plans made or refused), then a cProfile of the
slowest ones (top functions by own time). Finds calls that miss their plan.

    python3 tests/gpu/replays.py [--n 32] [--ops rot90,pad,...] [--profile 4]
"""
import argparse
import cProfile
import io
import pstats
import time

import cupy as cp
import numpy as np

import gpuaug
import gpuaug._plan as plan
from gpuaug.bench.checks import example_kwargs, prepare_call

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=32)
ap.add_argument("--calls", type=int, default=400)
ap.add_argument("--ops", default="")
ap.add_argument("--profile", type=int, default=4, help="profile this many of the slowest calls")
ap.add_argument("--profile-ops", default="", help="profile these ops (comma-separated) instead")
a = ap.parse_args()
rng = np.random.default_rng(0)
inputs = [cp.asarray(rng.integers(0, 256, (a.n, 224, 224, 3), dtype=np.uint8)) for _ in range(4)]
ops = [o for o in a.ops.split(",") if o] or list(gpuaug.registry)
print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} n={a.n}")
calls, rows = {}, []
for op in ops:
    spec = gpuaug.registry[op]
    f = prepare_call(spec, "cuda", inputs, example_kwargs(spec, 1, a.n, 224, 224), "NHWC", cp)[0]
    calls[op] = f
    for _ in range(60):
        f()
    cp.cuda.Device().synchronize()
    before = dict(plan.stats)
    t0 = time.perf_counter()
    for _ in range(a.calls):
        f()
    cp.cuda.Device().synchronize()
    us = (time.perf_counter() - t0) / a.calls * 1e6
    d = {k: (plan.stats[k] - before.get(k, 0)) / a.calls for k in plan.stats if plan.stats[k] != before.get(k, 0)}
    rows.append((us, op))
    print(f"{op:24s} {us:7.1f} us  " + "  ".join(f"{k}={v:.2f}" for k, v in sorted(d.items())), flush=True)
chosen = [(dict((o, u) for u, o in rows)[o], o) for o in a.profile_ops.split(",") if o]
for us, op in chosen or sorted(rows, reverse=True)[:a.profile]:
    f = calls[op]
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(300):
        f()
    pr.disable()
    cp.cuda.Device().synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
    print(f"==== {op} ({us:.1f} us)\n" + "\n".join(s.getvalue().splitlines()[6:32]))
