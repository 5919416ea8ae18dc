#!/usr/bin/env bash
# Session 10's single-GPU call with the DALI kit (issue 12, then 16): the end-to-end table with
# DALI's built-ins and torchvision in the same run (every default path, the Scheduler's GPU
# decode in this process and in 4 processes), the ResNet-18 training loop's data wait per
# loader, the in-memory staging path against memcpy / pinned H2D, then `gpuaug bench
# --policies` (DALI auto_aug's marginal cost beside gpuaug's). Writes $OUT/*.txt, $OUT/all.tgz.
#   OUT=/some/dir bash tests/gpu/s10.sh     # BUDGET_S=420: stages not started after it
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-420}
source tests/gpu/stage.sh
nvidia-smi -L; nproc
export GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
mkdir -p "$OUT/e2e"
stage e2e 240 python3 -m gpuaug.cli bench --e2e --images "${E2E_IMAGES:-4096}" --batch 256 \
  --workers "${E2E_WORKERS:-14}" --epochs "${E2E_EPOCHS:-3}" --paths "${E2E_PATHS:-dali,gpuaug_dali_rrc,gpuaug_dali,scheduler_cpu,scheduler_gpu,scheduler_gpu_procs,torchvision}" --out "$OUT/e2e"
[ -f "$OUT/e2e/e2e.md" ] && cat "$OUT/e2e/e2e.md"
stage train_loop 200 python3 examples/train_loop.py --images "${E2E_IMAGES:-4096}" --workers "${E2E_WORKERS:-14}" \
  --loaders "${LOADERS:-dali,gpuaug_dali_rrc,gpuaug_dali,scheduler_gpu_procs,scheduler_gpu,scheduler_cpu,torchvision}" \
  --steps "${TRAIN_STEPS:-30}" --warmup 5 --print-every 0 --json "$OUT/train_loop.json"
grep -A10 "^| loader" "$OUT/train_loop.txt"
stage inmem_prof 150 env BATCHES=${BATCHES:-48} EPOCHS=${EPOCHS:-3} python3 tests/gpu/inmem_prof.py
grep -vE "Warning|warn" "$OUT/inmem_prof.txt" | tail -16
stage policies 150 python3 tests/gpu/policies_bench.py --iters 40
tail -30 "$OUT/policies.txt"
echo "total ${SECONDS}s"
tar czf /tmp/s10.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s10.tgz "$OUT/all.tgz"
