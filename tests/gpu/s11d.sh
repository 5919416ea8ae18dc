#!/usr/bin/env bash
# Session 11 (base kit), last call: GPU tests of the ops whose host path changed, `gpuaug bench`
# (cuda backend, torchvision beside it) at 256 and 32 x 224 x 224, and hostprof at 32 for this
# tree and .base/ (the session's start) in the same call.
#   OUT=/some/dir bash tests/gpu/s11d.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-330}
source tests/gpu/stage.sh
nvidia-smi -L
export PYTHONPATH=$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
stage gpu_tests 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_plan.py tests/test_normalize.py tests/test_crop_mirror_normalize.py tests/test_color_jitter.py tests/test_resize.py tests/test_crop.py tests/test_host_params.py
grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -8
OPS_=${OPS:-flip rotate brightness color_jitter normalize crop_mirror_normalize gaussian_blur resize center_crop}
stage bench_ops 150 python3 -m gpuaug bench $OPS_ --backends cuda --peers --libraries torchvision --case 256x224x224 --case 32x224x224 --json "$OUT/bench_ops.json"
grep -E "^(op|[a-z_]+ +(gpuaug|torchvision))" "$OUT/bench_ops.txt" | head -60
mkdir -p "$OUT/n32" "$OUT/base32"
stage hostprof32 60 python3 tests/gpu/hostprof.py --n 32 --out "$OUT/n32"
PYTHONPATH=$PWD/.base:$PYTHONPATH stage base32 60 python3 tests/gpu/hostprof.py --n 32 --out "$OUT/base32"
paste <(grep "^==" "$OUT/n32/hostprof.txt") <(grep "^==" "$OUT/base32/hostprof.txt" | sed 's/^== [a-z_0-9]*: //')
echo "total ${SECONDS}s"
tar czf /tmp/s11d.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s11d.tgz "$OUT/all.tgz"
