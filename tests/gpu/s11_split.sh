#!/usr/bin/env bash
# Session 11 (base kit): inclusive host time of every gpuaug function on each op's call path
# (tests/gpu/hostsplit2.py) at 32 and 256 x 224 x 224 x 3. Optional GPU_TESTS first.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-300}
source tests/gpu/stage.sh
export PYTHONPATH=$PWD/tests/gpu:$PYTHONPATH
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 240 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12; }
stage split32 120 python3 tests/gpu/hostsplit2.py --n 32 ${OPS:+--ops $OPS}
grep "^==" "$OUT/split32.txt"
[ -n "${SPLIT256:-}" ] && { stage split256 120 python3 tests/gpu/hostsplit2.py --n 256 --calls 500 ${OPS:+--ops $OPS}; grep "^==" "$OUT/split256.txt"; }
echo "total ${SECONDS}s"
