"""Host cost per call of `gpuaug bench`'s calls, ops interleaved in rounds (so they share the
host's phases): N x 16 x 16 x 3 images, where kernels take a few us and the loop is the host's,
beside the same calls at 224 x 224 (the loop the bench reports). Least us per call over the rounds.

    python3 tests/gpu/host16.py [--n 32] [--ops flip,contrast,...] [--rounds 6]
"""
import argparse
import time

import cupy as cp
import numpy as np

import gpuaug
from gpuaug.bench.checks import example_kwargs, prepare_call

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=32)
ap.add_argument("--ops", default="")
ap.add_argument("--rounds", type=int, default=6)
ap.add_argument("--calls", type=int, default=200)
a = ap.parse_args()
rng = np.random.default_rng(0)
ops = [o for o in a.ops.split(",") if o] or list(gpuaug.registry)
calls = {}
for side in (16, 224):
    inputs = [cp.asarray(rng.integers(0, 256, (a.n, side, side, 3), dtype=np.uint8)) for _ in range(4)]
    for op in ops:
        spec = gpuaug.registry[op]
        calls[op, side] = prepare_call(spec, "cuda", inputs, example_kwargs(spec, 1, a.n, side, side), "NHWC", cp)[0]
best = {k: float("inf") for k in calls}
for f in calls.values():
    for _ in range(30):
        f()
cp.cuda.Device().synchronize()
for _ in range(a.rounds):
    for k, f in calls.items():
        t0 = time.perf_counter()
        for _ in range(a.calls):
            f()
        cp.cuda.Device().synchronize()
        best[k] = min(best[k], (time.perf_counter() - t0) / a.calls * 1e6)
print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} n={a.n}: least us per call over {a.rounds} rounds")
print(f"{'op':24s} {'16x16':>8s} {'224x224':>8s}")
for op in ops:
    print(f"{op:24s} {best[op, 16]:8.1f} {best[op, 224]:8.1f}")
