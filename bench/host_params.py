"""Host cost of the op-side parameter maths (issue 13), on the CPU alone: median us per call.

What an op does on the host before its launch, with per-sample host arrays for 256 samples:
argument checks, per-sample broadcasting, the parameter matrix. Nothing is allocated on or
launched to a GPU: each ``*_op`` row runs the op through :func:`gpuaug._run.describe` (which
returns at run()'s door), the other rows call the internal builders directly. NumPy only.

Rows:

- ``flip_op``, ``rotate_op``, ``brightness_op``: the whole op up to run();
- ``per_sample_*``: one per-sample column (flags, angles, factors with a low bound);
- ``rotation_inverse``: rotate's (N, 6) inverse maps from N angles;
- ``params_matrix``: the warp's (N, 2 + 6 + C) rows from those maps and a scalar fill;
- ``flip_matrix``: flip's (N, 2) matrix from a bool array and False (its per_sample calls included);
- ``brightness_matrix``: brightness's (N, 2) matrix from its checked factor column.

    python bench/host_params.py [--n 256] [--number 2000] [--repeat 7] [--json out.json]
"""
from __future__ import annotations


import numpy as np

import _hostbench as HB  # noqa: E402  (bench/, the script's own folder)


def cases(n):
    """name -> a zero-argument callable timing one piece for ``n`` samples."""
    import gpuaug
    from gpuaug._batch import as_batch
    from gpuaug._params import column_stack, per_sample
    from gpuaug._run import describe
    from gpuaug.ops import _colour, _warp
    from gpuaug.ops import brightness as br
    from gpuaug.ops import flip as fl

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8)
    b = as_batch(x, "NHWC")
    flags = rng.random(n) < 0.5
    angles = rng.uniform(-30, 30, n)
    factors = rng.uniform(0.8, 1.2, n)
    inv = _warp.rotation_inverse(b, angles, None, 1.0)
    ff = per_sample(factors, n, "factor", low=0)
    flip_f, rotate_f, bright_f = (gpuaug.registry[k].func for k in ("flip", "rotate", "brightness"))
    if hasattr(fl, "flip_params"):  # the raw flags (bool array, False), as flip() passes them
        flip_matrix = lambda: fl.flip_params(flags, False, n)  # noqa: E731
    else:  # before flip_params: per_sample twice, column_stack
        flip_matrix = lambda: column_stack([per_sample(flags, n, "horizontal", boolean=True),  # noqa: E731
                                            per_sample(False, n, "vertical", boolean=True)], n)
    limits = br.SPECS[0].limits("factor")
    return {
        "flip_op": lambda: describe(flip_f, x, horizontal=flags),
        "rotate_op": lambda: describe(rotate_f, x, angle=angles),
        "brightness_op": lambda: describe(bright_f, x, factor=factors),
        "per_sample_flags": lambda: per_sample(flags, n, "horizontal", boolean=True),
        "per_sample_angles": lambda: per_sample(angles, n, "angle"),
        "per_sample_factors": lambda: per_sample(factors, n, "factor", **limits),
        "rotation_inverse": lambda: _warp.rotation_inverse(b, angles, None, 1.0),
        "params_matrix": lambda: _warp.params_matrix(b, 1, 0, inv, 0),
        "flip_matrix": flip_matrix,
        "brightness_matrix": lambda: column_stack([ff, _colour.maxv_column(b)], n),
    }


def main(argv=None):
    ap = HB.parser(__doc__, 2000)
    a = ap.parse_args(argv)
    rows = {}
    print(f"host parameter maths, n={a.n}, {HB.machine()}")
    for name, f in cases(a.n).items():
        if a.only and name not in a.only:
            continue
        rows[name] = HB.time_us(f, a.number, a.repeat)
        print(f"  {name:22s} {rows[name]['median_us']:8.2f} us (best {rows[name]['best_us']:.2f})", flush=True)
    HB.write_json(a.json, {"n": a.n, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
