#!/usr/bin/env bash
# Session 8's last single-GPU call (nvidia-h200, base kit only): the GPU tests of what changed
# this session, then the timings of issues 16 (RandAugment / TrivialAugmentWide kernels),
# 15 (targets vs images alone, kornia) and 13 (Compose host cost). Stages that would start
# after BUDGET_S seconds are skipped and listed.
#   OUT=/some/dir bash tests/gpu/s8_final.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT
source tests/gpu/setup.sh > "$OUT/setup.txt" 2>&1; tail -3 "$OUT/setup.txt"
BUDGET_S=${BUDGET_S:-200}
stage() {  # stage NAME TIMEOUT CMD...: run unless past the budget; log to $OUT/NAME.txt
  local name=$1 t=$2; shift 2
  if [ "$SECONDS" -ge "$BUDGET_S" ]; then echo "SKIPPED (budget, ${SECONDS}s): $name"; return; fi
  local t0=$SECONDS
  timeout "$t" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (rc $?, $((SECONDS - t0)) s): $(tail -1 "$OUT/$name.txt")"
}
stage gpu_tests 120 python3 -m pytest -q -x -p no:cacheprovider ${GPU_TESTS:-tests/test_auto_policies.py}
stage ra_px 90 python3 tests/gpu/ra_px.py
cat "$OUT/ra_px.txt" | grep -E "fused|stats" | cut -c1-120
stage kprof 60 python3 tests/gpu/kprof.py ra ta
grep -E "^== " "$OUT/kprof.txt"; grep -E "^ +[0-9.]+ x +[0-9.]+ us" "$OUT/kprof.txt" | cut -c1-110
stage targets_bench 90 python3 tests/gpu/targets_bench.py --iters 30
grep -vE "^\s*$" "$OUT/targets_bench.txt" | tail -14
stage compose_host 90 python3 tests/gpu/compose_host.py --n 256 --iters 100
tail -8 "$OUT/compose_host.txt"
echo "total ${SECONDS}s"
