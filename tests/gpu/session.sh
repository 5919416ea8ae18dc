#!/usr/bin/env bash
# One call's worth of checks after the host-path and decode work (about 9 minutes):
# GPU tests of the changed areas, hostprof, the GPU-decode profile, then gpuaug bench --e2e.
#   OUT=... bash tests/gpu/session.sh [tests] [hostprof] [decode] [e2e]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT
export PYTHONUNBUFFERED=1 GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
for stage in "$@"; do
  t0=$SECONDS
  case $stage in
    tests)
      timeout ${TESTS_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu and not slow" \
        tests/test_gather_params.py tests/test_out_overlap.py tests/test_colour.py tests/test_policy.py \
        tests/test_flip.py tests/test_rotate.py tests/test_resized_crop.py tests/test_scheduler_gpu.py \
        tests/test_brightness.py tests/test_color_jitter.py tests/test_normalize.py \
        tests/test_crop_mirror_normalize.py > "$OUT/gpu-tests.log" 2>&1
      echo "tests: exit $? in $((SECONDS - t0)) s: $(tail -n 1 "$OUT/gpu-tests.log")"
      grep -E "^(FAILED|ERROR)" "$OUT/gpu-tests.log" | head -n 20 ;;
    hostprof)
      timeout 200 python3 tests/gpu/hostprof.py > "$OUT/hostprof.txt" 2>&1
      echo "hostprof: exit $? in $((SECONDS - t0)) s"; grep "^==" "$OUT/hostprof.txt" ;;
    decode)
      timeout 150 python3 tests/gpu/gpu_decode_prof.py 2>&1 | grep -v "nvjpeg2k\|nvTIFF\|nvtiff\|Note: If\|B stats" \
        | tee "$OUT/gpu_decode_prof.txt" ;;
    e2e)
      timeout ${E2E_TIMEOUT:-330} python3 -m gpuaug.cli bench --e2e --images "${E2E_IMAGES:-4096}" --batch 256 \
        --workers "${E2E_WORKERS:-14}" --epochs "${E2E_EPOCHS:-3}" \
        --paths "${E2E_PATHS:-dali,gpuaug_dali_rrc,gpuaug_dali,scheduler_cpu,scheduler_gpu,torchvision}" \
        --out "$OUT" > "$OUT/e2e.txt" 2>&1
      echo "e2e: exit $? in $((SECONDS - t0)) s"; [ -f "$OUT/e2e.md" ] && cat "$OUT/e2e.md" || tail -20 "$OUT/e2e.txt" ;;
  esac
done
