"""Same-process A/B of the host path: this tree's gpuaug against a copy of an older tree
imported as ``gpuaug_base`` (tests/gpu/make_base2.sh), their calls interleaved in blocks so
that both see the same host noise. Per case: the least and median us per call over the
blocks (back-to-back calls, one sync per block), and new / base.

Cases: `gpuaug bench`'s own calls (each op's example per-sample values, out=) and a few plain
loops without out= (flip and rotate with host and device values).

    PYTHONPATH=.base2:tests/gpu python3 tests/gpu/ab_inproc.py --n 32 [--blocks 12 --calls 400]
"""
from __future__ import annotations

import argparse
import json
import time

import cupy as cp
import numpy as np

import gpuaug
import gpuaug_base

OPS = "flip,rotate,brightness,color_jitter,normalize,crop_mirror_normalize,gaussian_blur,resize,center_crop"


def bench_call(mod, op, inputs, n):
    checks = __import__(mod.__name__ + ".bench.checks", fromlist=["example_kwargs"])
    spec = mod.registry[op]
    kw = checks.example_kwargs(spec, 1, n, 224, 224)
    return checks.prepare_call(spec, "cuda", inputs, kw, "NHWC", cp)[0]


def plain_calls(mod, x, n):
    rng = np.random.default_rng(1)
    fh = rng.random(n) < 0.5
    fd = cp.asarray(fh)
    ah = rng.uniform(-30, 30, n)
    ad = cp.asarray(ah)
    return {"flip host flags (no out)": lambda: mod.flip(x, horizontal=fh),
            "flip device flags (no out)": lambda: mod.flip(x, horizontal=fd),
            "rotate host angles (no out)": lambda: mod.rotate(x, ah),
            "rotate device angles (no out)": lambda: mod.rotate(x, ad)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--ops", default=OPS)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    inputs = [cp.asarray(rng.integers(0, 256, (a.n, 224, 224, 3), dtype=np.uint8)) for _ in range(4)]
    cases = {}
    for op in a.ops.split(","):
        cases[op] = (bench_call(gpuaug, op, inputs, a.n), bench_call(gpuaug_base, op, inputs, a.n))
    pn, pb = plain_calls(gpuaug, inputs[0], a.n), plain_calls(gpuaug_base, inputs[0], a.n)
    for k in pn:
        cases[k] = (pn[k], pb[k])
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} n={a.n}: new {gpuaug.__file__} "
          f"base {gpuaug_base.__file__}; {a.blocks} blocks of {a.calls} calls each, interleaved")
    print(f"{'case':32s} {'new min':>8s} {'base min':>8s} {'ratio':>6s} {'new med':>8s} {'base med':>8s}")
    rows = {}
    for name, fs in cases.items():
        for f in fs:  # warm-up: plans made and checked, kernels compiled
            for _ in range(100):
                f()
        cp.cuda.Device().synchronize()
        got = ([], [])
        for blk in range(a.blocks):
            for j in ((0, 1) if blk % 2 == 0 else (1, 0)):
                f = fs[j]
                t0 = time.perf_counter()
                for _ in range(a.calls):
                    f()
                cp.cuda.Device().synchronize()
                got[j].append((time.perf_counter() - t0) / a.calls * 1e6)
        nmin, bmin = min(got[0]), min(got[1])
        rows[name] = {"new_min_us": nmin, "base_min_us": bmin, "new_median_us": float(np.median(got[0])),
                      "base_median_us": float(np.median(got[1]))}
        print(f"{name:32s} {nmin:8.1f} {bmin:8.1f} {nmin / bmin:6.2f} {np.median(got[0]):8.1f} {np.median(got[1]):8.1f}",
              flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"n": a.n, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
