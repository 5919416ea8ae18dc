#!/usr/bin/env bash
# Session 13 (base kit): every op at 256 x 224 x 224 x 3: device time (`gpuaug bench`, CUDA
# backend) and the same-process A/B loop against the session's start (fd558d8, .base2/).
#   OUT=/some/dir bash tests/gpu/s13_256.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-400}
source tests/gpu/stage.sh
stage bench_all256 120 python3 -m gpuaug bench --backends cuda --case 256x224x224 --json "$OUT/bench_all256.json"
grep -vE "^\s*$" "$OUT/bench_all256.txt" | grep -v "row/s\|s/row" | head -45
export PYTHONPATH=$PWD/.base2:$PWD/tests/gpu${PYTHONPATH:+:$PYTHONPATH}
ALL=$(python3 -c "import gpuaug; print(','.join(gpuaug.registry))")
stage ab256_all 200 python3 tests/gpu/ab_inproc.py --n 256 --blocks 4 --calls 100 --ops "$ALL" --json "$OUT/ab256_all.json"
cat "$OUT/ab256_all.txt"
echo "total ${SECONDS}s"
tar czf /tmp/s13g.tgz --exclude all.tgz -C "$OUT" . && mv /tmp/s13g.tgz "$OUT/all.tgz"
