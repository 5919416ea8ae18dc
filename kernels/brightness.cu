// gpuaug_brightness<T, C> / gpuaug_brightness_packed<T, C>: torchvision's adjust_brightness,
// out = clamp(factor * x, 0, max) on the colour channels (the 4th channel, alpha, is copied).
// params: [factor, max value (for the Numba twin; here Range<T>::max)].
#include "colour.cuh"

namespace {
template <typename T, int C>
struct Brightness : gpuaug::OpBase {
  float f;
  __device__ __forceinline__ Brightness(const float* p, float) : f(GPUAUG_LDP(p)) {}
  template <int V>
  __device__ __forceinline__ void apply(const float* a, float* o) const {
#pragma unroll
    for (int c = 0; c < C; ++c) o[c] = c < 3 ? gpuaug::clamp_to(f * a[c], gpuaug::Range<T>::max) : a[c];
  }
};
}  // namespace

GPUAUG_COLOUR_KERNELS(gpuaug_brightness, Brightness)
