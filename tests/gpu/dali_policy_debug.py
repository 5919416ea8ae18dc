"""gd.policy through the native operator (gpuaug__Policy) against the policy's own calls, step by
step, on the GPU: the case of tests/test_dali_gpu.py::test_policy_gpu (8 uint8 33 x 47 x 3
images; flip + rotation(20) + ColorJitter(0.3, 0.3) + Normalize(0.5, 0.25), seed 5).

It prints, per configuration and batch:
- the input's statistics and the stage's plan (what the graph sends the operator);
- the parameter rows the operator built (GPUAUG_DALI_POLICY_DUMP: the operator writes its
  draws, descriptor tables and rows as text) against the rows gpuaug's fused stage builds from
  the policy's own draws (gpuaug/policy/_fused.py's build: what policy(x) uploads);
- the output's statistics (min, max, mean, the share of values equal to -2.0, the fill's
  normalised value) and the largest difference from policy(x), call by call.

Configurations, each in its own process (the dump directory is read once per process):
  native        gd.policy(x, pol): the native operator, the policy's own draws (default)
  native_list   the same with the images given as separate arrays (not views of one array)
  native_dali   draws="dali": DALI's fn.random.uniform (differs from policy(x) by design)
  python        backend="cuda": fn.python_function (the reference path)

Usage: python tests/gpu/dali_policy_debug.py   (results also in $OUT/dali_policy_debug.json and
the operator's dumps under $OUT/dumps/<config>/ when $OUT is set). Exit status 1 when the native
default path differs from policy(x).
"""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

N, H, W, C = 8, 33, 47, 3
CALLS = 3
CONFIGS = ("native", "native_list", "native_dali", "python")


def _images():
    return np.random.default_rng(1).integers(0, 256, (N, H, W, C), dtype=np.uint8)


def _policy():
    import gpuaug

    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(20),
                           gpuaug.ColorJitter(0.3, 0.3), gpuaug.Normalize((0.5,) * 3, (0.25,) * 3)], seed=5)


def _stats(a):
    a = np.asarray(a, np.float64)
    return {"min": float(a.min()), "max": float(a.max()), "mean": float(a.mean()),
            "frac_minus2": float(np.mean(a == -2.0))}


def _read_dumps(d):
    """{batch: {"header": str, "dense": bool, "draws": (n, k), "rows": (n, P), "src": (n, 6)}}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(d, "policy_*_*.txt"))):
        b = int(path.rsplit("_", 1)[1].split(".")[0])
        lines = open(path).read().splitlines()
        head = lines[0].split()
        kv = dict(zip(head[::2], head[1::2]))
        draws, rows, src = [], [], []
        for ln in lines[1:]:
            f = ln.split()
            if f[0] == "sample":
                src.append([int(v) for v in f[3:9]])
            elif f[0] == "draws":
                draws.append([float(v) for v in f[1:]])
            elif f[0] == "row":
                rows.append([float(v) for v in f[1:]])
        out[b] = {"header": lines[0], "dense": kv.get("dense") == "1", "sum": kv.get("sum"),
                  "draws": np.array(draws), "rows": np.array(rows, np.float32), "src": np.array(src)}
    return out


def _expected_rows(calls):
    """The rows policy(x) uploads for its first ``calls`` calls (float32, (n, P) each)."""
    from gpuaug._batch import as_batch
    from gpuaug.policy import _fused as F
    from gpuaug.policy.compose import plan_stages

    pol = _policy()
    spec = [s for _, s in plan_stages(pol.transforms, "uint8")]
    assert len(spec) == 1, spec
    out = []
    for _ in range(calls):
        pp = pol.sample(np.tile([H, W], (N, 1)))
        built = F.build(spec[0], pol.transforms, pp.values, as_batch(np.zeros((N, H, W, C), np.uint8)), "NHWC")
        out.append(built.rows.astype(np.float32))
    return out


def child(config, result_path):
    """One configuration: run CALLS batches, compare with policy(x) call by call."""
    import cupy as cp
    from nvidia.dali import fn, pipeline_def

    import gpuaug.dali as gd
    from gpuaug.dali import _native

    x = _images()
    res = {"config": config, "status": _native.status() if config != "python" else None}
    if res["status"] is not None:
        res["status"] = {k: v for k, v in res["status"].items() if k in ("mode", "active", "reason", "library")}
    kw = {"native": {}, "native_list": {}, "native_dali": {"draws": "dali"}, "python": {"backend": "cuda"}}[config]
    samples = ([x[i].copy() for i in range(N)] if config == "native_list" else None)

    @pipeline_def(batch_size=N, num_threads=2, device_id=0, prefetch_queue_depth=1, seed=11)
    def pipe():
        src = (lambda: samples) if samples is not None else (lambda: [x[i] for i in range(N)])
        d = fn.external_source(source=src, batch=True, device="gpu", layout="HWC")
        return gd.policy(d, _policy(), **kw)

    p = pipe()
    p._build_graph()
    res["operators"] = [str(op.spec).splitlines()[0].split()[-1].rstrip(":") for op in p._ops]
    p.build()
    ref = _policy()
    res["batches"] = []
    for it in range(CALLS):
        (out,) = p.run()
        got = np.stack([np.array(t) for t in out.as_cpu()])
        want = cp.asnumpy(ref(cp.asarray(x)))
        b = {"batch": it, "layout": str(out.layout()), "shape": list(got.shape), "dtype": str(got.dtype),
             "out": _stats(got), "ref": _stats(want),
             "max_abs_diff": float(np.abs(got.astype(np.float64) - want).max()) if got.shape == want.shape else None,
             "allclose_1e-5": bool(got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-5)),
             "per_sample": [{"out": _stats(got[i]), "ref": _stats(want[i]),
                             "max_abs_diff": float(np.abs(got[i].astype(np.float64) - want[i]).max())}
                            for i in range(N)] if got.shape == want.shape else None}
        res["batches"].append(b)
    json.dump(res, open(result_path, "w"), indent=1)


def main():
    import gpuaug
    from gpuaug.dali import _native

    out_dir = os.environ.get("OUT")
    work = tempfile.mkdtemp(prefix="gpuaug_policy_debug_")
    x = _images()
    print(f"input: {x.shape} {x.dtype}, min {x.min()} max {x.max()} mean {x.mean():.3f}; per sample means "
          f"{[round(float(v), 2) for v in x.reshape(N, -1).mean(1)]}")
    pol = _policy()
    print("plan:", [str(s) for s in pol.plan()])
    stages = _native.policy_stages(pol, "uint8")
    for k, st in enumerate(stages):
        print(f"stage {k}:", {key: v for key, v in st.items() if key != "source"})
    print("rng_state:", _native.policy_rng_state(pol))
    want_rows = _expected_rows(CALLS)
    print("expected row of sample 0, call 0 (policy(x)'s upload):", want_rows[0][0].tolist())

    summary, ok = {"stages": [{k: v for k, v in st.items()} for st in stages], "configs": {}}, True
    for config in CONFIGS:
        dump = os.path.join(work, config)
        os.makedirs(dump, exist_ok=True)
        env = dict(os.environ, GPUAUG_DALI_POLICY_DUMP=dump)
        rpath = os.path.join(work, config + ".json")
        r = subprocess.run([sys.executable, __file__, "--child", config, rpath], env=env, capture_output=True,
                           text=True, timeout=600)
        print(f"\n===== {config} (exit {r.returncode})")
        if r.returncode != 0 or not os.path.exists(rpath):
            print(r.stdout[-3000:], r.stderr[-6000:])
            summary["configs"][config] = {"error": r.stderr[-6000:]}
            ok = ok and config not in ("native", "native_list")
            continue
        res = json.load(open(rpath))
        print("status:", res["status"])
        print("operators:", res["operators"])
        dumps = _read_dumps(dump)
        res["dumps"] = {}
        for b in res["batches"]:
            it = b["batch"]
            print(f"batch {it}: {b['shape']} {b['dtype']} {b['layout']}; out {b['out']}; ref {b['ref']}; "
                  f"max |diff| {b['max_abs_diff']}; allclose {b['allclose_1e-5']}")
            if b["per_sample"]:
                bad = [i for i, s in enumerate(b["per_sample"]) if s["max_abs_diff"] > 1e-4]
                print(f"  samples differing: {bad}; per-sample frac(-2.0) out "
                      f"{[round(s['out']['frac_minus2'], 3) for s in b['per_sample']]} ref "
                      f"{[round(s['ref']['frac_minus2'], 3) for s in b['per_sample']]}")
            dm = dumps.get(it)
            if dm is not None:
                rows_equal = dm["rows"].shape == want_rows[it].shape and np.array_equal(dm["rows"], want_rows[it])
                diff = (float(np.abs(dm["rows"] - want_rows[it]).max()) if dm["rows"].shape == want_rows[it].shape
                        else None)
                print(f"  operator dump: {dm['header']}")
                print(f"  operator rows == policy(x)'s rows: {rows_equal} (max |diff| {diff}); sample 0 draws "
                      f"{dm['draws'][0].tolist()}")
                print(f"  sample 0 row: {dm['rows'][0].tolist()}")
                print(f"  sample 0 src table: {dm['src'][0].tolist()}")
                res["dumps"][it] = {"header": dm["header"], "rows_equal": bool(rows_equal), "max_row_diff": diff,
                                    "rows": dm["rows"].tolist(), "draws": dm["draws"].tolist()}
        if config in ("native", "native_list", "python"):
            good = all(b["allclose_1e-5"] for b in res["batches"])
            print(f"VERDICT {config}: {'matches policy(x) call by call' if good else 'DIFFERS from policy(x)'}")
            ok = ok and good
        summary["configs"][config] = res
        if out_dir:
            import shutil

            shutil.copytree(dump, os.path.join(out_dir, "dumps", config), dirs_exist_ok=True)
    print(f"\nOVERALL: {'OK' if ok else 'FAILED'} (gpuaug {getattr(gpuaug, '__version__', '?')})")
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        json.dump(summary, open(os.path.join(out_dir, "dali_policy_debug.json"), "w"), indent=1, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
