"""The headline figures of tests/gpu/bench_all.sh's op bench documents:

    python3 tests/gpu/bench_all_summary.py OUT_DIR
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "..", ".."))

import glob, json, sys
from gpuaug import bench
for path in sorted(glob.glob(f"{sys.argv[1]}/*.json")):
    if path.endswith("pytest-bench.json"):
        continue
    doc = json.load(open(path))
    c = doc["ceilings"]
    errs = bench.validate(doc)
    print(f"\n== {doc['config']['case']} on {doc['device']['name']} ({doc['created']}), "
          f"{doc['elapsed_s']:.0f} s, {'valid' if not errs else 'INVALID: ' + errs[0]}")
    print("copy 2x%s GiB %s GB/s; H2D pinned %s GB/s; D2H pinned %s GB/s; H2D pageable %s GB/s" % tuple(
        bench._num(v) for v in ((c["copy_large"] or {}).get("bytes", 0) / 2 / 2**30,
                                (c["copy_large"] or {}).get("gbps"), (c["h2d_pinned"] or {}).get("gbps"),
                                (c["d2h_pinned"] or {}).get("gbps"), (c["h2d_pageable"] or {}).get("gbps"))))
    print(f"{'op':22s} {'best':6s} {'ms':>8s} {'GB/s':>7s} {'%copy':>6s} {'numba ms':>9s}  {'fastest peer':34s} {'ms':>8s} {'x':>7s}")
    for s in doc["summary"]:
        nb = [r for r in doc["rows"] if r["op"] == s["op"] and r["variant"] == "numba" and r["library"] == "gpuaug"]
        bad = [r for r in doc["rows"] if r["op"] == s["op"] and r["library"] == "gpuaug" and
               (r["status"] != "ok" or r["check"] == "fail")]
        flag = "  " + "; ".join(f"{r['variant']}: {r['status'] if r['status'] != 'ok' else 'CHECK FAIL'}"
                                for r in bad) if bad else ""
        print(f"{s['op'][:22]:22s} {(s['gpuaug_variant'] or '-'):6s} {bench._num(s['gpuaug_ms']):>8s} "
              f"{bench._num(s['gpuaug_gbps']):>7s} {bench._num(s['pct_of_copy']):>6s} "
              f"{bench._num(nb[0]['ms'] if nb else None):>9s}  {(s['fastest_peer'] or '-')[:34]:34s} "
              f"{bench._num(s['fastest_peer_ms']):>8s} {bench._num(s['speedup_over_fastest_peer'], 'x'):>7s}{flag}")
