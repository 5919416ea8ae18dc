// gpuaug_rotate<T, C, INTERP, BORDER>: per-sample rotation about a centre. On the device a
// rotation is an affine warp: params row as warp_affine.cu's, holding the inverse of
// OpenCV's getRotationMatrix2D(center, angle, scale) (computed by gpuaug/ops/_warp.py).
#include "warp_common.cuh"

template <typename T, int C, int INTERP = 1, int BORDER = 0>
__global__ void __launch_bounds__(256) gpuaug_rotate(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                     GPUAUG_PARAMS params, int P, int n) {
  gpuaug::warp::warp_driver<T, C, INTERP, BORDER, false>(src, dst, params, P, n);
}

// Dense NHWC batches (source and output C-contiguous, each sample under 2^31 elements):
// no descriptor tables, 32-bit offsets, 4 rows of 8 x 4 warp tiles per thread.
template <typename T, int C, int INTERP = 1, int BORDER = 0>
__global__ void __launch_bounds__(256) gpuaug_rotate_dense(const T* src, T* dst, GPUAUG_PARAMS params, int P,
                                                          int n, int h, int w, int H, int W) {
  gpuaug::warp::warp_dense<T, C, INTERP, BORDER, false, 4>(src, dst, params, P, n, h, w, H, W);
}
