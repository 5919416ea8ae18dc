#!/usr/bin/env bash
# Session 9, second single-GPU call (nvidia-h200, base kit): issue 16's statistics launches
# over the reducing samples only (gpuaug.policy.auto.COMPACT_STATS) against a grid row per
# sample, in the same process: the policies' GPU tests (bit-exact against the NumPy twins),
# kprof ra ra3 ta (device / host / loop and per-kernel times, both ways), ra_px (per launch).
#   OUT=/some/dir bash tests/gpu/s9b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-200}
source tests/gpu/stage.sh
stage gpu_tests 120 python3 -m pytest -q -m gpu -p no:cacheprovider ${GPU_TESTS:-tests/test_auto_policies.py tests/test_mixing.py tests/test_policy_host_rows.py}
grep -E "FAILED|Error" "$OUT/gpu_tests.txt" | head -10
stage kprof 120 python3 tests/gpu/kprof.py ra ra3 ta
grep -E "^== " "$OUT/kprof.txt"; grep -E "^ +[0-9.]+ x +[0-9.]+ us" "$OUT/kprof.txt" | cut -c1-100
stage ra_px 90 python3 tests/gpu/ra_px.py
grep -E "fused|stats" "$OUT/ra_px.txt" | cut -c1-120
echo "total ${SECONDS}s"
tar czf /tmp/s9b.tgz -C "$OUT" . && mv /tmp/s9b.tgz "$OUT/all.tgz"
