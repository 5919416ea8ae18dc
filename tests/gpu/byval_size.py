"""Session 18: does the by-value block's size cost device time? The same kernel (brightness-like,
one block row per sample) with the matrix behind a pointer (uploaded once) or in a by-value
block of 64, 512 or 2048 floats, launched back to back (device-bound at 224 x 224); and the
contrast/brightness ops with GPUAUG_BYVAL on and off (events around 500 calls)."""
import os
import struct
import time

import cupy as cp
import numpy as np
from cupy_backends.cuda.api.driver import launchKernel

N = 32
code = r"""
template <int NB> struct Block { float v[NB]; };
template <typename PP>
__device__ __forceinline__ void body(const unsigned char* src, unsigned char* dst, PP params, int P, int per) {
  int s = blockIdx.y;
  float f = params[s * P];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < per; i += gridDim.x * blockDim.x) {
    float v = f * src[(size_t)s * per + i];
    dst[(size_t)s * per + i] = (unsigned char)fminf(fmaxf(rintf(v), 0.f), 255.f);
  }
}
extern "C" __global__ void k_ptr(const unsigned char* src, unsigned char* dst, const float* __restrict__ params, int P, int per) { body(src, dst, params, P, per); }
extern "C" __global__ void k_64(const unsigned char* src, unsigned char* dst, const __grid_constant__ Block<64> params, int P, int per) { body(src, dst, params.v, P, per); }
extern "C" __global__ void k_512(const unsigned char* src, unsigned char* dst, const __grid_constant__ Block<512> params, int P, int per) { body(src, dst, params.v, P, per); }
extern "C" __global__ void k_2048(const unsigned char* src, unsigned char* dst, const __grid_constant__ Block<2048> params, int P, int per) { body(src, dst, params.v, P, per); }
"""
mod = cp.RawModule(code=code, options=("-std=c++17",))
rng = np.random.default_rng(0)
for side in (16, 224):
    x = cp.asarray(rng.integers(0, 256, (N, side, side, 3), dtype=np.uint8))
    y = cp.empty_like(x)
    per = side * side * 3
    gx = max(1, min(64, per // 1024))
    blk = np.zeros(2048, np.float32)
    blk[:2 * N:2] = rng.uniform(0.5, 1.5, N)
    dpar = cp.asarray(blk[:2 * N])
    res = {}
    for name in ("k_ptr", "k_64", "k_512", "k_2048"):
        fn = mod.get_function(name)
        slots = np.zeros(5, np.uint64)
        ptrs = slots.ctypes.data + 8 * np.arange(5, dtype=np.uint64)
        if name == "k_ptr":
            struct.Struct("=QQQi4xi4x").pack_into(slots, 0, x.data.ptr, y.data.ptr, dpar.data.ptr, 2, per)
        else:
            struct.Struct("=QQ8xi4xi4x").pack_into(slots, 0, x.data.ptr, y.data.ptr, 2, per)
            ptrs[2] = blk.ctypes.data
        p = int(ptrs.ctypes.data)
        s = cp.cuda.get_current_stream().ptr

        def go():
            launchKernel(fn.kernel.ptr, gx, N, 1, 256, 1, 1, 0, s, p, 0)
        for _ in range(50):
            go()
        best = 1e9
        for r in range(5):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            for _ in range(500):
                go()
            e1.record()
            e1.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(e0, e1) / 500 * 1e3)
        res[name] = best
        ref = cp.asnumpy(y)
    print(f"{side}x{side} grid ({gx},{N}): us per launch back to back (device view, best of 5 x 500): " +
          ", ".join(f"{k} {v:.2f}" for k, v in res.items()))

import gpuaug
from gpuaug import _plan
for side in (16, 224):
    x = cp.asarray(rng.integers(0, 256, (N, side, side, 3), dtype=np.uint8))
    fac = [rng.uniform(0.5, 1.5, N) for _ in range(8)]
    for op in ("contrast", "brightness", "saturation", "gaussian_blur"):
        fn = getattr(gpuaug, op)
        if op == "gaussian_blur":
            args = [dict(sigma=rng.uniform(0.5, 2, N), kernel_size=7) for _ in range(8)]
        else:
            args = [{"factor": f} for f in fac]
        line = []
        for bv in ("1", "0", "1", "0"):
            os.environ["GPUAUG_BYVAL"] = bv
            _plan.clear_plans()
            for j in range(20):
                fn(x, **args[j % 8])
            cp.cuda.Device().synchronize()
            for j in range(20):
                fn(x, **args[j % 8])
            cp.cuda.Device().synchronize()
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            t0 = time.perf_counter()
            e0.record()
            for j in range(500):
                fn(x, **args[j % 8])
            e1.record()
            e1.synchronize()
            t = (time.perf_counter() - t0) / 500 * 1e6
            line.append(f"byval={bv} loop {t:.1f} dev {cp.cuda.get_elapsed_time(e0, e1) / 500 * 1e3:.1f}")
        print(f"{op} {side}: " + " | ".join(line), "| byval replays", _plan.stats["run_byval"])
