// gpuaug_color_twist<T, C> / gpuaug_color_twist_packed<T, C>: per-sample 3x4 affine colour
// matrix on values normalised to [0, 1]: rgb' = M[:, :3] rgb + M[:, 3] (in the dtype's units the
// offset is M[:, 3] * max, 255 for uint8). uint8 saturates; floats are not clamped; alpha copied.
// params: [M row-major (12), max].
#include "colour.cuh"

namespace {
template <typename T, int C>
struct ColorTwist : gpuaug::OpBase {
  float m[12];
  __device__ __forceinline__ ColorTwist(const float* p, float) {
#pragma unroll
    for (int k = 0; k < 12; ++k) m[k] = GPUAUG_LDP(p + k);
#pragma unroll
    for (int r = 0; r < 3; ++r) m[4 * r + 3] *= gpuaug::Range<T>::max;
  }
  template <int V>
  __device__ __forceinline__ void apply(const float* a, float* o) const {
#pragma unroll
    for (int c = 0; c < C; ++c) o[c] = a[c];
    if constexpr (C >= 3) {
#pragma unroll
      for (int r = 0; r < 3; ++r) {
        const float v = fmaf(m[4 * r], a[0], fmaf(m[4 * r + 1], a[1], fmaf(m[4 * r + 2], a[2], m[4 * r + 3])));
        o[r] = gpuaug::Range<T>::integer ? gpuaug::clamp_to(v, 255.f) : v;
      }
    }
  }
};
}  // namespace

GPUAUG_COLOUR_KERNELS(gpuaug_color_twist, ColorTwist)
