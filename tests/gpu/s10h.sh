#!/usr/bin/env bash
# Session 10 (DALI kit), issue 16: `gpuaug bench --policies` with DALI (gd.rand_augment /
# trivial_augment / auto_augment against DALI's auto_aug, marginal cost in a pipeline) after the
# policies went to one launch per step and MixUp/CutMix to the side ring; then, when GPU_TESTS
# names test files, those GPU tests; when OPS names ops, `gpuaug bench OPS --peers` (issue 13).
#   OUT=/some/dir bash tests/gpu/s10h.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-240}
source tests/gpu/stage.sh
nvidia-smi -L
stage policies 150 python3 tests/gpu/policies_bench.py --iters 60
grep -E "^\| (gpuaug|dali|gpuaug.dali) \||^- target" "$OUT/policies.txt" | head -40
if [ -n "${GPU_TESTS:-}" ]; then
  stage gpu_tests 120 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS
  grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -8
fi
if [ -n "${OPS:-}" ]; then  # issue 13's per-op rows: device ms, host us, loop ms, torchvision beside
  stage bench_ops 150 python3 -m gpuaug.cli bench $OPS --peers --libraries torchvision --budget 100 --quiet \
    --json "$OUT/bench_ops.json"
  grep -vE "^\s*$" "$OUT/bench_ops.txt" | tail -30
fi
echo "total ${SECONDS}s"
tar czf /tmp/s10h.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s10h.tgz "$OUT/all.tgz"
