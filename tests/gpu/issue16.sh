#!/usr/bin/env bash
# Issue 16 on the GPU machine: the GPU tests of the automatic policies, mixing, Mosaic and their
# DALI operators, then `gpuaug bench --policies` (gpuaug's policies vs torchvision, kornia and
# DALI's auto_aug on 256x224x224x3 uint8, one run). From the repo root:
#   OUT=dir bash tests/gpu/issue16.sh
# Files: $OUT/issue16.log, $OUT/policies.json, $OUT/policies.md. About 5-8 minutes.
set -uo pipefail
OUT="${OUT:-/tmp/issue16}"; mkdir -p "$OUT"
source tests/gpu/setup.sh >/dev/null 2>&1 || { echo "setup.sh failed"; exit 1; }
log="$OUT/issue16.log"; : > "$log"
declare -A rc
step() { local name="$1"; shift; echo "=== $name: $*" >>"$log"; "$@" >>"$log" 2>&1; rc[$name]=$?; }

step pytest_gpu python3 -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
                  tests/test_mixing.py tests/test_dali_auto.py tests/test_auto_policies.py tests/test_bench_policies.py
step bench      python3 -m gpuaug bench --policies --out "$OUT"

echo "---- summary (details in $log)"
grep -E "passed|failed" "$log" | tail -3
grep -E "^- (target|check|.*not measured)" "$log"
for k in pytest_gpu bench; do echo "$k: rc=${rc[$k]}"; done
