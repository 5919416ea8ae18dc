// gpuaug_rotate<T, C, INTERP, BORDER>: per-sample rotation about a centre. On the device a
// rotation is an affine warp: params row as warp_affine.cu's, holding the inverse of
// OpenCV's getRotationMatrix2D(center, angle, scale) (computed by gpuaug/ops/_warp.py).
#include "warp_common.cuh"

template <typename T, int C, int INTERP = 1, int BORDER = 0>
__global__ void __launch_bounds__(256) gpuaug_rotate(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                     const float* params, int P, int n) {
  gpuaug::warp::warp_driver<T, C, INTERP, BORDER, false>(src, dst, params, P, n);
}
