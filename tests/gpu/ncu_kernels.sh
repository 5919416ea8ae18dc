#!/bin/bash
# Nsight Compute on the heavier kernels (tests/gpu/kprof.py's workloads, each called twice):
# speed of light, memory, occupancy, launch, warp states, source counters' summary.
#   OUT=dir bash tests/gpu/ncu_kernels.sh [workload ...]   (default: targets ra)
# -> $OUT/ncu.txt
set -u
cd "$(dirname "$0")"
W=${*:-targets ra}
PYPROG="import kprof; fs = kprof.workloads('$W'.split()); [f() for f in fs.values() for _ in range(2)]"
timeout 500 ncu --kernel-name regex:'gpuaug_(fused_dense|target_all|autoaug_fused|autoaug_stats)' \
  --launch-skip 0 --launch-count ${COUNT:-8} \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  python3 -c "$PYPROG" > "${OUT:-/tmp}/ncu.txt" 2>&1
echo "ncu rc $?"
grep -E "gpuaug_|Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Compute \(SM\)|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Stall|One or More|No Eligible" "${OUT:-/tmp}/ncu.txt" | head -150
