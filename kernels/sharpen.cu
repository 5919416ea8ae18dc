// gpuaug_sharpen<T, C>: torchvision's adjust_sharpness. params: [factor, bound (255 or 1),
// round_blur (1 for uint8)]. Inner pixels: b = (sum of the 8 neighbours + 5 x) / 13, rounded
// for uint8; out = x + (1 - factor) (b - x), clamped to [0, bound]. The one-pixel border
// keeps x (clamped too), and images of height or width <= 2 are returned unchanged.
#include "common.cuh"

namespace {
template <typename T, int C>
struct SharpenFn {
  __device__ __forceinline__ void operator()(const gpuaug::Sample& s, const gpuaug::Sample&, const float* p,
                                             int y, int x, float* v) const {
    using gpuaug::load;
    const bool tiny = s.h <= 2 || s.w <= 2;
    const bool border = y == 0 || x == 0 || y == s.h - 1 || x == s.w - 1;
    const float f = p[0], bound = p[1];
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float xc = load<T>(s, y, x, c);
      float o = xc;
      if (!border) {
        float sum = 4.f * xc;  // 5 x + 8 neighbours, minus x counted in the 3x3 loop
#pragma unroll
        for (int dy = -1; dy <= 1; ++dy)
#pragma unroll
          for (int dx = -1; dx <= 1; ++dx) sum += load<T>(s, y + dy, x + dx, c);
        float b = sum / 13.f;
        if (p[2] != 0.f) b = floorf(b + 0.5f);
        o = __fmaf_rn(1.f - f, b - xc, xc);
      }
      if (!tiny) o = fminf(fmaxf(o, 0.f), bound);
      v[c] = o;
    }
  }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_sharpen(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params,
                               int P, int n) {
  gpuaug::value_driver<T, C>(src, dst, params, P, n, SharpenFn<T, C>());
}
