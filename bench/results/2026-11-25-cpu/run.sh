#!/usr/bin/env bash
# Issue 19: gpuaug's CPU twins against OpenCV and DALI's CPU operators, one run on one machine.
# (64, 224, 224, 3) uint8 NHWC, 5 timed calls per row (median) after 8 warm-up calls (one per
# rotated input/output buffer: the outputs' pages are touched before the timing starts).
# Per image per thread: gpuaug with GPUAUG_CPU_PARALLEL=0, OpenCV with setNumThreads(1), DALI CPU
# pipelines with num_threads=1 (GPUAUG_BENCH_CPU_THREADS=1). Passes, back to back:
#   before.json  gpuaug's generic njit twins (GPUAUG_CPU_FAST=0), 1 thread
#   after.json   the fast CPU kernels, 1 thread, with the OpenCV and DALI CPU peers
#   after-par.json  the fast CPU kernels with the default GPUAUG_CPU_PARALLEL (every core)
# then summarize.py writes results.md. Usage: bash run.sh [python]
set -euo pipefail
PY=${1:-python}
cd "$(dirname "$0")"
OPS="flip crop pad resize warp_affine rotate gaussian_blur box_blur median_blur brightness contrast color_jitter normalize"
COMMON="--device cpu --case 64x224x224 --repeat 5 --warmup 8"
export GPUAUG_BENCH_CPU_THREADS=1
(uptime; nproc; "$PY" -c "import cv2, numba, nvidia.dali as d; print('opencv', cv2.__version__, 'numba', numba.__version__, 'dali', d.__version__)") > load.txt
GPUAUG_CPU_PARALLEL=0 GPUAUG_CPU_FAST=0 "$PY" -m gpuaug bench $COMMON --json before.json $OPS | tee before.txt
uptime >> load.txt
GPUAUG_CPU_PARALLEL=0 "$PY" -m gpuaug bench $COMMON --peers --libraries opencv,dali --json after.json $OPS | tee after.txt
uptime >> load.txt
GPUAUG_CPU_PARALLEL=1 "$PY" -m gpuaug bench $COMMON --json after-par.json $OPS | tee after-par.txt
uptime >> load.txt
"$PY" summarize.py > results.md
cat results.md
