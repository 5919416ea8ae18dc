#!/usr/bin/env bash
# Session 14 (base kit), issue 13: why the loops of some ops at 256 exceed host + device
# (tests/gpu/stall.py), and nsys's API / kernel / memcpy summaries of one of them where nsys is.
#   OUT=/some/dir bash tests/gpu/s14b.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-400}
source tests/gpu/stage.sh
export PYTHONPATH=$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
stage stall256 150 python3 tests/gpu/stall.py --n 256 --ops ${OPS_:-salt_and_pepper,erase,grid_mask,crop,crop_mirror_normalize,solarize,resized_crop,flip,transpose}
grep "^==" "$OUT/stall256.txt"
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
if [ -n "$NSYS" ]; then
  stage nsys 150 "$NSYS" profile -t cuda,osrt -o "$OUT/sp" -f true python3 tests/gpu/stall.py --n 256 --ops salt_and_pepper --calls 200
  stage nsys_stats 100 "$NSYS" stats -q --report cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,osrt_sum "$OUT/sp.nsys-rep"
  head -80 "$OUT/nsys_stats.txt"; rm -f "$OUT"/sp.nsys-rep "$OUT"/sp.sqlite
fi
echo "total ${SECONDS}s"
