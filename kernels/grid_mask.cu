// gpuaug_grid_mask<T, C>: GridMask. params: [cos a, sin a, shift_y, shift_x, tile, ratio * tile]
// (float32). Pixel (y, x) is zeroed iff (u mod tile) < ratio * tile and (v mod tile) <
// ratio * tile, with u = x cos a - y sin a - shift_x, v = x sin a + y cos a - shift_y.
// The float32 operations (explicit fma, correctly rounded division) are those of the Numba
// twin (kernels/numba/grid_mask.py), so both make the same decision at every pixel.
#include "common.cuh"

namespace {
__device__ __forceinline__ float mod_tile(float u, float tile) {
  return __fmaf_rn(-floorf(__fdiv_rn(u, tile)), tile, u);
}

struct GridMaskMap {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample&, const gpuaug::Sample&,
                                             const float* p, int y, int x, int& sy, int& sx) const {
    const float fy = (float)y, fx = (float)x;
    const float u = __fmaf_rn(fx, p[0], __fmaf_rn(-fy, p[1], -p[3]));
    const float v = __fmaf_rn(fx, p[1], __fmaf_rn(fy, p[0], -p[2]));
    sy = y;
    sx = x;
    return !(mod_tile(u, p[4]) < p[5] && mod_tile(v, p[4]) < p[5]);
  }
  __device__ __forceinline__ float fill(const float*, int) const { return 0.f; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_grid_mask(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params,
                                 int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, GridMaskMap());
}
