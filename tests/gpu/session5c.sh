#!/usr/bin/env bash
# Session 5, final GPU check (base kit): plans with scratch memory, the host path, Compose
# (CPU-speed rework), the scheduler's chunked staging, and the host measurements.
# OUT=dir bash tests/gpu/session5c.sh [stage...]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT PYTHONUNBUFFERED=1 GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
PT="python3 -m pytest -q -p no:cacheprovider -rfE -W ignore::DeprecationWarning"
for stage in "$@"; do
  t0=$SECONDS
  case $stage in
    plan)     timeout 150 $PT -m gpu tests/test_plan.py tests/test_host_path.py > "$OUT/plan.log" 2>&1 ;;
    compose)  timeout 200 $PT -m gpu tests/test_compose_draws.py tests/test_policy.py tests/test_policy_cuda_host.py \
                tests/test_determinism.py -k "compose or policy or Compose" > "$OUT/compose.log" 2>&1 ;;
    chost)    timeout 120 python3 tests/gpu/compose_host.py > "$OUT/compose_host.log" 2>&1; grep "^==\|check" "$OUT/compose_host.log" ;;
    sched)    timeout 200 $PT tests/test_scheduler_gpu.py tests/test_scheduler_faults_gpu.py tests/test_scheduler_staging.py > "$OUT/sched.log" 2>&1 ;;
    inmem)    BATCHES=${BATCHES:-48} EPOCHS=${EPOCHS:-3} timeout 200 python3 tests/gpu/inmem_prof.py > "$OUT/inmem.log" 2>&1; tail -22 "$OUT/inmem.log" ;;
    split)    timeout 90 python3 tests/gpu/plansplit.py > "$OUT/plansplit.log" 2>&1; cat "$OUT/plansplit.log";
              timeout 60 python3 tests/gpu/hostsplit.py > "$OUT/hostsplit.log" 2>&1; head -3 "$OUT/hostsplit.log" ;;
    hostprof) timeout 150 python3 tests/gpu/hostprof.py > "$OUT/hostprof.log" 2>&1; grep "^==" "$OUT/hostprof.log" ;;
  esac
  rc=$?
  log=$(ls -t "$OUT"/*.log | head -1)
  echo "== $stage: rc $rc in $((SECONDS - t0)) s: $(tail -n 1 "$log")"
  grep -E "^(FAILED|ERROR)" "$log" | head -n 8
done
