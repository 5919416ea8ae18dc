#!/usr/bin/env bash
# Session 11 (base kit), issue 13: where each op call's host time goes on this machine.
# hostmicro (the floor: CuPy allocations, launches, copies, events), hostprof per op at 256 and
# 32 x 224 x 224 x 3 (device / host / loop and the cProfile top), hostsplit (inclusive times of
# the call path), compose_host (host draws / device draws / graph replay).
# With .base/ (a copy of an older gpuaug + kernels, see A/B below) hostprof also runs on it.
#   OUT=/some/dir bash tests/gpu/s11.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-420}
source tests/gpu/stage.sh
nvidia-smi -L
export PYTHONPATH=$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -8; }
[ -z "${NO_MICRO:-}" ] && stage hostmicro 60 python3 tests/gpu/hostmicro.py
stage split32 120 python3 tests/gpu/hostsplit2.py --n 32
grep "^==" "$OUT/split32.txt"
mkdir -p "$OUT/n256" "$OUT/n32"
stage hostprof256 150 python3 tests/gpu/hostprof.py --n 256 --out "$OUT/n256" ${OPS:+--ops $OPS}
grep "^==" "$OUT/n256/hostprof.txt"
stage hostprof32 120 python3 tests/gpu/hostprof.py --n 32 --out "$OUT/n32" ${OPS:+--ops $OPS}
grep "^==" "$OUT/n32/hostprof.txt"
if [ -d .base ]; then
  mkdir -p "$OUT/base256"
  PYTHONPATH=$PWD/.base:$PYTHONPATH stage base256 150 python3 tests/gpu/hostprof.py --n 256 --out "$OUT/base256" ${OPS:+--ops $OPS}
  grep "^==" "$OUT/base256/hostprof.txt"
  mkdir -p "$OUT/base32"
  PYTHONPATH=$PWD/.base:$PYTHONPATH stage base32 120 python3 tests/gpu/hostprof.py --n 32 --out "$OUT/base32" ${OPS:+--ops $OPS}
  grep "^==" "$OUT/base32/hostprof.txt"
fi
[ -z "${NO_MICRO:-}" ] && for op in flip rotate brightness; do stage hostsplit-$op 60 python3 tests/gpu/hostsplit.py --op $op; done
[ -z "${NO_COMPOSE:-}" ] && stage compose_host 150 python3 tests/gpu/compose_host.py --n 256,32
grep -E "^==|target" "$OUT/compose_host.txt" 2>/dev/null | head -20
echo "total ${SECONDS}s"
tar czf /tmp/s11.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s11.tgz "$OUT/all.tgz"
