"""results.md from run.sh's JSON files: per image per thread, targets of issue 19."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(name):
    d = json.load(open(os.path.join(HERE, name)))
    return d, {(r["op"], r["library"]): r for r in d["rows"]}


before_d, before = rows("before.json")
after_d, after = rows("after.json")
par_d, par = rows("after-par.json") if os.path.exists(os.path.join(HERE, "after-par.json")) else (None, {})
n = after_d["config"]["batch"]
ops = after_d["config"]["ops"]
threads = os.cpu_count()


def ms(table, op, lib):
    r = table.get((op, lib))
    return r["ms"] if r and r.get("ms") else None


def cell(v, per=1):
    return "–" if v is None else f"{v:.2f} ms ({v * 1000 / n * per:.0f} µs)"


def why(table, op, lib):
    r = table.get((op, lib))
    if r is None:
        return "not run"
    return f"{r['status']}: {(r.get('reason') or '')[:70]}"


print(f"# CPU twins vs OpenCV and DALI CPU ({after_d['config']['case']}, {after_d['device']['name']}, "
      f"{after_d['created'][:10]})\n")
print("Produced by `run.sh` (commands there); times are the median of 5 calls; in brackets µs per image "
      "per thread. gpuaug before = generic njit twins (`GPUAUG_CPU_FAST=0`), after = the fast CPU kernels "
      "(kernels/numba/cpu_fast), both `GPUAUG_CPU_PARALLEL=0`; OpenCV `setNumThreads(1)`, one call per "
      "image; DALI CPU pipelines with `num_threads=1`, timed as the marginal cost of the op in a "
      "pipeline. Load during the run (2 shared cores): see load.txt.\n")
print("| op | gpuaug before | gpuaug after | speed-up | OpenCV | after / OpenCV throughput (≥ 0.5) | DALI CPU | "
      "after / DALI throughput (≥ 1) | after, all cores |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for op in ops:
    b, a = ms(before, op, "gpuaug"), ms(after, op, "gpuaug")
    cv, da = ms(after, op, "opencv"), ms(after, op, "dali")
    p = ms(par, op, "gpuaug")
    sp = f"{b / a:.1f}x" if a and b else "–"
    rcv = f"{cv / a:.3f} {'MET' if cv / a >= 0.5 else '**MISSED**'}" if a and cv else why(after, op, "opencv")
    rda = f"{da / a:.3f} {'MET' if da / a >= 1 else '**MISSED**'}" if a and da else why(after, op, "dali")
    print(f"| {op} | {cell(b)} | {cell(a)} | {sp} | {cell(cv)} | {rcv} | {cell(da)} | {rda} | "
          f"{cell(p, per=threads)} |")
print(f"\n'after, all cores': GPUAUG_CPU_PARALLEL=1 (the default) on {threads} cores (µs per image per "
      "thread = ms x cores / images).")
print("""
Notes:
- Ratios are throughputs per image per thread: OpenCV ms / gpuaug ms (target >= 0.5) and DALI ms /
  gpuaug ms (target >= 1).
- The ops' benchmark parameters come from each OpSpec's example (per-sample values: flip flags,
  pad sides, resize to half size, random rotations/affines, sigma about 1.5, box 3 or 5, median 3,
  ...); OpenCV gets each image's own values (one call per image), DALI per-sample arguments.
- gpuaug writes into 8 preallocated rotating outputs (their pages touched in the warm-up) and reads
  8 rotating inputs (together over the L3 cache); OpenCV reads the same inputs and allocates each
  output image (glibc hands back the same freed blocks, so its outputs stay in cache); DALI is
  timed as the op's marginal cost in a CPU pipeline with num_threads=1.
- DALI has no CPU median_blur (fn.experimental.median_blur is GPU only).
- resize's example is half size, which takes an exact 2x2-mean path (OpenCV switches to block means
  there too); other sizes run the general bilinear kernel: resize_sizes.py / resize_sizes.txt
  (224 -> 160x120: 0.8-0.9x OpenCV; 224 -> 300x300: 1.1x, over two runs).
- Machine: 2 cores shared with other work; load averages before/after each pass in load.txt.
  Run to run, ratios move by several percent: flip, at 0.535 here, measured 0.496 (missed) in the
  run before this one; it sits at the 0.5 target rather than clearly above it.
""")
