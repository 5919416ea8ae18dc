"""Quick GPU probe (lead's scratch timing; the real benchmarks live in bench/).

Times registered ops (cuda/numba) against a same-size device copy with CUDA events,
rotating 4 random input buffers, after checking each against the CPU twin.
Usage: python3 tests/gpu/probe.py [op ...]
"""
import sys
import time

import cupy as cp
import numpy as np

import gpuaug


_SPIN = None


def spin(us):
    """Keep the GPU busy for ~us microseconds (a clock64 loop), so the calls queued behind it
    are timed back to back on the device, free of the host's per-call cost."""
    global _SPIN
    if _SPIN is None:
        _SPIN = cp.RawKernel(r"""
        extern "C" __global__ void spin(long long cycles) {
            long long t0 = clock64();
            while (clock64() - t0 < cycles) { }
        }""", "spin")
    _SPIN((1,), (1,), (np.int64(int(us * 1980)),))


def timeit(fn, bufs, reps=15, inner=20):
    """Median over reps of (events around `inner` calls queued behind a spin kernel) / inner:
    device time per call. Also the host's own cost per call (timeit.host_us)."""
    for b in bufs:
        fn(b)
    cp.cuda.runtime.deviceSynchronize()
    ts, hs = [], []
    for i in range(reps):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        spin(20000)
        s.record()
        h0 = time.perf_counter()
        for j in range(inner):
            fn(bufs[(i + j) % len(bufs)])
        hs.append((time.perf_counter() - h0) / inner)
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / inner)
    timeit.host_us = float(np.median(hs)) * 1e6
    return float(np.median(ts))


def main(ops):
    rng = np.random.default_rng(0)
    n, h, w, c = 256, 224, 224, 3
    host = [rng.integers(0, 256, (n, h, w, c), dtype=np.uint8) for _ in range(4)]
    bufs = [cp.asarray(x) for x in host]
    nbytes = bufs[0].nbytes
    outs = [cp.empty_like(b) for b in bufs]
    # The copy is timed like the ops (queued behind the spin kernel, back to back).
    tcopy = timeit(lambda b: outs[0].__setitem__(Ellipsis, b), bufs)
    copy_gbs = 2 * nbytes / tcopy / 1e6
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}: D2D copy {nbytes/1e6:.1f} MB "
          f"{tcopy*1e3:.1f} us  {copy_gbs:.0f} GB/s")
    for name in ops or sorted(gpuaug.registry):
        spec = gpuaug.registry[name]
        kw = spec.example(np.random.default_rng(1), n, h, w) if spec.example else {}
        small = host[0][:8]
        kws = spec.example(np.random.default_rng(1), 8, h, w) if spec.example else {}
        ref = spec.func(small, backend="cpu", **kws)
        for be in ("cuda", "numba"):
            try:
                t0 = time.time()
                got = cp.asnumpy(spec.func(cp.asarray(small), backend=be, **kws))
                compile_s = time.time() - t0
                d = np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()
                y = spec.func(bufs[0], backend=be, **kw)
                t = timeit(lambda b: spec.func(b, backend=be, **kw), bufs)
                gbs = (nbytes + y.nbytes) / t / 1e6
                print(f"{name:24s} {be:6s} {t*1e3:9.1f} us {gbs:7.0f} GB/s {100*gbs/copy_gbs:5.1f}% of copy  "
                      f"maxdiff vs cpu {d:g}  host {timeit.host_us:.0f} us/call  first call {compile_s:.2f}s")
            except Exception as e:  # noqa: BLE001
                print(f"{name:24s} {be:6s} FAILED {type(e).__name__}: {str(e)[:200]}")


if __name__ == "__main__":
    main(sys.argv[1:])
