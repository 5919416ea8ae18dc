"""Every op's bench call (example per-sample values) replayed from its plan equals the op run
without plans, bit for bit; prints how many replays each op made.

    python3 tests/gpu/replay_check.py [n]
"""
import sys

import cupy as cp
import numpy as np

import gpuaug
import gpuaug._plan as P
from gpuaug.bench.checks import example_kwargs

n = int(sys.argv[1]) if len(sys.argv) > 1 else 32
rng = np.random.default_rng(0)
x = cp.asarray(rng.integers(0, 256, (n, 64, 80, 3), dtype=np.uint8))
bad = 0
for op, spec in gpuaug.registry.items():
    kw = example_kwargs(spec, 1, n, 64, 80)
    want = spec.func(x, **kw)
    before = P.stats["run_replays"] + P.stats["replays"]
    for _ in range(40):
        got = getattr(gpuaug, op)(x, **kw)
        cp.cuda.Device().synchronize()
    reps = P.stats["run_replays"] + P.stats["replays"] - before
    same = all(bool((cp.asarray(g).view(np.uint8) == cp.asarray(w).view(np.uint8)).all())
               for g, w in (zip(got, want) if isinstance(got, (list, tuple)) else [(got, want)]))
    bad += not same
    print(f"{op:24s} replays {reps:3d} {'same' if same else 'DIFFERENT'}")
print("all the same" if not bad else f"{bad} ops differ")
