#!/usr/bin/env bash
# gpuaug's native DALI operator on the GPU machine (under 8 minutes):
#
#   OUT=/some/dir bash tests/gpu/dali_native.sh
#
# 1. builds the plugin (first use) and prints where it went and which path gd ops take;
# 2. tests/test_dali_native.py -m gpu: every native op bit-exact against the standalone op
#    (constants and per-sample DataNodes, dense and varshape, uint8/float16/float32),
#    warp_affine with an output size, serialize -> deserialize in a fresh process, bad
#    arguments; and the CPU tests of the same file;
# 3. tests/gpu/dali_native_bench.py: ms per batch, native vs python_function vs DALI built-ins,
#    under the default, synchronous and dynamic executors.
# Writes $OUT/dali_native_tests.txt, $OUT/dali_native_bench.txt and $OUT/dali_native_bench.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export OUT
export GPUAUG_CACHE_DIR=${GPUAUG_CACHE_DIR:-$OUT/cache}
source tests/gpu/setup.sh
python3 -c "import nvidia.dali as d; print('DALI', d.__version__)" || { echo "DALI is not installed (see the kit)"; exit 1; }
which g++ c++ || true
python3 - <<'PY'
from gpuaug.dali import native, _native
try:
    print("plugin:", native.build(verbose=True))
except Exception as e:
    print("BUILD FAILED:", e)
print("status:", _native.status())
PY
timeout 280 python3 -m pytest -q -rs tests/test_dali_native.py -p no:cacheprovider > "$OUT/dali_native_tests.txt" 2>&1
grep -E "^(FAILED|ERROR)" "$OUT/dali_native_tests.txt" | head -30; tail -3 "$OUT/dali_native_tests.txt"
timeout 170 python3 tests/gpu/dali_native_bench.py --budget 140 --out "$OUT/dali_native_bench.json" 2>&1 | tee "$OUT/dali_native_bench.txt" | tail -25
echo "SUMMARY: tests: $(tail -1 "$OUT/dali_native_tests.txt")"
