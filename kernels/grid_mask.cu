// gpuaug_grid_mask<T, C>: GridMask. params: [cos a, sin a, shift_y, shift_x, tile, ratio * tile]
// (float32). Pixel (y, x) is zeroed iff (u mod tile) < ratio * tile and (v mod tile) <
// ratio * tile, with u = x cos a - y sin a - shift_x, v = x sin a + y cos a - shift_y.
// The float32 operations (explicit fma, correctly rounded division) are those of the Numba
// twin (kernels/numba/grid_mask.py), so both make the same decision at every pixel.
// Launch: replace_rows (rowvec.cuh), 16 / sizeof(T) pixels of a row per thread.
#include "common.cuh"
#include "rowvec.cuh"

namespace {
__device__ __forceinline__ float mod_tile(float u, float tile) {
  return __fmaf_rn(-floorf(__fdiv_rn(u, tile)), tile, u);
}

template <typename T>
struct GridMask {
  static constexpr int PPT = gpuaug::replace_ppt(sizeof(T));
  __device__ __forceinline__ void decide(const float* p, const gpuaug::Sample&, int, int y, int x0,
                                         int (&what)[PPT]) const {
    const float fy = (float)y;
    const float uy = __fmaf_rn(-fy, p[1], -p[3]), vy = __fmaf_rn(fy, p[0], -p[2]);
#pragma unroll
    for (int j = 0; j < PPT; ++j) {
      const float fx = (float)(x0 + j);
      const float u = __fmaf_rn(fx, p[0], uy), v = __fmaf_rn(fx, p[1], vy);
      what[j] = mod_tile(u, p[4]) < p[5] && mod_tile(v, p[4]) < p[5];
    }
  }
  T zero;
  __device__ __forceinline__ void prepare(const float*) { zero = gpuaug::from_float<T>(0.f); }
  __device__ __forceinline__ T value(int, int) const { return zero; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_grid_mask(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                                 int P, int n) {
  gpuaug::replace_rows<T, C>(src, dst, params, P, n, GridMask<T>());
}
