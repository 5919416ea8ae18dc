#!/usr/bin/env bash
# Session 17, issue 13: GPU tests of $GPU_TESTS, per-call replays and cProfiles at 32 of $REPLAY_OPS,
# ncu kernel durations of $NCU_OPS at 32 and 256 and full sections of $NCU_FULL (kernel regex) at 256,
# the same-process A/B of $OPS_ against .base2 at 256 and 32, then $EXTRA.   OUT=/some/dir bash tests/gpu/s17a.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-560}
source tests/gpu/stage.sh
nvidia-smi -L
export PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12; }
[ -n "${REPLAY_OPS:-}" ] && { stage replays32 150 python3 tests/gpu/replays.py --n 32 --ops "$REPLAY_OPS" --profile-ops "${PROFILE_OPS:-}"; cat "$OUT/replays32.txt"; }
if [ -n "${NCU_OPS:-}" ]; then
  for n in 32 256; do
    N=$n stage ncu_time$n 120 ncu --metrics gpu__time_duration.sum python3 tests/gpu/ncu_ops.py ${NCU_OPS//,/ }
    grep -E "gpuaug|Kernel|gpu__time" "$OUT/ncu_time$n.txt" | grep -vE "^==PROF" | paste - - | sed -E 's/ +/ /g' | cut -c1-200
  done
fi
[ -n "${NCU_FULL:-}" ] && { stage ncu_full 150 ncu --kernel-name "regex:${NCU_FULL}" ${NCU_SECTIONS:---section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis} python3 tests/gpu/ncu_ops.py ${NCU_FULL_OPS//,/ }; grep -vE "^ *-+$" "$OUT/ncu_full.txt" | grep -E "gpuaug|Duration|Throughput|Occupancy|Registers|Shared Memory Config|Block Limit|Issue Slots|Warp Cycles|Executed Ipc|Pipe|Stall" | head -120; }
if [ -n "${OPS_:-}" ]; then
  stage ab256 200 python3 tests/gpu/ab_inproc.py --n 256 --blocks ${BLOCKS:-4} --calls 100 --ops "$OPS_" --json "$OUT/ab256.json"
  stage ab32 150 python3 tests/gpu/ab_inproc.py --n 32 --blocks ${BLOCKS:-4} --calls 200 --ops "$OPS_" --json "$OUT/ab32.json"
  cat "$OUT/ab256.txt" "$OUT/ab32.txt"
fi
[ -n "${EXTRA:-}" ] && { stage extra 200 bash -c "$EXTRA"; cat "$OUT/extra.txt"; }
echo "total ${SECONDS}s"
tar czf /tmp/s17a.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s17a.tgz "$OUT/all.tgz"
