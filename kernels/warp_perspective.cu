// gpuaug_warp_perspective<T, C, INTERP, BORDER>: per-sample homography (OpenCV
// warpPerspective). params row: [interp, border, a00 .. a22 (row-major), fill_0 ..
// fill_{C-1}], a = the destination -> source homography; the source point of output
// pixel (x, y) is (a0 . p, a1 . p) / (a2 . p) with p = (x, y, 1).
#include "warp_common.cuh"

template <typename T, int C, int INTERP = 1, int BORDER = 0>
__global__ void __launch_bounds__(256) gpuaug_warp_perspective(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                               GPUAUG_PARAMS params, int P, int n) {
  gpuaug::warp::warp_driver<T, C, INTERP, BORDER, true>(src, dst, params, P, n);
}

// Dense NHWC batches (source and output C-contiguous, each sample under 2^31 elements):
// no descriptor tables, 32-bit offsets, 4 rows of 8 x 4 warp tiles per thread.
template <typename T, int C, int INTERP = 1, int BORDER = 0>
__global__ void __launch_bounds__(256) gpuaug_warp_perspective_dense(const T* src, T* dst, GPUAUG_PARAMS params, int P,
                                                          int n, int h, int w, int H, int W) {
  gpuaug::warp::warp_dense<T, C, INTERP, BORDER, true, 4>(src, dst, params, P, n, h, w, H, W);
}
