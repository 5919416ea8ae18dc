#!/usr/bin/env bash
# A copy of gpuaug at REV (with its kernels) as the package gpuaug_base under .base2/, for
# tests/gpu/ab_inproc.py (both trees in one process). Run from the repository root:
#   bash tests/gpu/make_base2.sh 5d60676
set -euo pipefail
rev=${1:?revision}
rm -rf .base2 && mkdir -p .base2/tmp
git archive "$rev" gpuaug kernels | tar x -C .base2/tmp
mv .base2/tmp/gpuaug .base2/gpuaug_base && mv .base2/tmp/kernels .base2/gpuaug_base/kernels && rmdir .base2/tmp
grep -rl "gpuaug" .base2/gpuaug_base --include=*.py | xargs sed -i -E \
  's/\bfrom gpuaug\b([. ])/from gpuaug_base\1/g; s/\bimport gpuaug\b/import gpuaug_base/g; s/"gpuaug\./"gpuaug_base./g; s/'"'"'gpuaug\./'"'"'gpuaug_base./g'
