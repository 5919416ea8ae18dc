#!/usr/bin/env bash
# Fused augmentation policy benchmark + GPU tests on the GPU machine (about 2 minutes).
#
#   OUT=/some/dir bash tests/gpu/policy_bench.sh
#
# 1. The policy RandomHorizontalFlip + RandomAffine + ColorJitter + Normalize, per sample,
#    256x224x224x3 uint8 NHWC -> float32 NCHW (38.5 MB read, 154 MB written):
#    - gpuaug.Compose, fused (one kernel + the contrast pre-pass), drawing parameters each call,
#      and replaying fixed parameters (same device work, less host work);
#    - the same parameters as the op-by-op gpuaug chain (flip, warp_affine, color_jitter,
#      normalize: four kernels, three uint8 intermediates);
#    - torchvision v2 (Compose on the CUDA batch tensor; note: one parameter set per batch);
#    - kornia AugmentationSequential (per sample, float32; skipped when kornia is missing);
#    - NVIDIA DALI's chain of built-ins (flip, warp_affine, hsv + brightness_contrast,
#      crop_mirror_normalize; skipped without DALI);
#    - a device-to-device copy moving the same bytes (the memory floor, measured here).
#    Device time per batch by CUDA events with the calls queued behind a spin kernel (so the
#    host's cost per call does not hide or pad device time; gpuaug.bench.GpuClock), median of
#    REPEAT; the host's own cost per call measured separately (no spin).
#    Target: fused <= 0.10 ms per batch (floor ~0.045 ms on an H200).
# 2. RandomResizedCrop(224) from 16 1080p frames (16x1080x1920x3 uint8): fused policy, uint8
#    out and + Normalize float32 NCHW; gpuaug.resized_crop with the same boxes; torchvision v2.
# 3. Correctness on this GPU: the fused CUDA C output against the CPU twin (same parameters).
# 4. tests/test_policy.py -m gpu (RUN_TESTS=0 to skip).
#
# Writes to $OUT: policy_bench.json (all numbers), policy_bench.txt (the log),
# policy_gpu_tests.txt. Knobs: REPEAT=30 RUN_TESTS=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export OUT
source tests/gpu/setup.sh

timeout 150 python3 tests/gpu/policy_bench.py 2>&1 | tee "$OUT/policy_bench.txt"

if [ "${RUN_TESTS:-1}" = 1 ]; then
  timeout 200 python3 -m pytest -q tests/test_policy.py -m gpu 2>&1 | tail -25 | tee "$OUT/policy_gpu_tests.txt"
fi
