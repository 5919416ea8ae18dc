// gpuaug_erase<T, C>: pixels inside any of K boxes take the sample's fill value, the rest
// are copied. params: [fill_0..fill_3, K, (top, left, height, width) x K]; a box covers
// top <= y < top + height, left <= x < left + width (integers, exact in float32).
#include "common.cuh"

namespace {
struct EraseMap {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample&, const gpuaug::Sample&,
                                             const float* p, int y, int x, int& sy, int& sx) const {
    const int k = (int)p[4];
    const float fy = (float)y, fx = (float)x;
    for (int i = 0; i < k; ++i) {
      const float* b = p + 5 + 4 * i;
      if (fy >= b[0] && fy < b[0] + b[2] && fx >= b[1] && fx < b[1] + b[3]) return false;
    }
    sy = y;
    sx = x;
    return true;
  }
  __device__ __forceinline__ float fill(const float* p, int c) const { return p[c]; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_erase(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params,
                             int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, EraseMap());
}
