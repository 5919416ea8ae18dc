// gpuaug_erase<T, C>: pixels inside any of K boxes take the sample's fill value, the rest
// are copied. params: [fill_0..fill_3, K, (top, left, height, width) x K]; a box covers
// top <= y < top + height, left <= x < left + width (integers, exact in float32).
// Launch: replace_rows (rowvec.cuh): a thread tests its 16 / sizeof(T) pixels of a row
// against the boxes that cross the row, and moves them as 16-byte vectors.
// gpuaug_erase_packed<T, C>: dense NHWC batches (C-contiguous, 16-byte aligned, rows of whole
// 16-byte vectors): each sample is moved as consecutive 16-byte vectors, ERASE_UNROLL loads in
// flight per thread (coalesced, as the intensity kernels' u8_vec_driver); the elements of a
// vector inside a box take the fill. The same box arithmetic as gpuaug_erase (float32), so
// both give the same bytes.
#include "common.cuh"
#include "rowvec.cuh"

namespace {
template <typename T>
struct Erase {
  static constexpr int PPT = gpuaug::replace_ppt(sizeof(T));
  __device__ __forceinline__ void decide(const float* p, const gpuaug::Sample&, int, int y, int x0,
                                         int (&what)[PPT]) const {
#pragma unroll
    for (int j = 0; j < PPT; ++j) what[j] = 0;
    const int k = (int)p[4];
    const float fy = (float)y;
    for (int i = 0; i < k; ++i) {
      const float* b = p + 5 + 4 * i;
      if (fy >= b[0] && fy < b[0] + b[2]) {
        const int lo = (int)b[1] - x0, hi = (int)(b[1] + b[3]) - x0;  // pixels [lo, hi) of the chunk
#pragma unroll
        for (int j = 0; j < PPT; ++j) what[j] |= (j >= lo && j < hi);
      }
    }
  }
  T fill[4];
  __device__ __forceinline__ void prepare(const float* p) {
#pragma unroll
    for (int c = 0; c < 4; ++c) fill[c] = gpuaug::from_float<T>(p[c]);
  }
  __device__ __forceinline__ T value(int, int c) const { return fill[c]; }
};
}  // namespace

constexpr int ERASE_UNROLL = 4;

template <typename T, int C>
__global__ void gpuaug_erase_packed(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                    const float* __restrict__ params, int P, int n, int vpr, int h) {
  constexpr int PPT = gpuaug::replace_ppt(sizeof(T));  // elements per vector
  const int nvec = vpr * h;                             // vectors per sample
  const int w = vpr * PPT / C;                          // pixels per row
  const int per_block = (nvec + gridDim.x - 1) / gridDim.x;
  const int begin = blockIdx.x * per_block;
  const int end = min(nvec, begin + per_block);
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const float* p = params + (gpuaug::i64)s * P;
    Erase<T> op;
    op.prepare(p);
    const int k = (int)p[4];
    const uint4* a = src + (gpuaug::i64)s * nvec;
    uint4* b = dst + (gpuaug::i64)s * nvec;
    for (int i = begin + (int)threadIdx.x; i < end; i += ERASE_UNROLL * (int)blockDim.x) {
      gpuaug::vec16 v[ERASE_UNROLL];
#pragma unroll
      for (int u = 0; u < ERASE_UNROLL; ++u) {
        const int j = i + u * (int)blockDim.x;
        if (j < end) v[u] = gpuaug::load16(a + j);
      }
#pragma unroll
      for (int u = 0; u < ERASE_UNROLL; ++u) {
        const int j = i + u * (int)blockDim.x;
        if (j >= end) continue;
        const int y = j / vpr;
        const int e0 = (j - y * vpr) * PPT;  // the vector's first element in its row
        const float fy = (float)y;
        for (int q = 0; q < k; ++q) {
          const float* bx = p + 5 + 4 * q;
          if (fy >= bx[0] && fy < bx[0] + bx[2]) {
            // elements [lo, hi) of the vector: the box's pixels [left, left + width) in the row
            const int lo = max(min((int)bx[1], w), 0) * C - e0;
            const int hi = max(min((int)(bx[1] + bx[3]), w), 0) * C - e0;
            if (lo < PPT && hi > 0) {
              const int c0 = e0 % C;
#pragma unroll
              for (int e = 0; e < PPT; ++e)
                if (e >= lo && e < hi) gpuaug::vset<T>(v[u], e, op.value(1, (c0 + e) % C));
            }
          }
        }
        gpuaug::store16(b + j, v[u]);
      }
    }
  }
}

template <typename T, int C>
__global__ void gpuaug_erase(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params,
                             int P, int n) {
  gpuaug::replace_rows<T, C>(src, dst, params, P, n, Erase<T>());
}
