"""gpuaug_autoaug_fused variants on the GPU: kernels/auto_augment.cu compiled with
GPUAUG_AA_PX (pixels per thread) and GPUAUG_AA_MINB (launch bounds), timed on the launches
RandAugment(2, 9) and a few forced op pairs make (their arguments recorded from the real
calls), each output checked bit for bit against the production kernel's.

    python3 tests/gpu/ra_px.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import cupy as cp  # noqa: E402

from gpuaug.kernels import _cuda as K  # noqa: E402

CALLS = []
_real = K.get_function


def _spy(filename, name):
    fn = _real(filename, name)
    if "gpuaug_autoaug_fused" not in name and "gpuaug_autoaug_stats_fused" not in name:
        return fn

    class Rec:
        def __call__(self, grid, block, args, **kw):
            CALLS.append((name, args))
            return fn(grid, block, args, **kw)

        def __getattr__(self, a):
            return getattr(fn, a)
    return Rec()


K.get_function = _spy
import gpuaug  # noqa: E402
from gpuaug.policy import auto as A  # noqa: E402

if hasattr(A, "get_function"):
    A.get_function = _spy


def timed(fn, grid, args, iters=30):
    for _ in range(3):
        fn(grid, (256,), args)
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(iters):
        e0.record()
        fn(grid, (256,), args)
        e1.record()
        e1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
    return float(np.median(ts))


def main():
    n, s = 256, 224
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.integers(0, 256, (n, s, s, 3), dtype=np.uint8))
    cases = {}
    ra = gpuaug.RandAugment(2, 9, seed=0)
    ra3 = gpuaug.RandAugment(3, 9, seed=0)
    ta = gpuaug.TrivialAugmentWide(seed=0)
    for label, run in (("RandAugment(2, 9)", lambda: ra(x)), ("RandAugment(3, 9)", lambda: ra3(x)),
                       ("TrivialAugmentWide", lambda: ta(x)),
                       ("Identity->Identity", lambda: A.apply_ops(x, A.AutoParams(np.zeros((n, 2), int), np.zeros((n, 2))))),
                       ("Rotate->Sharpness", lambda: A.apply_ops(x, A.AutoParams(np.tile([[5, 9]], (n, 1)),
                                                                                  np.tile([[20.0, 0.5]], (n, 1))))),
                       ("Brightness->Posterize", lambda: A.apply_ops(x, A.AutoParams(np.tile([[6, 10]], (n, 1)),
                                                                                      np.tile([[0.3, 5.0]], (n, 1)))))):
        CALLS.clear()
        run()
        cp.cuda.Device().synchronize()
        cases[label] = list(CALLS)
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; {n}x{s}x{s}x3 uint8; us per launch (median)")
    variants = [(2, None), (1, 1), (1, 5), (2, 1), (2, 5), (2, 6), (2, 7)]  # None: the source's own
    for label, calls in cases.items():
        for name, args in calls:
            if "stats" in name:
                stats(label, name, args, n)
                continue
            src, dst = args[0], args[1]
            h, w = int(args[2]), int(args[3])
            ref = None
            line = []
            for px, mb in variants:
                opts = K.NVRTC_OPTIONS + ((f"-DGPUAUG_AA_PX={px}", f"-DGPUAUG_AA_MINB_ALL={mb}") if mb else ())
                fn = cp.RawModule(code=K.source("auto_augment.cu"), options=opts,
                                  name_expressions=[name]).get_function(name)
                out = cp.full_like(dst, 0xAB)
                a = (src, out) + tuple(args[2:])
                grid = (-(-(h * w) // (256 * px)), n)
                t = timed(fn, grid, a)
                if ref is None:
                    ref = out.copy()
                same = bool((out == ref).all())
                line.append(f"{'default' if mb is None else f'px{px}/mb{mb}'} {t:6.1f}{'' if same else ' DIFFERS'}")
            print(f"{label:>22} fused: " + "  ".join(line), flush=True)


def stats(label, name, args, n):
    """A statistics launch at several blocks per sample and loop unrollings; results (minmax,
    histogram, gray sum: fresh zeroed buffers) checked against the first variant's."""
    ref = None
    line = []
    for bps in (13, 25):
        for un in (None, 6, 8):
            opts = K.NVRTC_OPTIONS + ((f"-DGPUAUG_AA_SMINB={un}",) if un else ())
            fn = cp.RawModule(code=K.source("auto_augment.cu"), options=opts,
                              name_expressions=[name]).get_function(name)
            bufs = [cp.zeros_like(args[i]) for i in (5, 6, 7)]
            a = args[:5] + tuple(bufs) + args[8:]
            fn((bps, n), (256,), a)
            got = [b.copy() for b in bufs]
            if ref is None:
                ref = got
            same = all(bool((g == r).all()) for g, r in zip(got, ref))
            t = timed(fn, (bps, n), a)
            line.append(f"bps{bps}/mb{un} {t:6.1f}{'' if same else ' DIFFERS'}")
    print(f"{label:>22} {name.split('<')[1][:-1]:>5} stats: " + "  ".join(line), flush=True)


if __name__ == "__main__":
    main()
