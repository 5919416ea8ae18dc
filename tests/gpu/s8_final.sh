#!/usr/bin/env bash
# Session 8's last single-GPU call (nvidia-h200, base kit only): the GPU tests of what changed
# this session, then the timings of issues 16 (RandAugment / TrivialAugmentWide kernels),
# 15 (targets vs images alone, kornia), 13 (Compose host cost) and 20 (gpuaug bench --e2e
# --gpus 1; DALI's kit parts when the DALI path should run). Stages that would start
# after BUDGET_S seconds are skipped and listed.
#   OUT=/some/dir bash tests/gpu/s8_final.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${BUDGET_S:-180}
source tests/gpu/stage.sh
stage gpu_tests 150 python3 -m pytest -q -x -m gpu -p no:cacheprovider ${GPU_TESTS:-tests/test_auto_policies.py tests/test_compose_eager_memo.py tests/test_compose_draws.py tests/test_targets_gpu.py tests/test_targets_host_memo.py tests/test_targets_cuda_host.py}
stage ra_px 90 python3 tests/gpu/ra_px.py
cat "$OUT/ra_px.txt" | grep -E "fused|stats" | cut -c1-120
stage kprof 60 python3 tests/gpu/kprof.py ra ta
grep -E "^== " "$OUT/kprof.txt"; grep -E "^ +[0-9.]+ x +[0-9.]+ us" "$OUT/kprof.txt" | cut -c1-110
stage targets_bench 90 python3 tests/gpu/targets_bench.py --iters 30
grep -vE "^\s*$" "$OUT/targets_bench.txt" | tail -14
stage compose_host 90 python3 tests/gpu/compose_host.py --n 256 --iters 100
tail -8 "$OUT/compose_host.txt"
# the multi-GPU bench's code path on this one GPU (gpuaug bench --e2e --gpus 1: one torchrun of
# gpuaug.bench.ddp per path), with the single-process rows of the same paths
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
stage e2e_gpus1 60 python3 -m gpuaug bench --e2e --images 2048 --epochs 1 --min-seconds 0 \
  --paths ${E2E_PATHS:-scheduler_memory} --gpus 1 --steps 20 --warmup 5 --timeout 60 --out "$OUT/e2e"
grep -vE "^\s*$" "$OUT/e2e_gpus1.txt" | tail -16 | cut -c1-160
echo "total ${SECONDS}s"
tar czf /tmp/s8_final.tgz -C "$OUT" . && mv /tmp/s8_final.tgz "$OUT/all.tgz"  # a call returns few files
