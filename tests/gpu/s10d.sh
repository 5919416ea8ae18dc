#!/usr/bin/env bash
# Session 10, base kit only: the in-memory staging rows with more workers (issue 12: 8 workers
# reached 63-83% of memcpy-8's target): worker counts, ring depth, the interpreter's switch interval.
#   OUT=/some/dir bash tests/gpu/s10d.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-300}
source tests/gpu/stage.sh
nvidia-smi -L
stage inmem_rows 150 env BATCHES=48 EPOCHS=3 ROWS="batch (default),batch 6,batch 8,batch 12" python3 tests/gpu/inmem_prof.py
grep -vE "Warning|warn" "$OUT/inmem_rows.txt" | tail -14
stage inmem_switch 150 env BATCHES=48 EPOCHS=3 SWITCH_MS=0.5 ROWS="batch (default),batch 8 workers,batch 8 workers depth 5" python3 tests/gpu/inmem_prof.py
grep -vE "Warning|warn" "$OUT/inmem_switch.txt" | tail -6
echo "total ${SECONDS}s"
tar czf /tmp/s10d.tgz --exclude all.tgz --exclude "*.json" -C "$OUT" . && mv /tmp/s10d.tgz "$OUT/all.tgz"
