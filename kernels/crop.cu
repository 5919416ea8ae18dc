// gpuaug_crop<T, C>: per-sample window (params: [top, left]); output pixel (y, x) reads
// src(y + top, x + left). Pixels outside the source are written as zero: that is
// center_crop's zero padding (negative offsets), and it keeps windows whose offsets came
// from the GPU (not checked on the host) from reading out of bounds.
#include "common.cuh"

namespace {
struct CropMap {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, int& sy, int& sx) const {
    sy = y + __float2int_rn(p[0]);
    sx = x + __float2int_rn(p[1]);
    return sy >= 0 && sy < s.h && sx >= 0 && sx < s.w;
  }
  __device__ __forceinline__ float fill(const float*, int) const { return 0.f; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_crop(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params,
                            int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, CropMap());
}
