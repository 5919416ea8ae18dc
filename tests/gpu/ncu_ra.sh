#!/bin/bash
# Nsight Compute on the automatic policies' fused kernels for chosen op pairs (tests/gpu/ra_costs.py with PAIRS).
#   OUT=dir bash tests/gpu/ncu_ra.sh   -> $OUT/ncu_ra.txt
cd "$(dirname "$0")"
PAIRS="${PAIRS:-0,0 8,0 6,6}" timeout 300 ncu --kernel-name regex:'gpuaug_autoaug_(fused|stats_fused)' --launch-count 12 \
  --section SpeedOfLight --section InstructionStats --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  python3 ra_costs.py > $OUT/ncu_ra.txt 2>&1
grep -E "gpuaug_autoaug|Duration|Executed Instructions  |Issued Instructions  |Compute \(SM\)|Memory Throughput|L1/TEX Hit|L2 Hit|Stall|Cycles Per Issued|Achieved Occ|Mem Busy|Max Bandwidth|Mem Pipes" $OUT/ncu_ra.txt | head -120
