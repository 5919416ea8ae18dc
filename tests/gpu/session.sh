#!/usr/bin/env bash
# The GPU checks of a session, by stage (base kit; DALI stages need the DALI kit installed):
#   OUT=dir bash tests/gpu/session.sh stage [stage...]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT PYTHONUNBUFFERED=1 GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
export GPUAUG_CACHE_DIR=${GPUAUG_CACHE_DIR:-/tmp/gcache}  # the native DALI plugin and its compiled kernels
PT="python3 -m pytest -q -p no:cacheprovider -rfE -W ignore::DeprecationWarning"
for stage in "$@"; do
  t0=$SECONDS
  case $stage in
    a-tables)  timeout 330 $PT -m "gpu and not slow" tests/test_bad_input.py tests/test_determinism.py tests/test_colour.py \
               tests/test_properties.py tests/refs > "$OUT/tables.log" 2>&1 ;;
    a-sched)   timeout 200 $PT tests/test_scheduler_gpu.py tests/test_scheduler_faults_gpu.py tests/test_scheduler_staging.py > "$OUT/sched.log" 2>&1 ;;
    a-inmem)   BATCHES=${BATCHES:-48} EPOCHS=${EPOCHS:-3} timeout 240 python3 tests/gpu/inmem_prof.py > "$OUT/inmem.log" 2>&1 ;;
    a-targets) timeout 200 $PT tests/test_targets_gpu.py tests/test_targets_bad_input.py tests/test_targets_safe_crops.py \
               tests/test_targets.py tests/test_targets_cuda_host.py > "$OUT/targets.log" 2>&1 ;;
    a-tbench)  timeout 150 python3 tests/gpu/targets_bench.py > "$OUT/targets_bench.log" 2>&1 ;;
    a-mixing)  timeout 200 $PT tests/test_mixing.py tests/test_auto_policies.py tests/test_bench_policies.py \
               tests/test_bench.py tests/test_warp_affine.py tests/test_rotate.py tests/test_warp_perspective.py \
               tests/test_host_path.py > "$OUT/mixing.log" 2>&1 ;;
    a-benchcli) timeout 120 python3 -m gpuaug.cli bench flip rotate warp_affine --peers --batch 16 --size 64x64 \
               --repeat 5 --quiet > "$OUT/benchcli.log" 2>&1 ;;
    b-plan)     timeout 200 $PT -m gpu tests/test_plan.py tests/test_host_path.py > "$OUT/plan.log" 2>&1 ;;
    b-hostprof) timeout 150 python3 tests/gpu/hostprof.py > "$OUT/hostprof.log" 2>&1; grep "^==" "$OUT/hostprof.log" ;;
    b-hostprof32) mkdir -p "$OUT/n32"; timeout 120 python3 tests/gpu/hostprof.py --n 32 --out "$OUT/n32" > "$OUT/hostprof32.log" 2>&1; grep "^==" "$OUT/hostprof32.log" ;;
    b-micro)    timeout 120 python3 tests/gpu/hostmicro.py > "$OUT/micro.log" 2>&1; tail -12 "$OUT/micro.log" ;;
    b-inmem)    BATCHES=${BATCHES:-48} EPOCHS=${EPOCHS:-3} timeout 200 python3 tests/gpu/inmem_prof.py > "$OUT/inmem.log" 2>&1; tail -30 "$OUT/inmem.log" ;;
    b-tbench)   timeout 150 python3 tests/gpu/targets_bench.py > "$OUT/tbench.log" 2>&1; tail -25 "$OUT/tbench.log" ;;
    b-mixing)   timeout 200 $PT -m gpu tests/test_mixing.py tests/test_auto_policies.py > "$OUT/mixing.log" 2>&1 ;;
    plan)     timeout 150 $PT -m gpu tests/test_plan.py tests/test_host_path.py > "$OUT/plan.log" 2>&1 ;;
    compose)  timeout 200 $PT -m gpu tests/test_compose_draws.py tests/test_policy.py tests/test_policy_cuda_host.py \
                tests/test_determinism.py -k "compose or policy or Compose" > "$OUT/compose.log" 2>&1 ;;
    chost)    timeout 120 python3 tests/gpu/compose_host.py > "$OUT/compose_host.log" 2>&1; grep "^==\|check\|^parts\|(target" "$OUT/compose_host.log" ;;
    sched)    timeout 200 $PT tests/test_scheduler_gpu.py tests/test_scheduler_faults_gpu.py tests/test_scheduler_staging.py > "$OUT/sched.log" 2>&1 ;;
    inmem)    BATCHES=${BATCHES:-48} EPOCHS=${EPOCHS:-3} timeout 200 python3 tests/gpu/inmem_prof.py > "$OUT/inmem.log" 2>&1; tail -22 "$OUT/inmem.log" ;;
    split)    timeout 90 python3 tests/gpu/plansplit.py > "$OUT/plansplit.log" 2>&1; cat "$OUT/plansplit.log";
              for op in rotate brightness; do timeout 60 python3 tests/gpu/hostsplit.py --op $op --calls 1500 > "$OUT/hostsplit-$op.log" 2>&1; head -3 "$OUT/hostsplit-$op.log"; done;
              timeout 60 python3 tests/gpu/hostsplit.py > "$OUT/hostsplit.log" 2>&1; head -3 "$OUT/hostsplit.log" ;;
    hostprof) timeout 150 python3 tests/gpu/hostprof.py > "$OUT/hostprof.log" 2>&1; grep "^==" "$OUT/hostprof.log" ;;
    ops)      timeout 330 $PT -m "gpu and not slow" tests/test_bad_input.py tests/test_determinism.py tests/test_colour.py \
                tests/test_properties.py tests/test_gather_params.py tests/test_host_path.py tests/test_rotate.py tests/test_out_overlap.py \
                > "$OUT/ops.log" 2>&1 ;;
    # DALI stages (the DALI kit installed): the native plugin's build, its tests in two
    # processes at once (uint8 and the rest / the float bit-exact cases), its bench
    dali-build) timeout 300 python3 tests/gpu/dali_native_build.py > "$OUT/dali_native_build.log" 2>&1 ;;
    dali-tests) timeout 450 $PT tests/test_dali_native.py -k "not (bit_exact_against_standalone and not nchw) or uint8" \
                  > "$OUT/dali_native_tests1.log" 2>&1 &
                timeout 450 $PT tests/test_dali_native.py -k "bit_exact_against_standalone and not nchw and not uint8" \
                  > "$OUT/dali_native_tests2.log" 2>&1; wait
                tail -n 1 "$OUT/dali_native_tests1.log"; grep -E "^(FAILED|ERROR)" "$OUT/dali_native_tests1.log" | head -n 8 ;;
    dali-bench) timeout 260 python3 tests/gpu/dali_native_bench.py --budget ${BUDGET:-150} --out "$OUT/dali_native_bench.json" \
                  > "$OUT/dali_native_bench.log" 2>&1; tail -n 45 "$OUT/dali_native_bench.log" ;;
  esac
  rc=$?
  log=$(ls -t "$OUT"/*.log | head -1)
  echo "== $stage: rc $rc in $((SECONDS - t0)) s: $(tail -n 1 "$log")"
  grep -E "^(FAILED|ERROR)" "$log" | head -n 8
done
