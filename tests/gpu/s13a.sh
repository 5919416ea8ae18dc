#!/usr/bin/env bash
# Session 13 (base kit), issue 13, first look: where the remaining per-sample calls spend host
# time (hostsplit2: device-parameter calls and the bench calls of the ops still over target),
# and the host floor pieces of a replay on this machine.
#   OUT=/some/dir bash tests/gpu/s13a.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-500}
source tests/gpu/stage.sh
nvidia-smi -L
export PYTHONPATH=$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
stage split32 240 python3 tests/gpu/hostsplit2.py --n 32 --calls 1000 --ops flip_host,flip_dev,rotate_host,rotate_dev \
  --bench rotate,gaussian_blur,color_jitter,crop_mirror_normalize,brightness,normalize
stage floor 120 python3 tests/gpu/hostfloor.py
cat "$OUT/split32.txt" "$OUT/floor.txt"
echo "total ${SECONDS}s"
tar czf /tmp/s13a.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s13a.tgz "$OUT/all.tgz"
