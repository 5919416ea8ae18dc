"""Host cost of boxes, keypoints and masks through a Compose call (issue 15), on the CPU alone:
median us per call.

On the H100 (tests/gpu/kprof.py ``targets``, 256x224x224x3 uint8) the targets cost ~0.05 ms of
device time but ~1.3 ms of host time per call (loop 0.371 ms images alone, 1.669 ms with
boxes, keypoints and masks), so in a training loop their cost is this host time. The rows run
the kprof workload's calls on stand-in CuPy arrays (bench/host_policies.py's: a shape, a dtype
and an address, no memory; kernels do nothing, an upload is one host copy, the device's
constant cache is real), so each row is gpuaug's own Python and NumPy work per call; CuPy's
allocations and the launches themselves come on top on the GPU machine (``allocs`` and
``uploads`` count them per call):

- ``images``: ``policy(x)``;
- ``all`` / ``boxes_kp`` / ``masks``: ``policy(x, boxes=, keypoints=, masks=)`` with the
  targets of kprof (Boxes (n, 50, 4) float32 check=False, Keypoints (n, 17, 2) float32
  check=False, Masks (n, 224, 224) uint8) / boxes and keypoints / masks;
- ``extra.<row>``: the row less ``images``: what the targets add;
- ``pieces``: the targets' host steps of one ``all`` call, timed alone: ``targets_init``
  (PolicyTargets: the containers and their checks), ``stages`` (the stage's composed map and
  output size composed again, :func:`gpuaug.targets._policy._stages`), ``built_stages`` (the
  same taken from the images' stages, what a call does), ``inverse`` (the masks' destination
  -> source map computed again), ``map_stage`` (boxes, keypoints and masks of the stage:
  setup, outputs, upload, launch), ``run`` (PolicyTargets.run as a call runs it: all of the
  stage's target work) and ``run_recompose`` (the same composing the maps again).

    python bench/host_targets.py [--n 256] [--number 300] [--repeat 7] [--only all ...] [--json out.json]
    python bench/host_targets.py --profile all    # a cProfile excerpt of one row

On the GPU machine, device ms / host us / loop ms of the real calls:
``python3 tests/gpu/kprof.py targets``.
"""
from __future__ import annotations

import os
import sys
import types

import numpy as np

import _hostbench as HB  # noqa: E402  (bench/, the script's own folder)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import host_policies as HP  # noqa: E402

SIZE = 224
COUNTS = {"allocs": 0, "uploads": 0}


class _Event:
    done = True

    def record(self, stream=None):
        pass


def install_fakes():
    """host_policies' stand-ins, plus what the targets' GPU paths call on CuPy (and counters
    of allocations and uploads)."""
    HP.install_fakes()
    import gpuaug.kernels._cuda as kc

    cp = sys.modules["cupy"]
    FA = HP.FakeArray

    def counted(f):
        def g(*a, **k):
            COUNTS["allocs"] += 1
            return f(*a, **k)
        return g

    cp.empty = cp.zeros = counted(lambda shape, dtype=np.float32: FA(shape, dtype))
    cp.ones = cp.empty
    cp.empty_like = counted(lambda a: FA(a.shape, a.dtype))
    cp.bool_ = np.bool_
    cp.concatenate = lambda arrs: FA((sum(a.shape[0] for a in arrs),) + tuple(arrs[0].shape[1:]), arrs[0].dtype)
    cp.cuda.Event = lambda **k: _Event()
    up = kc.upload

    def upload(*arrays):
        COUNTS["uploads"] += 1
        return up(*arrays)

    kc.upload = upload
    kc.staging = lambda dev=None: types.SimpleNamespace(upload=lambda arrays: up(*arrays))  # constants' misses
    kc._constants.clear()
    return cp


def workload(n):
    """(images, boxes, keypoints, masks, policy) of kprof's targets workload, on stand-ins."""
    import gpuaug
    from gpuaug.targets import Boxes, Keypoints, Masks

    FA = HP.FakeArray
    x = FA((n, SIZE, SIZE, 3), np.uint8)
    tb = Boxes(FA((n, 50, 4), np.float32), check=False)
    tk = Keypoints(FA((n, 17, 2), np.float32), check=False)
    tm = Masks(FA((n, SIZE, SIZE), np.uint8))
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(),
                          gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                          gpuaug.RandomResizedCrop(SIZE)], seed=0, draws="host")  # the targets path draws on the host
    return x, tb, tk, tm, pol


def cases(n):
    """name -> a zero-argument callable timing one piece for ``n`` samples."""
    install_fakes()
    from gpuaug._batch import as_batch
    from gpuaug.policy.compose import batch_sizes
    from gpuaug.targets import _apply as A
    from gpuaug.targets import _policy as P

    x, tb, tk, tm, pol = workload(n)
    calls = {"images": lambda: pol(x), "all": lambda: pol(x, boxes=tb, keypoints=tk, masks=tm),
             "boxes_kp": lambda: pol(x, boxes=tb, keypoints=tk), "masks": lambda: pol(x, masks=tm)}
    b = as_batch(x, "NHWC")
    sizes = batch_sizes(b)
    params = pol._sample(n, sizes, None)
    (geo, m, out, constant, _), = P._stages(pol, params, "uint8", sizes)
    inv = P._stage_inverse(m)
    pt = P.PolicyTargets(b, sizes, tb, tk, tm)
    built = []
    pol._run(x, b, params, None, "cuda", built)  # the images' stages, as a call hands them on
    pieces = {
        "targets_init": lambda: P.PolicyTargets(b, sizes, tb, tk, tm),
        "stages": lambda: list(P._stages(pol, params, "uint8", sizes)),
        "built_stages": lambda: list(P._built_stages(built, n)),
        "inverse": lambda: P._stage_inverse(m),
        "map_stage": lambda: A.map_stage(tb, tk, tm, m, inv, sizes, out, constant),
        "run": lambda: pt.run(pol, params, "uint8", None, "cuda", built),
        "run_recompose": lambda: pt.run(pol, params, "uint8", None, "cuda"),
    }
    return calls, pieces


def _counts(f):
    COUNTS.update(allocs=0, uploads=0)
    f()
    return dict(COUNTS)


def main(argv=None):
    ap = HB.parser(__doc__, 300)
    ap.add_argument("--profile", help="print a cProfile excerpt of this row instead")
    a = ap.parse_args(argv)
    calls, pieces = cases(a.n)
    if a.profile:
        import cProfile
        import pstats

        f = {**calls, **pieces}[a.profile]
        for _ in range(20):
            f()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(a.number):
            f()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(30)
        return None
    print(f"targets host work, n={a.n}, {SIZE}x{SIZE}, stand-in CuPy; {HB.machine()}")
    rows = {}
    for name, f in list(calls.items()) + [(f"pieces.{k}", v) for k, v in pieces.items()]:
        if a.only and name not in a.only:
            continue
        rows[name] = HB.time_us(f, a.number, a.repeat)  # after a warm-up: the constant cache
        extra = ""
        if name in calls:
            c = _counts(f)
            rows[name].update(c)
            extra = f"  allocs {c['allocs']}, uploads {c['uploads']}"
        print(f"  {name:22s} {rows[name]['median_us']:8.1f} us (best {rows[name]['best_us']:.1f}){extra}", flush=True)
    if "images" in rows:
        for k in ("all", "boxes_kp", "masks"):
            if k in rows:
                d = rows[k]["median_us"] - rows["images"]["median_us"]
                rows[f"extra.{k}"] = {"median_us": d}
                print(f"  {'extra.' + k:22s} {d:8.1f} us")
    HB.write_json(a.json, {"n": a.n, "size": SIZE, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
