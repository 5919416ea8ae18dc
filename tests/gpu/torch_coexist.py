"""Does PyTorch in the same process change gpuaug's loop time? `gpuaug bench`'s calls at 32 (min of
5 rounds of 300 back-to-back calls, one sync), timed before torch is imported, after `import torch`,
after torch's CUDA context and a torch kernel, and after torch.set_num_threads(1); the process's
thread count at each step.

    python3 tests/gpu/torch_coexist.py [--n 32]
"""
import argparse
import os
import time

import cupy as cp
import numpy as np

import gpuaug
from gpuaug.bench.checks import example_kwargs, prepare_call

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=32)
a = ap.parse_args()
rng = np.random.default_rng(0)
inputs = [cp.asarray(rng.integers(0, 256, (a.n, 224, 224, 3), dtype=np.uint8)) for _ in range(4)]
OPS = ["flip", "invert", "brightness", "erase", "sharpen"]
calls = {op: prepare_call(gpuaug.registry[op], "cuda", inputs, example_kwargs(gpuaug.registry[op], 1, a.n, 224, 224),
                          "NHWC", cp)[0] for op in OPS}


def threads():
    return len(os.listdir("/proc/self/task"))


def loop(f, k=300, rounds=5):
    for _ in range(50):
        f()
    cp.cuda.Device().synchronize()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(k):
            f()
        cp.cuda.Device().synchronize()
        best = min(best, (time.perf_counter() - t0) / k * 1e6)
    return best


def report(stage):
    print(f"{stage:44s} threads {threads():3d}  " + "  ".join(f"{op} {loop(f):6.1f}" for op, f in calls.items()),
          flush=True)


print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} n={a.n}, us per call (min of 5 x 300)")
report("no torch")
import torch  # noqa: E402

report("import torch")
t = torch.zeros((a.n, 3, 224, 224), dtype=torch.uint8, device="cuda")
torch.flip(t, [-1])
torch.cuda.synchronize()
report("torch CUDA context + a kernel")
torch.set_num_threads(1)
report("torch.set_num_threads(1)")
import torchvision.transforms.v2.functional as F  # noqa: E402

F.horizontal_flip(t)
torch.cuda.synchronize()
report("torchvision imported, a kernel")
report("no change (repeat)")
