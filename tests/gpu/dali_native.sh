#!/usr/bin/env bash
# gpuaug's native DALI operators on the GPU machine:
#
#   OUT=/some/dir bash tests/gpu/dali_native.sh
#
# 1. builds the plugin (first use; a failed build prints the compiler's full output) and prints
#    where it went and which path gd ops take;
# 2. tests/test_dali_native.py (CPU and -m gpu): every native op bit-exact against the standalone
#    op (constants and per-sample DataNodes, dense and varshape, uint8/float16/float32),
#    warp_affine with an output size, gd.policy natively bit-exact against the policy replayed
#    with the same draws (6 policies x dense/varshape x 1/3/4 channels), DALI's draws, serialize
#    -> deserialize in a fresh process (ops and policy), bad arguments;
# 3. tests/gpu/dali_native_bench.py: ms per batch, native vs python_function vs DALI built-ins,
#    under the default, synchronous and dynamic executors, the issue's targets (MET / not met),
#    and per-operator host/device ms (GPUAUG_DALI_NATIVE_PROFILE=1).
# If every native test with DataNode parameters fails at pipeline build or run, rerun with
# GPUAUG_DALI_NATIVE_ARGS=cat (the previous, GPU-tested way of passing parameters) and report.
# Modes (first argument): tests1 (uint8 bit-exact cases and every other test), tests2 (float16 /
# float32 bit-exact cases), bench, policy (gd.policy and the gd.compose chain only: their native
# tests, test_dali_gpu.py's policy test by default and through python_function, and
# tests/gpu/dali_policy_debug.py, which prints the operator's parameter rows and outputs against
# policy(x)); each under 10 minutes. "tests" runs both test halves, no
# argument runs everything (over 10 minutes: run the three one after another instead).
# Writes $OUT/dali_native_build.txt, $OUT/dali_native_tests.txt (+ tests2), $OUT/dali_native_bench.txt and
# $OUT/dali_native_bench.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export OUT
export GPUAUG_CACHE_DIR=${GPUAUG_CACHE_DIR:-$OUT/cache}
source tests/gpu/setup.sh
python3 -c "import nvidia.dali as d; print('DALI', d.__version__)" || { echo "DALI is not installed (see the kit)"; exit 1; }
which g++ c++ || true
python3 tests/gpu/dali_native_build.py 2>&1 | tee "$OUT/dali_native_build.txt"
MODE=${1:-all}
# two halves of the GPU tests, each under its own limit (the first NVRTC compile of every kernel
# instance is paid here; later runs read the compiled kernels from
# $GPUAUG_CACHE_DIR/dali_native/kernels): tests1 = uint8 and everything else, tests2 = the
# float16 / float32 bit-exact cases
if [ "$MODE" = all ] || [ "$MODE" = tests ] || [ "$MODE" = tests1 ]; then
timeout 540 python3 -m pytest -q -rs tests/test_dali_native.py -p no:cacheprovider \
    -k "not (bit_exact_against_standalone and not nchw) or uint8" > "$OUT/dali_native_tests.txt" 2>&1
grep -E "^(FAILED|ERROR)" "$OUT/dali_native_tests.txt" | head -40; tail -3 "$OUT/dali_native_tests.txt"
fi
if [ "$MODE" = all ] || [ "$MODE" = tests ] || [ "$MODE" = tests2 ]; then
timeout 540 python3 -m pytest -q -rs tests/test_dali_native.py -p no:cacheprovider \
    -k "bit_exact_against_standalone and not nchw and not uint8" > "$OUT/dali_native_tests2.txt" 2>&1
grep -E "^(FAILED|ERROR)" "$OUT/dali_native_tests2.txt" | head -40; tail -3 "$OUT/dali_native_tests2.txt"
fi
if [ "$MODE" = policy ]; then
timeout 200 python3 tests/gpu/dali_policy_debug.py > "$OUT/dali_policy_debug.txt" 2>&1
grep -E "VERDICT|OVERALL|rows == " "$OUT/dali_policy_debug.txt"
timeout 360 python3 -m pytest -q -rs -p no:cacheprovider tests/test_dali_native.py tests/test_dali_gpu.py \
    -k "policy or chain" > "$OUT/dali_policy_tests.txt" 2>&1
grep -E "^(FAILED|ERROR)" "$OUT/dali_policy_tests.txt" | head -40; tail -3 "$OUT/dali_policy_tests.txt"
fi
if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
timeout 300 python3 tests/gpu/dali_native_bench.py --budget 200 --out "$OUT/dali_native_bench.json" 2>&1 | tee "$OUT/dali_native_bench.txt" | tail -70
fi
echo "SUMMARY: tests: $(tail -1 "$OUT/dali_native_tests.txt" 2>/dev/null) | $(tail -1 "$OUT/dali_native_tests2.txt" 2>/dev/null)"
