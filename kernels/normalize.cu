// gpuaug_normalize<T, C, O>: out[c] = (x[c] - mean[c]) / std[c] (as x * (1/std) - mean/std), from
// T to O (float or half), the output in its own layout (the descriptor strides). It is
// crop_mirror_normalize without crop or mirror (see intensity.cuh): parameter rows
// [0, 0, 0, h, w, mean[C], std[C]]. gpuaug_normalize_vec<T, C, O, PLANAR>: four output
// pixels per thread, aligned vector stores (NCHW when PLANAR, else NHWC).
#include "intensity.cuh"

template <typename T, int C, typename O = float>
__global__ void gpuaug_normalize(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                                 int P, int n) {
  gpuaug::cmn_generic<T, O, C, C>(src, dst, params, P, n);
}

template <typename T, int C, typename O, bool PLANAR, int ROWS = gpuaug::CMN_ROWS>
__global__ void gpuaug_normalize_vec(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                                     int P, int n) {
  gpuaug::cmn_vec<T, O, C, C, PLANAR, ROWS>(src, dst, params, P, n);
}
