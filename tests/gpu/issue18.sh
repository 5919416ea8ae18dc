#!/usr/bin/env bash
# Issue 18 on the GPU machine: the new-user paths (demo, info, bench table, python -m gpuaug)
# and the bad-input fixes' GPU variants. Run from the repo root: OUT=dir bash tests/gpu/issue18.sh
# Prints a summary at the end; files: $OUT/demo.png, $OUT/issue18.log. About 3-5 minutes.
set -uo pipefail
OUT="${OUT:-/tmp/issue18}"; mkdir -p "$OUT"
source tests/gpu/setup.sh >/dev/null 2>&1 || { echo "setup.sh failed"; exit 1; }
log="$OUT/issue18.log"; : > "$log"
declare -A rc
step() { local name="$1"; shift; echo "=== $name: $*" >>"$log"; "$@" >>"$log" 2>&1; rc[$name]=$?; }

step info        python3 -m gpuaug info
step demo_gpu    python3 -m gpuaug demo --device gpu --out "$OUT/demo.png"
step demo_auto   python3 -m gpuaug demo --out "$OUT/demo-auto.png"
step bench_table python3 -m gpuaug bench flip crop_mirror_normalize --batch 8 --size 64x64 --repeat 5 --quiet
step pytest_new  python3 -m pytest -q -p no:cacheprovider tests/test_cli.py tests/test_demo.py \
                   tests/test_numba_cache.py tests/test_readme_examples.py
step pytest      python3 -m pytest -q -p no:cacheprovider tests/test_bad_input.py -k "crop_offsets or grid_mask_tile or out_of_int64 or fail_at_call_time or given_as_arrays or stream_protocol or scheduler_ or dali_compose or alias_each_other or interleaved or equalize_on_many or test_out_ or strided_out or bad_stream"

echo "---- summary (details in $log)"
grep -E "^device: |augmented variants" "$log" | head -4
grep -E "^crop_mirror_normalize +gpuaug|^op +library" "$log" | head -3
grep -E "passed|failed" "$log" | tail -2
for k in info demo_gpu demo_auto bench_table pytest_new pytest; do echo "$k: rc=${rc[$k]}"; done
