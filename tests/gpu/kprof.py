"""Where the device and host time of the heavier calls goes, on the GPU machine: per workload,
device ms / host us / loop ms (``_timing.dev_host_loop``), its CUDA kernels with their durations
(PyTorch's profiler: CUPTI sees every kernel of the process, CuPy's included) and a cProfile
excerpt of the loop.

    OUT=dir python3 tests/gpu/kprof.py [workload ...]

Workloads: targets (Compose flip + affine + RRC, images alone and with 50 boxes, 17 keypoints and
a mask per image), unfused (RandAugment(1|2|3, 9), TrivialAugmentWide, AutoAugment: the fused
launches against one launch per step), ra (RandAugment(2, 9)), ra3 (RandAugment(3, 9)), ta (TrivialAugmentWide),
mixup, cutmix; ra, ra3 and ta also with gpuaug.policy.auto.COMPACT_STATS False.
256x224x224x3 uint8, random data.
"""
import os
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import cupy as cp  # noqa: E402

import gpuaug  # noqa: E402
from _timing import dev_host_loop  # noqa: E402

SPIN = r'''extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0 = clock64();
    while (clock64() - t0 < ns) {}
}'''


def kernels(f, reps=20):
    """{kernel name: (calls per rep, us per call)} over ``reps`` calls of f."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        f()
    cp.cuda.Device().synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            f()
        cp.cuda.Device().synchronize()
        torch.cuda.synchronize()
    tot = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            t = tot[e.name[:110]]
            t[0] += 1
            t[1] += e.device_time if hasattr(e, "device_time") else e.cuda_time
    return {k: (v[0] / reps, v[1] / max(v[0], 1)) for k, v in tot.items()}


def workloads(names):
    rng = np.random.default_rng(0)
    n, s = 256, 224
    x = cp.asarray(rng.integers(0, 256, (n, s, s, 3), dtype=np.uint8))
    out = {}
    if "targets" in names:
        from gpuaug.targets import Boxes, Keypoints, Masks
        m, k = 50, 17
        x1 = rng.uniform(0, s * 0.8, (n, m))
        y1 = rng.uniform(0, s * 0.8, (n, m))
        b = np.stack([x1, y1, x1 + rng.uniform(4, s * 0.2, (n, m)), y1 + rng.uniform(4, s * 0.2, (n, m))], -1)
        tb = Boxes(cp.asarray(b.astype(np.float32)), check=False)
        tk = Keypoints(cp.asarray(rng.uniform(0, s - 1, (n, k, 2)).astype(np.float32)), check=False)
        tm = Masks(cp.asarray(rng.integers(0, 21, (n, s, s), dtype=np.uint8)))
        pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(),
                              gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                              gpuaug.RandomResizedCrop(s)], seed=0)
        out["targets: images"] = lambda: pol(x)
        out["targets: images+boxes+kp+masks"] = lambda: pol(x, boxes=tb, keypoints=tk, masks=tm)
        out["targets: images+boxes+kp"] = lambda: pol(x, boxes=tb, keypoints=tk)
        out["targets: images+masks"] = lambda: pol(x, masks=tm)
    from gpuaug.policy import auto as A

    def loose(f):  # the statistics launches as before session 9: a grid row per sample
        def g():
            A.COMPACT_STATS = False
            try:
                return f()
            finally:
                A.COMPACT_STATS = True
        return g

    def unfused(f):  # one gpuaug_autoaug_apply launch per step (the reference path) instead of the fused ones
        def g():
            A._run_cuda.__defaults__ = (False, None)
            try:
                return f()
            finally:
                A._run_cuda.__defaults__ = (True, None)
        return g

    if "unfused" in names:
        for label, pol in (("RandAugment(2, 9)", gpuaug.RandAugment(2, 9, seed=0)),
                           ("RandAugment(3, 9)", gpuaug.RandAugment(3, 9, seed=0)),
                           ("RandAugment(1, 9)", gpuaug.RandAugment(1, 9, seed=0)),
                           ("TrivialAugmentWide", gpuaug.TrivialAugmentWide(seed=0)),
                           ("AutoAugment(imagenet)", gpuaug.AutoAugment(seed=0))):
            out[f"{label}, fused"] = lambda pol=pol: pol(x)
            out[f"{label}, one launch per step"] = unfused(lambda pol=pol: pol(x))
    if "ra" in names:
        ra = gpuaug.RandAugment(2, 9, seed=0)
        out["RandAugment(2, 9)"] = lambda: ra(x)
        out["RandAugment(2, 9), statistics a row per sample"] = loose(lambda: ra(x))
    if "ra3" in names:
        ra3 = gpuaug.RandAugment(3, 9, seed=0)
        out["RandAugment(3, 9)"] = lambda: ra3(x)
        out["RandAugment(3, 9), statistics a row per sample"] = loose(lambda: ra3(x))
    if "ta" in names:
        ta = gpuaug.TrivialAugmentWide(seed=0)
        out["TrivialAugmentWide"] = lambda: ta(x)
        out["TrivialAugmentWide, statistics a row per sample"] = loose(lambda: ta(x))
    labels = cp.asarray(rng.integers(0, 1000, n))
    if "mixup" in names:
        mu = gpuaug.MixUp(0.8, num_classes=1000, seed=0)
        out["MixUp(0.8)"] = lambda: mu(x, labels)
    if "cutmix" in names:
        cm = gpuaug.CutMix(1.0, num_classes=1000, seed=0)
        out["CutMix(1.0)"] = lambda: cm(x, labels)
    return out


def main():
    names = sys.argv[1:] or ["targets", "ra", "ta", "mixup", "cutmix"]
    spin = cp.RawKernel(SPIN, "spin")
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; 256x224x224x3 uint8")
    for name, f in workloads(names).items():
        r, prof = dev_host_loop(f, spin, 100, top=18)
        print(f"== {name}: dev {r['dev_ms']:.3f} ms  host {r['host_us']:.0f} us  loop {r['loop_ms']:.3f} ms")
        ks = kernels(f)
        for k, (c, us) in sorted(ks.items(), key=lambda kv: -kv[1][0] * kv[1][1]):
            print(f"   {c:5.1f} x {us:8.1f} us  {k}")
        print(prof, flush=True)


if __name__ == "__main__":
    main()
