// gpuaug_channel_shuffle<T, C> / gpuaug_channel_shuffle_packed<T, C>: out[..., c] =
// x[..., perm[c]] with a per-sample permutation (exact: values pass through float32 unchanged).
// params: [perm (C)]; indices are clamped to [0, C) so unchecked device values cannot read out of
// the pixel.
#include "colour.cuh"

namespace {
template <typename T, int C>
struct ChannelShuffle : gpuaug::OpBase {
  // sel[c][k]: output channel c takes input channel k + 1 (else channel 0). Flags rather than
  // indices: from `perm[c] == k ? a[k] : ...` the compiler rebuilds a dynamically indexed (local
  // memory) array.
  bool sel[C][C > 1 ? C - 1 : 1];
  __device__ __forceinline__ ChannelShuffle(const float* p, float) {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int k = min(max(__float2int_rn(GPUAUG_LDP(p + c)), 0), C - 1);
#pragma unroll
      for (int q = 1; q < C; ++q) sel[c][q - 1] = k == q;
    }
  }
  template <int V>
  __device__ __forceinline__ void apply(const float* a, float* o) const {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      float v = a[0];
#pragma unroll
      for (int q = 1; q < C; ++q) v = sel[c][q - 1] ? a[q] : v;
      o[c] = v;
    }
  }
};
}  // namespace

GPUAUG_COLOUR_KERNELS(gpuaug_channel_shuffle, ChannelShuffle)
