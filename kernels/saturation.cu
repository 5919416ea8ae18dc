// gpuaug_saturation<T, C> / gpuaug_saturation_packed<T, C>: torchvision's adjust_saturation,
// out = clamp(factor * x + (1 - factor) * gray, 0, max) per pixel, gray = 0.2989 r + 0.587 g +
// 0.114 b (floored for uint8); alpha copied. One channel: unchanged (as torchvision).
// params: [factor, max].
#include "colour.cuh"

namespace {
template <typename T, int C>
struct Saturation : gpuaug::OpBase {
  float f;
  __device__ __forceinline__ Saturation(const float* p, float) : f(GPUAUG_LDP(p)) {}
  template <int V>
  __device__ __forceinline__ void apply(const float* a, float* o) const {
    if constexpr (C < 3) {
      o[0] = a[0];
    } else {
      const float g = (1.f - f) * gpuaug::luma_floor<T>(a[0], a[1], a[2]);
#pragma unroll
      for (int c = 0; c < C; ++c)
        o[c] = c < 3 ? gpuaug::clamp_to(fmaf(f, a[c], g), gpuaug::Range<T>::max) : a[c];
    }
  }
};
}  // namespace

GPUAUG_COLOUR_KERNELS(gpuaug_saturation, Saturation)
