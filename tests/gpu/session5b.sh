#!/usr/bin/env bash
# Session 5, GPU check B (base kit): launch plans and the host path, then the measurements of
# this session's helpers' work that need no DALI. OUT=dir bash tests/gpu/session5b.sh [stage...]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT PYTHONUNBUFFERED=1 GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
PT="python3 -m pytest -q -p no:cacheprovider -rfE -W ignore::DeprecationWarning"
for stage in "$@"; do
  t0=$SECONDS
  case $stage in
    plan)     timeout 200 $PT -m gpu tests/test_plan.py tests/test_host_path.py > "$OUT/plan.log" 2>&1 ;;
    hostprof) timeout 150 python3 tests/gpu/hostprof.py > "$OUT/hostprof.log" 2>&1; grep "^==" "$OUT/hostprof.log" ;;
    hostprof32) mkdir -p "$OUT/n32"; timeout 120 python3 tests/gpu/hostprof.py --n 32 --out "$OUT/n32" > "$OUT/hostprof32.log" 2>&1; grep "^==" "$OUT/hostprof32.log" ;;
    micro)    timeout 120 python3 tests/gpu/hostmicro.py > "$OUT/micro.log" 2>&1; tail -12 "$OUT/micro.log" ;;
    inmem)    BATCHES=${BATCHES:-48} EPOCHS=${EPOCHS:-3} timeout 200 python3 tests/gpu/inmem_prof.py > "$OUT/inmem.log" 2>&1; tail -30 "$OUT/inmem.log" ;;
    tbench)   timeout 150 python3 tests/gpu/targets_bench.py > "$OUT/tbench.log" 2>&1; tail -25 "$OUT/tbench.log" ;;
    mixing)   timeout 200 $PT -m gpu tests/test_mixing.py tests/test_auto_policies.py > "$OUT/mixing.log" 2>&1 ;;
  esac
  rc=$?
  log=$(ls -t "$OUT"/*.log | head -1)
  echo "== $stage: rc $rc in $((SECONDS - t0)) s: $(tail -n 1 "$log")"
  grep -E "^(FAILED|ERROR)" "$log" | head -n 8
done
