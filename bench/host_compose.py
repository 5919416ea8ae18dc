"""Host cost of a Compose call's draws and parameter rows (issues 13 and 12), on the CPU alone.

The policy of tests/gpu/kprof.py's ``targets`` workload and of a training loader (issue 12):
``Compose([RandomHorizontalFlip(), RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
RandomResizedCrop(224)])`` with host draws, for n = 256 images of 224 x 224. Nothing is
allocated on or launched to a GPU: the rows time the pieces a call runs on the host before its
launch, by calling them directly. NumPy only (plus Numba for ``compose3_cpu_tiny``).

Rows (median and best us per call):

- ``draw``: ``Compose._sample`` (the three transforms' draws, PolicyParams);
- ``flip_sample``, ``affine_sample``, ``rrc_sample``: each transform's ``sample`` as Compose calls
  it (sizes an (n, 2) int64 array);
- ``resized_crop_boxes``: the public, checked ``gpuaug.random.resized_crop_boxes``;
- ``perspective_corners``, ``erasing_boxes``, ``crop_offsets``: the other samplers with integer
  draws (RandomPerspective, RandomErasing, RandomCrop(200, padding=4));
- ``build``: ``policy._fused.build`` of the stage (its memoised template: ``_build_fast``);
- ``flip_matrices``, ``affine_matrices``, ``rrc_matrices``: each transform's (n, 3, 3) maps;
- ``compose_maps``: the two matmuls that fold them; ``inverse``: ``_fused._inverse``;
  ``integer_maps``: ``_fused._integer_maps``;
- ``draw_build``: ``draw`` then ``build``, the host work of a call before allocate/launch;
- ``compose3_cpu_tiny``: the same policy (RandomResizedCrop(4)) called on an (8, 4, 4, 3) uint8
  NumPy batch, backend="cpu" (the whole call, kernel included: a few us).

    python bench/host_compose.py [--n 256] [--size 224] [--number 1000] [--repeat 7] [--only ROW ...]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import timeit

import numpy as np


def policy(size):
    import gpuaug

    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(),
                           gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                           gpuaug.RandomResizedCrop(size)], seed=0)


def cases(n, size):
    """name -> a zero-argument callable timing one piece for ``n`` images of ``size`` x ``size``."""
    from gpuaug import random as R
    from gpuaug._batch import as_batch
    from gpuaug.policy import _fused as F
    from gpuaug.policy.compose import batch_sizes

    pol = policy(size)
    # a zero-strided batch of the right shape: as_batch only reads its shape and dtype here
    x = np.lib.stride_tricks.as_strided(np.zeros(3, np.uint8), (n, size, size, 3), (0, 0, 0, 1))
    b = as_batch(x, "NHWC")
    sizes = batch_sizes(b)
    (kind, spec), = pol._items("uint8")
    flip, aff, rrc = pol.transforms
    rng = np.random.default_rng(1)
    p = pol._sample(n, sizes, None)
    F.build(spec, pol.transforms, p.values, b, "NHWC")  # the template
    fv, av, rv = p.values
    mf = flip.matrices(fv, sizes)
    ma = aff.matrices(av, sizes)
    mr = rrc.matrices(rv, sizes)
    m = np.matmul(mr, np.matmul(ma, mf))
    inv, _ = F._inverse(m)

    def draw_build():
        q = pol._sample(n, sizes, None)
        return F.build(spec, pol.transforms, q.values, b, "NHWC")

    tiny = policy(4)
    xt = np.random.default_rng(0).integers(0, 256, (8, 4, 4, 3), dtype=np.uint8)
    return {
        "draw": lambda: pol._sample(n, sizes, None),
        "flip_sample": lambda: flip.sample(rng, n, sizes),
        "affine_sample": lambda: aff.sample(rng, n, sizes),
        "rrc_sample": lambda: rrc.sample(rng, n, sizes),
        "resized_crop_boxes": lambda: R.resized_crop_boxes(rng, sizes, rrc.scale, rrc.ratio),
        "perspective_corners": lambda: R.perspective_corners(rng, sizes, 0.5),
        "erasing_boxes": lambda: R.erasing_boxes(rng, sizes),
        "crop_offsets": lambda: R.crop_offsets(rng, sizes, (200, 200), (4, 4, 4, 4)),
        "build": lambda: F.build(spec, pol.transforms, p.values, b, "NHWC"),
        "flip_matrices": lambda: flip.matrices(fv, sizes),
        "affine_matrices": lambda: aff.matrices(av, sizes),
        "rrc_matrices": lambda: rrc.matrices(rv, sizes),
        "compose_maps": lambda: np.matmul(mr, np.matmul(ma, mf)),
        "inverse": lambda: F._inverse(m),
        "integer_maps": lambda: F._integer_maps(inv),
        "draw_build": draw_build,
        "compose3_cpu_tiny": lambda: tiny(xt, backend="cpu"),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--number", type=int, default=1000, help="calls per timing")
    ap.add_argument("--repeat", type=int, default=7, help="timings per row")
    ap.add_argument("--only", nargs="*", help="row names")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    rows = {}
    print(f"Compose host draws and rows, n={a.n}, {a.size}x{a.size}, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, NumPy {np.__version__}")
    for name, f in cases(a.n, a.size).items():
        if a.only and name not in a.only:
            continue
        for _ in range(20):
            f()  # warm-up: imports, memos, compiles
        ts = [t / a.number * 1e6 for t in timeit.repeat(f, number=a.number, repeat=a.repeat)]
        rows[name] = {"median_us": statistics.median(ts), "best_us": min(ts)}
        print(f"  {name:20s} {rows[name]['median_us']:8.2f} us (best {rows[name]['best_us']:.2f})", flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"n": a.n, "size": a.size, "rows": rows}, fh, indent=1)
    return rows


if __name__ == "__main__":
    main()
