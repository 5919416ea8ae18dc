// gpuaug_warp_perspective<T, C, INTERP, BORDER>: per-sample homography (OpenCV
// warpPerspective). params row: [interp, border, a00 .. a22 (row-major), fill_0 ..
// fill_{C-1}], a = the destination -> source homography; the source point of output
// pixel (x, y) is (a0 . p, a1 . p) / (a2 . p) with p = (x, y, 1).
#include "warp_common.cuh"

template <typename T, int C, int INTERP = 1, int BORDER = 0>
__global__ void __launch_bounds__(256) gpuaug_warp_perspective(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                               const float* params, int P, int n) {
  gpuaug::warp::warp_driver<T, C, INTERP, BORDER, true>(src, dst, params, P, n);
}
