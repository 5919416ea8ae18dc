"""MixUp and CutMix against a same-size copy on the GPU machine (issue 16's target: <= 1.5x a
copy's device time), after checking them against their NumPy twins.

Batch: 256 x 224 x 224 x 3 NHWC, uint8 (the target's) and float32; labels: int64 class ids on
the device (1000 classes), so each call makes soft labels too. Per row (tests/gpu/_timing.py):

- dev ms: 10 calls queued behind a spin kernel, timed by events: the whole call's device work
  (the staged upload of the draws and the one launch);
- host us: wall time per call while a long spin holds the stream (draws, packing, launch);
- loop ms: 200 back-to-back calls, one sync.

Rows "kernel only" launch gpuaug_mix directly with records already on the device (no draws, no
upload): the image kernel's own time, with the cyclic launch order (partners read from L2) and
with 0..N-1 (no reuse), seg outputs a block (MixUp keeps the partner's pixels in registers for
the next output along the walk; the default is MixUp.seg), with and without the label blocks. The cProfile top of the MixUp and
CutMix loops goes to the .txt file.

    python3 tests/gpu/mixing_bench.py [--n 256] [--size 224] [--iters 200]

Writes $OUT/mixing_bench.txt and $OUT/mixing_bench.json (or ./ without $OUT). Exit status 1
when a check fails.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpuaug  # noqa: E402
from gpuaug.policy import mixing as mx  # noqa: E402
from _timing import dev_host_loop  # noqa: E402 - tests/gpu/_timing.py

SPIN = r'''extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long t0 = clock64(); while (clock64() - t0 < ns) {} }'''
K = 1000


def mixers(seed=0):
    return {"MixUp(0.8)": gpuaug.MixUp(0.8, num_classes=K, seed=seed),
            "CutMix(1.0)": gpuaug.CutMix(1.0, num_classes=K, seed=seed)}


def check(x, labels, layout, say):
    """Images and soft labels of the GPU call = the NumPy twin given the same draws (bits)."""
    ok = True
    hx, hl = cp.asnumpy(x), cp.asnumpy(labels)
    for name, m in mixers(1).items():
        y, soft = m(x, labels, layout=layout)
        ry, rs = m(hx, hl, params=m.last_params, layout=layout)
        same_y = bool((cp.asnumpy(y) == ry).all())
        same_s = bool((cp.asnumpy(soft) == rs).all())
        p = m.last_params
        cyc = bool((p.partner[p.order] == np.roll(p.order, -1)).all())  # the walk the launch order follows
        say(f"check {name} {x.dtype} {layout} {tuple(x.shape)}: images {'= twin' if same_y else 'DIFFER'}, "
            f"soft labels {'= twin' if same_s else 'DIFFER'}, partners along the launch order: {cyc}")
        ok &= same_y and same_s and cyc
    return ok


def kernel_only(m, x, labels, cyclic, with_labels, seg):
    """A callable launching gpuaug_mix alone (records on the device already), ``seg`` outputs
    a block."""
    m = type(m)(m.alpha, m.num_classes, seed=2)
    m.seg = seg
    n, h, w, c = x.shape
    p = m.draw(n, (h, w))
    rec = mx._records(p.partner, p.lam.astype(np.float32), p.boxes, p.order if cyclic else None)
    rec_d = cp.asarray(rec)
    out = cp.empty_like(x)
    soft = cp.empty((n, K), cp.float32)
    lkind = 2 if with_labels else 0
    fn, grid, geo = m._plan(x.device.id, x.dtype.name, n, h, w, c, "NHWC", x.data.ptr % 16 == 0, lkind)
    tail = (labels, soft, np.int32(K), np.int32(2)) if with_labels else (None, None, np.int32(0), np.int32(0))
    args = (x, out, rec_d) + geo + tail
    fn(grid, (256,), args)  # once, checked against the twin with the same draws
    p.order = p.order if cyclic else None
    ry, rs = m(cp.asnumpy(x), cp.asnumpy(labels), params=p)
    same = bool((cp.asnumpy(out) == ry).all()) and (not with_labels or bool((cp.asnumpy(soft) == rs).all()))
    return (lambda: fn(grid, (256,), args)), same


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    spin = cp.RawKernel(SPIN, "spin")
    rep, prof = io.StringIO(), io.StringIO()
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    res = {"device": dev, "n": a.n, "size": a.size, "rows": [], "checks_ok": None, "targets": {}}

    def say(s):
        print(s, flush=True)
        rep.write(s + "\n")

    n, s = a.n, a.size
    say(f"{dev}; MixUp / CutMix vs copy, {n} x {s} x {s} x 3 NHWC, int64 labels on the device ({K} classes)")
    rng = np.random.default_rng(0)
    host = rng.integers(0, 256, (n, s, s, 3), dtype=np.uint8)
    x8 = cp.asarray(host)
    labels = cp.asarray(rng.integers(0, K, n))
    xf = x8.astype(cp.float32) / 255
    ok = check(x8, labels, "NHWC", say)
    ok &= check(xf, labels, "NHWC", say)
    small = cp.ascontiguousarray(x8[:32].transpose(0, 3, 1, 2))
    ok &= check(small, labels[:32], "NCHW", say)
    ok &= check(small[:, :, :, :223], labels[:32], "NCHW", say)  # rows of 223 bytes: element kernels
    res["checks_ok"] = bool(ok)
    say(f"checks: {'ok' if ok else 'FAILED'}")

    rows = res["rows"]

    def row(name, f, profile=False, copy=None):
        r, text = dev_host_loop(f, spin, iters=a.iters)
        r["name"] = name
        rows.append(r)
        vs = ""
        if copy is not None:
            r["ratio_to_copy"] = r["dev_ms"] / copy["dev_ms"]
            vs = f"   = {r['ratio_to_copy']:.2f}x copy"
        say(f"  {name:<70} dev {r['dev_ms']:.4f} ms   host {r['host_us']:7.1f} us   loop {r['loop_ms']:.4f} ms{vs}")
        if profile:
            prof.write(f"---- cProfile, {a.iters} calls of {name}\n{text}\n")
        return r

    for tag, x in (("uint8", x8), ("float32", xf)):
        say(f"{tag}: {x.nbytes / 2**20:.1f} MiB a batch")
        dst = cp.empty_like(x)
        copy = row(f"copy {tag} (cupy.copyto, same size)", lambda: cp.copyto(dst, x))
        say(f"    copy: {2 * x.nbytes / copy['dev_ms'] / 1e6:.0f} GB/s (read + write)")
        for name, m in mixers().items():
            r = row(f"{name} {tag}, whole call (draws, upload, labels)", lambda m=m: m(x, labels), profile=True,
                    copy=copy)
            ratio = r["ratio_to_copy"]
            if tag == "uint8":
                res["targets"][f"{name} <= 1.5x a same-size copy"] = {"ratio": ratio, "met": ratio <= 1.5}
                res["targets"][f"{name} host <= 25 us"] = {"us": r["host_us"], "met": r["host_us"] <= 25}
            if m.kind == "mixup":
                variants = [(True, 1, True), (True, 2, True), (True, 4, True), (True, 8, True), (False, 1, True),
                            (False, 4, True), (True, m.seg, False)]
            else:
                variants = [(True, 1, True), (False, 1, True), (True, 1, False)]
            for cyclic, seg, lab in variants:
                f, same = kernel_only(m, x, labels, cyclic, lab, seg)
                ok &= same
                row(f"  kernel only {name} {tag}, {'cyclic' if cyclic else '0..N-1'} order, seg {seg}, "
                    f"{'with' if lab else 'no'} labels{'' if same else ' DIFFERS FROM THE TWIN'}", f, copy=copy)
    for name, m in mixers().items():
        t0 = time.perf_counter()
        for _ in range(1000):
            m.draw(n, (s, s))
        say(f"host: {name}.draw({n}, ({s}, {s})) {(time.perf_counter() - t0) * 1e3:.1f} us a call (of the host us)")

    # the same three as `gpuaug bench --policies` times them (GpuClock: an event per call)
    from gpuaug.bench.clocks import GpuClock

    clock = GpuClock()
    dst = cp.empty_like(x8)
    bench = {"copy": clock.time(lambda: cp.copyto(dst, x8), 100, 5).ms}
    for name, m in mixers().items():
        bench[name] = clock.time(lambda m=m: m(x8, labels), 100, 5).ms
    res["gpuclock_ms"] = bench
    say("GpuClock (as gpuaug bench --policies), uint8: " + ", ".join(f"{k} {v:.4f} ms" for k, v in bench.items())
        + "; " + ", ".join(f"{k} {bench[k] / bench['copy']:.2f}x" for k in bench if k != "copy"))

    res["checks_ok"] = bool(ok)
    say(f"checks (whole calls and kernel-only variants = twin): {'ok' if ok else 'FAILED'}")
    say("targets (uint8, whole calls):")
    for k, v in res["targets"].items():
        val = f"{v['ratio']:.2f}x" if "ratio" in v else f"{v['us']:.1f} us"
        say(f"  {k}: {val} - {'MET' if v['met'] else 'NOT MET'}")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "mixing_bench.txt"), "w") as f:
        f.write(rep.getvalue() + "\n" + prof.getvalue())
    with open(os.path.join(a.out, "mixing_bench.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {a.out}/mixing_bench.txt and .json")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
