"""Bench: gpuaug's automatic policies and mixing against torchvision, kornia and DALI's auto_aug
on one 256x224x224x3 uint8 NHWC batch: ``gpuaug bench --policies`` (gpuaug/bench/policies.py),
plus two diagnostic rows (RandAugment(2, 9)'s drawn rows through the fused launches and
through one launch per step, no draws).

    OUT=dir python3 tests/gpu/policies_bench.py [--n 256] [--size 224] [--iters 50] [--warmup 10]

Prints the table (checks, targets, what was not measured); writes $OUT/policies.json and
$OUT/policies.md when OUT is set. Exit status 1 if the document does not validate (a failed
check included).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from gpuaug.bench import policies  # noqa: E402


def fused_rows(doc, n, size, iters, warmup):
    """RandAugment(2, 9) rows, no draws: the default path (``STEPS_PER_LAUNCH`` steps a launch:
    1, gpuaug_autoaug_apply after compacted statistics), the fused passes (2 steps a launch) and
    the first step-by-step path (``fused=False``: statistics of every sample)."""
    import cupy as cp

    import gpuaug
    from gpuaug.bench import GpuClock
    from gpuaug.policy import auto as A

    x = cp.asarray(cp.random.randint(0, 256, (n, size, size, 3), dtype=cp.uint8))
    p = gpuaug.RandAugment(2, 9, seed=0).draw(n, (size, size))
    steps = A.step_rows(p.ops.T.ravel(), p.magnitudes.T.ravel(), size, size).reshape(2, n, -1)
    clock = GpuClock()
    for variant, fused, per in (("drawn rows, default path (a launch per step)", True, A.STEPS_PER_LAUNCH),
                                ("drawn rows, fused passes (STEPS_PER_LAUNCH = 2)", True, 2),
                                ("drawn rows, reference step path (fused=False)", False, A.STEPS_PER_LAUNCH)):
        def run(fused=fused, per=per):
            old, A.STEPS_PER_LAUNCH = A.STEPS_PER_LAUNCH, per
            try:
                return A._run_cuda(x, steps, None, None, fused)
            finally:
                A.STEPS_PER_LAUNCH = old
        t = clock.time(run, iters, warmup)
        doc["rows"].append(policies._row("gpuaug", "RandAugment(2, 9)", variant, t, note="no draws"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()
    doc = policies.run(args.n, args.size, args.iters, args.warmup, device="gpu",
                       log=lambda m: print(m, file=sys.stderr, flush=True))
    fused_rows(doc, args.n, args.size, args.iters, args.warmup)
    print(policies.format_table(doc))
    problems = policies.validate(doc)
    for p in problems:
        print(f"PROBLEM: {p}")
    out = os.environ.get("OUT")
    if out:
        for path in policies.write(doc, out):
            print(f"wrote {path}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
