// Autocontrast per image and channel, as torchvision's autocontrast, in two steps:
//   1. gpuaug_autocontrast_stats<T, C>: one block per sample (256 threads) reduces the
//      per-channel min and max over the sample and writes its parameter row of step 2,
//      [lo (C), scale (C), bound]: bound = 255 (uint8) or 1 (floats),
//      scale = (max - min) *f32 (1 / bound); a channel with max == min gets lo = 0, scale = 1
//      (left as it is, then clamped, as torchvision does).
//   2. gpuaug_autocontrast<T, C>: out = clamp((x - lo[c]) / scale[c], 0, bound) in float32
//      (uint8 stored as every gpuaug op stores, floor(v + 0.5); torchvision truncates).
#include "intensity.cuh"

namespace {
constexpr int AC_THREADS = 256;

template <typename T, int C>
struct AutocontrastFn {
  __device__ __forceinline__ void operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, float* v) const {
    const float bound = p[2 * C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float t = (gpuaug::load<T>(s, y, x, c) - p[c]) / p[C + c];
      v[c] = fminf(fmaxf(t, 0.f), bound);
    }
  }
};
}  // namespace

// Step 1: grid (N), block AC_THREADS; params (N, P) with P >= 2C + 1.
template <typename T, int C>
__global__ void gpuaug_autocontrast_stats(const gpuaug::i64* src_tab, float* __restrict__ params, int P, int n) {
  __shared__ float smin[C][AC_THREADS];
  __shared__ float smax[C][AC_THREADS];
  const int s = blockIdx.x;
  if (s >= n) return;
  const gpuaug::Sample src = gpuaug::sample_at(src_tab, s);
  float lo[C], hi[C];
#pragma unroll
  for (int c = 0; c < C; ++c) { lo[c] = 3.0e38f; hi[c] = -3.0e38f; }
  const gpuaug::i64 npix = (gpuaug::i64)src.h * src.w;
  for (gpuaug::i64 i = threadIdx.x; i < npix; i += blockDim.x) {
    const int y = (int)(i / src.w), x = (int)(i - (gpuaug::i64)y * src.w);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float v = gpuaug::load<T>(src, y, x, c);
      lo[c] = fminf(lo[c], v);
      hi[c] = fmaxf(hi[c], v);
    }
  }
#pragma unroll
  for (int c = 0; c < C; ++c) { smin[c][threadIdx.x] = lo[c]; smax[c][threadIdx.x] = hi[c]; }
  __syncthreads();
  for (int off = AC_THREADS / 2; off > 0; off >>= 1) {
    if ((int)threadIdx.x < off)
#pragma unroll
      for (int c = 0; c < C; ++c) {
        smin[c][threadIdx.x] = fminf(smin[c][threadIdx.x], smin[c][threadIdx.x + off]);
        smax[c][threadIdx.x] = fmaxf(smax[c][threadIdx.x], smax[c][threadIdx.x + off]);
      }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float bound = gpuaug::maxval<T>();
    float* p = params + (gpuaug::i64)s * P;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float a = smin[c][0], b = smax[c][0];
      const bool flat = a == b;
      p[c] = flat ? 0.f : a;
      p[C + c] = flat ? 1.f : (b - a) * (1.f / bound);
    }
    p[2 * C] = bound;
  }
}

// Step 2.
template <typename T, int C>
__global__ void gpuaug_autocontrast(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params, int P, int n) {
  gpuaug::value_driver<T, C>(src, dst, params, P, n, AutocontrastFn<T, C>());
}
