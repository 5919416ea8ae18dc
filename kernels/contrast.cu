// gpuaug_contrast<T, C> / gpuaug_contrast_packed<T, C>: torchvision's adjust_contrast,
// out = clamp(factor * x + (1 - factor) * mean, 0, max) on the colour channels (alpha copied),
// mean = the sample's mean grayscale (floored per pixel for uint8; the value itself for one
// channel), from the partial sums of gpuaug_gray_sum<T, C, 0> (colour.cuh), run first.
// params: [factor, max, (mean: Numba twin only)].
#include "colour.cuh"

namespace {
template <typename T, int C>
struct Contrast : gpuaug::OpBase {
  static constexpr bool kMean = true;
  float f, m;
  __device__ __forceinline__ Contrast(const float* p, float mean) : f(GPUAUG_LDP(p)), m((1.f - f) * mean) {}
  template <int V>
  __device__ __forceinline__ void apply(const float* a, float* o) const {
#pragma unroll
    for (int c = 0; c < C; ++c)
      o[c] = c < 3 ? gpuaug::clamp_to(fmaf(f, a[c], m), gpuaug::Range<T>::max) : a[c];
  }
};
}  // namespace

GPUAUG_COLOUR_KERNELS(gpuaug_contrast, Contrast)
GPUAUG_COLOUR_FUSED(gpuaug_contrast, Contrast, 0)
