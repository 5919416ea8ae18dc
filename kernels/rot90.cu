// gpuaug_rot90<T, C>: per-sample counter-clockwise quarter turns as numpy.rot90
// (params: [k]). Output pixel (y, x) of a k-turned h x w image reads
//   k%4 = 1: src(x, w-1-y)   2: src(h-1-y, w-1-x)   3: src(h-1-x, y)
#include "common.cuh"

namespace {
struct Rot90Map {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, int& sy, int& sx) const {
    // k may come from the GPU unnormalised (any integer): reduce it here.
    int k = __float2int_rn(p[0]) % 4;
    if (k < 0) k += 4;
    switch (k) {
      case 1: sy = x; sx = s.w - 1 - y; break;
      case 2: sy = s.h - 1 - y; sx = s.w - 1 - x; break;
      case 3: sy = s.h - 1 - x; sx = y; break;
      default: sy = y; sx = x; break;
    }
    return true;
  }
  __device__ __forceinline__ float fill(const float*, int) const { return 0.f; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_rot90(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                             int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, Rot90Map());
}
