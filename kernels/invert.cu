// gpuaug_invert<T, C>: out = M - x, M = 255 (uint8) or 1 (floats); no parameters.
// gpuaug_invert_u8: dense uint8 batches, 16 bytes at a time (255 - x == ~x).
#include "intensity.cuh"

namespace {
template <typename T, int C>
struct InvertFn {
  __device__ __forceinline__ void operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float*, int y, int x, float* v) const {
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = gpuaug::maxval<T>() - gpuaug::load<T>(s, y, x, c);
  }
};

struct InvertVec {
  __device__ __forceinline__ void setup(const float*) {}
  __device__ __forceinline__ uint4 operator()(uint4 v, int) const {
    return make_uint4(~v.x, ~v.y, ~v.z, ~v.w);
  }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_invert(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                              int P, int n) {
  gpuaug::value_driver<T, C>(src, dst, params, P, n, InvertFn<T, C>());
}

extern "C" __global__ void gpuaug_invert_u8(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                            int nvec, GPUAUG_PARAMS params, int P, int n) {
  InvertVec op;
  gpuaug::u8_vec_driver(src, dst, nvec, params, P, n, op);
}
