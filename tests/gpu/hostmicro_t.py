"""The timing loop of the host micro-benchmarks (us per call, median of 5 x n)."""
import time

import cupy as cp
import numpy as np


def t(name, f, n=2000, before=None):
    """``before``: called ahead of each timed round (e.g. a spin kernel that keeps the stream busy)."""
    for _ in range(50):
        f()
    cp.cuda.Device().synchronize()
    r = []
    for _ in range(5):
        if before is not None:
            before()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        r.append((time.perf_counter() - t0) / n * 1e6)
        cp.cuda.Device().synchronize()
    print(f"{name:40s} {np.median(r):8.2f} us", flush=True)
