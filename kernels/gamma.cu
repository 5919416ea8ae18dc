// gpuaug_gamma<T, C>: out = M * clamp(gain * (max(x, 0) / M)^gamma, 0, 1), M = 255 (uint8)
// or 1 (floats); params [gamma, gain]. gpuaug_gamma_u8: dense uint8 batches through a
// per-sample 256-entry table in shared memory, built with the same formula.
#include "intensity.cuh"

namespace {
__device__ __forceinline__ float gamma_value(float x, float g, float gain, float m) {
  const float r = gain * powf(fmaxf(x, 0.f) / m, g);
  return m * fminf(fmaxf(r, 0.f), 1.f);
}

template <typename T, int C>
struct GammaFn {
  __device__ __forceinline__ void operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, float* v) const {
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = gamma_value(gpuaug::load<T>(s, y, x, c), p[0], p[1], gpuaug::maxval<T>());
  }
};

struct GammaLut {
  unsigned char* lut;
  __device__ __forceinline__ void setup(const float* p) {
    __syncthreads();  // the previous sample's table is no longer read
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
      lut[i] = gpuaug::from_float<unsigned char>(gamma_value((float)i, p[0], p[1], 255.f));
    __syncthreads();
  }
  __device__ __forceinline__ uint4 operator()(uint4 v, int) const { return gpuaug::lut_vec(lut, v); }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_gamma(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                             int P, int n) {
  gpuaug::value_driver<T, C>(src, dst, params, P, n, GammaFn<T, C>());
}

extern "C" __global__ void gpuaug_gamma_u8(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                           int nvec, GPUAUG_PARAMS params, int P, int n) {
  __shared__ unsigned char lut[256];
  GammaLut op{lut};
  gpuaug::u8_vec_driver(src, dst, nvec, params, P, n, op);
}
