// gpuaug_flip<T, C>: per-sample horizontal / vertical flip (params: [horizontal, vertical]).
#include "common.cuh"

namespace {
struct FlipMap {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, int& sy, int& sx) const {
    sx = p[0] != 0.f ? s.w - 1 - x : x;
    sy = p[1] != 0.f ? s.h - 1 - y : y;
    return true;
  }
  __device__ __forceinline__ float fill(const float*, int) const { return 0.f; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_flip(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params,
                            int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, FlipMap());
}
