#!/usr/bin/env bash
# Session 10's second call (DALI kit): the Scheduler's GPU decode in processes now decodes the
# next epoch's first batches ahead (issue 12's training-loop data wait). The process-decode GPU
# tests, the training loop (per-step waits in train_loop.json) with DALI's built-ins beside,
# the e2e rows DALI built-ins / gpuaug's DALI pipeline (twice each, alternating) / Scheduler GPU
# decode in processes / torchvision, then MixUp/CutMix against a copy (issue 16).
#   OUT=/some/dir bash tests/gpu/s10b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-420}
source tests/gpu/stage.sh
nvidia-smi -L
export GPUAUG_CACHE=${GPUAUG_CACHE:-/tmp/gpuaug-cache}
stage decode_tests 120 python3 -m pytest -q -p no:cacheprovider tests/test_scheduler_decode.py -rs
stage train_loop 200 python3 examples/train_loop.py --images 4096 --workers 14 \
  --loaders "${LOADERS:-dali,gpuaug_dali_rrc,scheduler_gpu_procs}" --steps "${TRAIN_STEPS:-48}" --warmup 5 \
  --print-every 0 --json "$OUT/train_loop.json"
grep -A6 "^| loader" "$OUT/train_loop.txt"
python3 -c "import json; [print(r['loader'], r.get('waits_ms')) for r in json.load(open('$OUT/train_loop.json'))['results']]"
for r in 1 2; do
  mkdir -p "$OUT/e2e$r"
  stage e2e$r 150 python3 -m gpuaug.cli bench --e2e --images 4096 --batch 256 --workers 14 --epochs 3 \
    --paths "dali,gpuaug_dali_rrc,scheduler_gpu_procs${E2E_EXTRA:-,torchvision}" --out "$OUT/e2e$r"
  [ -f "$OUT/e2e$r/e2e.md" ] && grep "^|" "$OUT/e2e$r/e2e.md"
done
stage mixing 120 python3 tests/gpu/mixing_bench.py --iters 100 --out "$OUT"
grep -E "copy|x copy" "$OUT/mixing.txt" "$OUT/mixing_bench.txt" | head -30
echo "total ${SECONDS}s"
tar czf /tmp/s10b.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s10b.tgz "$OUT/all.tgz"
