// gpuaug_warp_affine<T, C, INTERP, BORDER>: per-sample affine warp (OpenCV warpAffine).
// params row: [interp, border, a00 a01 a02 a10 a11 a12, fill_0 .. fill_{C-1}], a = the
// destination -> source map. INTERP: 0 nearest, 1 bilinear; BORDER: common.cuh's Border.
// The defaults (bilinear, constant) let the generic <T, C> name resolve.
#include "warp_common.cuh"

template <typename T, int C, int INTERP = 1, int BORDER = 0>
__global__ void __launch_bounds__(256) gpuaug_warp_affine(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                          GPUAUG_PARAMS params, int P, int n) {
  gpuaug::warp::warp_driver<T, C, INTERP, BORDER, false>(src, dst, params, P, n);
}

// Dense NHWC batches (source and output C-contiguous, each sample under 2^31 elements):
// no descriptor tables, 32-bit offsets, 4 rows of 8 x 4 warp tiles per thread.
template <typename T, int C, int INTERP = 1, int BORDER = 0>
__global__ void __launch_bounds__(256) gpuaug_warp_affine_dense(const T* src, T* dst, GPUAUG_PARAMS params, int P,
                                                          int n, int h, int w, int H, int W) {
  gpuaug::warp::warp_dense<T, C, INTERP, BORDER, false, 4>(src, dst, params, P, n, h, w, H, W);
}
