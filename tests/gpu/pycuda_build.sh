#!/usr/bin/env bash
# Build pycuda from its sdist on the GPU machine (no network), then run the pycuda tests and
# the prefetch example. Logs under $OUT; a summary at the end.
#
#   bash tests/gpu/pycuda_build.sh            (device tool: carry .pycuda)
#
# .pycuda/ (ignored by git; see the README's pycuda paragraph for how it was filled) holds
# pycuda-<version>.tar.gz and the wheels pycuda needs at run time: pytools, platformdirs,
# siphash24, typing_extensions, mako, markupsafe (cp312 manylinux for the two binary ones).
#
# Environment:
#   CUDA_ROOT         the toolkit (include/cuda.h); found from nvcc / /usr/local/cuda* if unset
#   PYCUDA_SITE       where pycuda is installed (default /tmp/site, the kit's PYTHONPATH dir)
#   PYCUDA_BUILD_DIR  scratch (default /tmp/pycuda-build)
#   PYCUDA_JOBS       parallel compiles (default: the number of cores)
#   PYCUDA_REBUILD=1  build again although $SITE already has an importable pycuda
#   PYCUDA_ONLY_BUILD=1   stop after the build (what a machine without a GPU can check)
#   PYCUDA_SKIP_SETUP=1   do not source tests/gpu/setup.sh (already done, or not wanted)
#   PYCUDA_FIND_LINKS  one more wheel folder (e.g. cp311 markupsafe/siphash24 for a local try)
#
# Why not just `pip install pycuda`: no network there, and pycuda has no wheels. Why the
# wheel is built in-process rather than by pip: setuptools compiles an extension's sources
# one after the other (its -j runs extensions in parallel, and pycuda has one), and the
# 50-odd Boost.Python files take minutes serially; a thread pool around the compiler's
# per-object step makes it ~1 minute on 16 cores. If that fails, plain pip is the fallback.
# The Python steps (finding pip's cuda.h, the wheel build, the driver line) are in
# tests/gpu/pycuda_build.py beside this script.
set -uo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
OUT=${OUT:-$REPO/out}
mkdir -p "$OUT"
export OUT
LOG=$OUT/pycuda_build.log
: > "$LOG"
t_start=$SECONDS
say() { echo "pycuda_build: $*" | tee -a "$LOG"; }
fail() { say "FAILED: $*"; echo "--- last lines of $LOG ---"; tail -n 40 "$LOG"; exit 1; }

KITDIR=$REPO/.pycuda
SITE=${PYCUDA_SITE:-/tmp/site}
B=${PYCUDA_BUILD_DIR:-/tmp/pycuda-build}
JOBS=${PYCUDA_JOBS:-$(nproc)}
PY=${PYTHON:-python3}

if [ "${PYCUDA_SKIP_SETUP:-0}" != 1 ] && [ -f tests/gpu/setup.sh ]; then
  # shellcheck disable=SC1091
  source tests/gpu/setup.sh >> "$LOG" 2>&1 || say "warning: tests/gpu/setup.sh returned $?"
fi
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
mkdir -p "$SITE"

# ---- already built (a warm machine)? -----------------------------------------------------
skip_build=0
if [ "${PYCUDA_REBUILD:-0}" != 1 ] && ls "$SITE"/pycuda/_driver*.so > /dev/null 2>&1 \
   && "$PY" -c "import pycuda.driver" > /dev/null 2>&1; then
  skip_build=1
  say "pycuda already installed in $SITE and importable: not rebuilt (PYCUDA_REBUILD=1 forces it)"
fi

if [ $skip_build = 0 ]; then
# ---- inputs ---------------------------------------------------------------------------
sdist=$(ls "$KITDIR"/pycuda-*.tar.gz 2>/dev/null | sort -V | tail -n 1)
[ -n "$sdist" ] || fail "no $KITDIR/pycuda-*.tar.gz: carry .pycuda (see the README's pycuda paragraph)"
say "sdist $(basename "$sdist"); wheels: $(cd "$KITDIR" && ls *.whl 2>/dev/null | tr '\n' ' ')"

# ---- the CUDA toolkit -----------------------------------------------------------------
cands=()
[ -n "${CUDA_ROOT:-}" ] && cands+=("$CUDA_ROOT")
[ -n "${CUDA_HOME:-}" ] && cands+=("$CUDA_HOME")
if command -v nvcc > /dev/null; then
  cands+=("$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")")
  # a wrapper script (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`) names the real one
  real=$(grep -o '/[^ "]*/bin/nvcc' "$(command -v nvcc)" 2>/dev/null | head -n 1)
  [ -n "$real" ] && cands+=("$(dirname "$(dirname "$real")")")
fi
cands+=(/usr/local/cuda /usr/local/cuda-13* /usr/local/cuda-1* /opt/cuda)
CUDA_ROOT=
for d in "${cands[@]}"; do
  if [ -f "$d/include/cuda.h" ]; then CUDA_ROOT=$(readlink -f "$d"); break; fi
done
if [ -z "$CUDA_ROOT" ]; then
  # pip's CUDA toolkit packages (nvidia/cu13/include/cuda.h) as a last resort
  h=$("$PY" "$REPO/tests/gpu/pycuda_build.py" find-cuda-h 2>/dev/null)
  [ -n "$h" ] && CUDA_ROOT=$(dirname "$(dirname "$h")")
fi
[ -n "$CUDA_ROOT" ] || fail "no CUDA toolkit headers (include/cuda.h) found; set CUDA_ROOT"
export CUDA_ROOT
cuver=$(grep -m1 '#define CUDA_VERSION' "$CUDA_ROOT/include/cuda.h" | awk '{print $3}')
say "CUDA_ROOT=$CUDA_ROOT (cuda.h CUDA_VERSION $cuver)"

rm -rf "$B"; mkdir -p "$B/lib"
# pycuda links -lcuda. The driver's libcuda.so.1 may come without the libcuda.so link (a
# container's driver mount), and a machine without a driver has at most the toolkit's stub.
# Link against whichever is found through a libcuda.so in our own folder; at run time the
# loader takes the real driver's libcuda.so.1 (the stub's soname is the same).
libcuda=
for f in "$CUDA_ROOT"/lib64/stubs/libcuda.so "$CUDA_ROOT"/lib/stubs/libcuda.so \
         "$CUDA_ROOT"/targets/*/lib/stubs/libcuda.so \
         /usr/local/nvidia/lib64/libcuda.so.1 /usr/local/nvidia/lib/libcuda.so.1 \
         /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 /usr/lib/libcuda.so.1 \
         $(ldconfig -p 2>/dev/null | awk '/libcuda\.so(\.1)? /{print $NF}'); do
  if [ -e "$f" ]; then libcuda=$f; break; fi
done
if [ -n "$libcuda" ]; then
  ln -s "$libcuda" "$B/lib/libcuda.so"
  say "linking against $libcuda"
else
  # no driver, no stub: an empty library with the driver's soname is enough to link
  echo "" | gcc -shared -x c -o "$B/lib/libcuda.so" -Wl,-soname,libcuda.so.1 - >> "$LOG" 2>&1 \
    || fail "no libcuda found and could not make a stub"
  # keep the stub as a dependency although it defines nothing (toolchains that link with
  # --as-needed would drop it); distutils puts $LDFLAGS before the libraries
  export LDFLAGS="${LDFLAGS:+$LDFLAGS }-Wl,--no-as-needed"
  say "no libcuda found: linking against an empty stub (pycuda will import only where a driver is)"
fi
curand_opt=--no-cuda-enable-curand
for d in "$CUDA_ROOT/lib64" "$CUDA_ROOT/lib" "$CUDA_ROOT"/targets/*/lib; do
  if [ -f "$CUDA_ROOT/include/curand.h" ] && ls "$d"/libcurand.so* > /dev/null 2>&1; then
    curand_opt="--curand-lib-dir=$d"; break
  fi
done
say "curand: ${curand_opt}"

# ---- configure and build --------------------------------------------------------------
pyinc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
[ -f "$pyinc/Python.h" ] || fail "no Python.h in $pyinc: the Python headers (python3-dev) are needed to build pycuda"
command -v g++ > /dev/null || fail "no g++: pycuda's extension is C++"
say "$("$PY" -c "import sys, numpy, setuptools; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'setuptools', setuptools.__version__)"); g++ $(g++ -dumpfullversion)"
t0=$SECONDS
tar -xzf "$sdist" -C "$B" || fail "cannot unpack $sdist"
SRC=$(ls -d "$B"/pycuda-*/ | head -n 1)
SRC=${SRC%/}
cd "$SRC" || fail "no source dir"
cudart_dir=$CUDA_ROOT/lib64
[ -d "$cudart_dir" ] || cudart_dir=$CUDA_ROOT/lib
"$PY" configure.py --cuda-root="$CUDA_ROOT" --cudadrv-lib-dir="$B/lib" --cudart-lib-dir="$cudart_dir" \
  $curand_opt >> "$LOG" 2>&1 || fail "configure.py"
cat siteconf.py >> "$LOG"

"$PY" "$REPO/tests/gpu/pycuda_build.py" wheel "$JOBS" "$B/dist" >> "$LOG" 2>&1
rc=$?
whl=$(ls "$B"/dist/pycuda-*.whl 2>/dev/null | head -n 1)
if [ $rc = 0 ] && [ -n "$whl" ]; then
  say "built $(basename "$whl") in $((SECONDS - t0)) s ($JOBS jobs)"
  python_target=$whl
else
  say "parallel wheel build failed (exit $rc); falling back to pip's serial build"
  python_target=$SRC
fi
cd "$REPO"
# --target installs every dependency into $SITE (pip ignores what is installed elsewhere
# under --target): all of them travel in .pycuda; numpy is only a build requirement.
links=(--find-links "$KITDIR")
[ -n "${PYCUDA_FIND_LINKS:-}" ] && links+=(--find-links "$PYCUDA_FIND_LINKS")
"$PY" -m pip install --no-build-isolation --no-index "${links[@]}" --target "$SITE" --upgrade \
  --no-compile --no-cache-dir "$python_target" >> "$LOG" 2>&1 || fail "pip install pycuda"
say "installed into $SITE in $((SECONDS - t0)) s"
"$PY" -c "import pycuda, pytools, mako; print('pycuda', pycuda.VERSION_TEXT, 'from', pycuda.__file__)" 2>&1 | tee -a "$LOG"
ext=$(ls "$SITE"/pycuda/_driver*.so 2>/dev/null | head -n 1)
[ -n "$ext" ] || fail "no pycuda/_driver*.so in $SITE"
say "$(basename "$ext") needs: $(readelf -d "$ext" 2>/dev/null | grep -o 'NEEDED.*' | grep -o '\[[^]]*\]' | tr '\n' ' ')"
if command -v readelf > /dev/null; then
  readelf -d "$ext" | grep -q 'libcuda\.so' || fail "$(basename "$ext") does not link libcuda"
fi
fi  # skip_build

if [ "${PYCUDA_ONLY_BUILD:-0}" = 1 ]; then
  say "build only: done in $((SECONDS - t_start)) s"
  exit 0
fi

# ---- run ------------------------------------------------------------------------------
"$PY" tests/gpu/pycuda_build.py driver 2>&1 | tee -a "$LOG"
PT=("$PY" -m pytest -q -p no:cacheprovider -rfEsx)
t0=$SECONDS
timeout 270 "${PT[@]}" tests/test_pycuda.py "tests/test_scheduler_gpu.py::test_pycuda_stream_and_device_allocations" \
  > "$OUT/pycuda-tests.log" 2>&1
trc=$?
say "tests: exit $trc in $((SECONDS - t0)) s: $(tail -n 1 "$OUT/pycuda-tests.log")"
grep -E "^(FAILED|ERROR|SKIPPED|XFAIL)" "$OUT/pycuda-tests.log" | head -n 30
t0=$SECONDS
timeout 120 "$PY" examples/pycuda_prefetch.py > "$OUT/pycuda-prefetch.log" 2>&1
erc=$?
say "example: exit $erc in $((SECONDS - t0)) s"
tail -n 20 "$OUT/pycuda-prefetch.log"
echo "== summary: pycuda build+install OK; tests exit $trc; example exit $erc; total $((SECONDS - t_start)) s"
[ $trc = 0 ] && [ $erc = 0 ]
