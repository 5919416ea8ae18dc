#!/usr/bin/env bash
# Session 10 (base kit), issue 16: the policies' GPU tests with one launch per step (the new
# default), kprof of RandAugment(2|3, 9) / TrivialAugmentWide, the fused path beside it
# (unfused), and `gpuaug bench --policies` (no DALI in this call: its rows say unavailable).
#   OUT=/some/dir bash tests/gpu/s10f.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-300}
source tests/gpu/stage.sh
nvidia-smi -L
stage gpu_tests 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_auto_policies.py tests/test_policy_host_rows.py tests/test_mixing.py tests/test_compose_draws.py ${GPU_TESTS:-}
grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -8
stage kprof 120 python3 tests/gpu/kprof.py ra ra3 ta
grep -E "^==|^ +[0-9.]+ x" "$OUT/kprof.txt" | head -40
stage policies 150 python3 tests/gpu/policies_bench.py --iters 40
grep -E "^\| gpuaug \||^- target" "$OUT/policies.txt" | head -30
echo "total ${SECONDS}s"
tar czf /tmp/s10f.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s10f.tgz "$OUT/all.tgz"
