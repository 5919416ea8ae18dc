"""A planned call's host time, piece by piece (normalize to float32 NCHW, with scalars, at
n=32 and n=256): the plan path's functions wrapped with perf_counter_ns timers, the loop's
total beside them (back-to-back calls, one sync; and each call followed by a sync)."""
import time

import cupy as cp
import numpy as np

import gpuaug
import gpuaug._plan as PL
import gpuaug.kernels._cuda as K

from _timing import TOTALS, wrap  # tests/gpu/_timing.py (this folder is on sys.path)


def per_call(f, k):
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(k):
        f()
    cp.cuda.Device().synchronize()
    return (time.perf_counter() - t0) / k * 1e6


mean, std = (120.0, 110.0, 100.0), (50.0, 60.0, 70.0)
for n in (32, 256):
    x = cp.asarray(np.random.default_rng(0).integers(0, 256, (n, 224, 224, 3), dtype=np.uint8))
    for name, f in (("normalize", lambda: gpuaug.normalize(x, mean, std)),
                    ("crop_mirror_normalize", lambda: gpuaug.crop_mirror_normalize(x, (200, 200), mean=mean, std=std)),
                    ("center_crop", lambda: gpuaug.center_crop(x, 200))):
        for _ in range(5):
            f()
        cp.cuda.Device().synchronize()
        f()
        r0 = PL.stats["replays"]
        loop = per_call(f, 200)
        replayed = PL.stats["replays"] - r0
        print(f"n={n} {name}: loop {loop:.1f} us per call ({replayed} of 200 replayed); plan stats {PL.stats}",
              flush=True)
wrap(PL.Plan, "run")
wrap(PL, "_table")
wrap(K._Constants, "get")
wrap(K.Kernel, "__call__")
wrap(cp, "empty")
x = cp.asarray(np.random.default_rng(0).integers(0, 256, (32, 224, 224, 3), dtype=np.uint8))
f = lambda: gpuaug.normalize(x, mean, std)  # noqa: E731
per_call(f, 20)
TOTALS.clear()
t = per_call(f, 500)
print(f"n=32 normalize, wrapped: {t:.1f} us per call")
for k, v in sorted(TOTALS.items(), key=lambda kv: -kv[1]):
    print(f"  {k:32s} {v / 500 / 1e3:8.2f} us per call (inclusive)")
