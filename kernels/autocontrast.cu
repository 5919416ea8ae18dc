// Autocontrast per image and channel, as torchvision's autocontrast, in two steps:
//   1. gpuaug_autocontrast_parts<T, C>: blocks reduce the per-channel min and max over
//      slices of each sample; gpuaug_autocontrast_rows<T, C> combines them into the sample's
//      parameter row of step 2,
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

// Step 1a: grid (nparts, N), block AC_THREADS: block b reduces the per-channel min and max of
// its slice of sample s's pixels (ceil(H W / nparts) of them; possibly none) into
// parts[s][b] = [min (C), max (C)]. Every part is written (no zeroed or initialised memory).
template <typename T, int C>
__global__ void gpuaug_autocontrast_parts(const gpuaug::i64* src_tab, float* __restrict__ parts, int nparts, int n) {
  __shared__ float smin[C][AC_THREADS];
  __shared__ float smax[C][AC_THREADS];
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const gpuaug::Sample src = gpuaug::sample_at(src_tab, s);
    float lo[C], hi[C];
#pragma unroll
    for (int c = 0; c < C; ++c) { lo[c] = 3.0e38f; hi[c] = -3.0e38f; }
    const gpuaug::i64 npix = (gpuaug::i64)src.h * src.w;
    const gpuaug::i64 per = (npix + nparts - 1) / nparts;
    const gpuaug::i64 begin = per * blockIdx.x, end = min(npix, begin + per);
    for (gpuaug::i64 i = begin + threadIdx.x; i < end; i += blockDim.x) {
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
      float* q = parts + ((gpuaug::i64)s * nparts + blockIdx.x) * (2 * C);
#pragma unroll
      for (int c = 0; c < C; ++c) { q[c] = smin[c][0]; q[C + c] = smax[c][0]; }
    }
    __syncthreads();
  }
}

// Step 1b: one thread per sample: the parameter row of step 2 from its nparts parts,
// [lo (C), scale (C), bound] (min and max do not depend on the order they are taken in).
template <typename T, int C>
__global__ void gpuaug_autocontrast_rows(const float* __restrict__ parts, int nparts, float* __restrict__ params,
                                         int P, int n) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n) return;
  const float bound = gpuaug::maxval<T>();
  const float* q = parts + (gpuaug::i64)s * nparts * (2 * C);
  float* p = params + (gpuaug::i64)s * P;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    float a = 3.0e38f, b = -3.0e38f;
    for (int k = 0; k < nparts; ++k) {
      a = fminf(a, q[k * 2 * C + c]);
      b = fmaxf(b, q[k * 2 * C + C + c]);
    }
    const bool flat = a == b;
    p[c] = flat ? 0.f : a;
    p[C + c] = flat ? 1.f : (b - a) * (1.f / bound);
  }
  p[2 * C] = bound;
}

// Step 2.
template <typename T, int C>
__global__ void gpuaug_autocontrast(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params, int P, int n) {
  gpuaug::value_driver<T, C>(src, dst, params, P, n, AutocontrastFn<T, C>());
}
