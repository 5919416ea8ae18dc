// gpuaug_gaussian_blur<T, C>: separable Gaussian blur, reflect-101 borders, per-sample
// weights computed on the host (params: [k, w_0 .. w_{k-1}, padding]); see separable.cuh.
// gpuaug_gaussian_blur_1<T, C> filters one channel per pass, for kernels too large for a
// C-channel tile in 48 KiB of shared memory.
#include "separable.cuh"

template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_gaussian_blur(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                            GPUAUG_PARAMS params, int P, int n) {
  gpuaug::separable_tile<T, C, C>(src, dst, params, P, n);
}

template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_gaussian_blur_1(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                              GPUAUG_PARAMS params, int P, int n) {
  gpuaug::separable_tile<T, C, 1>(src, dst, params, P, n);
}

// gpuaug_gaussian_blur_k<T, C, K>: the same for batches whose largest k is at most K (3..15, odd),
// with the window loops unrolled (the fast path).
template <typename T, int C, int K>
__global__ void __launch_bounds__(256) gpuaug_gaussian_blur_k(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                              GPUAUG_PARAMS params, int P, int n) {
  gpuaug::separable_tile_k<T, C, K>(src, dst, params, P, n);
}
