#!/usr/bin/env bash
# Session 9's single-GPU call (nvidia-h200, base kit only): the GPU tests of the targets' side
# stream (issue 15), the targets bench (fork vs no fork vs high priority), and Nsight Compute on
# RandAugment(2, 9)'s kernels (issue 16). Writes $OUT/*.txt and $OUT/all.tgz.
#   OUT=/some/dir bash tests/gpu/s9.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-240}
source tests/gpu/stage.sh
nvidia-smi -L
stage gpu_tests 150 python3 -m pytest -q -m gpu -p no:cacheprovider ${GPU_TESTS:-tests/test_targets_gpu.py tests/test_targets_host_memo.py tests/test_targets_cuda_host.py tests/test_compose_eager_memo.py}
grep -E "FAILED|Error" "$OUT/gpu_tests.txt" | head -10
stage targets_bench 120 python3 tests/gpu/targets_bench.py --iters 40
grep -vE "^\s*$" "$OUT/targets_bench.txt" | tail -18
stage ra_ncu 150 ncu --kernel-name regex:gpuaug_autoaug --launch-skip 9 --launch-count 3 --section SpeedOfLight \
  --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis python3 tests/gpu/ra_ncu.py
grep -E "gpuaug_autoaug|Duration|Throughput|Occupancy|Registers|Stall|Eligible|Issued Warp|Block Limit|Waves" "$OUT/ra_ncu.txt" | head -90
echo "total ${SECONDS}s"
tar czf /tmp/s9.tgz -C "$OUT" . && mv /tmp/s9.tgz "$OUT/all.tgz"
