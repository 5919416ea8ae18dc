#!/usr/bin/env bash
# End to end on the GPU machine (issue 12): a JPEG folder to RRC 224 + flip + normalize float32
# NCHW batches through every path, then the ResNet-18 training example. Under 8 minutes.
#
#   OUT=/some/dir bash tests/gpu/e2e.sh
#
# 1. gpuaug.dali.image_folder_pipeline / torch_loader GPU tests (tests/test_dali_gpu.py -k folder),
#    and the mixed-decode pipeline against the CPU one with the same seed (validation, flip, default).
# 2. `gpuaug bench --e2e` on a generated folder of 4,096 JPEGs (8 classes, ~300-640 px, ~50 KB),
#    batch 256, 14 workers: DALI built-ins, gpuaug DALI pipeline (RRC+flip, default policy),
#    Scheduler CPU (processes, threads) / GPU decode, torchvision DataLoader, and dali_slice (gpuaug's
#    graph ending in DALI's crop_mirror_normalize) -> $OUT/e2e.{json,md,png}, log e2e.txt.
# 3. examples/train_loop.py: ResNet-18, 5 + 30 steps per loader -> $OUT/train_loop.{txt,json}.
# Knobs (environment): E2E_IMAGES=4096 E2E_WORKERS=14 E2E_EPOCHS=3 TRAIN_STEPS=30,
# E2E_PATHS=dali,gpuaug_dali_rrc,... (default: every path plus dali_slice).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export OUT
source tests/gpu/setup.sh
python3 -c "import nvidia.dali as d, torch, torchvision; print('DALI', d.__version__, 'torch', torch.__version__, 'torchvision', torchvision.__version__)"
python3 -c "import nvidia.nvimgcodec as n; print('nvImageCodec', getattr(n, '__version__', '?'))" 2>/dev/null \
  || echo "nvImageCodec: not importable (the Scheduler GPU-decode row will say unavailable)"
export GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
T0=$SECONDS

echo "== 1. image_folder_pipeline GPU tests"
timeout 120 python3 -m pytest -q tests/test_dali_gpu.py -k "folder_pipeline or torch_loader" -rs \
  -p no:cacheprovider 2>&1 | tee "$OUT/e2e_dali_tests.txt" | tail -5

echo "== 1b. the mixed-decode pipeline against the same pipeline on the CPU (same seed: same boxes, flips)"
timeout 120 python3 tests/gpu/e2e_check.py 2>&1 | tee "$OUT/e2e_check.txt"

echo "== 2. gpuaug bench --e2e  [$((SECONDS - T0)) s]"
# dali_slice: gpuaug's graph with DALI's own crop_mirror_normalize (the python_function's cost)
E2E_PATHS=${E2E_PATHS:-dali,dali_slice,gpuaug_dali_rrc,gpuaug_dali,scheduler_cpu,scheduler_cpu_threads,scheduler_gpu,torchvision}
timeout 330 python3 -m gpuaug.cli bench --e2e --images "${E2E_IMAGES:-4096}" --batch 256 \
  --workers "${E2E_WORKERS:-14}" --epochs "${E2E_EPOCHS:-3}" --paths "$E2E_PATHS" --out "$OUT" 2>&1 \
  | tee "$OUT/e2e.txt"
echo "bench exit: ${PIPESTATUS[0]}"

echo "== 3. examples/train_loop.py  [$((SECONDS - T0)) s]"
timeout 170 python3 examples/train_loop.py --images "${E2E_IMAGES:-4096}" --workers "${E2E_WORKERS:-14}" \
  --steps "${TRAIN_STEPS:-30}" --warmup 5 --json "$OUT/train_loop.json" 2>&1 | tee "$OUT/train_loop.txt"
echo "train_loop exit: ${PIPESTATUS[0]}"

echo
echo "== summary  [$((SECONDS - T0)) s]"
tail -3 "$OUT/e2e_dali_tests.txt"
grep -E "PASS|FAIL" "$OUT/e2e_check.txt"
[ -f "$OUT/e2e.md" ] && cat "$OUT/e2e.md"
echo
grep -A12 "^| loader" "$OUT/train_loop.txt" || tail -12 "$OUT/train_loop.txt"
ls -la "$OUT"
