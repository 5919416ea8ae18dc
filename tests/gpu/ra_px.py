"""gpuaug_autoaug_fused / _stats_fused variants on the GPU: kernels/auto_augment.cu compiled
with other macros (GPUAUG_AA_PX pixels per thread, GPUAUG_AA_MINB_ALL launch bounds,
GPUAUG_AA_SMINB statistics launch bounds), timed on the launches RandAugment(2, 9) and a few forced op pairs make
(their grids and arguments recorded from the real calls), each output checked bit for bit
against the production kernel's (the first variant).

    python3 tests/gpu/ra_px.py

Session 8 (H200, bench/results/2026-11-28-h200-s8/ra_px.txt) timed a 16-pixel-a-thread path
for samples whose steps are all point-wise (GPUAUG_AA_POINT16, since removed) this way: faster
when every sample took it (Identity->Identity 111 -> 81 us) but slower for RandAugment(2, 9)
(fused 176 -> 189 us, statistics after one step 67 -> 75 us), where a third of the samples do.
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
            CALLS.append((name, grid, args))
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
    fused_v = [("default", ())] + [(f"px{px}/mb{mb}", (f"-DGPUAUG_AA_PX={px}", f"-DGPUAUG_AA_MINB_ALL={mb}"))
                                   for px, mb in ((1, 5), (2, 5), (2, 7), (4, 6))]
    stats_v = [("default", ()), ("smb6", ("-DGPUAUG_AA_SMINB=6",))]
    for label, calls in cases.items():
        for name, grid, args in calls:
            stats = "stats" in name
            ref = None
            line = []
            for vname, opts in (stats_v if stats else fused_v):
                fn = cp.RawModule(code=K.source("auto_augment.cu"), options=K.NVRTC_OPTIONS + opts,
                                  name_expressions=[name]).get_function(name)
                if stats:  # fresh zeroed minmax, histogram, gray sum
                    outs = [cp.zeros_like(args[i]) for i in (5, 6, 7)]
                    a = args[:5] + tuple(outs) + args[8:]
                    g = grid
                else:
                    outs = [cp.full_like(args[1], 0xAB)]
                    a = (args[0], outs[0]) + tuple(args[2:])
                    px = next((int(o.split("=")[1]) for o in opts if o.startswith("-DGPUAUG_AA_PX=")), A._FUSED_PX)
                    g = (-(-(int(args[2]) * int(args[3])) // (256 * px)), n)
                fn(g, (256,), a)
                got = [o.copy() for o in outs]
                if ref is None:
                    ref = got
                same = all(bool((x_ == r).all()) for x_, r in zip(got, ref))
                t = timed(fn, g, a)
                line.append(f"{vname} {t:6.1f}{'' if same else ' DIFFERS'}")
            kind = name.split("<")[1][:-1] + (" stats" if stats else " fused")
            print(f"{label:>22} {kind:>10}: " + "  ".join(line), flush=True)


if __name__ == "__main__":
    main()
