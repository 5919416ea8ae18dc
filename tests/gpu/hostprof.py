"""Host-path profile on the GPU machine: per op, device ms (calls queued behind a spin kernel),
host us per call, loop ms (200 back-to-back calls, one sync), and the cProfile top functions
of the loop. Also the Scheduler's in-memory path against a naive loop, with the compute
thread's own cProfile. Writes $OUT/hostprof.txt and $OUT/hostprof.json.

    python3 tests/gpu/hostprof.py [--ops flip,rotate,...] [--n 256] [--sched]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import time

import cupy as cp
import numpy as np

import gpuaug
from _timing import dev_host_loop  # tests/gpu/_timing.py (this folder is on sys.path)

SPIN = r'''extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long t0 = clock64(); while (clock64() - t0 < ns) {} }'''


def cases(n, x, rng):
    ang_h = rng.uniform(-30, 30, n)
    ang_d = cp.asarray(ang_h)
    flags_h = rng.random(n) < 0.5
    flags_d = cp.asarray(flags_h)  # device flags made once, as a device RNG would hand them over
    mean, std = (0.485 * 255, 0.456 * 255, 0.406 * 255), (0.229 * 255, 0.224 * 255, 0.225 * 255)
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10),
                          gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05), gpuaug.Normalize(mean, std)], seed=0)
    return {
        "flip_host": lambda: gpuaug.flip(x, horizontal=flags_h),
        "flip_dev": lambda: gpuaug.flip(x, horizontal=flags_d),
        "center_crop": lambda: gpuaug.center_crop(x, (200, 200)),
        "rotate_host": lambda: gpuaug.rotate(x, ang_h),
        "rotate_dev": lambda: gpuaug.rotate(x, ang_d),
        "resize": lambda: gpuaug.resize(x, (112, 112)),
        "gaussian_blur": lambda: gpuaug.gaussian_blur(x, sigma=1.5),
        "brightness": lambda: gpuaug.brightness(x, rng.uniform(0.8, 1.2, n)),
        "color_jitter": lambda: gpuaug.color_jitter(x, brightness=1.1, contrast=0.9, saturation=1.2, hue=0.05),
        "normalize": lambda: gpuaug.normalize(x, mean, std, dtype="float32", output_layout="NCHW"),
        "crop_mirror_normalize": lambda: gpuaug.crop_mirror_normalize(x, (200, 200), mean=mean, std=std),
        "compose4": lambda: pol(x),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--sched", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.integers(0, 256, (a.n, 224, 224, 3), dtype=np.uint8))
    spin = cp.RawKernel(SPIN, "spin")
    allc = cases(a.n, x, rng)
    names = a.ops.split(",") if a.ops else list(allc)
    rep = io.StringIO()
    res = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "n": a.n, "ops": {}}

    def say(s):
        print(s, flush=True)
        rep.write(s + "\n")
    say(f"{res['device']} n={a.n}")
    for name in names:
        f = allc[name]
        try:
            r, prof = dev_host_loop(f, spin, 200, top=12)
            res["ops"][name] = r
            say(f"== {name}: dev {r['dev_ms']:.3f} ms  host {r['host_us']:.1f} us  loop {r['loop_ms']:.3f} ms")
            rep.write(prof[-3500:])
        except Exception as e:  # noqa: BLE001
            say(f"== {name}: ERROR {type(e).__name__}: {e}")
    try:
        import torch
        import torchvision.transforms.v2.functional as TF
        t = torch.from_dlpack(x).permute(0, 3, 1, 2)
        for name, g in (("tv_hflip", lambda: TF.horizontal_flip(t)),
                        ("tv_normalize", lambda: TF.normalize(t.float(), [0.5] * 3, [0.2] * 3))):
            for _ in range(5):
                g()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                g()
            torch.cuda.synchronize()
            say(f"== {name}: loop {(time.perf_counter() - t0) / 200 * 1e3:.3f} ms")
    except Exception as e:  # noqa: BLE001
        say(f"torchvision: {e}")
    if a.sched:
        sched_profile(say, res)
    with open(os.path.join(a.out, "hostprof.txt"), "w") as fh:
        fh.write(rep.getvalue())
    with open(os.path.join(a.out, "hostprof.json"), "w") as fh:
        json.dump(res, fh, indent=1)


def sched_profile(say, res):
    from gpuaug.scheduler import Scheduler
    nb = 24
    src = np.random.default_rng(1).integers(0, 256, (nb * 256, 224, 224, 3), dtype=np.uint8)
    bb = 256 * 224 * 224 * 3
    # naive loop
    for _ in range(2):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for i in range(nb):
            y = gpuaug.flip(cp.asarray(src[i * 256:(i + 1) * 256]))
        cp.cuda.Device().synchronize()
        dt = time.perf_counter() - t0
    say(f"== naive loop: {nb * bb / dt / 1e9:.2f} GB/s")
    res["naive_gbps"] = nb * bb / dt / 1e9
    for kw in ({}, {"pin_source": True}, {"workers": 8}):
        try:
            s = Scheduler(src, gpuaug.flip, batch_size=256, **kw)
            for _ in s:
                pass
            pr = cProfile.Profile()
            t0 = time.perf_counter()
            pr.enable()
            for y in s:
                pass
            pr.disable()
            cp.cuda.Device().synchronize()
            dt = time.perf_counter() - t0
            st = s.stats()
            say(f"== scheduler {kw}: {nb * bb / dt / 1e9:.2f} GB/s; stats {str(st)[:600]}")
            res[f"sched_{kw}"] = nb * bb / dt / 1e9
            o = io.StringIO()
            pstats.Stats(pr, stream=o).sort_stats("tottime").print_stats(10)
            say(o.getvalue()[-2500:])
            s.close()
        except Exception as e:  # noqa: BLE001
            import traceback
            say(f"== scheduler {kw}: ERROR {traceback.format_exc()[-1500:]}")


if __name__ == "__main__":
    main()
