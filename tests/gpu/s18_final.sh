#!/usr/bin/env bash
# Session 18 (base kit, the DALI parts already in /tmp/kit, .base2 = the session's start affc925),
# issue 13, last call: GPU tests of the files the session touched ($GPU_TESTS), the native DALI
# operators (build + bit-exact against the standalone ops: every kernel signature changed), the
# same-process A/B of every op at 256 and 32, the ops with a torchvision peer beside it, host16, and
# `gpuaug bench`'s device times of every op.
# Two calls: PART=a (tests, native DALI operators, host16), PART=b (A/B, bench, table).
#   OUT=/some/dir PART=a bash tests/gpu/s18_final.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-560}
source tests/gpu/stage.sh
nvidia-smi -L
[ "${PART:-a}" = a ] && [ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 150 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12; }
[ "${PART:-a}" = a ] && [ -n "${DALI_K:-}" ] && { stage dali_native 240 python3 -m pytest -q -rs -p no:cacheprovider tests/test_dali_native.py -k "$DALI_K"; grep -E "FAILED|Error|passed|failed|SKIP" "$OUT/dali_native.txt" | tail -12; }
[ "${PART:-a}" = a ] && { stage host16 60 python3 tests/gpu/host16.py --rounds 4; cat "$OUT/host16.txt"; }
if [ "${PART:-a}" = b ]; then
  ALL=$(python3 -c "import gpuaug; print(','.join(gpuaug.registry))")
  PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH} stage ab256 110 python3 tests/gpu/ab_inproc.py --n 256 --blocks 3 --calls 100 --ops "$ALL" --json "$OUT/ab256.json"
  PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH} stage ab32 90 python3 tests/gpu/ab_inproc.py --n 32 --blocks 3 --calls 200 --ops "$ALL" --json "$OUT/ab32.json"
  stage bench_ops 150 python3 -m gpuaug bench flip erase brightness contrast saturation hue normalize rotate gaussian_blur autocontrast resized_crop grayscale crop_mirror_normalize --backends cuda --peers --libraries torchvision --case 256x224x224 --case 32x224x224 --json "$OUT/bench_ops.json"
  stage bench_all 110 python3 -m gpuaug bench --backends cuda --case 256x224x224 --case 32x224x224 --json "$OUT/bench_all.json"
  cat "$OUT/ab256.txt" "$OUT/ab32.txt"
  grep -vE "^\s*$" "$OUT/bench_ops.txt" | grep -v "row/s\|s/row" | head -90
  python3 tests/gpu/final_table.py "$OUT" > "$OUT/table.md" 2>&1; tail -3 "$OUT/table.md"
fi
echo "total ${SECONDS}s"
tar czf /tmp/s18f.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s18f.tgz "$OUT/all.tgz"
