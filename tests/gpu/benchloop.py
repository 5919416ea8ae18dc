"""Loop time of `gpuaug bench`'s own calls (each op's example per-sample values, ``out=``, the
planned ``gpuaug.<op>``): us per call over back-to-back calls with one sync; the least of several rounds (a host-bound
loop on a shared host: the quietest round is the code's own cost), median and max beside it.
For same-call A/B runs against another tree (PYTHONPATH=.base:...).

    python3 tests/gpu/benchloop.py --n 32 --ops flip,rotate [--calls 2000] [--tag new]
"""
from __future__ import annotations

import argparse
import time

import cupy as cp
import numpy as np

import gpuaug
from gpuaug.bench.checks import example_kwargs, prepare_call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ops", default="flip,rotate,brightness,color_jitter,normalize,crop_mirror_normalize,"
                                     "gaussian_blur,resize,center_crop")
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    inputs = [cp.asarray(rng.integers(0, 256, (a.n, 224, 224, 3), dtype=np.uint8)) for _ in range(4)]
    print(f"{a.tag} {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} n={a.n} gpuaug={gpuaug.__file__}")
    for op in a.ops.split(","):
        spec = gpuaug.registry[op]
        kw = example_kwargs(spec, 1, a.n, 224, 224)
        f = prepare_call(spec, "cuda", inputs, kw, "NHWC", cp)[0]
        for _ in range(100):
            f()
        cp.cuda.Device().synchronize()
        r = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            for _ in range(a.calls):
                f()
            cp.cuda.Device().synchronize()
            r.append((time.perf_counter() - t0) / a.calls * 1e6)
        print(f"{a.tag:5s} {op:24s} loop min {min(r):7.1f} us  (median {np.median(r):.1f}, max {max(r):.1f})")


if __name__ == "__main__":
    main()
