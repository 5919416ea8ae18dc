#!/usr/bin/env bash
# SASS and ptxas statistics of one kernel instance: bash tests/gpu/sass.sh FILE.cu 'name<args>' 'signature args' OUTFILE
#   bash tests/gpu/sass.sh gaussian_blur.cu 'gpuaug_gaussian_blur_k<unsigned char, 3, 11>' 'const gpuaug::i64*, const gpuaug::i64*, const float*, int, int' g.sass
set -euo pipefail
d=$(mktemp -d)
printf '#include "%s"\ntemplate __global__ void %s(%s);\n' "$1" "$2" "$3" > "$d/k.cu"
nvcc -arch=sm_90 -cubin -std=c++17 -Ikernels -Xptxas -v -o "$d/k.cubin" "$d/k.cu" > "$4" 2>&1
cuobjdump -sass "$d/k.cubin" >> "$4"
grep -oE "^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[0-9T] )?[A-Z0-9_]+" "$4" | awk '{print $NF}' | sort | uniq -c | sort -rn | head -25
