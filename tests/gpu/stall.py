"""Why some ops' loops at 256 take longer than host time + nothing (issue 13): per bench call,
the loop (back-to-back calls, one sync), each call's host time (perf_counter, no sync), each
call's span on the device (events before and after it, in the loop) and the gaps between
spans, the device time of calls queued behind a spin kernel, and what the run() ring and the
staging area did (fallbacks, uploads, waits).

    python3 tests/gpu/stall.py --n 256 --ops salt_and_pepper,erase [--calls 300]
"""
import argparse
import time

import cupy as cp
import numpy as np

import gpuaug
import gpuaug._plan as P
from gpuaug.bench.checks import example_kwargs, prepare_call
from gpuaug.kernels import _cuda as cu

SPIN = r'''extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long t0 = clock64(); while (clock64() - t0 < ns) {} }'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--ops", default="salt_and_pepper,erase,grid_mask,crop,solarize,flip")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    spin = cp.RawKernel(SPIN, "spin")
    inputs = [cp.asarray(rng.integers(0, 256, (a.n, 224, 224, 3), dtype=np.uint8)) for _ in range(4)]
    fails = [0]
    take0 = P._Ring.take

    def take(self, params):
        got = take0(self, params)
        if got is None:
            fails[0] += 1
        return got
    P._Ring.take = take
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} n={a.n} calls={a.calls}")
    for op in a.ops.split(","):
        spec = gpuaug.registry[op]
        kw = example_kwargs(spec, 1, a.n, 224, 224)
        f = prepare_call(spec, "cuda", inputs, kw, "NHWC", cp)[0]
        for _ in range(60):
            f()
        cp.cuda.Device().synchronize()
        loops = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(a.calls):
                f()
            cp.cuda.Device().synchronize()
            loops.append((time.perf_counter() - t0) / a.calls * 1e6)
        st0 = dict(cu.staging().stats)
        ps0, fails[0] = dict(P.stats), 0
        host = np.empty(a.calls)
        for i in range(a.calls):
            t0 = time.perf_counter()
            f()
            host[i] = time.perf_counter() - t0
        cp.cuda.Device().synchronize()
        st = {k: cu.staging().stats[k] - st0[k] for k in st0}
        ps = {k: P.stats[k] - ps0[k] for k in ps0 if P.stats[k] != ps0[k]}
        ring_fail = fails[0]
        ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(a.calls)]
        for i in range(a.calls):
            ev[i][0].record()
            f()
            ev[i][1].record()
        cp.cuda.Device().synchronize()
        span = np.array([cp.cuda.get_elapsed_time(e0, e1) for e0, e1 in ev]) * 1e3
        gap = np.array([cp.cuda.get_elapsed_time(ev[i][1], ev[i + 1][0]) for i in range(a.calls - 1)]) * 1e3
        # device time: 16 calls behind a spin, per call (median of 5 rounds)
        dev = []
        for _ in range(5):
            spin((1,), (1,), (np.uint64(4_000_000),))
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            for _ in range(16):
                f()
            e1.record()
            e1.synchronize()
            dev.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3 / 16)
        h = host * 1e6
        print(f"== {op}: loop {np.median(loops):.1f} us; host mean {h.mean():.1f} med {np.median(h):.1f} "
              f"p90 {np.percentile(h, 90):.1f} max {h.max():.0f} (>{3 * np.median(h):.0f}us: {(h > 3 * np.median(h)).sum()}); "
              f"span med {np.median(span):.1f} mean {span.mean():.1f}; gap med {np.median(gap):.1f} mean {gap.mean():.1f}; "
              f"device {np.median(dev):.1f}; ring fallbacks {ring_fail}; staging {st}; plans {ps}")


if __name__ == "__main__":
    main()
