// gpuaug_color_jitter<T, C> / gpuaug_color_jitter_packed<T, C>: brightness, contrast, saturation
// and hue (torchvision's adjust_* in that order) in one pass, in float32, rounded once; alpha
// copied; one channel: brightness and contrast only (as torchvision).
// Contrast's mean is that of the brightness-adjusted image. Brightness clamps, so that mean is
// not factor * (source mean) once a channel saturates (nor, for uint8, once the grayscale is
// floored); gpuaug_gray_sum<T, C, 1> applies the brightness (params column 0) to every pixel
// before taking the grayscale instead.
// The steps run on values normalised to [0, 1], where every clamp is a free .sat modifier
// (uint8: 3 instead of 7 instructions per channel for brightness + contrast + saturation); uint8
// results carry the rounding's + 0.5 (kBiased).
// params: [brightness, contrast, saturation, hue, max, (mean: Numba twin only)].
#include "colour.cuh"

namespace {
template <typename T, int C>
struct Jitter : gpuaug::OpBase {
  static constexpr bool kMean = true;
  static constexpr int kVariants = 2;  // 1: with hue
  static constexpr bool kBiased = gpuaug::Range<T>::integer;
  static constexpr float M = gpuaug::Range<T>::max;
  static constexpr float kHalf = kBiased ? 0.5f : 0.f;
  float b, cf, cm, sf, gs;
  gpuaug::HueRotation rot;
  bool hue;
  __device__ __forceinline__ Jitter(const float* p, float mean)
      : b(GPUAUG_LDP(p) * (1.f / M)), cf(GPUAUG_LDP(p + 1)), cm((1.f - cf) * mean * (1.f / M)), sf(GPUAUG_LDP(p + 2)),
        gs((1.f - sf) * (1.f / M)), rot(GPUAUG_LDP(p + 3)), hue(C >= 3 && GPUAUG_LDP(p + 3) != 0.f) {}
  __device__ __forceinline__ int variant() const { return hue; }
  template <int V>
  __device__ __forceinline__ void apply(const float* a, float* o) const {
    constexpr int K = C < 3 ? 1 : 3;
    float x[K];
#pragma unroll
    for (int c = 0; c < K; ++c) x[c] = __saturatef(fmaf(cf, __saturatef(b * a[c]), cm));
    if constexpr (C >= 3) {
      const float g = gs * gpuaug::luma_floor_norm<T>(x[0], x[1], x[2]);  // in the dtype's units
#pragma unroll
      for (int c = 0; c < 3; ++c) x[c] = __saturatef(fmaf(sf, x[c], g));
      if constexpr (V == 1) {
        rot(x[0], x[1], x[2], M, kHalf);
      } else {
#pragma unroll
        for (int c = 0; c < 3; ++c) x[c] = fmaf(x[c], M, kHalf);
      }
    } else {
      x[0] = fmaf(x[0], M, kHalf);
    }
#pragma unroll
    for (int c = 0; c < C; ++c) o[c] = c < K ? x[c < K ? c : 0] : a[c] + kHalf;
  }
};
}  // namespace

GPUAUG_COLOUR_KERNELS(gpuaug_color_jitter, Jitter)
GPUAUG_COLOUR_FUSED(gpuaug_color_jitter, Jitter, 1)
