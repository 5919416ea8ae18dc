#!/usr/bin/env bash
# Scheduler benchmark + GPU tests on the GPU machine (about 1-2 minutes).
#
#   OUT=/some/dir bash tests/gpu/scheduler_bench.sh
#
# 1. pinned (and pageable) host-to-device bandwidth alone, 38.5 MB copies on one stream;
# 2. the scheduler feeding 256x224x224x3 uint8 batches from a NumPy array in host memory
#    (BATCHES distinct batches, 1.85 GB by default: larger than any cache) through
#    gpuaug.flip, in several settings (pinned staging ring with worker threads; the source
#    page-locked in place; copy only; depth 1 = no overlap; for reference a naive loop
#    (pageable copy then the kernel) and PyTorch DataLoader(pin_memory=True));
#    reports achieved H2D GB/s as % of the pinned copy (target >= 90% while augmenting),
#    overlap fraction, copy/compute busy;
# 3. tests/test_scheduler_gpu.py (RUN_TESTS=0 to skip).
#
# Writes to $OUT: scheduler_bench.json (all numbers), scheduler_bench.txt (the log),
# scheduler_trace_<setting>.json (Chrome traces: open in https://ui.perfetto.dev),
# scheduler_timeline.txt (ASCII timelines), scheduler_gpu_tests.txt.
# Knobs (environment): BATCHES=48 WORKERS=8 DEPTH=4 RUN_TESTS=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export OUT
source tests/gpu/setup.sh

timeout 150 python3 tests/gpu/scheduler_bench.py 2>&1 | tee "$OUT/scheduler_bench.txt"

if [ "${RUN_TESTS:-1}" = 1 ]; then
  timeout 150 python3 -m pytest -q -m gpu tests/test_scheduler_gpu.py -rs -s -p no:cacheprovider 2>&1 \
    | tee "$OUT/scheduler_gpu_tests.txt" | tail -40
fi
ls -la "$OUT"
