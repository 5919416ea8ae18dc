// gpuaug_hue<T, C> / gpuaug_hue_packed<T, C>: torchvision's adjust_hue (HSV hue + shift, mod 1
// turn), in the closed form of colour.cuh's HueRotation; alpha copied. One channel, or a shift
// of 0: unchanged (exactly; variant 0). uint8 results carry the rounding's + 0.5 (kBiased).
// params: [shift, max].
#include "colour.cuh"

namespace {
template <typename T, int C>
struct Hue : gpuaug::OpBase {
  static constexpr int kVariants = 2;
  static constexpr bool kBiased = gpuaug::Range<T>::integer;
  static constexpr float kHalf = kBiased ? 0.5f : 0.f;
  gpuaug::HueRotation rot;
  bool on;
  __device__ __forceinline__ Hue(const float* p, float) : rot(GPUAUG_LDP(p)), on(C >= 3 && GPUAUG_LDP(p) != 0.f) {}
  __device__ __forceinline__ int variant() const { return on; }
  template <int V>
  __device__ __forceinline__ void apply(const float* a, float* o) const {
#pragma unroll
    for (int c = 0; c < C; ++c) o[c] = a[c] + kHalf;
    if constexpr (C >= 3 && V == 1) {
      o[0] = a[0], o[1] = a[1], o[2] = a[2];
      rot(o[0], o[1], o[2], 1.f, kHalf);
    }
  }
};
}  // namespace

GPUAUG_COLOUR_KERNELS(gpuaug_hue, Hue)
