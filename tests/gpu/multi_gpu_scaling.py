"""tests/gpu/multi_gpu.sh's scaling table, from the $OUT/scale-<config>-<gpus>.json files its
runs wrote.
"""
import os as _os
import sys as _sys

_sys.path.insert(0, _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "..", ".."))

import json, os
out = os.environ["OUT"]
print("scaling (input pipeline alone, batch per rank %s, images/s summed over ranks):" % os.environ.get("BATCH", 256))
print(f"  {'config':14s} {'1 GPU':>9s} {'2 GPUs':>9s} {'efficiency':>10s}  data-wait % per rank (1 / 2 GPUs)  "
      "epoch check  loader")
for cfg in ("sched-memory", "sched-folder", "dali-folder"):
    r = {}
    for n in (1, 2):
        p = f"{out}/scale-{cfg}-{n}.json"
        if os.path.exists(p):
            r[n] = json.load(open(p))
    a, b = (r[n]["images_per_s"] if n in r else None for n in (1, 2))
    eff = f"{100 * b / (2 * a):.0f}%" if a and b else "-"
    waits = " / ".join(",".join(f"{x['data_wait_pct']:.0f}" for x in r[n]["ranks"]) if n in r else "-" for n in (1, 2))
    checks = "/".join(("ok" if r[n]["check"] and r[n]["check"]["ok"] else "FAILED") if n in r else "-"
                      for n in (1, 2))
    what = (r.get(2) or r.get(1) or {}).get("what", "")
    place = "/".join(str(r[n].get("placement_ok")) if n in r else "-" for n in (1, 2))
    print(f"  {cfg:14s} {a or '-':>9} {b or '-':>9} {eff:>10s}  {waits:32s}  {checks:11s}  {what}; "
          f"contexts only on own GPU: {place}")
print("targets (issue 20): >= 90% from 1 to 2 GPUs for the Scheduler with GPU decode and for DALI")
