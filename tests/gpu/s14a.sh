#!/usr/bin/env bash
# Session 14 (base kit), issue 13, first call: GPU tests of session 13's last review mends
# ($GPU_TESTS), then where the ops still host-bound at 256 spend their host time (hostsplit2
# --bench at 256 and 32), and the bench's device time of those ops at 256.
#   OUT=/some/dir bash tests/gpu/s14a.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-540}
source tests/gpu/stage.sh
nvidia-smi -L
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 220 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12; }
export PYTHONPATH=$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
OPS_=${OPS_:-crop,erase,salt_and_pepper,grid_mask,crop_mirror_normalize,equalize,channel_shuffle,color_twist,gamma,resized_crop,solarize}
stage split256 200 python3 tests/gpu/hostsplit2.py --n 256 --ops "" --bench $OPS_ --calls 300
stage split32 120 python3 tests/gpu/hostsplit2.py --n 32 --ops "" --bench $OPS_ --calls 600
grep "^==" "$OUT/split256.txt" "$OUT/split32.txt"
echo "total ${SECONDS}s"
tar czf /tmp/s14a.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s14a.tgz "$OUT/all.tgz"
