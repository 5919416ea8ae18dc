// gpuaug_erase<T, C>: pixels inside any of K boxes take the sample's fill value, the rest
// are copied. params: [fill_0..fill_3, K, (top, left, height, width) x K]; a box covers
// top <= y < top + height, left <= x < left + width (integers, exact in float32).
// Launch: replace_rows (rowvec.cuh): a thread tests its 16 / sizeof(T) pixels of a row
// against the boxes that cross the row, and moves them as 16-byte vectors.
// gpuaug_erase_packed<T, C>: dense NHWC batches (C-contiguous, 16-byte aligned, rows of whole
// 16-byte vectors, fewer than 2**20 rows): each sample is moved as consecutive 16-byte vectors,
// ERASE_UNROLL per thread in flight (coalesced, as the intensity kernels' u8_vec_driver); the
// elements of a vector inside a box take the fill, and a vector wholly inside is not read. The
// same box arithmetic as gpuaug_erase (float32), so both give the same bytes.
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
constexpr int ERASE_KREG = 4;  // boxes held in registers per sample; more are read from params

// Elements [lo, hi) of a vector of PPT elements as a bit mask (lo, hi may lie outside [0, PPT)).
template <int PPT>
__device__ __forceinline__ unsigned int span_mask(int lo, int hi) {
  lo = max(lo, 0);
  hi = min(hi, PPT);
  return lo < hi ? ((1u << hi) - 1u) & ~((1u << lo) - 1u) : 0u;
}

template <typename T, int C>
__global__ void gpuaug_erase_packed(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                    GPUAUG_PARAMS params, int P, int n, int vpr, int h) {
  constexpr int PPT = gpuaug::replace_ppt(sizeof(T));  // elements per vector
  constexpr unsigned int FULL = (1u << PPT) - 1u;
  const int nvec = vpr * h;                             // vectors per sample
  const int w = vpr * PPT / C;                          // pixels per row
  const float inv_vpr = 1.f / (float)vpr;
  const int per_block = (nvec + gridDim.x - 1) / gridDim.x;
  const int begin = blockIdx.x * per_block;
  const int end = min(nvec, begin + per_block);
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const float* p = params + (gpuaug::i64)s * P;
    Erase<T> op;
    op.prepare(p);
    const int k = (int)p[4];
    // The first boxes in registers: rows [top, bot) (float32, as gpuaug_erase compares them)
    // and elements [lo, hi) of a row.
    float top[ERASE_KREG], bot[ERASE_KREG];
    int lo[ERASE_KREG], hi[ERASE_KREG];
#pragma unroll
    for (int q = 0; q < ERASE_KREG; ++q) {
      top[q] = 1.f, bot[q] = 0.f, lo[q] = hi[q] = 0;
      if (q < k) {
        const float* bx = p + 5 + 4 * q;
        top[q] = bx[0], bot[q] = bx[0] + bx[2];
        lo[q] = max(min((int)bx[1], w), 0) * C, hi[q] = max(min((int)(bx[1] + bx[3]), w), 0) * C;
      }
    }
    const uint4* a = src + (gpuaug::i64)s * nvec;
    uint4* b = dst + (gpuaug::i64)s * nvec;
    for (int i = begin + (int)threadIdx.x; i < end; i += ERASE_UNROLL * (int)blockDim.x) {
      unsigned int mask[ERASE_UNROLL];
      int c0[ERASE_UNROLL];
#pragma unroll
      for (int u = 0; u < ERASE_UNROLL; ++u) {  // which elements the boxes cover
        const int j = i + u * (int)blockDim.x;
        int y = (int)((float)j * inv_vpr);  // j / vpr: off by at most one for h < 2**20 (the host's limit)
        if (y * vpr > j) --y; else if ((y + 1) * vpr <= j) ++y;
        const int e0 = (j - y * vpr) * PPT;  // the vector's first element in its row
        const float fy = (float)y;
        unsigned int m = 0;
#pragma unroll
        for (int q = 0; q < ERASE_KREG; ++q)
          if (fy >= top[q] && fy < bot[q]) m |= span_mask<PPT>(lo[q] - e0, hi[q] - e0);
        for (int q = ERASE_KREG; q < k; ++q) {
          const float* bx = p + 5 + 4 * q;
          if (fy >= bx[0] && fy < bx[0] + bx[2])
            m |= span_mask<PPT>(max(min((int)bx[1], w), 0) * C - e0,
                                max(min((int)(bx[1] + bx[3]), w), 0) * C - e0);
        }
        mask[u] = m;
        c0[u] = e0 % C;
      }
      gpuaug::vec16 v[ERASE_UNROLL];
#pragma unroll
      for (int u = 0; u < ERASE_UNROLL; ++u) {  // loads of the vectors not wholly covered
        const int j = i + u * (int)blockDim.x;
        if (j < end && mask[u] != FULL) v[u] = gpuaug::load16(a + j);
      }
#pragma unroll
      for (int u = 0; u < ERASE_UNROLL; ++u) {
        const int j = i + u * (int)blockDim.x;
        if (j >= end) continue;
        if (mask[u]) {
#pragma unroll
          for (int e = 0; e < PPT; ++e)
            if ((mask[u] >> e) & 1u) gpuaug::vset<T>(v[u], e, op.value(1, (c0[u] + e) % C));
        }
        gpuaug::store16(b + j, v[u]);
      }
    }
  }
}

template <typename T, int C>
__global__ void gpuaug_erase(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                             int P, int n) {
  gpuaug::replace_rows<T, C>(src, dst, params, P, n, Erase<T>());
}
