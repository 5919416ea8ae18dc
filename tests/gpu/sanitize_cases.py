"""Every gpuaug kernel on small, awkward inputs: the program that tests/gpu/sanitize.sh runs
under compute-sanitizer (memcheck, racecheck, initcheck, synccheck).

For each registry op and backend ("cuda" = CUDA C, "numba" = the Numba CUDA twin) it runs
every dtype x layout x channel count on odd sizes, a 16-byte-aligned size (the vectorised
fast paths), a size larger than one shared-memory tile, a varshape list, every value of the
op's choice parameters (interpolation, border, padding mode, output dtype/layout) and extra
parameter variants that change the kernel's path (filter sizes larger than the image...),
then the fused policy kernel (gpuaug.Compose). Each output is compared with the CPU twin
(backend "cpu"), so a kernel that reads garbage also fails here, not only under the tools.

CuPy's memory pool is switched off (every array is its own cudaMalloc), so memcheck sees
the exact bounds of every buffer instead of a pool's larger chunk.

    python3 tests/gpu/sanitize_cases.py [--profile full|shared|quick] [--backends cuda,numba] [OPS...]

"shared" keeps the ops whose kernels use shared memory or barriers (racecheck/synccheck).
Prints one line per case group and a summary; exits 1 if any case raised or mismatched.
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback

import numpy as np

#: Ops whose CUDA C kernels use shared memory / __syncthreads (racecheck, synccheck).
SHARED = ("gaussian_blur", "box_blur", "sharpen", "median_blur", "equalize", "transpose", "rot90",
          "resize", "resized_crop")

#: Extra parameter sets per op (on top of the registry example) that take other kernel paths.
EXTRA = {
    "gaussian_blur": [dict(sigma=0.8), dict(sigma=3.0, kernel_size=31), dict(sigma=1.0, kernel_size=3)],
    "box_blur": [dict(kernel_size=3), dict(kernel_size=15)],
    "median_blur": [dict(kernel_size=3), dict(kernel_size=5)],
    "rot90": [dict(k=1), dict(k=2), dict(k=3)],
    "pad": [dict(padding=3, mode="reflect"), dict(padding=(0, 5, 1, 0), mode="edge")],
    "posterize": [dict(bits=1), dict(bits=8)],
    "solarize": [dict(threshold=0.0), dict(threshold=0.5)],
}

SIZES = {"odd": (2, 7, 13), "aligned": (2, 16, 64), "tiled": (1, 70, 90), "pixel": (1, 1, 1)}
VARSHAPE = ((9, 12), (12, 5), (6, 17))


def _rand(rng, shape, dtype):
    if dtype == "uint8":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    return rng.random(shape).astype(dtype)


def _layout(x, layout):
    return x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def _compare(got, ref, what):
    got = [got] if not isinstance(got, list) else got
    ref = [ref] if not isinstance(ref, list) else ref
    assert len(got) == len(ref), f"{what}: {len(got)} outputs vs {len(ref)}"
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype, f"{what}: {g.shape} {g.dtype} vs {r.shape} {r.dtype}"
        if g.dtype == np.uint8:
            d = np.abs(g.astype(np.int32) - r.astype(np.int32)).max(initial=0)
            assert d <= 1, f"{what}: max |diff| {d} vs the CPU twin"
        else:
            assert np.isfinite(g).all() or not np.isfinite(r).all(), f"{what}: non-finite output"
            tol = 1e-2 if g.dtype == np.float16 else 1e-4
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=tol, atol=tol,
                                       err_msg=what)


class Runner:
    def __init__(self, backends, cp):
        self.cp = cp
        self.backends = backends
        self.cases = 0
        self.failures = []
        self.invalid = 0
        self.numba_profile = "full"

    def one(self, spec, x, kw, layout, what, numba=True):
        cp = self.cp
        try:
            ref = spec.func(x, **kw, layout=layout, backend="cpu")
        except ValueError:  # an example value outside this dtype's range (e.g. a uint8 threshold)
            self.invalid += 1
            return
        for be in self.backends:
            if be not in spec.backends or (be == "numba" and not numba):
                continue
            xd = [cp.asarray(a) for a in x] if isinstance(x, list) else cp.asarray(x)
            kd = {k: (cp.asarray(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
            self.cases += 1
            try:
                try:
                    y = spec.func(xd, **kd, layout=layout, backend=be)
                except TypeError as e:  # a host-only value (it decides the output shape): pass it as is
                    if "host" not in str(e):
                        raise
                    y = spec.func(xd, **kw, layout=layout, backend=be)
                cp.cuda.get_current_stream().synchronize()
                got = [cp.asnumpy(a) for a in y] if isinstance(y, list) else cp.asnumpy(y)
                _compare(got, ref, f"{what} [{be}]")
            except Exception as e:  # noqa: BLE001 - collected and reported
                self.failures.append(f"{what} [{be}]: {type(e).__name__}: {e}")
                traceback.print_exc(limit=3)

    def op(self, name, profile, rng):
        import gpuaug

        spec = gpuaug.registry[name]
        dtypes = spec.dtypes if profile != "quick" else ("uint8", "float32")
        sizes = dict(SIZES)
        if profile == "quick":
            sizes = {"odd": SIZES["odd"]}
        start = self.cases
        t0 = time.time()
        per_channel = {p.name for p in spec.params if "C" in p.shape}
        for sname, (n, h, w) in sizes.items():
            try:
                kws = [spec.example(rng, n, h, w) if spec.example else {}]
            except Exception:  # noqa: BLE001 - e.g. no homography for a 1x1 image
                self.invalid += 1
                continue
            if sname == "odd":
                kws += [dict(kws[0], **e) for e in EXTRA.get(name, [])]
                for p in spec.params:  # every choice, on the first example
                    if p.kind == "choice":
                        kws += [dict(kws[0], **{p.name: c}) for c in p.choices if c != kws[0].get(p.name, p.default)]
            for dtype in dtypes:
                for layout in spec.layouts:
                    for c in spec.channels:
                        if (sname != "odd" or layout != "NHWC") and c not in (3, spec.channels[-1]):
                            continue
                        for kw in kws:
                            if c != 3:  # the examples are drawn for 3 channels
                                kw = {k: _channels(k, v, c) if k in per_channel else v for k, v in kw.items()}
                            x = _layout(_rand(rng, (n, h, w, c), dtype), layout)
                            numba = self.numba_profile == "full" or (sname == "odd" and c == 3)
                            self.one(spec, x, kw, layout, f"{name} {sname} {dtype} {layout} c{c} {_short(kw)}", numba)
        if spec.varshape:
            for dtype in dtypes:
                imgs = [_rand(rng, (h, w, 3), dtype) for h, w in VARSHAPE]
                kw = spec.example(rng, len(imgs), min(h for h, _ in VARSHAPE), min(w for _, w in VARSHAPE)) \
                    if spec.example else {}
                self.one(spec, imgs, kw, "NHWC", f"{name} varshape {dtype} {_short(kw)}")
        print(f"{name}: {self.cases - start} cases, {time.time() - t0:.1f} s", flush=True)

    def policy(self, rng):
        import gpuaug

        cp = self.cp
        for dtype in ("uint8", "float32"):
            for layout in ("NHWC", "NCHW"):
                x = _layout(_rand(rng, (3, 21, 37, 3), dtype), layout)
                make = lambda: gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(25),  # noqa: E731
                                               gpuaug.ColorJitter(0.3, 0.3, 0.3),
                                               gpuaug.Normalize((0.5,) * 3, (0.25,) * 3)], seed=3)
                self.cases += 1
                what = f"Compose {dtype} {layout}"
                try:
                    ref = make()(x, layout=layout)
                    got = cp.asnumpy(make()(cp.asarray(x), layout=layout))
                    cp.cuda.get_current_stream().synchronize()
                    _compare(got, ref, what)
                except Exception as e:  # noqa: BLE001
                    self.failures.append(f"{what}: {type(e).__name__}: {e}")
                    traceback.print_exc(limit=3)
        print("policy: done", flush=True)


def _channels(name, v, c):
    """A per-channel example value (drawn for 3 channels) for ``c`` channels."""
    a = np.asarray(v)
    if name == "permutation":
        return np.broadcast_to(np.arange(c)[::-1], a.shape[:-1] + (c,)).copy()
    if a.ndim and a.shape[-1] == 3:
        return np.repeat(a[..., :1], c, axis=-1)
    return v


class _NumpyAsCupy:
    """Enough of CuPy's API on NumPy for --dry-run."""

    asarray = staticmethod(np.asarray)
    asnumpy = staticmethod(np.asarray)

    class cuda:  # noqa: N801
        @staticmethod
        def get_current_stream():
            class _S:
                def synchronize(self):
                    pass
            return _S()


def _short(kw):
    out = []
    for k, v in kw.items():
        a = np.asarray(v) if not isinstance(v, str) else v
        out.append(f"{k}={a.tolist() if isinstance(a, np.ndarray) and a.size <= 4 else ('…' if isinstance(a, np.ndarray) else a)}")
    return ",".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ops", nargs="*")
    ap.add_argument("--profile", default="full", choices=("full", "shared", "quick"))
    ap.add_argument("--backends", default="cuda,numba")
    ap.add_argument("--numba-profile", default="odd", choices=("full", "odd"),
                    help="odd: the Numba twin on the odd size with 3 channels only (each Numba "
                         "specialisation compiles for seconds; the CUDA C kernels see every case)")
    ap.add_argument("--no-policy", action="store_true")
    ap.add_argument("--shard", default="0/1", help="i/k: every k-th op from the i-th (the policy in shard 0)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: check the cases on the CPU twin only")
    a = ap.parse_args(argv)

    if a.dry_run:
        cp, a.backends = _NumpyAsCupy(), "cpu"
    else:
        import cupy as cp

        cp.cuda.set_allocator(None)  # exact buffer bounds for memcheck
        cp.cuda.set_pinned_memory_allocator(None)
    import gpuaug

    ops = a.ops or sorted(gpuaug.registry)
    if a.profile == "shared":
        ops = [o for o in ops if o in SHARED]
    shard, shards = (int(v) for v in a.shard.split("/"))
    ops = ops[shard::shards]
    r = Runner(a.backends.split(","), cp)
    r.numba_profile = a.numba_profile
    rng = np.random.default_rng(2026)
    t0 = time.time()
    for name in ops:
        r.op(name, a.profile, rng)
    if not a.no_policy and not a.ops and shard == 0:
        r.policy(rng)
    print(f"SUMMARY: {r.cases} cases over {len(ops)} ops, backends {a.backends}, profile {a.profile}, "
          f"{len(r.failures)} failed, {r.invalid} parameter sets invalid for the dtype (not run), "
          f"{time.time() - t0:.0f} s")
    for f in r.failures[:50]:
        print("  FAIL", f)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
