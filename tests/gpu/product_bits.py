"""Would a closed-form 3x3 product change Compose's parameter rows on this machine? (issue 13)

The fused stage composes its geometry maps with ``np.matmul`` on (n, 3, 3) stacks: one BLAS
dgemm per sample (~15 us per product for n = 256 on a 2-core VM), whose order of operations
and use of FMA depend on the OpenBLAS kernel the CPU selects. The native DALI operator
(dali_plugins/native/gpuaug_host.h ``mat_mul``) and the device draws (kernels/fused_draw.cu)
sum each entry left to right without FMA. This script compares, for a few policies and
n = 256 images of 224 x 224, the rows' inverse maps built with np.matmul (what runs today) and
with that closed form (the broadcast formula below, ~7 us for both products), in float64 and
in float32 (what the kernels read), and times both products. CPU only; NumPy and gpuaug.

    OUT=dir python3 tests/gpu/product_bits.py [--calls 300]

Prints one line per policy and writes $OUT/product_bits.json (or ./product_bits.json).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import timeit

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import gpuaug  # noqa: E402
from gpuaug.policy import _fused as F  # noqa: E402


def plain(a, b):
    """a @ b for (n, 3, 3) stacks, each entry a[i, 0] b[0, j] + a[i, 1] b[1, j] + a[i, 2] b[2, j]
    summed left to right (no FMA: NumPy ufuncs round every product and sum)."""
    n = len(a)
    a3 = np.ascontiguousarray(a.reshape(n, 9).T).reshape(3, 3, n)
    b3 = np.ascontiguousarray(b.reshape(n, 9).T).reshape(3, 3, n)
    c = a3[:, 0, None] * b3[None, 0]
    c += a3[:, 1, None] * b3[None, 1]
    c += a3[:, 2, None] * b3[None, 2]
    return np.ascontiguousarray(c.reshape(9, n).T).reshape(n, 3, 3)


def policies():
    return {
        "flip+affine+rrc (kprof targets)": [gpuaug.RandomHorizontalFlip(),
                                            gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                                            gpuaug.RandomResizedCrop(224)],
        "flip+affine(10) (compose_host)": [gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10)],
        "resize+affine(shear,center)+vflip+ccrop": [gpuaug.Resize((40, 36)),
                                                    gpuaug.RandomAffine(20, translate=(0.1, 0.2), scale=(0.8, 1.2),
                                                                        shear=(-5, 5, -3, 3), center=(10.3, 7.1)),
                                                    gpuaug.RandomVerticalFlip(0.3), gpuaug.CenterCrop(30)],
        "rotation+affine": [gpuaug.RandomRotation(30), gpuaug.RandomAffine(10, translate=(0.1, 0.1))],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300)
    a = ap.parse_args(argv)
    n = 256
    sizes = F.uniform_sizes(n, 224, 224)
    print(f"{platform.node()} {platform.machine()} {platform.processor()}, NumPy {np.__version__}")
    rows = {}
    for name, ts in policies().items():
        pol = gpuaug.Compose(ts, seed=0)
        d64 = d32 = total = 0
        for _ in range(a.calls):
            p = pol._sample(n, sizes, None)
            s, mb, mp = sizes, None, None
            for t, v in zip(pol.transforms, p.values):
                mi = t.matrices(v, s)
                s = np.asarray(t.out_sizes(s), np.int64)
                mb = mi if mb is None else np.matmul(mi, mb)
                mp = mi if mp is None else plain(mi, mp)
            ib, ip = F._inverse(mb)[0], F._inverse(mp)[0]
            d64 += int((ib != ip).sum())
            d32 += int((ib.astype(np.float32) != ip.astype(np.float32)).sum())
            total += ib.size
        rows[name] = {"entries": total, "differ_float64": d64, "differ_float32": d32}
        print(f"  {name:42s} {total} entries: differ in float64 {d64}, in float32 {d32}", flush=True)
    g = np.random.default_rng(0)
    x, y = g.normal(size=(n, 3, 3)), g.normal(size=(n, 3, 3))
    t_mm = min(timeit.repeat(lambda: np.matmul(x, y), number=2000, repeat=5)) / 2000 * 1e6
    t_pl = min(timeit.repeat(lambda: plain(x, y), number=2000, repeat=5)) / 2000 * 1e6
    rows["timing_us_per_product"] = {"matmul": t_mm, "plain_with_transposes": t_pl}
    print(f"  one (256, 3, 3) product: np.matmul {t_mm:.1f} us, closed form {t_pl:.1f} us "
          "(with the transposes in and out; on (9, n) entries it needs none)")
    out = os.environ.get("OUT", ".")
    with open(os.path.join(out, "product_bits.json"), "w") as fh:
        json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
