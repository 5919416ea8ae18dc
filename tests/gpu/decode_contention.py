"""Why nvImageCodec's batched decode takes ~44 ms per 256 images inside the Scheduler and
~17 ms alone (issue 12): the same decode call timed alone, beside Python threads that spin
(GIL pressure), beside threads that read files, beside a thread launching small kernels on
another stream, and from a non-main thread.

    python3 tests/gpu/decode_contention.py
"""
from __future__ import annotations

import os
import threading
import time

import cupy as cp
import numpy as np


def main():
    from gpuaug.bench_e2e import synthetic_folder
    from gpuaug.scheduler._decode import GpuDecoder, read_file

    root = synthetic_folder(2048)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs)
    datas = [read_file(f) for f in files[:256]]
    dec = GpuDecoder(0)
    stream = cp.cuda.Stream(non_blocking=True)

    def once():
        t0 = time.perf_counter()
        out = dec.decode(datas, stream.ptr)
        stream.synchronize()
        return (time.perf_counter() - t0) * 1e3, out

    for _ in range(3):
        once()

    def timed(label, reps=7):
        ts = [once()[0] for _ in range(reps)]
        print(f"{label:55s} {np.median(ts):7.1f} ms  (min {min(ts):.1f})", flush=True)

    timed("alone")
    stop = threading.Event()

    def spin():
        x = 0
        while not stop.is_set():
            x += 1

    def reader():
        i = 0
        while not stop.is_set():
            read_file(files[i % len(files)])
            i += 1

    def launcher():
        a = cp.zeros(1 << 20, cp.float32)
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            while not stop.is_set():
                a += 1
                s.synchronize()

    for label, target, k in (("beside 1 spinning Python thread", spin, 1),
                             ("beside 4 spinning Python threads", spin, 4),
                             ("beside 4 file-reading threads", reader, 4),
                             ("beside 14 file-reading threads", reader, 14),
                             ("beside a thread launching kernels on another stream", launcher, 1)):
        stop.clear()
        ts = [threading.Thread(target=target, daemon=True) for _ in range(k)]
        for t in ts:
            t.start()
        time.sleep(0.05)
        timed(label)
        stop.set()
        for t in ts:
            t.join()

    res = {}

    def in_thread():
        ts = [once()[0] for _ in range(7)]
        res["t"] = ts

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    print(f"{'from a non-main thread':55s} {np.median(res['t']):7.1f} ms")
    # a decoder per call (as if it were re-created)
    t0 = time.perf_counter()
    d2 = GpuDecoder(0)
    print(f"{'GpuDecoder() construction':55s} {(time.perf_counter() - t0) * 1e3:7.1f} ms")
    del d2


if __name__ == "__main__":
    main()
