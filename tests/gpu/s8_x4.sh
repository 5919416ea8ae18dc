#!/usr/bin/env bash
# Session 8 on the 4-GPU machine (nvidia-h200-x4), one call after the DALI kit parts arrived:
# tests/gpu/multi_gpu.sh (the two-GPU tests, placement, torchrun smoke, scaling 1/2/4 GPUs),
# its outputs packed into one tar beside the summary (a call returns only a few files).
#   OUT=/some/dir bash tests/gpu/s8_x4.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT
BUDGET_S=${BUDGET_S:-330} bash tests/gpu/multi_gpu.sh > "$OUT/multi_gpu.log" 2>&1
tail -40 "$OUT/multi_gpu.log"
tar czf /tmp/s8_x4.tgz -C "$OUT" . && mv /tmp/s8_x4.tgz "$OUT/all.tgz"
