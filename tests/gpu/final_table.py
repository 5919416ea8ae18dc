"""The session's final table from one s15_final.sh output folder: per op, `gpuaug bench`'s device
time at 32 and 256 beside the same-process A/B loop times (new / the session's start), and the
loop / device ratio at 256; then the counts the issue's targets ask about.

    python3 tests/gpu/final_table.py OUT > OUT/table.md
"""
import glob
import json
import os
import sys

d = sys.argv[1]
ab = {n: json.load(open(os.path.join(d, f"ab{n}.json")))["rows"] for n in (32, 256)}
dev = {}
for path in glob.glob(os.path.join(d, "bench_all-*.json")):
    got = json.load(open(path))
    n = got["config"]["batch"] if isinstance(got["config"].get("batch"), int) else int(os.path.basename(path).split("-")[1].split("x")[0])
    for r in got["rows"]:
        if r["library"] == "gpuaug" and r["status"] == "ok":
            dev[(r["op"], n)] = r["ms"] * 1e3
print("| op | 32: device µs | 32: loop µs, new / start | 256: device µs | 256: loop µs, new / start "
      "| 256: loop / device, new (start) |")
print("|---|---:|---:|---:|---:|---:|")
within = {"new": 0, "base": 0}
under30 = {"new": 0, "base": 0}
ops = [op for op in ab[256] if op in ab[32] and (op, 256) in dev]
for op in ops:
    a32, a256 = ab[32][op], ab[256][op]
    d32, d256 = dev.get((op, 32), float("nan")), dev[(op, 256)]
    rn, rb = a256["new_min_us"] / d256, a256["base_min_us"] / d256
    within["new"] += rn <= 1.15
    within["base"] += rb <= 1.15
    under30["new"] += a32["new_min_us"] <= 30
    under30["base"] += a32["base_min_us"] <= 30
    flag = "**" if rn > 1.15 else ""
    print(f"| {op} | {d32:.1f} | {a32['new_min_us']:.1f} / {a32['base_min_us']:.1f} | {d256:.1f} | "
          f"{a256['new_min_us']:.1f} / {a256['base_min_us']:.1f} | {flag}{rn:.2f}{flag} ({rb:.2f}) |")
for op in ab[256]:
    if op not in ops:
        print(f"| {op} |  | {ab[32][op]['new_min_us']:.1f} / {ab[32][op]['base_min_us']:.1f} |  | "
              f"{ab[256][op]['new_min_us']:.1f} / {ab[256][op]['base_min_us']:.1f} |  |")
print(f"\nwithin 1.15x of device time at 256: {within['new']} of {len(ops)} ops (start: {within['base']})")
print(f"loop at or under 30 us at 32: {under30['new']} of {len(ops)} ops (start: {under30['base']})")
