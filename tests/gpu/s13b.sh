#!/usr/bin/env bash
# Session 13 (base kit), issue 13: GPU tests of the touched paths ($GPU_TESTS), same-process
# A/B against the session's start (fd558d8, .base2/ from tests/gpu/make_base2.sh) at 32, and
# hostsplit2 of the device-parameter calls and the bench calls changed.
#   OUT=/some/dir bash tests/gpu/s13b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-540}
source tests/gpu/stage.sh
nvidia-smi -L
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider -x $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -8; }
export PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
stage ab32 200 python3 tests/gpu/ab_inproc.py --n 32 --blocks 10 --calls 300 --json "$OUT/ab32.json"
cat "$OUT/ab32.txt"
stage split32 120 python3 tests/gpu/hostsplit2.py --n 32 --calls 1000 --ops flip_dev,rotate_dev --bench gaussian_blur,color_jitter,brightness
head -120 "$OUT/split32.txt"
echo "total ${SECONDS}s"
tar czf /tmp/s13b.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s13b.tgz "$OUT/all.tgz"
