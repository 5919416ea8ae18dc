#!/usr/bin/env bash
# On the GPU machine: `gpuaug bench --peers` for every registered op, for the two cases of the
# benchmark issue (256x224x224x3 uint8 and 16x1080x1920x3 uint8) in one process (so kernels
# compile once), with JSON, PNG and logs under $OUT. Finishes within ~7 minutes: a per-case
# time budget (peers are skipped and repeats cut once it is spent) and a hard timeout.
#
# Usage (repository root):  bash tests/gpu/bench_all.sh [OPS...]
#   OUT=dir           where results go (default: ./out; the device tool provides $OUT)
#   BENCH_BUDGET=s    per-case budget in seconds (default 200)
#   BENCH_REPEAT=n    timed calls per row (default 50)
#   BENCH_PYTEST=1    also run `pytest bench/ --benchmark-only` (20 rounds) into $OUT
#   BENCH_CASES="NxHxW ..."  other cases (default "256x224x224 16x1080x1920")
#   BENCH_SETUP=0     skip tests/gpu/setup.sh (already installed; or a dry run without a GPU)
#   BENCH_TAG=name    suffix of the result files, to run op subsets on separate calls, e.g.
#                     BENCH_TAG=a bash tests/gpu/bench_all.sh flip rot90 ...; BENCH_TAG=b ... ; then,
#                     anywhere: gpuaug bench --merge *-a.json *-b.json --json 'bench/results/{date}-{gpu}-{case}.json'
# Carry the kit (.kit/base, .kit/install.sh; DALI parts as make-kit.sh says) for NumPy 2.4
# (numba-cuda 0.30 needs it), kornia and DALI; without it those peers say "not installed".
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
start=$SECONDS

if [ "${BENCH_SETUP:-1}" != "0" ]; then
  # shellcheck disable=SC1091
  source tests/gpu/setup.sh > "$OUT/setup.log" 2>&1
  echo "setup: $((SECONDS - start)) s ($(tail -n 2 "$OUT/setup.log" | tr '\n' ' '))"
fi
python3 - <<'EOF'
import numpy
if tuple(int(v) for v in numpy.__version__.split(".")[:2]) >= (2, 5):
    print(f"WARNING: numpy {numpy.__version__}: numba-cuda 0.30 needs < 2.5, so the numba rows will "
          "fail; carry the kit (.kit/base + .kit/install.sh)")
EOF

python3 -m gpuaug.cli info > "$OUT/info.txt" 2>&1
cat "$OUT/info.txt"

budget=${BENCH_BUDGET:-200}
repeat=${BENCH_REPEAT:-50}
cases=()
for c in ${BENCH_CASES:-256x224x224 16x1080x1920}; do cases+=(--case "$c"); done
timeout --signal=INT --kill-after=20 400 \
  python3 -m gpuaug.cli bench "$@" --peers "${cases[@]}" \
    --dtype uint8 --layout NHWC --repeat "$repeat" --warmup 3 --budget "$budget" --log --quiet \
    --json "$OUT/{date}-{gpu}-{case}${BENCH_TAG:+-$BENCH_TAG}.json" \
    --plot "$OUT/{date}-{gpu}-{case}${BENCH_TAG:+-$BENCH_TAG}.png" \
    > "$OUT/bench.log" 2> "$OUT/bench.err"
rc=$?
echo "gpuaug bench: exit $rc after $((SECONDS - start)) s (table: $OUT/bench.log, per-row log: $OUT/bench.err)"
[ $rc -eq 124 ] && echo "TIMED OUT: the cases written so far are in $OUT; rerun the rest as another part (BENCH_TAG)"
grep -q "time budget" "$OUT"/*.json 2>/dev/null && echo "BUDGET SPENT: some peers were skipped (status 'skipped'); rerun those ops as another part (BENCH_TAG) and merge"
grep -E "^gpuaug: " "$OUT/bench.err" | head -n 20

if [ "${BENCH_PYTEST:-0}" = "1" ]; then
  timeout 240 python3 -m pytest bench/ --benchmark-only -q -p no:cacheprovider --gpuaug-rounds 20 \
    --benchmark-json "$OUT/pytest-bench.json" > "$OUT/pytest-bench.log" 2>&1
  echo "pytest bench: exit $? ($OUT/pytest-bench.log, $OUT/pytest-bench.json)"
fi

# The headline figures, short enough for the end of the output.
python3 - "$OUT" <<'EOF'
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
EOF
echo "total: $((SECONDS - start)) s"
exit $rc
