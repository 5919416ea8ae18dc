"""One call of each op named on the command line (bench example values, 256x224x224x3 uint8),
for ``ncu`` to profile: ``ncu --section SpeedOfLight ... python3 tests/gpu/ncu_ops.py sharpen median_blur``
(``N=32`` in the environment: 32 images)."""
import os
import sys

import cupy as cp
import numpy as np

import gpuaug
from gpuaug.bench.checks import example_kwargs

rng = np.random.default_rng(0)
n = int(os.environ.get("N", 256))
x = cp.asarray(rng.integers(0, 256, (n, 224, 224, 3), dtype=np.uint8))
for op in sys.argv[1:]:
    kw = example_kwargs(gpuaug.registry[op], 1, n, 224, 224)
    getattr(gpuaug, op)(x, **kw)
cp.cuda.Device().synchronize()
