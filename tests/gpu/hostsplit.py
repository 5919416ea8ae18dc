"""Where one op call's host time goes, without a profiler's distortion: the functions on the
call path are wrapped with perf_counter_ns timers (inclusive time per call; ~0.2 us added
per wrapped call), and the loop's total is printed beside them. Also runs with gc disabled,
to see the collector's share.

    python3 tests/gpu/hostsplit.py [--op flip|rotate|brightness] [--n 256] [--calls 3000]
"""
import argparse
import gc
import time

import cupy as cp
import numpy as np

import gpuaug
import gpuaug._batch as B
import gpuaug._plan as P
import gpuaug._run as R
import gpuaug.kernels._cuda as K
from gpuaug.ops import _colour as C
from gpuaug.ops import _warp as W
from gpuaug.ops import brightness as BR
from gpuaug.ops import flip as F

from _timing import TOTALS, wrap  # tests/gpu/_timing.py (this folder is on sys.path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--op", default="flip", choices=("flip", "rotate", "brightness"))
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.integers(0, 256, (a.n, 224, 224, 3), dtype=np.uint8))
    flags = rng.random(a.n) < 0.5
    angles = rng.uniform(-30, 30, a.n)
    factors = rng.uniform(0.8, 1.2, a.n)
    op = gpuaug.registry[a.op].func
    kw = {"flip": {"horizontal": flags}, "rotate": {"angle": angles}, "brightness": {"factor": factors}}[a.op]

    def loop(k):
        for _ in range(k):
            op(x, **kw)

    loop(50)
    cp.cuda.Device().synchronize()
    for gc_on in (True, False):
        if not gc_on:
            gc.disable()
        t0 = time.perf_counter()
        loop(a.calls)
        t = (time.perf_counter() - t0) / a.calls * 1e6
        cp.cuda.Device().synchronize()
        print(f"{a.op}(x, per-sample host values) loop, gc {'on' if gc_on else 'off'}: {t:.1f} us per call (unwrapped)",
              flush=True)
        gc.enable()
    for owner, name in ((F, "as_batch"), (F, "per_sample"), (F, "column_stack"), (F, "run"),
                        (F, "choose_backend"), (B.Batch, "alloc"), (R, "_run_cuda"), (R, "device_params"),
                        (R, "param_item"), (K, "stage"), (K, "upload"), (K._Staging, "upload"),
                        (F, "_fast"), (K.Kernel, "__call__"), (B, "_empty"), (R, "on_device"),
                        (R, "table_item"), (P, "launch"), (P, "run_key"), (P, "run_planned"),
                        (P, "_device_params"), (P.Plan, "run"), (K._Staging, "upload_float32"),
                        (cp, "empty"), (R, "check_stream"), (K._Staging, "_sent"), (K._Staging, "_reserve"),
                        (W, "warp"), (W, "rotation_inverse"), (W, "params_matrix"), (W, "fill_columns"),
                        (W, "device_scope"), (W, "cos_sin"), (W, "per_sample"), (W, "as_batch"), (W, "run"),
                        (W, "check_modes"), (W, "output_shapes"), (W, "dense_fast"), (C, "column_stack"),
                        (C, "_run_cuda"), (P._Ring, "take"), (P._Ring, "sent"),
                        # the fast host parameter builders (issue 13)
                        (F, "flip_params"), (F, "_flag"), (W, "_cos_sin_host"), (W, "_rotation_inverse_host"),
                        (W, "_template"), (BR, "per_sample"), (BR, "apply"), (BR, "as_batch"),
                        (C, "maxv_column"), (P, "enabled")):
        wrap(owner, name)
    # run() looks _run_cuda/device_params up as module globals, F looks run up in its own module
    TOTALS.clear()
    loop(50)
    TOTALS.clear()
    t0 = time.perf_counter()
    loop(a.calls)
    t = (time.perf_counter() - t0) / a.calls * 1e6
    cp.cuda.Device().synchronize()
    print(f"{a.op}(x, per-sample host values) loop, wrapped: {t:.1f} us per call")
    for k, v in sorted(TOTALS.items(), key=lambda kv: -kv[1]):
        print(f"  {k:40s} {v / a.calls / 1e3:8.2f} us per call (inclusive)")


if __name__ == "__main__":
    main()
