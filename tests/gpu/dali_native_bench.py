"""What gpuaug's native DALI operator costs per batch, next to DALI's built-ins and python_function.

Run on the GPU machine (under 3 minutes; --budget caps it)::

    source tests/gpu/setup.sh; python3 tests/gpu/dali_native_bench.py

Batch: 256x224x224x3 uint8 from a GPU ``external_source`` (one device buffer, no_copy). Per
pipeline and executor: ``--warmup`` runs, then ``--iters`` (30) runs each followed by a device
synchronisation; the median ms per batch is reported, and the difference to the identity
pipeline (what the op adds). Executors: DALI's default (async, pipelined), synchronous
(exec_async=False, exec_pipelined=False) and exec_dynamic=True.

Rows: identity; fn.flip vs gd.flip native vs gd.flip python_function (coin flip per sample);
fn.rotate vs gd.rotate native vs python_function (uniform angle); fn.brightness_contrast vs
gd.color_jitter native (brightness + contrast: the mean pre-pass), fn.crop_mirror_normalize vs
gd.crop_mirror_normalize native (float32 CHW out); the chain of four built-ins (flip, rotate,
brightness_contrast, crop_mirror_normalize) vs gd.policy native (the fused Compose: ONE
fn.gpuaug.policy, drawing from the policy's own generator: no DALI random operator) vs
gd.policy native with draws="dali" (one fn.random.uniform more) vs gd.policy python_function
(backend="cuda") vs the same four as native gd ops, and that chain's prefixes (where a chain's
cost goes), and both chains with constant parameters (the native one then has no DALI CPU
operators: the difference to the per-sample chain is what the random draws cost), and gd.flip,
gd.rotate and the chain with GPUAUG_DALI_NATIVE_ARGS=cat (the previous form: the graph
concatenates each parameter row with reshape/cast/constant/cat and checks shapes with fn.shapes,
~8 DALI CPU operators per op, 30 for the chain; the default passes each DataNode as its own
argument input and the operator assembles the rows). Before timing, gd.flip/gd.rotate native and python_function outputs are compared
(bit-exact). Then (--profile, default on) the native chain and the native policy run once more
in a subprocess with GPUAUG_DALI_NATIVE_PROFILE=1: each native operator prints its host ms per
call (RunImpl) and device ms per call (CUDA events around its launches). Writes
$OUT/dali_native_bench.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]
EXECUTORS = {
    "default": {},
    "sync": {"exec_async": False, "exec_pipelined": False},
    "exec_dynamic": {"exec_dynamic": True},
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--budget", type=float, default=240, help="seconds after which the remaining rows are skipped")
    ap.add_argument("--executors", default="default,sync,exec_dynamic")
    ap.add_argument("--rows", default="", help="comma-separated substrings: only rows whose name holds one")
    ap.add_argument("--no-profile", dest="profile", action="store_false")
    ap.add_argument("--profile-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "dali_native_bench.json"))
    a = ap.parse_args(argv)

    import cupy as cp
    import nvidia.dali as dali
    from nvidia.dali import fn, pipeline_def, types

    import gpuaug
    import gpuaug.dali as gd
    from gpuaug.dali import _native

    t_start = time.perf_counter()
    st = _native.status()
    print(f"DALI {dali.__version__}; native operator: {'active' if st['active'] else 'UNAVAILABLE: ' + str(st['reason'])}"
          f" ({st['library']})", flush=True)
    n, s = a.batch, a.size
    batch = cp.asarray(np.random.default_rng(0).integers(0, 256, (n, s, s, 3), dtype=np.uint8))

    def images():
        return fn.external_source(source=lambda: batch, batch=True, device="gpu", layout="HWC", no_copy=True)

    def u(lo, hi):
        return fn.random.uniform(range=[lo, hi])

    def policy_node(x, backend=None, **kw):
        # as gpuaug.dali._bench's policy row
        pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(30),
                              gpuaug.ColorJitter(brightness=0.5, contrast=0.5),
                              gpuaug.Normalize([m / 255 for m in MEAN], [s / 255 for s in STD])], seed=0)
        return gd.policy(x, pol, backend=backend, **kw)

    def policy_py(x):
        return policy_node(x, backend="cuda")

    def native_chain(k):
        def g(x):
            x = gd.flip(x, horizontal=fn.random.coin_flip(), vertical=False, backend="native")
            if k > 1:
                x = gd.rotate(x, angle=u(-15, 15), backend="native")
            if k > 2:
                x = gd.color_jitter(x, brightness=u(0.7, 1.3), contrast=u(0.7, 1.3), backend="native")
            if k > 3:
                x = gd.crop_mirror_normalize(x, mean=MEAN, std=STD, backend="native")
            return x
        return g

    def cat_args(g):  # the graph-side "cat" parameter form (GPUAUG_DALI_NATIVE_ARGS=cat), for comparison
        def h(x):
            old = os.environ.get("GPUAUG_DALI_NATIVE_ARGS")
            os.environ["GPUAUG_DALI_NATIVE_ARGS"] = "cat"
            try:
                return g(x)
            finally:
                if old is None:
                    del os.environ["GPUAUG_DALI_NATIVE_ARGS"]
                else:
                    os.environ["GPUAUG_DALI_NATIVE_ARGS"] = old
        return h

    rows = {
        "identity": lambda x: x,
        "fn.flip (coin flip)": lambda x: fn.flip(x, horizontal=fn.random.coin_flip()),
        "gd.flip native": lambda x: gd.flip(x, horizontal=fn.random.coin_flip(), vertical=False, backend="native"),
        "gd.flip python_function": lambda x: gd.flip(x, horizontal=fn.random.coin_flip(), vertical=False,
                                                     backend="python"),
        "fn.rotate (uniform angle)": lambda x: fn.rotate(x, angle=u(-30, 30), keep_size=True, fill_value=0),
        "gd.rotate native": lambda x: gd.rotate(x, angle=u(-30, 30), backend="native"),
        "gd.rotate python_function": lambda x: gd.rotate(x, angle=u(-30, 30), backend="python"),
        "built-ins: flip + rotate + brightness_contrast + cmn": lambda x: fn.crop_mirror_normalize(
            fn.brightness_contrast(fn.rotate(fn.flip(x, horizontal=fn.random.coin_flip()), angle=u(-15, 15),
                                             keep_size=True, fill_value=0),
                                   brightness=u(0.7, 1.3), contrast=u(0.7, 1.3)),
            mean=MEAN, std=STD, dtype=types.FLOAT, output_layout="CHW"),
        "fn.brightness_contrast": lambda x: fn.brightness_contrast(x, brightness=u(0.7, 1.3), contrast=u(0.7, 1.3)),
        "gd.color_jitter native (b + c)": lambda x: gd.color_jitter(x, brightness=u(0.7, 1.3), contrast=u(0.7, 1.3),
                                                                   backend="native"),
        "fn.crop_mirror_normalize (f32 CHW)": lambda x: fn.crop_mirror_normalize(
            x, mean=MEAN, std=STD, dtype=types.FLOAT, output_layout="CHW"),
        "gd.crop_mirror_normalize native": lambda x: gd.crop_mirror_normalize(x, mean=MEAN, std=STD,
                                                                             backend="native"),
        "gd.policy native (fused)": lambda x: policy_node(x, backend="native"),
        "gd.policy native, draws='dali' (fused)": lambda x: policy_node(x, backend="native", draws="dali"),
        "gd.policy python_function (fused)": policy_py,
        # where a chain's cost goes: the same four native ops with constant parameters (no DALI CPU
        # operators at all: no random draws, reshape/cast/cat of the parameter rows, fn.shapes checks)
        "gd native chain, constants (no CPU ops)": lambda x: gd.crop_mirror_normalize(
            gd.color_jitter(gd.rotate(gd.flip(x, horizontal=True, vertical=False, backend="native"), angle=10.0,
                                      backend="native"), brightness=1.2, contrast=0.8, backend="native"),
            mean=MEAN, std=STD, backend="native"),
        "built-ins chain, constants": lambda x: fn.crop_mirror_normalize(
            fn.brightness_contrast(fn.rotate(fn.flip(x, horizontal=1), angle=10.0, keep_size=True, fill_value=0),
                                   brightness=1.2, contrast=0.8),
            mean=MEAN, std=STD, dtype=types.FLOAT, output_layout="CHW"),
        "gd native: flip + rotate": native_chain(2),
        "gd native: flip + rotate + color_jitter": native_chain(3),
        "gd native: flip + rotate + color_jitter + cmn": native_chain(4),
        "gd.compose native_chain (ONE gpuaug__Chain): flip + rotate + color_jitter + cmn": lambda x: gd.compose([
            ("flip", {"horizontal": fn.random.coin_flip(), "vertical": False}),
            ("rotate", {"angle": u(-15, 15)}),
            ("color_jitter", {"brightness": u(0.7, 1.3), "contrast": u(0.7, 1.3)}),
            ("crop_mirror_normalize", {"mean": MEAN, "std": STD})], backend="native", native_chain=True)(x),
        "gd.flip native, cat args": cat_args(lambda x: gd.flip(x, horizontal=fn.random.coin_flip(), vertical=False,
                                                               backend="native")),
        "gd.rotate native, cat args": cat_args(lambda x: gd.rotate(x, angle=u(-30, 30), backend="native")),
        "gd native: flip + rotate + color_jitter + cmn, cat args": cat_args(native_chain(4)),
    }
    if a.rows:
        keep = [r.strip() for r in a.rows.split(",") if r.strip()]
        rows = {k: v for k, v in rows.items() if k == "identity" or any(r in k for r in keep)}
    executors = {k: EXECUTORS[k] for k in a.executors.split(",") if k}

    def _profile_only():  # child of --profile: a few runs per pipeline, the operators print when destroyed
        for name in ("gd native: flip + rotate + color_jitter + cmn", "gd.policy native (fused)"):
            p = build(rows[name])
            for _ in range(max(60, a.warmup + a.iters)):
                p.run()
            cp.cuda.runtime.deviceSynchronize()
            print(f"-- {name}: {max(60, a.warmup + a.iters)} runs (default executor); operator lines follow", flush=True)
            del p
            import gc

            gc.collect()
        return 0

    def build(graph, **ex):
        def define():
            return graph(images())
        kw = dict(batch_size=n, num_threads=a.threads, device_id=0, seed=1)
        kw.update(ex)
        if not ex:
            kw["prefetch_queue_depth"] = 2
        p = pipeline_def(define, **kw)()
        p.build()
        return p

    if a.profile_only:
        return _profile_only()

    # correctness first: native == python_function on the same draws (same seed, same graph shape)
    checks = {}
    for op, kw in (("flip", {"horizontal": None, "vertical": False}), ("rotate", {"angle": None})):
        outs = {}
        for be in ("native", "python"):
            def g(x, be=be, op=op, kw=kw):
                k = dict(kw)
                k["horizontal" if op == "flip" else "angle"] = (fn.random.coin_flip(seed=11) if op == "flip"
                                                               else fn.random.uniform(range=[-30, 30], seed=12))
                return getattr(gd, op)(x, **k, backend=be)
            p = build(g, exec_async=False, exec_pipelined=False)
            (o,) = p.run()
            outs[be] = np.stack([np.array(t) for t in o.as_cpu()])
            del p
        checks[op] = bool(np.array_equal(outs["native"], outs["python"]))
        print(f"check gd.{op}: native == python_function: {checks[op]}", flush=True)

    res = {"dali": dali.__version__, "batch": [n, s, s, 3], "iters": a.iters, "native": st, "checks": checks,
           "ms": {}}
    for ex_name, ex in executors.items():
        for name, graph in rows.items():
            if time.perf_counter() - t_start > a.budget:
                print("time budget reached; skipping the rest", flush=True)
                break
            try:
                p = build(graph, **ex)
                for _ in range(a.warmup):
                    p.run()
                cp.cuda.runtime.deviceSynchronize()
                ts = []
                for _ in range(a.iters):
                    t0 = time.perf_counter()
                    p.run()
                    cp.cuda.runtime.deviceSynchronize()
                    ts.append((time.perf_counter() - t0) * 1e3)
                del p
                ms = statistics.median(ts)
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"{ex_name} / {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                ms = None
            res["ms"].setdefault(name, {})[ex_name] = ms
            print(f"{ex_name:13s} {name:58s} {ms if ms is None else round(ms, 3)}", flush=True)

    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    base = res["ms"].get("identity", {})
    print(f"\n# ms per batch (median of {a.iters}), {n}x{s}x{s}x3 uint8; in brackets: added over identity")
    print(f"| pipeline | {' | '.join(executors)} |")
    print("|---|" + "---:|" * len(executors))
    for name, per in res["ms"].items():
        cells = []
        for ex in executors:
            v, b = per.get(ex), base.get(ex)
            cells.append("-" if v is None else f"{v:.2f}" + ("" if b is None or name == "identity" else f" ({v - b:+.2f})"))
        print(f"| {name} | {' | '.join(cells)} |")
    # the targets of issue 14, per executor: gd.flip / gd.rotate vs fn.flip / fn.rotate; the fused
    # policy vs 0.6x the built-in chain of four (added over identity)
    def added(name, ex):
        v, b = res["ms"].get(name, {}).get(ex), base.get(ex)
        return None if v is None or b is None else v - b
    for ex in executors:
        pairs = (("gd.flip native", "fn.flip (coin flip)", 1.0), ("gd.rotate native", "fn.rotate (uniform angle)", 1.0),
                 ("gd.policy native (fused)", "built-ins: flip + rotate + brightness_contrast + cmn", 0.6))
        for mine, theirs, k in pairs:
            x, y = added(mine, ex), added(theirs, ex)
            if x is not None and y is not None:
                print(f"target {ex:13s} {mine} {x:+.2f} ms vs {k:g} x {theirs} ({y:+.2f}): "
                      f"{'MET' if x <= k * y else 'not met'}")
    if a.profile:
        import subprocess

        env = dict(os.environ, GPUAUG_DALI_NATIVE_PROFILE="1")
        cmd = [sys.executable, os.path.abspath(__file__), "--profile-only", "--batch", str(n), "--size", str(s),
               "--iters", str(a.iters), "--warmup", str(a.warmup)]
        print("\n# per-operator host / device ms per call (GPUAUG_DALI_NATIVE_PROFILE=1, default executor)",
              flush=True)
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            lines = [ln for ln in (r.stdout + r.stderr).splitlines()
                     if "gpuaug native profile" in ln or ln.startswith("--")]
            print("\n".join(lines) if lines else (r.stdout + r.stderr)[-3000:])
            res["profile"] = lines
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"profile run failed: {e}")
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    print(f"\nSUMMARY: native {'active' if st['active'] else 'unavailable'}; bit-exact checks {checks}; "
          f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
