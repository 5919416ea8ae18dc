#!/usr/bin/env bash
# Session 13 (base kit), issue 13: GPU tests of the touched paths ($GPU_TESTS), then the
# same-process A/B against the session's start (fd558d8, .base2/) at 32 and 256.
#   OUT=/some/dir bash tests/gpu/s13c.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-540}
source tests/gpu/stage.sh
nvidia-smi -L
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 220 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12; }
export PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
stage ab32 150 python3 tests/gpu/ab_inproc.py --n 32 --blocks 10 --calls 300 --json "$OUT/ab32.json"
stage ab256 150 python3 tests/gpu/ab_inproc.py --n 256 --blocks 8 --calls 150 --json "$OUT/ab256.json"
cat "$OUT/ab32.txt" "$OUT/ab256.txt"
echo "total ${SECONDS}s"
tar czf /tmp/s13c.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s13c.tgz "$OUT/all.tgz"
