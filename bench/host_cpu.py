"""Host cost per call on the CPU backend, tiny batch (issue 13's CPU targets): median us per call.

A (8, 4, 4, 3) uint8 NumPy batch, where the kernels cost a few microseconds, so what is timed is
the host path: argument checks, parameter draws, planning, the Numba dispatch.

- ``flip``: ``gpuaug.flip(x, horizontal)`` with 8 per-sample flags (target <= 12 us);
- ``compose4``: ``Compose([RandomHorizontalFlip, RandomAffine(10), ColorJitter(0.2, 0.2, 0.2,
  0.05), Normalize(ImageNet)])`` on ``backend="cpu"`` (the policy tests/gpu/compose_host.py
  times on the GPU), draws="host" (target <= 100 us) and draws="device" (the NumPy twin of the
  device draws, which NumPy input uses).

Each row: ``--reps`` timings of ``--iters`` back-to-back calls after a warm-up (compiles, memos);
the median and the best of the per-call means. Not a test: timings stay out of the suite
(tests/test_compose_host_calls.py guards the call count instead).

    python bench/host_cpu.py [--iters 2000] [--reps 7] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
TARGETS = {"flip": 12.0, "compose4_host_draws": 100.0}


def compose4(draws="host"):
    import gpuaug

    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10),
                           gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05), gpuaug.Normalize(MEAN, STD)],
                          seed=0, draws=draws)


def cases():
    """name -> a zero-argument call on the (8, 4, 4, 3) batch."""
    import gpuaug

    x = np.random.default_rng(0).integers(0, 256, (8, 4, 4, 3), dtype=np.uint8)
    flags = np.arange(8) % 2 == 0
    host, dev = compose4("host"), compose4("device")
    return {
        "flip": lambda: gpuaug.flip(x, flags, backend="cpu"),
        "compose4_host_draws": lambda: host(x, backend="cpu"),
        "compose4_device_draws": lambda: dev(x, backend="cpu"),
    }


def time_call(fn, iters, reps):
    """(median, best) microseconds per call over ``reps`` runs of ``iters`` calls."""
    for _ in range(20):
        fn()
    per = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        per.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(per), min(per)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", default=None, help="also write the rows here")
    a = ap.parse_args(argv)
    rows = {}
    print(f"{platform.node()} ({os.cpu_count()} cores), load {os.getloadavg()[0]:.2f}; "
          f"(8, 4, 4, 3) uint8, backend='cpu', us per call")
    for name, fn in cases().items():
        med, best = time_call(fn, a.iters, a.reps)
        tgt = TARGETS.get(name)
        rows[name] = {"median_us": med, "best_us": best, "target_us": tgt}
        verdict = "" if tgt is None else ("  (target <= %g: %s)" % (tgt, "met" if med <= tgt else "NOT met"))
        print(f"{name:24s} median {med:8.1f}  best {best:8.1f}{verdict}", flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"kind": "gpuaug-host-cpu", "load": os.getloadavg()[0], "rows": rows}, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
