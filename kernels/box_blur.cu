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

// gpuaug_box_blur_packed<PB>: dense uint8 batches, 16-byte aligned, whose rows are whole 16-byte
// vectors and whose every k is at most 5; PB bytes per pixel (1..4: the NHWC channels, or 1 for
// the planes of NCHW, pps planes per sample). A thread makes one 16-byte vector of one row (grid:
// x over a plane's vectors, y over the planes). Its k x k window sums S are integers (at most
// 25 * 255, in 16-bit lanes: even and odd bytes apart), and out = floor(S / k^2 + 0.5), exact in
// integers: what the separable float32 kernels round to (S / k^2 is never within 1 / (2 k^2)
// of a half, far beyond their float32 error), so every kernel gives the same bytes. Vectors
// whose window leaves the row's neighbour vectors or the image's rows (the reflect-101 borders)
// add their windows byte by byte through border_index instead.
namespace {
// The word of bytes starting O bytes after word i of w (O may be negative).
template <int O>
__device__ __forceinline__ unsigned int bytes_at(const unsigned int* w, int i) {
  constexpr int A = O >= 0 ? O / 4 : -((-O + 3) / 4), B = O - 4 * A;
  return B == 0 ? w[i + A] : __funnelshift_r(w[i + A], w[i + A + 1], 8 * B);
}

template <int PB, int DX>
__device__ __forceinline__ void add_shifted(const unsigned int* w, int R, unsigned int (&se)[4],
                                            unsigned int (&so)[4]) {
  constexpr unsigned int EVEN = 0x00FF00FFu;
  if (DX > R || -DX > R) return;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned int v = bytes_at<DX * PB>(w, k + 2);
    se[k] += v & EVEN;
    so[k] += (v >> 8) & EVEN;
  }
}
}  // namespace

template <int PB>
__global__ void __launch_bounds__(256) gpuaug_box_blur_packed(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                              const float* __restrict__ params, int P, int n,
                                                              int planes, int pps, int vpr, int h) {
  const int nvec = vpr * h;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= nvec) return;
  const int y = j / vpr, q = j - y * vpr;
  const int w = vpr * 16 / PB;  // pixels per row
  for (int s = blockIdx.y; s < planes; s += gridDim.y) {
    const int k = (int)params[(gpuaug::i64)(s / pps) * P], R = k >> 1;
    const unsigned int div = 2u * (unsigned int)(k * k);
    const unsigned int mul = (unsigned int)((0x100000000ull + div - 1) / div);  // ceil(2^32 / div)
    const uint4* plane = src + (gpuaug::i64)s * nvec;
    unsigned int out[4];
    if (q > 0 && q < vpr - 1 && y >= R && y < h - R) {  // the window within the rows and vectors q - 1 .. q + 1
      unsigned int se[4] = {0u, 0u, 0u, 0u}, so[4] = {0u, 0u, 0u, 0u};
      for (int r = y - R; r <= y + R; ++r) {
        const uint4* row = plane + (gpuaug::i64)r * vpr + q;
        const uint4 v = __ldg(row);
        const uint2 a = __ldg(reinterpret_cast<const uint2*>(row) - 1);  // the previous vector's last 8 bytes
        const uint2 b = __ldg(reinterpret_cast<const uint2*>(row + 1));  // the next vector's first 8 bytes
        const unsigned int words[8] = {a.x, a.y, v.x, v.y, v.z, v.w, b.x, b.y};
        add_shifted<PB, -2>(words, R, se, so);
        add_shifted<PB, -1>(words, R, se, so);
        add_shifted<PB, 0>(words, R, se, so);
        add_shifted<PB, 1>(words, R, se, so);
        add_shifted<PB, 2>(words, R, se, so);
      }
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
    } else {  // reflect-101 borders: byte by byte
      const unsigned char* bytes = reinterpret_cast<const unsigned char*>(plane);
#pragma unroll
      for (int k4 = 0; k4 < 4; ++k4) {
        unsigned int word = 0;
        for (int m = 0; m < 4; ++m) {
          const int pos = 16 * q + 4 * k4 + m, px = pos / PB, c = pos - px * PB;
          unsigned int sum = 0;
          for (int dy = -R; dy <= R; ++dy) {
            const unsigned char* row =
                bytes + (gpuaug::i64)gpuaug::border_index(y + dy, h, gpuaug::BORDER_REFLECT101) * vpr * 16;
            for (int dx = -R; dx <= R; ++dx)
              sum += __ldg(row + gpuaug::border_index(px + dx, w, gpuaug::BORDER_REFLECT101) * PB + c);
          }
          word |= __umulhi(2u * sum + (unsigned int)(k * k), mul) << (8 * m);
        }
        out[k4] = word;
      }
    }
    dst[(gpuaug::i64)s * nvec + j] = make_uint4(out[0], out[1], out[2], out[3]);
  }
}
