"""The classic pycuda prefetch recipe, with gpuaug doing the augmenting, against gpuaug's
Scheduler doing the same job.

    python3 examples/pycuda_prefetch.py                     # needs a GPU and pycuda
    python3 examples/pycuda_prefetch.py --images 4096 --batch 256 --buffers 2

The recipe: a memmapped uint8 dataset (N, H, W, 3) on disk; two page-locked host buffers
(``pycuda.driver.pagelocked_empty``) filled from the memmap by a thread pool; batch i+1 is
copied with ``memcpy_htod_async`` on a *copy* stream while ``gpuaug.rotate`` augments batch i
on a *compute* stream (GPUArray in, GPUArray ``out=``), the two ordered by pycuda events:

    host    fill p0 (b0) | fill p1 (b1) | wait copy b0, fill p0 (b2) | ...
    copy        H2D b0 -> d0 | wait aug b0 | H2D b1 -> d1 | H2D b2 -> d0 ...
    compute            wait copy b0 | rotate d0 -> o0 | wait copy b1 | rotate d1 -> o1 ...

It prints, from event timings: the pinned H2D bandwidth measured alone, the link rate the
copies ran at while the GPU augmented (target: >= 90% of pinned), the end-to-end rate
(bytes over the GPU's span: the slower of the host fill and the link sets it), and the
overlap (time copy and compute ran at once, as a fraction of the shorter of the two). Then
the same job by ``gpuaug.Scheduler`` (``pin_source=True``: copies straight from the page-
locked memmap, no host fill; and the default staging path). The last two batches are
checked against ``gpuaug.rotate`` on CuPy.

pycuda runs on the runtime's primary context (``pycuda.autoprimaryctx``), the one CuPy and
gpuaug use; see the README on contexts.
"""
from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def make_dataset(path, n, h, w, seed=0):
    """Write an (n, h, w, 3) uint8 .npy and return it memmapped read-only."""
    if not os.path.exists(path):
        a = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(n, h, w, 3))
        rng = np.random.default_rng(seed)
        for i in range(0, n, 256):
            a[i:i + 256] = rng.integers(0, 256, a[i:i + 256].shape, dtype=np.uint8)
        a.flush()
        del a
    data = np.load(path, mmap_mode="r")
    # warm the page cache and the mapping: the measurement is of the pipeline, not the disk
    for i in range(0, len(data), 256):
        int(data[i:i + 256, ::8, ::8].sum())
    return data


def merge(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def busy(iv):
    return sum(e - s for s, e in merge(iv))


def both(a, b):
    """Time covered by both interval sets."""
    a, b, t, i, j = merge(a), merge(b), 0.0, 0, 0
    while i < len(a) and j < len(b):
        t += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return t


def pinned_h2d_gbps(drv, nbytes, reps=20):
    """H2D bandwidth of one pinned buffer copied ``reps`` times, alone on a stream."""
    host = drv.pagelocked_empty(nbytes, np.uint8)
    dev = drv.mem_alloc(nbytes)
    s = drv.Stream()
    e0, e1 = drv.Event(), drv.Event()
    drv.memcpy_htod_async(dev, host, s)
    e0.record(s)
    for _ in range(reps):
        drv.memcpy_htod_async(dev, host, s)
    e1.record(s)
    e1.synchronize()
    return nbytes * reps / (e1.time_since(e0) / 1e3) / 1e9


def recipe(drv, gpuarray, gpuaug, data, batch, nbuf, threads, angles):
    """One epoch of the pycuda recipe. Returns (timings dict, outputs, last batch indices)."""
    n = len(data) // batch
    shape = (batch,) + data.shape[1:]
    pinned = [drv.pagelocked_empty(shape, np.uint8) for _ in range(nbuf)]
    dev_in = [gpuarray.empty(shape, np.uint8) for _ in range(nbuf)]
    dev_out = [gpuarray.empty(shape, np.uint8) for _ in range(nbuf)]
    copy_s, comp_s = drv.Stream(), drv.Stream()
    ev = [{k: drv.Event() for k in ("c0", "c1", "a0", "a1")} for _ in range(n)]
    origin = drv.Event()
    pool = ThreadPoolExecutor(threads)
    step = max(1, -(-batch // threads))
    fill_s = 0.0

    def fill(buf, i):
        lo = i * batch
        list(pool.map(lambda a: np.copyto(buf[a:min(batch, a + step)], data[lo + a:lo + min(batch, a + step)]),
                      range(0, batch, step)))

    origin.record(copy_s)
    origin.synchronize()
    t_start = time.perf_counter()
    for i in range(n):
        k = i % nbuf
        if i >= nbuf:
            ev[i - nbuf]["c1"].synchronize()      # the pinned slot's last copy is done
        t = time.perf_counter()
        fill(pinned[k], i)
        fill_s += time.perf_counter() - t
        if i >= nbuf:
            copy_s.wait_for_event(ev[i - nbuf]["a1"])  # dev_in[k] was read by augment i - nbuf
        ev[i]["c0"].record(copy_s)
        drv.memcpy_htod_async(dev_in[k].gpudata, pinned[k], copy_s)
        ev[i]["c1"].record(copy_s)
        comp_s.wait_for_event(ev[i]["c1"])
        ev[i]["a0"].record(comp_s)
        gpuaug.rotate(dev_in[k], angle=angles[i], out=dev_out[k], stream=comp_s)
        ev[i]["a1"].record(comp_s)
    ev[-1]["a1"].synchronize()
    wall = time.perf_counter() - t_start
    pool.shutdown()
    t = [{k: e.time_since(origin) / 1e3 for k, e in d.items()} for d in ev]
    copies = [(d["c0"], d["c1"]) for d in t]
    augs = [(d["a0"], d["a1"]) for d in t]
    nbytes = n * pinned[0].nbytes
    span = max(e for _, e in augs) - min(s for s, _ in copies)
    res = {"batches": n, "bytes": nbytes, "wall_s": wall, "span_s": span, "fill_s": fill_s,
           "copy_s": busy(copies), "aug_s": busy(augs),
           "overlap": both(copies, augs) / max(1e-12, min(busy(copies), busy(augs)))}
    last = {(n - 1 - j): dev_out[(n - 1 - j) % nbuf] for j in range(min(nbuf, n))}
    return res, last


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=3072)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--buffers", type=int, default=2, help="page-locked host buffers (2: double buffering)")
    ap.add_argument("--threads", type=int, default=min(16, os.cpu_count() or 1), help="host fill threads")
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "gpuaug_prefetch.npy"))
    args = ap.parse_args(argv)

    import cupy as cp

    cp.cuda.Device(0).use()
    import pycuda.autoprimaryctx  # noqa: F401 - pycuda on the runtime's primary context
    import pycuda.driver as drv
    import pycuda.gpuarray as gpuarray

    import gpuaug

    data = make_dataset(args.data, args.images, args.size, args.size)
    nb = len(data) // args.batch
    rng = np.random.default_rng(1)
    angles = [rng.uniform(-15, 15, args.batch).astype(np.float32) for _ in range(nb)]
    bbytes = args.batch * int(np.prod(data.shape[1:]))
    print(f"{drv.Device(0).name()}: {len(data)} images {data.shape[1:]} uint8 memmapped "
          f"({data.nbytes / 1e9:.2f} GB), batches of {args.batch} ({bbytes / 1e6:.1f} MB), "
          f"{args.buffers} page-locked buffers, {args.threads} fill threads")
    pinned = max(pinned_h2d_gbps(drv, bbytes) for _ in range(3))
    print(f"pinned H2D alone: {pinned:.1f} GB/s")

    recipe(drv, gpuarray, gpuaug, data, args.batch, args.buffers, args.threads, angles)  # warm-up
    r, last = recipe(drv, gpuarray, gpuaug, data, args.batch, args.buffers, args.threads, angles)
    for i, out in last.items():
        want = gpuaug.rotate(cp.asarray(data[i * args.batch:(i + 1) * args.batch]), angle=angles[i])
        assert np.array_equal(out.get(), cp.asnumpy(want)), f"batch {i} differs from gpuaug.rotate on CuPy"
    link = r["bytes"] / r["copy_s"] / 1e9
    e2e = r["bytes"] / r["span_s"] / 1e9
    fill = r["bytes"] / r["fill_s"] / 1e9
    print(f"pycuda recipe: link while augmenting {link:.1f} GB/s = {link / pinned:.0%} of pinned "
          f"(target >= 90%: {'met' if link >= 0.9 * pinned else 'NOT met'}); end to end {e2e:.1f} GB/s "
          f"= {e2e / pinned:.0%} of pinned; host fill {fill:.1f} GB/s; overlap {r['overlap']:.0%}; "
          f"copy busy {r['copy_s'] / r['span_s']:.0%}, augment busy {r['aug_s'] / r['span_s']:.0%} "
          f"of {r['span_s'] * 1e3:.1f} ms; last {len(last)} batches checked")

    for pin in (True, False):
        it = itertools.cycle(angles)

        def augment(b):
            return gpuaug.rotate(b, angle=next(it))

        try:
            with gpuaug.Scheduler(data, augment, batch_size=args.batch, pin_source=pin, depth=3,
                                  workers=args.threads, drop_last=True) as s:
                for _ in s:  # warm-up epoch
                    pass
                for _ in s:
                    pass
                st = s.stats(warmup=1)
        except Exception as e:  # noqa: BLE001 - report and go on to the other variant
            print(f"Scheduler pin_source={pin!s:5}: failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        e2e_s = st.bytes / st.span_s / 1e9  # over the GPU's span, as for the recipe
        print(f"Scheduler pin_source={pin!s:5}: link {st.copy_gb_per_s:.1f} GB/s = "
              f"{st.copy_gb_per_s / pinned:.0%} of pinned; end to end {e2e_s:.1f} GB/s = {e2e_s / pinned:.0%}; "
              f"overlap {st.overlap:.0%}; copy busy {st.copy_busy:.0%}, compute busy {st.compute_busy:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
