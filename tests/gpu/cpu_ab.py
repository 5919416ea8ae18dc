"""CPU backend, same process: this tree against .base2/gpuaug_base (tests/gpu/make_base2.sh), flip and the
Compose of 4 (host draws) on an (8, 4, 4, 3) batch, interleaved: median and best us per call of 9 x 1000 calls."""
import sys, time, statistics
import numpy as np
sys.path.insert(0, "/work/main/.base2")
import gpuaug, gpuaug_base
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
def cases(g):
    x = np.random.default_rng(0).integers(0, 256, (8, 4, 4, 3), dtype=np.uint8)
    flags = np.arange(8) % 2 == 0
    c = g.Compose([g.RandomHorizontalFlip(), g.RandomAffine(10), g.ColorJitter(0.2, 0.2, 0.2, 0.05), g.Normalize(MEAN, STD)], seed=0, draws="host")
    return {"flip": lambda: g.flip(x, flags, backend="cpu"), "compose4": lambda: c(x, backend="cpu")}
A, B = cases(gpuaug), cases(gpuaug_base)
for name in A:
    for f in (A[name], B[name]):
        for _ in range(300): f()
    r = {"new": [], "base": []}
    for _ in range(9):
        for k, f in (("new", A[name]), ("base", B[name])):
            t0 = time.perf_counter()
            for _ in range(1000): f()
            r[k].append((time.perf_counter() - t0) / 1000 * 1e6)
    print(name, {k: (round(statistics.median(v), 1), round(min(v), 1)) for k, v in r.items()})
