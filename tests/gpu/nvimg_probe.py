"""nvImageCodec on the GPU machine: which backends load, and batched decode throughput of each.

    python3 tests/gpu/nvimg_probe.py [--n 256] [--reps 5]

Prints the nvjpeg libraries the loader can see, then images/s for Decoder(backends=...) on N
synthetic 500x375 JPEGs (q90), decoded as one batch (the Scheduler's decode='gpu' call), and
the default Decoder() (what gpuaug.scheduler.GpuDecoder builds). Checks each decode against
OpenCV's (mean abs diff) before timing it.
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import os
import time

import cupy as cp
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    for lib in ("libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"):
        try:
            ctypes.CDLL(lib)
            print(f"dlopen {lib}: ok")
        except OSError as e:
            print(f"dlopen {lib}: {e}")
    print("nvjpeg files:", sorted(glob.glob("/usr/local/cuda*/lib64/libnvjpeg*"))[:4],
          sorted(glob.glob("/tmp/site/nvidia/*/lib/libnvjpeg*"))[:4])
    import cv2
    from nvidia import nvimgcodec as nv
    print("nvimgcodec", getattr(nv, "__version__", "?"))
    rng = np.random.default_rng(0)
    datas, refs = [], []
    for i in range(a.n):
        h, w = (375, 500) if i % 2 else (500, 375)
        small = rng.integers(0, 256, (h // 8, w // 8, 3), np.uint8)
        img = cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)
        img = cv2.add(img, rng.integers(0, 20, img.shape, np.uint8))
        ok, enc = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
        datas.append(enc.tobytes())
        refs.append(cv2.cvtColor(cv2.imdecode(enc, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB))
    print(f"{a.n} JPEGs, {sum(map(len, datas)) / a.n / 1024:.1f} KB avg")
    B = nv.Backend
    kinds = {"default": None}
    for name in ("HW_GPU_ONLY", "GPU_ONLY", "HYBRID_CPU_GPU", "CPU_ONLY"):
        k = getattr(nv.BackendKind, name, None)
        if k is not None:
            kinds[name] = [B(k)]
    stream = cp.cuda.Stream(non_blocking=True)
    for name, backends in kinds.items():
        try:
            dec = nv.Decoder(device_id=0) if backends is None else nv.Decoder(device_id=0, backends=backends)
            css = [nv.CodeStream(d) for d in datas]
            out = dec.decode(css, cuda_stream=stream.ptr)
            stream.synchronize()
            bad = sum(o is None for o in out)
            if bad:
                print(f"{name:16s} {bad} of {a.n} images not decoded")
                continue
            diff = max(float(np.abs(cp.asnumpy(cp.asarray(o)).astype(np.int16) - r).mean())
                       for o, r in zip(out[:8], refs[:8]))
            times = []
            for _ in range(a.reps):
                t0 = time.perf_counter()
                css = [nv.CodeStream(d) for d in datas]
                out = dec.decode(css, cuda_stream=stream.ptr)
                stream.synchronize()
                times.append(time.perf_counter() - t0)
            t = float(np.median(times))
            print(f"{name:16s} {a.n / t:9.0f} img/s  ({t * 1e3:.1f} ms/batch, mean|diff| vs cv2 {diff:.2f})")
        except Exception as e:  # noqa: BLE001
            print(f"{name:16s} FAILED {type(e).__name__}: {e}")
    print("cpu count", os.cpu_count())


if __name__ == "__main__":
    main()
