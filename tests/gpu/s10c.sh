#!/usr/bin/env bash
# Session 10's third call (DALI kit), issue 12: the in-memory staging rows with the scheduler's
# events blocking (default) and spinning; fn.crop_mirror_normalize against gpuaug's native one
# inside DALI (marginal cost); then gpuaug.dali.image_folder_pipeline(augment="flip") against
# DALI's built-ins in three alternating e2e rounds (the third with GPUAUG_DALI_NATIVE_PROFILE=1:
# the native operator's host and device ms per batch).
#   OUT=/some/dir bash tests/gpu/s10c.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-400}
source tests/gpu/stage.sh
nvidia-smi -L
export GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
stage inmem_prof 150 env BATCHES=${BATCHES:-48} EPOCHS=${EPOCHS:-3} python3 tests/gpu/inmem_prof.py
grep -vE "Warning|warn" "$OUT/inmem_prof.txt" | tail -22
stage dali_cmn 120 python3 tests/gpu/dali_native_bench.py --rows "identity,crop_mirror_normalize" \
  --executors default,sync --no-profile --iters 40 --out "$OUT/dali_cmn.json"
tail -8 "$OUT/dali_cmn.txt"
r=0
for paths in dali,gpuaug_dali_rrc gpuaug_dali_rrc,dali dali,gpuaug_dali_rrc; do
  r=$((r + 1)); mkdir -p "$OUT/ab$r"
  prof=0; [ $r -eq 3 ] && prof=1
  stage ab$r 120 env GPUAUG_DALI_NATIVE_PROFILE=$prof python3 -m gpuaug.cli bench --e2e --images 4096 --batch 256 \
    --workers 14 --epochs ${AB_EPOCHS:-4} --paths "$paths" --out "$OUT/ab$r"
  grep "^| [Dg]" "$OUT/ab$r/e2e.md"
done
grep "native profile" "$OUT/ab3.txt" | tail -3
echo "total ${SECONDS}s"
tar czf /tmp/s10c.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s10c.tgz "$OUT/all.tgz"
