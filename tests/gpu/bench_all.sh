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
python3 tests/gpu/numpy_check.py

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
python3 tests/gpu/bench_all_summary.py "$OUT"
echo "total: $((SECONDS - start)) s"
exit $rc
