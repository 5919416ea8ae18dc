// gpuaug_solarize<T, C>: out = M - x where x >= threshold, else x; M = 255 (uint8) or 1
// (floats); params [threshold]. gpuaug_solarize_u8: dense uint8 batches, four bytes per
// SIMD compare (x >= t  <=>  x >= ceil(t) for integer x).
#include "intensity.cuh"

namespace {
template <typename T, int C>
struct SolarizeFn {
  __device__ __forceinline__ void operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, float* v) const {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float a = gpuaug::load<T>(s, y, x, c);
      v[c] = a >= p[0] ? gpuaug::maxval<T>() - a : a;
    }
  }
};

struct SolarizeVec {
  unsigned int t4;   // ceil(threshold) in every byte
  bool none;         // threshold above 255: nothing inverts
  __device__ __forceinline__ void setup(const float* p) {
    const float t = ceilf(p[0]);
    none = !(t <= 255.f);
    const unsigned int ti = t <= 0.f ? 0u : (none ? 255u : (unsigned int)t);
    t4 = ti * 0x01010101u;
  }
  __device__ __forceinline__ unsigned int word(unsigned int w) const {
    return none ? w : w ^ __vcmpgeu4(w, t4);  // 255 - x == x ^ 0xff
  }
  __device__ __forceinline__ uint4 operator()(uint4 v, int) const {
    return make_uint4(word(v.x), word(v.y), word(v.z), word(v.w));
  }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_solarize(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                                int P, int n) {
  gpuaug::value_driver<T, C>(src, dst, params, P, n, SolarizeFn<T, C>());
}

extern "C" __global__ void gpuaug_solarize_u8(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                              int nvec, GPUAUG_PARAMS params, int P, int n) {
  SolarizeVec op;
  gpuaug::u8_vec_driver(src, dst, nvec, params, P, n, op);
}
