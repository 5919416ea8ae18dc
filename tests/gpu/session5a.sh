#!/usr/bin/env bash
# Session 5, GPU check A (no DALI kit needed): the GPU tests and scripts of this session's
# helpers' work. OUT=dir bash tests/gpu/session5a.sh [stage...]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT PYTHONUNBUFFERED=1 GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
PT="python3 -m pytest -q -p no:cacheprovider -rfE -W ignore::DeprecationWarning"
for stage in "$@"; do
  t0=$SECONDS
  case $stage in
    tables)  timeout 330 $PT -m "gpu and not slow" tests/test_bad_input.py tests/test_determinism.py tests/test_colour.py \
               tests/test_properties.py tests/refs > "$OUT/tables.log" 2>&1 ;;
    sched)   timeout 200 $PT tests/test_scheduler_gpu.py tests/test_scheduler_faults_gpu.py tests/test_scheduler_staging.py > "$OUT/sched.log" 2>&1 ;;
    inmem)   BATCHES=${BATCHES:-48} EPOCHS=${EPOCHS:-3} timeout 240 python3 tests/gpu/inmem_prof.py > "$OUT/inmem.log" 2>&1 ;;
    targets) timeout 200 $PT tests/test_targets_gpu.py tests/test_targets_bad_input.py tests/test_targets_safe_crops.py \
               tests/test_targets.py tests/test_targets_cuda_host.py > "$OUT/targets.log" 2>&1 ;;
    tbench)  timeout 150 python3 tests/gpu/targets_bench.py > "$OUT/targets_bench.log" 2>&1 ;;
    mixing)  timeout 200 $PT tests/test_mixing.py tests/test_auto_policies.py tests/test_bench_policies.py \
               tests/test_bench.py tests/test_warp_affine.py tests/test_rotate.py tests/test_warp_perspective.py \
               tests/test_host_path.py > "$OUT/mixing.log" 2>&1 ;;
    benchcli) timeout 120 python3 -m gpuaug.cli bench flip rotate warp_affine --peers --batch 16 --size 64x64 \
               --repeat 5 --quiet > "$OUT/benchcli.log" 2>&1 ;;
  esac
  rc=$?
  log=$(ls -t "$OUT"/*.log | head -1)
  echo "== $stage: rc $rc in $((SECONDS - t0)) s: $(tail -n 1 "$log")"
  grep -E "^(FAILED|ERROR)" "$log" | head -n 8
done
