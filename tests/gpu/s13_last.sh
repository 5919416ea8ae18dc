#!/usr/bin/env bash
# Session 13 (base kit), last call: GPU tests of the plan-key fix (pad's modes) and the ops
# touched after the previous sweep ($GPU_TESTS), then tests/gpu/s13_bench.sh's benches.
#   OUT=/some/dir bash tests/gpu/s13_last.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-560}
source tests/gpu/stage.sh
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12; }
bash tests/gpu/s13_bench.sh
