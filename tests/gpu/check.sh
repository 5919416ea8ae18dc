#!/usr/bin/env bash
# The GPU machine's checks, in stages, each with its own time limit, logs under $OUT.
#
#   bash tests/gpu/check.sh STAGE...      (the device tool provides $OUT)
#
# Stages:
#   tests     pytest -m "gpu and not dali and not slow"           -> gpu-tests.log
#   dali      tests/test_dali_gpu.py + test_dali_faults_gpu.py (DALI_DEBUG=1: dali_debug.py first) -> dali-tests.log
#             (each test file in its own process: a DALI abort kills the process)
#   large     pytest tests/test_large_batch.py (2.2 GB batches)     -> large-batch.log
#   sanitize  tests/gpu/sanitize.sh                                 -> sanitize-*.log
#   soak      tests/gpu/soak.py                                     -> soak.log, soak.json
#   bench     tests/gpu/bench_all.sh                                -> bench results
#   dalibench tests/gpu/dali_bench.sh                               -> dali_bench.*
#   sched_e2e tests/gpu/sched_e2e.py (Scheduler staging, folder decode, GPU decode check) -> sched_e2e.*
# The first call on a fresh machine installs the kit (tests/gpu/setup.sh); later calls on the
# same warm machine skip the parts already there.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export OUT
start=$SECONDS
# shellcheck disable=SC1091
source tests/gpu/setup.sh > "$OUT/setup.log" 2>&1
echo "setup: $((SECONDS - start)) s: $(tail -n 2 "$OUT/setup.log" | tr '\n' ' ')"
export BENCH_SETUP=0 SAN_SETUP=0
PT=(python3 -m pytest -q -p no:cacheprovider -rfE)

for stage in "$@"; do
  t0=$SECONDS
  case $stage in
    tests)
      timeout ${TESTS_TIMEOUT:-330} "${PT[@]}" -m "gpu and not dali and not slow" tests > "$OUT/gpu-tests.log" 2>&1
      echo "tests: exit $? in $((SECONDS - t0)) s: $(tail -n 1 "$OUT/gpu-tests.log")"
      grep -E "^(FAILED|ERROR)" "$OUT/gpu-tests.log" | head -n 30 ;;
    dali)
      if [ "${DALI_DEBUG:-0}" = 1 ]; then
        timeout 200 python3 tests/gpu/dali_debug.py > "$OUT/dali-debug.log" 2>&1
        echo "dali debug: exit $? in $((SECONDS - t0)) s"; grep -E "^\[" "$OUT/dali-debug.log"
      fi
      timeout 280 "${PT[@]}" tests/test_dali_gpu.py tests/test_dali_faults_gpu.py > "$OUT/dali-tests.log" 2>&1
      echo "dali tests: exit $? in $((SECONDS - t0)) s: $(tail -n 1 "$OUT/dali-tests.log")"
      grep -E "^(FAILED|ERROR)|Fatal|Abort" "$OUT/dali-tests.log" | head -n 30 ;;
    large)
      timeout 230 "${PT[@]}" tests/test_large_batch.py > "$OUT/large-batch.log" 2>&1
      echo "large: exit $? in $((SECONDS - t0)) s: $(tail -n 1 "$OUT/large-batch.log")"
      grep -E "^(FAILED|ERROR)" "$OUT/large-batch.log" | head -n 30 ;;
    sanitize)
      bash tests/gpu/sanitize.sh ;;
    soak)
      timeout 300 python3 tests/gpu/soak.py --time-limit "${SOAK_LIMIT:-200}" > "$OUT/soak.log" 2>&1
      echo "soak: exit $? in $((SECONDS - t0)) s"; tail -n 15 "$OUT/soak.log" ;;
    bench)
      bash tests/gpu/bench_all.sh ;;
    dalibench)
      bash tests/gpu/dali_bench.sh | tail -n 60 ;;
    sched_e2e)
      timeout 470 python3 tests/gpu/sched_e2e.py > "$OUT/sched_e2e.log" 2>&1
      echo "sched_e2e: exit $? in $((SECONDS - t0)) s"; sed -n '/== summary ==/,$p' "$OUT/sched_e2e.log" ;;
    *)
      echo "unknown stage $stage" ;;
  esac
done
echo "total: $((SECONDS - start)) s"
# The device tool brings back at most 16 files: pack the logs, keep the summaries and results.
(cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz ./*.log ./*.out 2>/dev/null && rm -f ./*.out sanitize-*.log)
