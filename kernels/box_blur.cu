// gpuaug_box_blur<T, C>: box (mean) filter, reflect-101 borders, per-sample
// size k: params [k, 1/k x k, padding], the separable filter of separable.cuh.
// gpuaug_box_blur_1<T, C> filters one channel per pass, for kernels too large for a
// C-channel tile in 48 KiB of shared memory.
#include "separable.cuh"

template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_box_blur(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                            GPUAUG_PARAMS params, int P, int n) {
  gpuaug::separable_tile<T, C, C>(src, dst, params, P, n);
}

template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_box_blur_1(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                              GPUAUG_PARAMS params, int P, int n) {
  gpuaug::separable_tile<T, C, 1>(src, dst, params, P, n);
}

// gpuaug_box_blur_k<T, C, K>: the same for batches whose largest k is at most K (3..15, odd),
// with the window loops unrolled (the fast path).
template <typename T, int C, int K>
__global__ void __launch_bounds__(256) gpuaug_box_blur_k(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                         GPUAUG_PARAMS params, int P, int n) {
  gpuaug::separable_tile_k<T, C, K>(src, dst, params, P, n);
}

// gpuaug_box_blur_packed<PB>: dense uint8 batches, 16-byte aligned, whose rows are whole 16-byte
// vectors, with at least 3 rows and 3 pixels a row, and every k at most 5; PB bytes per pixel
// (1..4: the NHWC channels, or 1 for the planes of NCHW, pps planes per sample). A thread makes
// one 16-byte vector of one row (grid: x over a plane's vectors, y over the planes). Its k x k
// window sums S are integers (at most 25 * 255, in 16-bit lanes: even and odd bytes apart), and
// out = floor(S / k^2 + 0.5), exact in integers: what the separable float32 kernels round to
// (S / k^2 is never within 1 / (2 k^2) of a half, far beyond their float32 error), so every
// kernel gives the same bytes. Reflect-101 borders: rows reflect as indices; at a row's ends
// the 8 bytes beyond the vector are made of the reflected pixels, which lie in the vector itself
// (at most 2 pixels out, and the row has at least 3), so border vectors take the same path.
namespace {
__device__ __forceinline__ unsigned int byte_of(const unsigned int* v, int pos) {  // pos: compile-time
  return (v[pos >> 2] >> (8 * (pos & 3))) & 0xFFu;
}

// Word W (0: bytes -8..-5, 1: bytes -4..-1) before the row's first vector v, reflect-101: byte
// c of pixel -d is byte c of pixel d. Bytes of pixels past -2 (never read) are 0.
template <int PB, int W>
__device__ __forceinline__ unsigned int left_reflected(const unsigned int* v) {
  unsigned int word = 0;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int pos = -8 + 4 * W + m;
    const int p = pos >= 0 ? pos / PB : -((-pos + PB - 1) / PB), c = pos - p * PB;  // pixel p < 0
    if (p >= -2) word |= byte_of(v, -p * PB + c) << (8 * m);
  }
  return word;
}

// Word W (0: bytes 16..19, 1: bytes 20..23) after the row's last vector v: byte c of pixel
// last + d is byte c of pixel last - d.
template <int PB, int W>
__device__ __forceinline__ unsigned int right_reflected(const unsigned int* v) {
  unsigned int word = 0;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const int pos = 4 * W + m, d = pos / PB + 1, c = pos - (d - 1) * PB;  // d pixels past the last
    if (d <= 2) word |= byte_of(v, 16 - (d + 1) * PB + c) << (8 * m);
  }
  return word;
}

template <int PB, int DX>
__device__ __forceinline__ void add_shifted(const unsigned int* w, int R, unsigned int (&se)[4],
                                            unsigned int (&so)[4]) {
  constexpr unsigned int EVEN = 0x00FF00FFu;
  if (DX > R || -DX > R) return;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned int v = gpuaug::bytes_at<DX * PB>(w, k + 2);
    se[k] += v & EVEN;
    so[k] += (v >> 8) & EVEN;
  }
}
}  // namespace

template <int PB>
__global__ void __launch_bounds__(256) gpuaug_box_blur_packed(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                              GPUAUG_PARAMS params, int P, int n,
                                                              int planes, int pps, int vpr, int h) {
  const int nvec = vpr * h;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= nvec) return;
  const int y = j / vpr, q = j - y * vpr;
  for (int s = blockIdx.y; s < planes; s += gridDim.y) {
    const int k = (int)params[(gpuaug::i64)(s / pps) * P], R = k >> 1;
    const unsigned int div = 2u * (unsigned int)(k * k);
    const unsigned int mul = (unsigned int)((0x100000000ull + div - 1) / div);  // ceil(2^32 / div)
    const uint4* plane = src + (gpuaug::i64)s * nvec;
    unsigned int se[4] = {0u, 0u, 0u, 0u}, so[4] = {0u, 0u, 0u, 0u};
    for (int r = y - R; r <= y + R; ++r) {
      const int rr = r < 0 ? -r : r >= h ? 2 * h - 2 - r : r;  // reflect-101 (h >= 3, R <= 2)
      const uint4* row = plane + (gpuaug::i64)rr * vpr + q;
      const uint4 v = __ldg(row);
      unsigned int words[8];  // bytes -8 .. 23 around the vector
      words[2] = v.x, words[3] = v.y, words[4] = v.z, words[5] = v.w;
      if (q > 0) {
        const uint2 a = __ldg(reinterpret_cast<const uint2*>(row) - 1);  // the previous vector's last 8 bytes
        words[0] = a.x, words[1] = a.y;
      } else {
        words[0] = left_reflected<PB, 0>(words + 2), words[1] = left_reflected<PB, 1>(words + 2);
      }
      if (q < vpr - 1) {
        const uint2 b = __ldg(reinterpret_cast<const uint2*>(row + 1));  // the next vector's first 8 bytes
        words[6] = b.x, words[7] = b.y;
      } else {
        words[6] = right_reflected<PB, 0>(words + 2), words[7] = right_reflected<PB, 1>(words + 2);
      }
      add_shifted<PB, -2>(words, R, se, so);
      add_shifted<PB, -1>(words, R, se, so);
      add_shifted<PB, 0>(words, R, se, so);
      add_shifted<PB, 1>(words, R, se, so);
      add_shifted<PB, 2>(words, R, se, so);
    }
    unsigned int out[4];
#pragma unroll
    for (int k4 = 0; k4 < 4; ++k4) {
      unsigned int word = 0;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const unsigned int sum = ((m & 1 ? so[k4] : se[k4]) >> (16 * (m >> 1))) & 0xFFFFu;
        word |= __umulhi(2u * sum + (unsigned int)(k * k), mul) << (8 * m);
      }
      out[k4] = word;
    }
    dst[(gpuaug::i64)s * nvec + j] = make_uint4(out[0], out[1], out[2], out[3]);
  }
}
