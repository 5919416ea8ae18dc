// gpuaug_resize<T, C, MODE>: resize every sample to the output size (MODE 0 nearest,
// 1 bilinear (default), 2 area). params: see resize.cuh (box = the whole image).
// One thread per output pixel, all channels; taps through the read-only cache
// (resample_driver in resize.cuh).
#include "resize.cuh"

template <typename T, int C, int MODE = gpuaug::RESIZE_BILINEAR>
__global__ void gpuaug_resize(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                              int P, int n) {
  gpuaug::resample_driver<T, C, MODE>(src, dst, params, P, n);
}
