#!/usr/bin/env bash
# Session 10 (DALI kit), issue 12: DALI's decoder split (hw_decoder_load) for gpuaug's
# image_folder_pipeline and DALI's built-ins, alternating rounds (tests/gpu/dali_hwload.py).
#   OUT=/some/dir bash tests/gpu/s10e.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-300}
source tests/gpu/stage.sh
nvidia-smi -L
export GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
stage dali_hwload 280 python3 tests/gpu/dali_hwload.py --loads "${LOADS:-default,0.8,0.95}" --rounds "${ROUNDS:-2}" \
  --epochs "${EPOCHS:-5}"
grep -vE "Warning|warn|nvjpeg2k|nvtiff|ERROR|Note:" "$OUT/dali_hwload.txt" | tail -20
echo "total ${SECONDS}s"
