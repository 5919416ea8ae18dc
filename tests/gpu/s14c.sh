#!/usr/bin/env bash
# Session 14 (base kit + .base2 = the session's start, 003fc45), issue 13: GPU tests of the
# touched paths ($GPU_TESTS), then the same-process A/B of $OPS_ (default: every op) at 256 and
# 32, and `gpuaug bench`'s device time of those ops at 256 ($BENCH=1).
#   OUT=/some/dir bash tests/gpu/s14c.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-560}
source tests/gpu/stage.sh
nvidia-smi -L
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12; }
export PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
OPS_=${OPS_:-$(python3 -c "import gpuaug; print(','.join(gpuaug.registry))")}
stage ab256 200 python3 tests/gpu/ab_inproc.py --n 256 --blocks ${BLOCKS:-4} --calls 100 --ops "$OPS_" --json "$OUT/ab256.json"
stage ab32 150 python3 tests/gpu/ab_inproc.py --n 32 --blocks ${BLOCKS:-4} --calls 200 --ops "$OPS_" --json "$OUT/ab32.json"
[ -n "${BENCH:-}" ] && stage bench256 150 python3 -m gpuaug bench --backends cuda --case 256x224x224 --json "$OUT/bench256.json" $(echo "$OPS_" | tr , " ")
cat "$OUT/ab256.txt" "$OUT/ab32.txt"
[ -n "${BENCH:-}" ] && grep -vE "^\s*$" "$OUT/bench256.txt" | grep -v "row/s\|s/row" | head -45
echo "total ${SECONDS}s"
tar czf /tmp/s14c.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s14c.tgz "$OUT/all.tgz"
