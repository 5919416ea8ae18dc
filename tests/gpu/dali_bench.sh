#!/usr/bin/env bash
# gpuaug.dali benchmark on the GPU machine, with DALI from the kit (under 4 minutes).
#
#   OUT=/some/dir bash tests/gpu/dali_bench.sh
#
# Per registry op, the marginal cost inside a DALI pipeline (ms per batch over the bare
# pipeline; GPU batch 256x224x224x3 uint8 from external_source; synchronous executor, as
# DESIGN.md measured the floor): python_function + CUDA C, the Numba path (numba_function
# where DALI accepts the toolkit, else the Numba CUDA twin in python_function), the kernel
# alone (CUDA events), the Python time inside the callback; python_function's floor (a
# callback returning its input); DALI's built-ins (flip, rotate, warp_affine, resize,
# gaussian_blur, brightness_contrast, hsv, crop_mirror_normalize); gpuaug.dali.compose of
# flip + rotate + color_jitter + crop_mirror_normalize against the chain of DALI's four.
#
# Writes to $OUT: dali_bench.json (all numbers), dali_bench.md (the table), dali_bench.txt
# (the log), and with RUN_TESTS=1 dali_gpu_tests.txt (tests/test_dali_gpu.py).
# Knobs (environment): DALI_BENCH_OPS=flip,rotate (default all), DALI_BENCH_NUMBA=all|some|none,
# DALI_BENCH_BUDGET=150 (seconds after which Numba rows are skipped), RUN_TESTS=0.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export OUT
source tests/gpu/setup.sh
python3 -c "import nvidia.dali as d; print('DALI', d.__version__)" || { echo "DALI is not installed (see the kit)"; exit 1; }

timeout 230 python3 -m gpuaug.dali._bench --out "$OUT/dali_bench.json" \
  --budget "${DALI_BENCH_BUDGET:-150}" 2>&1 | tee "$OUT/dali_bench.txt"

if [ "${RUN_TESTS:-0}" = 1 ]; then
  timeout 400 python3 -m pytest -q tests/test_dali_gpu.py -rs -p no:cacheprovider 2>&1 \
    | tee "$OUT/dali_gpu_tests.txt" | tail -40
fi
ls -la "$OUT"
