"""Where the Scheduler's decode='gpu' path spends its time (issue 12), on the GPU machine.

    python3 tests/gpu/gpu_decode_prof.py            (needs nvImageCodec: .kit/nvimg)

A. The stages of one batch, run by hand in this thread, each synchronised and timed:
   read the files, plan (random boxes), nvImageCodec decode, CuPy views, finish (one
   varshape resized_crop), then the augment (flip + normalize).
B. The Scheduler itself over the same folder (images/s), with a py-spy record of every
   thread when PYSPY is set to the py-spy binary (collapsed stacks to $OUT/pyspy_gpu.txt).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import cupy as cp
import numpy as np

OUT = os.environ.get("OUT", "out")
os.makedirs(OUT, exist_ok=True)
N = int(os.environ.get("FILES", "2048"))
B = 256


def t(fn, reps=3):
    ts = []
    for _ in range(reps):
        cp.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        r = fn()
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t0)
    return r, float(np.median(ts)) * 1e3


def main():
    if os.environ.get("SWITCH"):  # GIL switch interval experiment (s; Python's default is 0.005)
        sys.setswitchinterval(float(os.environ["SWITCH"]))
        print("sys.setswitchinterval", sys.getswitchinterval())
    import gpuaug
    from gpuaug.bench_e2e import synthetic_folder
    from gpuaug.scheduler import ImageFolder
    from gpuaug.scheduler._device import CudaDevice

    root = synthetic_folder(N)
    src = ImageFolder(root, size=(224, 224), decode="gpu", crop="random", seed=0)
    idx = np.arange(B)
    dev = CudaDevice(0)
    stream = cp.cuda.Stream(non_blocking=True)
    (enc, bad), ms = t(lambda: src.read_encoded(idx))
    print(f"A read_encoded {B} files (1 thread): {ms:.1f} ms")
    datas = [d for d, _ in enc]
    (boxes, regions), ms = t(lambda: src.plan_decode([hw for _, hw in enc], dev.decode_supports_roi("RGB")))
    print(f"A plan_decode: {ms:.2f} ms")
    dec = dev._decoder("RGB")
    raw, ms = t(lambda: dec.decode(datas, stream.ptr, regions))
    print(f"A GpuDecoder.decode (nvImageCodec, batched): {ms:.1f} ms = {B / ms * 1e3:.0f} img/s")
    imgs, ms = t(lambda: dev.decode_images(datas, "RGB", stream, regions))
    print(f"A decode_images (decode + CuPy views): {ms:.1f} ms")
    views, ms = t(lambda: [cp.asarray(im) for im in raw])
    print(f"A cp.asarray of {B} decoded images: {ms:.2f} ms")
    dense, ms = t(lambda: src.finish(imgs, boxes))
    print(f"A finish (varshape resized_crop into dense): {ms:.2f} ms")
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.Normalize((123.7, 116.3, 103.5), (58.4, 57.1, 57.4))],
                         seed=0)
    _, ms = t(lambda: pol(dense))
    print(f"A augment flip+normalize: {ms:.2f} ms")

    # B: the Scheduler, 3 epochs (first is warm-up)
    for workers in [int(w) for w in os.environ.get("WORKERS", "14,4").split(",")]:
        procs = int(os.environ.get("GPU_PROCS", "0")) or None
        if procs:
            src.close()
            src = ImageFolder(root, size=(224, 224), decode="gpu", crop="random", seed=0, gpu_processes=procs)
            print(f"B gpu_processes={procs}")
        sched = gpuaug.Scheduler(src, pol, batch_size=B, workers=workers, shuffle=True, seed=0, drop_last=True)
        spy = None
        if os.environ.get("PYSPY") and workers == 14:
            spy = subprocess.Popen([os.environ["PYSPY"], "record", "-r", "200", "-f", "raw", "--threads",
                                    "-d", "12", "-o", os.path.join(OUT, "pyspy_gpu.txt"), "--nonblocking",
                                    "--pid", str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        for ep in range(3):
            t0 = time.perf_counter()
            n = 0
            for x, _ in sched:
                n += x.shape[0]
            cp.cuda.Device().synchronize()
            dt = time.perf_counter() - t0
            print(f"B Scheduler gpu decode, {workers} workers, epoch {ep}: {n / dt:.0f} img/s")
        st = sched.stats()
        print("B stats:", {k: getattr(st, k) for k in dir(st) if not k.startswith("_") and
                             isinstance(getattr(st, k), (int, float))})
        sched.timeline(os.path.join(OUT, f"sched_trace_gpu_{workers}.json"))
        sched.close()
        if spy is not None:
            spy.wait(timeout=60)
    src.close()


if __name__ == "__main__":
    main()
