// gpuaug_pad<T, C>: per-sample padding (params: [top, left, mode, value]); output pixel
// (y, x) reads src(border(y - top), border(x - left)) with common.cuh's border_index
// (mode 0 constant -> value, 1 edge, 3 reflect = numpy.pad "reflect" / BORDER_REFLECT_101).
#include "common.cuh"

namespace {
struct PadMap {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, int& sy, int& sx) const {
    const int mode = __float2int_rn(p[2]);
    sy = gpuaug::border_index(y - __float2int_rn(p[0]), s.h, mode);
    sx = gpuaug::border_index(x - __float2int_rn(p[1]), s.w, mode);
    return sy >= 0 && sx >= 0;
  }
  __device__ __forceinline__ float fill(const float* p, int) const { return p[3]; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_pad(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                           int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, PadMap());
}
