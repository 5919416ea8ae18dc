#!/usr/bin/env bash
# Issue 20 follow-up: why the DALI loader (gpuaug_dali_rrc) scales 103% from 1 to 2 GPUs but
# 60-84% from 1 to 4. Runs `gpuaug bench --e2e FOLDER --gpus 1,4 --paths gpuaug_dali_rrc` over
#   - folder size (N_LIST, default "4096 16384"): with 4,096 JPEGs a rank's shard on 4 GPUs is
#     4 batches of 256 a epoch, so epoch boundaries come 4x as often per image as on 1 GPU;
#   - DALI threads per rank (W_LIST, default "8 4 14").
# Needs the DALI kit (tests/gpu/setup.sh). Writes $OUT/dali_scale.txt and $OUT/all.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"; export OUT
source tests/gpu/setup.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
N_LIST=${N_LIST:-"4096 16384"}; W_LIST=${W_LIST:-"8 4 14"}; STEPS=${STEPS:-60}; BUDGET_S=${BUDGET_S:-480}
S="$OUT/dali_scale.txt"; : > "$S"
for n in $N_LIST; do
  F=$(python3 -c "import sys; from gpuaug.bench.e2e import synthetic_folder; print(synthetic_folder(int(sys.argv[1])))" "$n" | tail -1)
  for w in $W_LIST; do
    [ "$SECONDS" -lt "$BUDGET_S" ] || { echo "SKIPPED n=$n workers=$w (budget)" | tee -a "$S"; continue; }
    d="$OUT/n$n-w$w"
    timeout 200 python3 -m gpuaug bench --e2e "$F" --gpus 1,4 --paths gpuaug_dali_rrc --workers "$w" --steps "$STEPS" \
      --warmup 5 --batch 256 --size 224 --timeout 100 --out "$d" > "$d.txt" 2>&1
    echo "folder $n JPEGs, DALI threads/rank $w (rc $?, ${SECONDS}s):" | tee -a "$S"
    grep -E "^\| gpuaug_dali_rrc" "$d.txt" "$d/e2e.md" 2>/dev/null | sed 's/^[^|]*//' | sort -u | tee -a "$S"
    grep -hE "^\[rank .*images/s" "$d"/scaling/*-4.txt 2>/dev/null | cut -c1-120 | tee -a "$S"
  done
done
tar czf /tmp/dali_scale.tgz -C "$OUT" . && mv /tmp/dali_scale.tgz "$OUT/all.tgz"
