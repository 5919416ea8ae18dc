#!/usr/bin/env bash
# Session 13 (base kit), issue 13, last run: `gpuaug bench` of the host-path ops at 256 and 32 x
# 224 x 224 x 3 with torchvision beside it, then every op at 32 (gpuaug's CUDA backend: device,
# host and loop time per call).
#   OUT=/some/dir bash tests/gpu/s13_bench.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-560}
source tests/gpu/stage.sh
nvidia-smi -L
OPS_=${OPS:-flip rotate brightness color_jitter normalize crop_mirror_normalize gaussian_blur resize center_crop}
stage bench_ops 260 python3 -m gpuaug bench $OPS_ --backends cuda --peers --libraries torchvision --case 256x224x224 --case 32x224x224 --json "$OUT/bench_ops.json"
grep -vE "^\s*$" "$OUT/bench_ops.txt" | grep -v "row/s\|s/row" | head -60
stage bench_all32 240 python3 -m gpuaug bench --backends cuda --case 32x224x224 --json "$OUT/bench_all32.json"
grep -vE "^\s*$" "$OUT/bench_all32.txt" | grep -v "row/s\|s/row" | head -60
echo "total ${SECONDS}s"
tar czf /tmp/s13b.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s13b.tgz "$OUT/all.tgz"
