"""Nsight Compute on RandAugment(2, 9)'s kernels (issue 16: where the statistics launches and
the fused pass lose time), 256x224x224x3 uint8 random data, run under ncu:

    ncu --kernel-name regex:gpuaug_autoaug --launch-skip 9 --launch-count 3 \\
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \\
        --section SchedulerStats python3 tests/gpu/ra_ncu.py

Four calls (three warm-up): each call launches gpuaug_autoaug_stats_fused<3, 0>, <3, 1> (when
some sample reduces at that step) and gpuaug_autoaug_fused<3, 2>."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import cupy as cp  # noqa: E402

import gpuaug  # noqa: E402

x = cp.asarray(np.random.default_rng(0).integers(0, 256, (256, 224, 224, 3), dtype=np.uint8))
ra = gpuaug.RandAugment(2, 9, seed=0)
for _ in range(4):
    y = ra(x)
cp.cuda.Device().synchronize()
print("ok", y.shape, int(y[0, 0, 0, 0]))
