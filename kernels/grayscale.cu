// gpuaug_grayscale<T, C, CO = 1> / gpuaug_grayscale_packed<T, C, CO>: torchvision's
// rgb_to_grayscale, gray = 0.2989 r + 0.587 g + 0.114 b (rounded to nearest for uint8; alpha
// dropped), written to CO (1 or 3) channels; a one-channel input is copied to CO channels.
// params: [max].
#include "colour.cuh"

namespace {
template <typename T, int C, int CO>
struct Grayscale : gpuaug::OpBase {
  __device__ __forceinline__ Grayscale(const float*, float) {}
  template <int V>
  __device__ __forceinline__ void apply(const float* a, float* o) const {
    float g;
    if constexpr (C < 3) {
      g = a[0];
    } else {
      g = gpuaug::luma<T>(a[0], a[1], a[2]);
    }
#pragma unroll
    for (int c = 0; c < CO; ++c) o[c] = g;
  }
};
}  // namespace

template <typename T, int C, int CO = 1>
__global__ void __launch_bounds__(256) gpuaug_grayscale(GPUAUG_COLOUR_ARGS) {
  gpuaug::strided_map<T, C, CO, Grayscale<T, C, CO>>(GPUAUG_COLOUR_CALL);
}
template <typename T, int C, int CO = 1>
__global__ void __launch_bounds__(256) gpuaug_grayscale_packed(GPUAUG_COLOUR_ARGS) {
  gpuaug::packed_map<T, C, CO, Grayscale<T, C, CO>>(GPUAUG_COLOUR_CALL);
}
