#!/usr/bin/env bash
# Session 12 (base kit), issue 13, last run: optional GPU tests ($GPU_TESTS), same-process A/B
# against the session's start at 32 and 256 (tests/gpu/ab_inproc.py with .base2/ from
# tests/gpu/make_base2.sh), host_rows' per-line costs, then `gpuaug bench` of the
# host-path ops at 256 and 32 x 224 x 224 x 3 with torchvision beside it.
#   OUT=/some/dir bash tests/gpu/s12_final.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-560}
source tests/gpu/stage.sh
nvidia-smi -L
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 150 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -8; }
export PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
stage ab32 200 python3 tests/gpu/ab_inproc.py --n 32 --json "$OUT/ab32.json"
stage ab256 200 python3 tests/gpu/ab_inproc.py --n 256 --blocks 10 --calls 200 --json "$OUT/ab256.json"
stage micro_rows 60 python3 tests/gpu/micro_rows.py
cat "$OUT/ab32.txt" "$OUT/ab256.txt" "$OUT/micro_rows.txt"
OPS_=${OPS:-flip rotate brightness color_jitter normalize crop_mirror_normalize gaussian_blur resize center_crop}
stage bench_ops 300 python3 -m gpuaug bench $OPS_ --backends cuda --peers --libraries torchvision --case 256x224x224 --case 32x224x224 --json "$OUT/bench_ops.json"
grep -vE "^\s*$" "$OUT/bench_ops.txt" | head -80
echo "total ${SECONDS}s"
tar czf /tmp/s12f.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s12f.tgz "$OUT/all.tgz"
