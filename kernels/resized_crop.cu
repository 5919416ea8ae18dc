// gpuaug_resized_crop<T, C, MODE>: resample each sample's box (top, left, h, w) to the
// output size in one pass (MODE 0 nearest, 1 bilinear (default), 2 area). params: see
// resize.cuh. One thread per output pixel, all channels; taps through the read-only cache
// (resample_driver in resize.cuh).
#include "resize.cuh"

template <typename T, int C, int MODE = gpuaug::RESIZE_BILINEAR>
__global__ void gpuaug_resized_crop(const gpuaug::i64* src, const gpuaug::i64* dst,
                                    GPUAUG_PARAMS params, int P, int n) {
  gpuaug::resample_driver<T, C, MODE>(src, dst, params, P, n);
}
