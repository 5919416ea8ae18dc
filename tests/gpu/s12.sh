#!/usr/bin/env bash
# Session 12 (base kit), issue 13: GPU tests of the plan/host paths, `gpuaug bench`'s own calls'
# loop at 32 for this tree and .base/ (the session's start) alternating in the same call, and
# hostsplit2 --bench (where those calls spend their host time).
#   OUT=/some/dir bash tests/gpu/s12.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-480}
source tests/gpu/stage.sh
nvidia-smi -L
export PYTHONPATH=$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -8; }
OPS_=${OPS:-flip,rotate,brightness,color_jitter,normalize,crop_mirror_normalize,gaussian_blur,resize,center_crop}
for round in ${ROUNDS:-1 2 3}; do
  stage loop32-new-$round 100 python3 tests/gpu/benchloop.py --n 32 --ops $OPS_ --tag new --calls 1000 --rounds 5
  PYTHONPATH=$PWD/.base:$PYTHONPATH stage loop32-base-$round 100 python3 tests/gpu/benchloop.py --n 32 --ops $OPS_ --tag base --calls 1000 --rounds 5
done
python3 tests/gpu/ab_table.py "$OUT"/loop32-*.txt | tee "$OUT/ab32.txt"
[ -z "${NO_SPLIT:-}" ] && stage split32 150 python3 tests/gpu/hostsplit2.py --n 32 --ops "" --bench $OPS_ --calls 1000
[ -n "${BENCH:-}" ] && { stage bench_ops 240 python3 -m gpuaug bench ${OPS_//,/ } --backends cuda --peers --libraries torchvision --case 256x224x224 --case 32x224x224 --json "$OUT/bench_ops.json"; grep -vE "^\s*$" "$OUT/bench_ops.txt" | head -70; }
echo "total ${SECONDS}s"
tar czf /tmp/s12.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s12.tgz "$OUT/all.tgz"
