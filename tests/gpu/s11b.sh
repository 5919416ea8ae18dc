#!/usr/bin/env bash
# Session 11 (base kit), issue 13 after the host-path changes: GPU tests of the touched paths,
# hostsplit2 at 32, hostprof at 32 for this tree and for .base/ (the session's start) in the
# same call, and `gpuaug bench` (cuda backend, torchvision beside it) at 256 and 32 x 224 x 224.
#   OUT=/some/dir bash tests/gpu/s11b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-480}
source tests/gpu/stage.sh
nvidia-smi -L
export PYTHONPATH=$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -8; }
stage split32 120 python3 tests/gpu/hostsplit2.py --n 32
grep "^==" "$OUT/split32.txt"
for round in 1 2; do
  mkdir -p "$OUT/n32-$round" "$OUT/base32-$round"
  stage hostprof32-$round 120 python3 tests/gpu/hostprof.py --n 32 --out "$OUT/n32-$round"
  PYTHONPATH=$PWD/.base:$PYTHONPATH stage base32-$round 120 python3 tests/gpu/hostprof.py --n 32 --out "$OUT/base32-$round"
done
grep "^==" "$OUT"/n32-*/hostprof.txt "$OUT"/base32-*/hostprof.txt
OPS_=${OPS:-flip rotate brightness color_jitter normalize crop_mirror_normalize gaussian_blur resize center_crop}
stage bench_ops 240 python3 -m gpuaug bench $OPS_ --backends cuda --peers --libraries torchvision --case 256x224x224 --case 32x224x224 --json "$OUT/bench_ops.json"
grep -vE "^\s*$" "$OUT/bench_ops.txt" | head -70
echo "total ${SECONDS}s"
tar czf /tmp/s11b.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s11b.tgz "$OUT/all.tgz"
