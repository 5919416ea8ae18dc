// gpuaug_box_blur<T, C>: box (mean) filter, reflect-101 borders, per-sample
// size k: params [k, 1/k x k, padding], the separable filter of separable.cuh.
// gpuaug_box_blur_1<T, C> filters one channel per pass, for kernels too large for a
// C-channel tile in 48 KiB of shared memory.
#include "separable.cuh"

template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_box_blur(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                            const float* params, int P, int n) {
  gpuaug::separable_tile<T, C, C>(src, dst, params, P, n);
}

template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_box_blur_1(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                              const float* params, int P, int n) {
  gpuaug::separable_tile<T, C, 1>(src, dst, params, P, n);
}

// gpuaug_box_blur_k<T, C, K>: the same for batches whose largest k is at most K (3..15, odd),
// with the window loops unrolled (the fast path).
template <typename T, int C, int K>
__global__ void __launch_bounds__(256) gpuaug_box_blur_k(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                         const float* params, int P, int n) {
  gpuaug::separable_tile_k<T, C, K>(src, dst, params, P, n);
}
