#!/usr/bin/env python3
"""Soak gpuaug.Scheduler: 10,000 batches on the GPU, checksummed; memory and threads recorded.

    python3 tests/gpu/soak.py                 # GPU: 10,000 batches of 64x224x224x3 uint8
    OUT=dir python3 tests/gpu/soak.py         # ... and the report in dir/soak.json
    python3 tests/gpu/soak.py --fake          # the same on the CPU (FakeDevice, 4x16x16x3)

The source cycles through ``--pool`` distinct random host batches (more than the ring
holds, so a batch delivered early, late, twice or from a reused slot has other content)
and passes the batch index as the label. The augment is ``gpuaug.brightness(gpuaug.flip(b),
1.25)`` on the compute stream. The consumer works on its own non-blocking stream: it checks
the index sequence (nothing lost, duplicated or reordered), takes a position-weighted
checksum of every batch on the device (one reduction into a device array, compared at the
end with the checksum of the same augment applied directly to the pool batch), copies
every ``--verify-every``-th batch to the host and compares it byte for byte, then poisons
the batch (fills it with 0xAB), so memory reused before the consumer's release would show.
Now and then the consumer is slow (a spin kernel on its stream), so the ring fills.

Recorded before the run, at batch 100, at batch N-50 ("at_end": the ring still full), at the
last batch and after close(): the scheduler's
own pinned/device bytes and buffers (counted by a wrapper around its Device), CuPy's pool
(used/total bytes), the pinned pool's free blocks, cudaMemGetInfo, threads, RSS. Flat
memory: the scheduler's figures, the pool's used bytes and the thread count are the same at
batch 100 and at batch N-50; after close() the scheduler holds nothing, the pool's used bytes
and the threads are back to the start. Any failed check is listed under "problems" and
the exit status is 1. Stops early (a problem) after ``--time-limit`` seconds.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import gpuaug  # noqa: E402
from gpuaug.scheduler import FakeDevice  # noqa: E402

SPIN = r"""
extern "C" __global__ void gpuaug_soak_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""

ACCT = ("pinned_bytes", "pinned_buffers", "device_bytes", "device_buffers")


def counting(base):
    """``base`` (a Device class) counting the scheduler's pinned and device allocations."""

    class Counting(base):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self._acct_lock = threading.Lock()
            self.acct = dict.fromkeys(ACCT, 0)

        def _add(self, kind, nbytes, n):
            with self._acct_lock:
                self.acct[f"{kind}_bytes"] += nbytes
                self.acct[f"{kind}_buffers"] += n

        def alloc_pinned(self, nbytes):
            buf = super().alloc_pinned(nbytes)
            self._add("pinned", buf.nbytes, 1)
            return buf

        def free_pinned(self, buf):
            n = buf.nbytes
            super().free_pinned(buf)
            self._add("pinned", -n, -1)

        def alloc_device(self, nbytes):
            buf = super().alloc_device(nbytes)
            self._add("device", buf.nbytes, 1)
            return buf

        def free_device(self, buf):
            n = buf.nbytes
            super().free_device(buf)
            self._add("device", -n, -1)

    Counting.__name__ = f"Counting{base.__name__}"
    return Counting


def batch_bytes_of(shape):
    return int(np.prod(shape))


def rss_bytes():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Backend:
    """NumPy + FakeDevice (--fake) or CuPy + CudaDevice: arrays, checksums, the consumer stream."""

    def __init__(self, fake, n_elems, seed=0):
        self.fake = fake
        w = np.random.default_rng(seed + 1).integers(1, 2 ** 32, n_elems, dtype=np.uint64)
        if fake:
            self.xp = np
            self.dev = counting(FakeDevice)(max_log=1000)
            self.consumer = None
            self.w = w
        else:
            import cupy as cp

            from gpuaug.scheduler import CudaDevice

            self.xp = cp
            self.dev = counting(CudaDevice)(0)
            self.consumer = cp.cuda.Stream(non_blocking=True)
            self.w = cp.asarray(w.astype(np.uint32))
            self._wsum = cp.ReductionKernel("T x, uint32 w", "uint64 y",
                                            "(unsigned long long)x * (unsigned long long)w",
                                            "a + b", "y = a", "0", "gpuaug_soak_wsum")
            self._spin = cp.RawKernel(SPIN, "gpuaug_soak_spin")
            try:
                khz = cp.cuda.runtime.deviceGetAttribute(13, 0)  # cudaDevAttrClockRate
            except Exception:  # noqa: BLE001
                khz = 1_700_000
            self.cycles_per_ms = int(khz)

    def stream(self):
        import contextlib

        return contextlib.nullcontext() if self.fake else self.consumer

    def checksum(self, a):
        """A position-weighted sum of ``a`` (mod 2^64): a device scalar (or a NumPy one)."""
        flat = a.reshape(-1)
        if self.fake:
            return (flat.astype(np.uint64) * self.w).sum(dtype=np.uint64)
        return self._wsum(flat, self.w)

    def slow(self, ms):
        if self.fake:
            time.sleep(ms / 1e3)
        else:
            self._spin((1,), (1,), (np.int64(self.cycles_per_ms * ms),))

    def to_host(self, a):
        if self.fake:
            return np.array(a)
        return self.xp.asnumpy(a, stream=self.consumer)  # blocking: waits for the stream

    def sync(self):
        if not self.fake:
            self.consumer.synchronize()
            self.xp.cuda.Device().synchronize()

    def probe(self):
        r = {"scheduler": dict(self.dev.acct), "threads": len(threading.enumerate()),
             "gpuaug_threads": sorted(t.name for t in threading.enumerate() if t.name.startswith("gpuaug")),
             "rss_bytes": rss_bytes()}
        if not self.fake:
            cp = self.xp
            from gpuaug.kernels._cuda import clear_constants

            clear_constants()  # the ops' cached descriptor tables are not the scheduler's memory
            pool = cp.get_default_memory_pool()
            r["pool_used_bytes"] = int(pool.used_bytes())
            r["pool_total_bytes"] = int(pool.total_bytes())
            r["pinned_pool_free_blocks"] = int(cp.get_default_pinned_memory_pool().n_free_blocks())
            free, total = cp.cuda.runtime.memGetInfo()
            r["device_free_bytes"], r["device_total_bytes"] = int(free), int(total)
        return r


def gpu_name(cp):
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def augment(b):
    return gpuaug.brightness(gpuaug.flip(b), 1.25)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fake", action="store_true", help="FakeDevice on the CPU (no GPU)")
    ap.add_argument("--batches", type=int, default=10_000)
    ap.add_argument("--shape", default=None, help="NxHxWxC (default 64x224x224x3; 4x16x16x3 with --fake)")
    ap.add_argument("--pool", type=int, default=8, help="distinct host batches (> depth)")
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--verify-every", type=int, default=100, help="host byte-for-byte check period")
    ap.add_argument("--time-limit", type=float, default=200.0, help="seconds; stop early (a problem)")
    args = ap.parse_args(argv)
    shape = tuple(int(v) for v in (args.shape or ("4x16x16x3" if args.fake else "64x224x224x3")).split("x"))
    n_batches = args.batches
    problems = []
    t_start = time.perf_counter()

    be = Backend(args.fake, int(np.prod(shape)))
    xp = be.xp
    rng = np.random.default_rng(0)
    pool = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(args.pool)]
    # the expected output and checksum of every pool batch: the augment applied directly
    expect = [augment(xp.asarray(p)) for p in pool]
    be.sync()
    expect_host = [np.asarray(be.to_host(e)) if not args.fake else e for e in expect]
    expect_sums = np.array([int(be.checksum(e)) for e in expect], dtype=np.uint64)
    sums = xp.zeros(n_batches, dtype=xp.uint64)
    be.sync()
    before = be.probe()

    def source():
        for k in range(n_batches):
            yield pool[k % args.pool], k

    sched = gpuaug.Scheduler(source, augment, depth=args.depth, workers=args.workers, device=be.dev,
                             stream=be.consumer)
    marks, verified, delivered = {}, 0, 0
    end_mark = max(101, n_batches - 50)  # the pipeline is still full there (at the last batch its threads have ended)
    t0 = time.perf_counter()
    images = None
    try:
        for i, (images, k) in enumerate(sched):
            if k != i:
                problems.append(f"batch {i}: got index {k} (lost, duplicated or out of order)")
                break
            if tuple(images.shape) != shape or images.dtype != np.uint8:
                problems.append(f"batch {i}: shape {tuple(images.shape)} dtype {images.dtype}")
                break
            with be.stream():
                if i % 53 == 7:
                    be.slow(0.2)  # a slow consumer now and then: the ring fills up
                sums[i] = be.checksum(images)
                if i % args.verify_every == 0 or i == n_batches - 1:
                    host = be.to_host(images)
                    if not np.array_equal(host, expect_host[i % args.pool]):
                        bad = int(np.count_nonzero(host != expect_host[i % args.pool]))
                        problems.append(f"batch {i}: host check failed ({bad} bytes differ)")
                    verified += 1
                images.fill(0xAB)  # poison: seen by any later batch that reused this memory early
            delivered += 1
            if i in (100, end_mark, n_batches - 1):
                be.sync()
                marks[i] = be.probe()
            if time.perf_counter() - t_start > args.time_limit:
                problems.append(f"time limit {args.time_limit} s reached after {delivered} batches")
                break
        be.sync()
        wall = time.perf_counter() - t0
    finally:
        images = None
        sched.close()
    st = sched.stats()
    be.sync()
    # close() hands the pinned ring to the device's pool (kept for the next scheduler): what
    # it holds is counted apart, then freed, and then the scheduler must hold nothing
    pinned_pool = be.dev.pinned_pool()
    pooled = pinned_pool.idle_bytes if pinned_pool is not None else 0
    if pooled > args.depth * batch_bytes_of(shape):
        problems.append(f"the pinned pool holds {pooled} bytes after close, more than the ring "
                        f"({args.depth} x {batch_bytes_of(shape)})")
    if pinned_pool is not None:
        pinned_pool.clear()
    after_close = be.probe()

    got = np.asarray(be.to_host(sums) if not args.fake else sums)[:delivered]
    want = expect_sums[np.arange(delivered) % args.pool]
    wrong = np.flatnonzero(got != want)
    if wrong.size:
        problems.append(f"{wrong.size} batches with a wrong device checksum, first {wrong[:8].tolist()}")
    if delivered != n_batches:
        problems.append(f"delivered {delivered} of {n_batches} batches")

    at_100 = marks.get(100)
    at_end = marks.get(end_mark)
    batch_bytes = int(np.prod(shape))
    if at_100 is not None and at_end is not None:
        if at_100["scheduler"] != at_end["scheduler"]:
            problems.append(f"scheduler memory not flat: {at_100['scheduler']} -> {at_end['scheduler']}")
        if at_100["gpuaug_threads"] != at_end["gpuaug_threads"] or at_100["threads"] != at_end["threads"]:
            problems.append(f"threads not flat: {at_100['threads']} -> {at_end['threads']}")
        if "pool_used_bytes" in at_100:
            u0, u1 = at_100["pool_used_bytes"], at_end["pool_used_bytes"]
            if abs(u1 - u0) > 2 * batch_bytes:
                problems.append(f"CuPy pool used bytes not flat: {u0} -> {u1}")
        if "device_free_bytes" in at_100:
            # device memory in use outside CuPy's pool (the scheduler's cudaMalloc'd slots, the context),
            # compared between two points of the same run: one-time allocations (context, modules,
            # streams) are all made by batch 100. Not exact: the pool counts a chunk at its size, the
            # driver commits 2 MiB pages, so each chunk the pool adds meanwhile shows here as its
            # rounding (0.8 MiB for one 9.2 MiB chunk on the H200); hence a bound, not equality.
            # Not compared with "before" either (new streams' pool arenas, the context's first use).
            out0 = at_100["device_total_bytes"] - at_100["device_free_bytes"] - at_100["pool_total_bytes"]
            out1 = at_end["device_total_bytes"] - at_end["device_free_bytes"] - at_end["pool_total_bytes"]
            d = out1 - out0
            if d > 256 << 20:
                problems.append(f"device memory outside CuPy's pool grew by {d} bytes")
        if at_100["rss_bytes"] and at_end["rss_bytes"] and at_end["rss_bytes"] - at_100["rss_bytes"] > 512 << 20:
            problems.append(f"RSS grew by {at_end['rss_bytes'] - at_100['rss_bytes']} bytes")
    if after_close["scheduler"] != dict.fromkeys(ACCT, 0):
        problems.append(f"after close the scheduler still holds {after_close['scheduler']}")
    if after_close["gpuaug_threads"] or after_close["threads"] != before["threads"]:
        problems.append(f"threads left after close: {after_close['gpuaug_threads']} "
                        f"({before['threads']} before, {after_close['threads']} after)")
    if "pool_used_bytes" in before and after_close["pool_used_bytes"] != before["pool_used_bytes"]:
        problems.append(f"CuPy pool used bytes {before['pool_used_bytes']} before, "
                        f"{after_close['pool_used_bytes']} after close")
    errors = getattr(be.dev, "errors", [])
    if errors:
        problems.append(f"FakeDevice rule checks: {errors[:5]}")

    report = {
        "ok": not problems, "problems": problems, "device": "fake" if args.fake else be.dev.name,
        "gpu": None if args.fake else gpu_name(be.xp),
        "shape": list(shape), "batch_bytes": batch_bytes, "batches": delivered, "checksummed": delivered,
        "verified_host": verified, "pool": args.pool, "depth": args.depth, "workers": sched.workers,
        "wall_s": round(wall, 3), "total_s": round(time.perf_counter() - t_start, 3),
        "batches_per_s": round(delivered / wall, 1) if wall > 0 else None,
        "gb_per_s": round(delivered * batch_bytes / wall / 1e9, 3) if wall > 0 else None,
        "stats": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in dataclasses.asdict(st).items()},
        "end_mark": end_mark, "before": before, "at_100": at_100, "at_end": at_end,
        "at_last": marks.get(n_batches - 1), "pinned_pool_bytes_after_close": pooled,
        "after_close": after_close,
    }
    text = json.dumps(report, indent=1)
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "soak.json"), "w") as f:
            f.write(text)
    print(text)
    print(("SOAK OK" if not problems else "SOAK FAILED: " + "; ".join(problems)), file=sys.stderr)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
