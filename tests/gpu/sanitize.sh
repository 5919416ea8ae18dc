#!/usr/bin/env bash
# Every gpuaug kernel under compute-sanitizer on the GPU machine: memcheck, racecheck, initcheck
# and synccheck, over tests/gpu/sanitize_cases.py (every op x backend cuda/numba x dtype x layout
# x channels, odd / aligned / tiled / 1-pixel sizes, varshape, every choice parameter, the fused
# policy kernel; outputs checked against the CPU twin).
#
#   OUT=dir bash tests/gpu/sanitize.sh          (the device tool provides $OUT)
#
# First a plain run (warms CuPy's kernel cache, checks every case), then the four tools in
# parallel, each in its own process: memcheck and initcheck over the full profile, racecheck
# and synccheck over the ops whose kernels use shared memory and barriers. Logs:
# $OUT/sanitize-<tool>.log (the tool's report), $OUT/sanitize-<tool>.out (the program's output),
# and $OUT/sanitize-summary.txt. Knobs: SAN_TOOLS="memcheck initcheck", SAN_BACKENDS=cuda,numba,
# SAN_TIMEOUT=480 (seconds per tool), SAN_SETUP=0 (gpuaug already installed), SAN_PLAIN=0 (no plain run).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
start=$SECONDS
if [ "${SAN_SETUP:-1}" != "0" ]; then
  # shellcheck disable=SC1091
  source tests/gpu/setup.sh > "$OUT/sanitize-setup.log" 2>&1
fi
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
backends=${SAN_BACKENDS:-cuda,numba}
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
[ -n "$cs" ] || { echo "compute-sanitizer not found"; exit 2; }
"$cs" --version | tail -n 1

if [ "${SAN_PLAIN:-1}" != "0" ]; then
  python3 tests/gpu/sanitize_cases.py --profile full --backends "$backends" > "$OUT/sanitize-plain.out" 2>&1
  echo "plain run: exit $? after $((SECONDS - start)) s: $(grep SUMMARY "$OUT/sanitize-plain.out")"
fi

pids=()
shards=${SAN_SHARDS:-3}
for tool in ${SAN_TOOLS:-memcheck initcheck racecheck synccheck}; do
  case $tool in
    racecheck|synccheck) profile=shared; k=1 ;;
    *) profile=full; k=$shards ;;  # a memcheck error ends the CUDA context: shards keep going
  esac
  extra=(--report-api-errors no)  # Numba's driver probes (cuGetProcAddress) are not kernel errors
  [ "$tool" = memcheck ] && extra+=(--leak-check no --padding 64)
  [ "$tool" = racecheck ] && extra+=(--racecheck-report all)
  for ((i = 0; i < k; i++)); do
    name=$tool$([ "$k" -gt 1 ] && echo "-$i")
    timeout --kill-after=10 "${SAN_TIMEOUT:-480}" "$cs" --tool "$tool" "${extra[@]}" --print-limit 200 \
      --error-exitcode 99 --log-file "$OUT/sanitize-$name.log" \
      python3 tests/gpu/sanitize_cases.py --profile "$profile" --backends "$backends" --shard "$i/$k" \
      > "$OUT/sanitize-$name.out" 2>&1 &
    pids+=("$!:$name:$profile")
  done
done
summary() {
  echo "compute-sanitizer: $("$cs" --version | tail -n 1)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  for entry in "${pids[@]}"; do
    pid=${entry%%:*}; rest=${entry#*:}; tool=${rest%%:*}; profile=${rest#*:}
    wait "$pid"; rc=$?
    errs=$(grep -Eo "ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ errors?, [0-9]+ warnings?\)" \
           "$OUT/sanitize-$tool.log" | tail -n 1)
    echo "$tool ($profile profile): exit $rc; ${errs:-no summary}; $(grep SUMMARY "$OUT/sanitize-$tool.out" | tail -n 1)"
  done
  echo "total: $((SECONDS - start)) s"
}
summary > "$OUT/sanitize-summary.txt" 2>&1  # not in a pipe: `wait` needs this shell's children
cat "$OUT/sanitize-summary.txt"
