"""Device time of the automatic policies' fused kernel by op pair: every sample given the same
two ops (RandAugment(2, 9)'s magnitudes, random signs) through gpuaug.policy.auto.apply_ops on
256x224x224x3 uint8; the kernels' times from the PyTorch profiler (tests/gpu/kprof.py), and
RandAugment's own draws for reference. Which pairs cost what tells where the fused pass spends.

    python3 tests/gpu/ra_costs.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import cupy as cp  # noqa: E402

import gpuaug  # noqa: E402
from gpuaug.policy.auto import OP_NAMES, AutoParams, apply_ops  # noqa: E402
from kprof import kernels  # noqa: E402

MAG = {1: 0.27, 2: 0.27, 3: 61.0, 4: 61.0, 5: 27.0, 6: 0.27, 7: 0.27, 8: 0.27, 9: 0.27, 10: 6.0, 11: 179.0}


def main():
    n, s = 256, 224
    rng = np.random.default_rng(0)
    x = cp.asarray(rng.integers(0, 256, (n, s, s, 3), dtype=np.uint8))
    print(f"# {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}; {n}x{s}x{s}x3 uint8; us per call")
    once = bool(os.environ.get("PAIRS"))  # under ncu: each pair's launches once, no timing
    if not once:
        ra = gpuaug.RandAugment(2, 9, seed=0)
        ra(x)
        ks = kernels(lambda: ra(x, params=ra.last_params))
        tot = sum(c * us for c, us in ks.values())
        print(f"RandAugment(2, 9) drawn: {tot:8.1f} us  " + "  ".join(f"{k.split('(')[0][5:]} {us:.1f}"
                                                                  for k, (c, us) in ks.items()))
    picks = [0, 1, 5, 6, 8, 9, 10, 13]  # Identity, ShearX, Rotate, Brightness, Contrast, Sharpness, Posterize, Equalize
    pairs = [(a, b) for a in picks for b in picks]
    if os.environ.get("PAIRS"):  # e.g. PAIRS="0,0 8,0": only these (for ncu)
        pairs = [tuple(int(v) for v in ab.split(",")) for ab in os.environ["PAIRS"].split()]
    for a, b in pairs:
        if True:
            ops = np.tile(np.array([[a, b]]), (n, 1))
            signed = (ops >= 1) & (ops <= 9)
            mags = np.array([[MAG.get(a, 0.0), MAG.get(b, 0.0)]]) * np.where(signed & (rng.random((n, 2)) < 0.5), -1, 1)
            p = AutoParams(ops, mags)
            if once:
                apply_ops(x, p)
                cp.cuda.Device().synchronize()
                continue
            ks = kernels(lambda: apply_ops(x, p))
            fused = sum(us * c for k, (c, us) in ks.items() if "autoaug_fused" in k)
            other = sum(us * c for k, (c, us) in ks.items() if "autoaug_fused" not in k and "Mem" not in k)
            print(f"{OP_NAMES[a]:>10} -> {OP_NAMES[b]:<10} fused {fused:7.1f}  stats/lut {other:6.1f}", flush=True)


if __name__ == "__main__":
    main()
