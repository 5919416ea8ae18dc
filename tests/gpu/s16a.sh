#!/usr/bin/env bash
# Session 16 (base kit + .base2 = the session's start, e6f8f3d), issue 13: GPU tests of the
# touched paths ($GPU_TESTS), per-call plan stats and cProfiles of $PROFILE_OPS at 32
# (tests/gpu/replays.py), then the same-process A/B of $OPS_ at 256 and 32.
#   OUT=/some/dir bash tests/gpu/s16a.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-560}
source tests/gpu/stage.sh
nvidia-smi -L
[ -n "${GPU_TESTS:-}" ] && { stage gpu_tests 200 python3 -m pytest -q -m gpu -p no:cacheprovider $GPU_TESTS; grep -E "FAILED|Error|passed|failed" "$OUT/gpu_tests.txt" | tail -12; }
export PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
[ -n "${REPLAYS:-}" ] && { stage replays32 150 python3 tests/gpu/replays.py --n 32 --ops "${REPLAYS_OPS:-}" --profile-ops "${PROFILE_OPS:-}"; cat "$OUT/replays32.txt"; }
[ -n "${EXTRA:-}" ] && { stage extra 200 bash -c "$EXTRA"; cat "$OUT/extra.txt"; }
if [ -n "${OPS_:-}" ]; then
  stage ab256 200 python3 tests/gpu/ab_inproc.py --n 256 --blocks ${BLOCKS:-4} --calls 100 --ops "$OPS_" --json "$OUT/ab256.json"
  stage ab32 150 python3 tests/gpu/ab_inproc.py --n 32 --blocks ${BLOCKS:-4} --calls 200 --ops "$OPS_" --json "$OUT/ab32.json"
  cat "$OUT/ab256.txt" "$OUT/ab32.txt"
fi
echo "total ${SECONDS}s"
tar czf /tmp/s16a.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s16a.tgz "$OUT/all.tgz"
