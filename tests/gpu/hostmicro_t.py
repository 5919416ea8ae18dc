"""The timing loop of the host micro-benchmarks (us per call, median of 5 x n)."""
import time

import cupy as cp
import numpy as np


def t(name, f, n=2000):
    for _ in range(50):
        f()
    r = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        r.append((time.perf_counter() - t0) / n * 1e6)
        cp.cuda.Device().synchronize()
    print(f"{name:40s} {np.median(r):8.2f} us", flush=True)
