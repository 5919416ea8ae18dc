// gpuaug_transpose<T, C>: swap height and width; output pixel (y, x) reads src(x, y).
#include "common.cuh"

namespace {
struct TransposeMap {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample&, const gpuaug::Sample&,
                                             const float*, int y, int x, int& sy, int& sx) const {
    sy = x;
    sx = y;
    return true;
  }
  __device__ __forceinline__ float fill(const float*, int) const { return 0.f; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_transpose(const gpuaug::i64* src, const gpuaug::i64* dst,
                                 const float* params, int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, TransposeMap());
}
