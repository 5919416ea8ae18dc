// gpuaug_erase<T, C>: pixels inside any of K boxes take the sample's fill value, the rest
// are copied. params: [fill_0..fill_3, K, (top, left, height, width) x K]; a box covers
// top <= y < top + height, left <= x < left + width (integers, exact in float32).
// Launch: replace_rows (rowvec.cuh): a thread tests its 16 / sizeof(T) pixels of a row
// against the boxes that cross the row, and moves them as 16-byte vectors.
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

template <typename T, int C>
__global__ void gpuaug_erase(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params,
                             int P, int n) {
  gpuaug::replace_rows<T, C>(src, dst, params, P, n, Erase<T>());
}
