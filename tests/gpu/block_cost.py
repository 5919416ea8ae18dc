"""Session 18: host cost of one cuLaunchKernel by the size of its by-value block (2, 4, 8, 16 KB),
and crop / normalize / erase at 256 with the block sizes (512, 4096) against (512, 1024, 2048, 4096)."""
import struct
import sys
import time

import cupy as cp
import numpy as np
from cupy_backends.cuda.api.driver import launchKernel

code = r"""
template <int NB> struct Block { float v[NB]; };
template <int NB>
__global__ void k(float* out, const __grid_constant__ Block<NB> b) { if (threadIdx.x == 0) out[blockIdx.x] = b.v[blockIdx.x]; }
"""
sizes = (512, 1024, 2048, 4096, 8000)
mod = cp.RawModule(code=code, options=("-std=c++17",), name_expressions=[f"k<{s}>" for s in sizes])
out = cp.zeros(64, np.float32)
s = cp.cuda.get_current_stream().ptr
for nb in sizes:
    fn = mod.get_function(f"k<{nb}>")
    blk = np.arange(nb, dtype=np.float32)
    slots = np.zeros(2, np.uint64)
    ptrs = slots.ctypes.data + 8 * np.arange(2, dtype=np.uint64)
    struct.Struct("=Q").pack_into(slots, 0, out.data.ptr)
    ptrs[1] = blk.ctypes.data
    p = int(ptrs.ctypes.data)
    for _ in range(100):
        launchKernel(fn.kernel.ptr, 1, 1, 1, 32, 1, 1, 0, s, p, 0)
    cp.cuda.Device().synchronize()
    best = 1e9
    for r in range(7):
        t0 = time.perf_counter()
        for _ in range(300):
            launchKernel(fn.kernel.ptr, 1, 1, 1, 32, 1, 1, 0, s, p, 0)
        t1 = time.perf_counter()
        cp.cuda.Device().synchronize()
        t2 = time.perf_counter()
        best = min(best, (t1 - t0) / 300 * 1e6)
    print(f"block {nb * 4:6d} bytes: host us per launch (300 queued, least of 7): {best:.2f}; loop with sync {(t2 - t0) / 300 * 1e6:.2f}")

import gpuaug
from gpuaug import _plan
from gpuaug.bench.checks import example_kwargs, prepare_call
from gpuaug.kernels import _cuda
rng = np.random.default_rng(0)
n = 256
inputs = [cp.asarray(rng.integers(0, 256, (n, 224, 224, 3), dtype=np.uint8)) for _ in range(4)]
ops = sys.argv[1].split(",") if len(sys.argv) > 1 else ["crop", "normalize", "erase", "crop_mirror_normalize", "grid_mask", "rotate"]
for sizes_ in ((512, 4096), (512, 1024, 2048, 4096)):
    _cuda.BLOCK_SIZES = sizes_
    _plan.clear_plans()
    for op in ops:
        spec = gpuaug.registry[op]
        f = prepare_call(spec, "cuda", inputs, example_kwargs(spec, 1, n, 224, 224), "NHWC", cp)[0]
        for _ in range(30):
            f()
        cp.cuda.Device().synchronize()
        best = 1e9
        for r in range(5):
            t0 = time.perf_counter()
            for _ in range(100):
                f()
            cp.cuda.Device().synchronize()
            best = min(best, (time.perf_counter() - t0) / 100 * 1e6)
        print(f"sizes {sizes_}: {op:24s} loop {best:6.1f} us at 256")
