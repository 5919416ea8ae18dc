#!/usr/bin/env bash
# Session 10 (base kit), issue 16: MixUp/CutMix with their records sent ahead on a side stream.
# The mixing GPU tests (the ring behind a busy stream included), mixing_bench (whole call vs
# kernel only vs a copy), and `gpuaug bench --policies`' gpuaug rows.
#   OUT=/some/dir bash tests/gpu/s10g.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-240}
source tests/gpu/stage.sh
nvidia-smi -L
stage gpu_tests 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_mixing.py ${GPU_TESTS:-}
grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -8
stage mixing 120 python3 tests/gpu/mixing_bench.py --iters 100 --out "$OUT"
grep -E "copy|x copy" "$OUT/mixing_bench.txt" | head -30
stage policies 150 python3 tests/gpu/policies_bench.py --iters 40
grep -E "^\| gpuaug \||^- target" "$OUT/policies.txt" | head -30
echo "total ${SECONDS}s"
tar czf /tmp/s10g.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s10g.tgz "$OUT/all.tgz"
