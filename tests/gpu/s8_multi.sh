#!/usr/bin/env bash
# Session 8 on the 2-GPU machine (nvidia-h200-x2), one call after the DALI kit parts arrived:
# the policy/mixing GPU tests of the session-7 kernel changes on GPU 1 (in the background,
# while multi_gpu.sh's folder is written and its two-GPU tests run), then tests/gpu/multi_gpu.sh.
#   OUT=/some/dir bash tests/gpu/s8_multi.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT
source tests/gpu/setup.sh > "$OUT/setup.txt" 2>&1; cat "$OUT/setup.txt" | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
( CUDA_VISIBLE_DEVICES=1 timeout 200 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_auto_policies.py tests/test_policy_host_rows.py tests/test_mixing.py \
    > "$OUT/policy_gpu.txt" 2>&1; echo "rc $?" >> "$OUT/policy_gpu.txt" ) &
PID=$!
BUDGET_S=${BUDGET_S:-330} bash tests/gpu/multi_gpu.sh
wait $PID
echo "== policy/mixing GPU tests (GPU 1): $(tail -2 "$OUT/policy_gpu.txt" | tr '\n' ' ')"
