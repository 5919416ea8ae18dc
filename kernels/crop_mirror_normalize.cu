// gpuaug_crop_mirror_normalize<T, C, O, CO>: DALI's crop_mirror_normalize in one pass
// (see intensity.cuh): window corner anchor = roundf(pos * (in - crop)) per axis, mirror
// flips the window left-right, out[c] = (x[c] - mean[c]) / std[c] (as x * (1/std) - mean/std),
// CO = 4 for a padded 3-channel output (4th channel 0). Parameter rows
// [pos_y, pos_x, mirror, crop_h, crop_w, mean[C], std[C]].
// gpuaug_crop_mirror_normalize_vec<T, C, O, CO, PLANAR>: four output pixels per thread,
// aligned vector stores (NCHW when PLANAR, else NHWC).
#include "intensity.cuh"

template <typename T, int C, typename O = float, int CO = C>
__global__ void gpuaug_crop_mirror_normalize(const gpuaug::i64* src, const gpuaug::i64* dst,
                                             GPUAUG_PARAMS params, int P, int n) {
  gpuaug::cmn_generic<T, O, C, CO>(src, dst, params, P, n);
}

template <typename T, int C, typename O, int CO, bool PLANAR, int ROWS = gpuaug::CMN_ROWS>
__global__ void gpuaug_crop_mirror_normalize_vec(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                 GPUAUG_PARAMS params, int P, int n) {
  gpuaug::cmn_vec<T, O, C, CO, PLANAR, ROWS>(src, dst, params, P, n);
}
