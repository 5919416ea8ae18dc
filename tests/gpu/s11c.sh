#!/usr/bin/env bash
# Session 11 (DALI kit), final checks: GPU tests of the launch plans (out= replays), Compose's
# new default (draws="auto") in DALI (python_function and gd.policy's native operator), the
# gather memo and device parameters; then `gpuaug bench` (cuda backend, torchvision beside it)
# at 256 and 32 x 224 x 224 timing gpuaug.<op> (the planned functions) with out=.
#   OUT=/some/dir bash tests/gpu/s11c.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-500}
source tests/gpu/stage.sh
nvidia-smi -L
export PYTHONPATH=$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
stage gpu_tests 280 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_plan.py tests/test_dali_gpu.py tests/test_dali_native.py tests/test_gather_params.py tests/test_compose_draws.py ${GPU_TESTS:-}
grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12
OPS_=${OPS:-flip rotate brightness color_jitter normalize crop_mirror_normalize gaussian_blur resize center_crop}
stage bench_ops 200 python3 -m gpuaug bench $OPS_ --backends cuda --peers --libraries torchvision --case 256x224x224 --case 32x224x224 --json "$OUT/bench_ops.json"
grep -E "^(op|[a-z_]+ +(gpuaug|torchvision))" "$OUT/bench_ops.txt" | head -60
echo "total ${SECONDS}s"
tar czf /tmp/s11c.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s11c.tgz "$OUT/all.tgz"
