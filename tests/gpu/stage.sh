# Sourced by the session scripts of tests/gpu (s8_final.sh, s9.sh, s9b.sh): from the repository
# root, with OUT set, it installs the kit (tests/gpu/setup.sh, log in $OUT/setup.txt) and defines
#   stage NAME TIMEOUT CMD...   run CMD unless BUDGET_S seconds have passed; log to $OUT/NAME.txt
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT
source tests/gpu/setup.sh > "$OUT/setup.txt" 2>&1; tail -3 "$OUT/setup.txt"
BUDGET_S=${BUDGET_S:-180}
stage() {
  local name=$1 t=$2; shift 2
  if [ "$SECONDS" -ge "$BUDGET_S" ]; then echo "SKIPPED (budget, ${SECONDS}s): $name"; return; fi
  local t0=$SECONDS
  timeout "$t" "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name (rc $?, $((SECONDS - t0)) s): $(tail -1 "$OUT/$name.txt")"
}
