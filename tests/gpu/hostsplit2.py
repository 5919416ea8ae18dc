"""Inclusive host time per call of every gpuaug function on an op call's path (perf_counter_ns
wrappers on every function and method of the gpuaug modules and kernels._cuda, under every name
a module binds them to; about 0.2 us added per wrapped call, so compare rows, not totals), with
the loop's own time per call, unwrapped, beside it. For host-bound loops pick a small batch.

    python3 tests/gpu/hostsplit2.py [--n 32] [--calls 2000] [--ops normalize,flip_host,...]

``--bench`` times instead the calls ``gpuaug bench`` times: each op's example per-sample
parameters, into preallocated outputs (out=), rotating over 4 inputs (case names bench:<op>).
"""
import argparse
import sys
import time
import types

import cupy as cp
import numpy as np

import gpuaug
import gpuaug.kernels._cuda  # noqa: F401
from hostprof import cases


def wrap_all(totals, counts):
    done = {}
    mods = [m for n, m in list(sys.modules.items()) if m is not None and (n == "gpuaug" or n.startswith("gpuaug."))]

    def make(f, label):
        def timed(*a, **k):
            t0 = time.perf_counter_ns()
            try:
                return f(*a, **k)
            finally:
                totals[label] = totals.get(label, 0) + time.perf_counter_ns() - t0
                counts[label] = counts.get(label, 0) + 1
        timed.__wrapped__ = f
        for attr in ("unplanned", "__gpuaug_op__"):
            if hasattr(f, attr):
                setattr(timed, attr, getattr(f, attr))
        return timed

    def get(f, label):
        w = done.get(id(f))
        if w is None:
            w = done[id(f)] = (f, make(f, label))
        return w[1]

    for m in mods:
        for name, v in list(vars(m).items()):
            if isinstance(v, types.FunctionType) and (v.__module__ or "").startswith("gpuaug"):
                setattr(m, name, get(v, f"{v.__module__.split('.', 1)[-1]}.{v.__qualname__}"))
            elif isinstance(v, type) and (v.__module__ or "").startswith("gpuaug") and v.__module__ == m.__name__:
                for an, av in list(vars(v).items()):
                    if isinstance(av, types.FunctionType) and not an.startswith("__"):
                        setattr(v, an, get(av, f"{v.__module__.split('.', 1)[-1]}.{av.__qualname__}"))
    cp.empty = get(cp.empty, "cupy.empty")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--bench", default="", help="comma-separated ops timed as gpuaug bench calls them")
    ap.add_argument("--ops", default="flip_host,flip_dev,rotate_host,rotate_dev,brightness,color_jitter,normalize,"
                                     "crop_mirror_normalize,gaussian_blur,resize,center_crop,compose4")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.integers(0, 256, (a.n, 224, 224, 3), dtype=np.uint8))
    allc = cases(a.n, x, rng)
    fac = rng.uniform(0.8, 1.2, a.n)
    allc["brightness"] = lambda: gpuaug.brightness(x, fac)  # no draw inside the timed call
    names = [o for o in a.ops.split(",") if o]

    def bench_cases():
        from gpuaug.bench.checks import example_kwargs, prepare_call
        inputs = [cp.asarray(rng.integers(0, 256, (a.n, 224, 224, 3), dtype=np.uint8)) for _ in range(4)]
        got = {}
        for op in a.bench.split(","):
            if op:
                spec = gpuaug.registry[op]
                kw = example_kwargs(spec, 1, a.n, 224, 224)
                got["bench:" + op] = prepare_call(spec, "cuda", inputs, kw, "NHWC", cp)[0]
        return got
    if a.bench:
        allc.update(bench_cases())
        names += [k for k in allc if k.startswith("bench:")]
    plain = {}
    for name in names:
        f = allc[name]
        for _ in range(50):
            f()
        cp.cuda.Device().synchronize()
        r = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(a.calls):
                f()
            cp.cuda.Device().synchronize()
            r.append((time.perf_counter() - t0) / a.calls * 1e6)
        plain[name] = float(np.median(r))
    totals, counts = {}, {}
    wrap_all(totals, counts)
    allc = cases(a.n, x, rng)  # rebuilt: the lambdas now call the wrapped functions
    allc["brightness"] = lambda: gpuaug.brightness(x, fac)
    if a.bench:
        allc.update(bench_cases())
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} n={a.n}")
    for name in names:
        f = allc[name]
        for _ in range(50):
            f()
        cp.cuda.Device().synchronize()
        totals.clear()
        counts.clear()
        t0 = time.perf_counter()
        for _ in range(a.calls):
            f()
        cp.cuda.Device().synchronize()
        t = (time.perf_counter() - t0) / a.calls * 1e6
        print(f"== {name}: loop {plain[name]:.1f} us per call unwrapped, {t:.1f} wrapped")
        for k, v in sorted(totals.items(), key=lambda kv: -kv[1])[:28]:
            print(f"  {k:58s} {v / a.calls / 1e3:8.2f} us  x{counts[k] / a.calls:.0f}")


if __name__ == "__main__":
    main()
