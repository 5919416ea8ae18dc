#!/usr/bin/env bash
# Session 13 (base kit), issue 13: GPU tests of every op touched ($GPU_TESTS), then the
# same-process A/B against the session's start (fd558d8, .base2/) for every op at 32.
#   OUT=/some/dir bash tests/gpu/s13f.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-560}
source tests/gpu/stage.sh
nvidia-smi -L
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 280 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12; }
export PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
ALL=$(python3 -c "import gpuaug; print(','.join(gpuaug.registry))")
stage ab32_all 220 python3 tests/gpu/ab_inproc.py --n 32 --blocks 6 --calls 200 --ops "$ALL" --json "$OUT/ab32_all.json"
cat "$OUT/ab32_all.txt"
echo "total ${SECONDS}s"
tar czf /tmp/s13f.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s13f.tgz "$OUT/all.tgz"
