// gpuaug_median_blur<T, C>: median of the k x k window (k = 3 or 5 per sample, params [k]),
// per channel, replicated borders (OpenCV's medianBlur uses BORDER_REPLICATE).
//
// Launch: block (32, 8), grid (ceil(W / 128), ceil(H / 8), N): a thread makes 4 adjacent
// outputs of one row. k = 3: the 6 columns of 3 it needs are sorted once and shared, and
// each median is med3(max of the lows, med3 of the middles, min of the highs) (exact for
// 3 sorted columns). k = 5: 13 passes of selection over the 25 values in registers.
#include "common.cuh"
#include "rowvec.cuh"

namespace {
__device__ __forceinline__ void sort2(float& a, float& b) {
  const float lo = fminf(a, b);
  b = fmaxf(a, b);
  a = lo;
}
__device__ __forceinline__ float med3(float a, float b, float c) {
  return fmaxf(fminf(a, b), fminf(fmaxf(a, b), c));
}
__device__ __forceinline__ int clampi(int i, int n) { return min(max(i, 0), n - 1); }
}  // namespace

namespace {
template <typename T, int C, bool ONLY3>
__device__ __forceinline__ void median_tile(const gpuaug::i64* src_tab, const gpuaug::i64* dst_tab,
                                            const float* params, int P, int n) {
  using namespace gpuaug;
  const int xb = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = sample_at(dst_tab, s);
    if (xb >= d.w || y >= d.h) continue;
    const Sample src = sample_at(src_tab, s);
    const int k = ONLY3 ? 3 : (int)params[(i64)s * P];
    if (k == 3) {
      const T* rows[3];
#pragma unroll
      for (int i = 0; i < 3; ++i) rows[i] = pixel<T>(src, clampi(y - 1 + i, src.h), 0);
      i64 cols[6];
#pragma unroll
      for (int j = 0; j < 6; ++j) cols[j] = (i64)clampi(xb - 1 + j, src.w) * src.sx;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float lo[6], mid[6], hi[6];
#pragma unroll
        for (int j = 0; j < 6; ++j) {
          float a = to_float(ldg_elem(rows[0] + cols[j] + c * src.sc));
          float b = to_float(ldg_elem(rows[1] + cols[j] + c * src.sc));
          float e = to_float(ldg_elem(rows[2] + cols[j] + c * src.sc));
          sort2(a, b); sort2(b, e); sort2(a, b);
          lo[j] = a; mid[j] = b; hi[j] = e;
        }
#pragma unroll
        for (int o = 0; o < 4; ++o) {
          const int x = xb + o;
          if (x < d.w) {
            const float m = med3(fmaxf(fmaxf(lo[o], lo[o + 1]), lo[o + 2]), med3(mid[o], mid[o + 1], mid[o + 2]),
                                 fminf(fminf(hi[o], hi[o + 1]), hi[o + 2]));
            pixel<T>(d, y, x)[c * d.sc] = from_float<T>(m);
          }
        }
      }
    } else {  // k == 5
      for (int o = 0; o < 4; ++o) {
        const int x = xb + o;
        if (x >= d.w) break;
#pragma unroll 1
        for (int c = 0; c < C; ++c) {
          float v[25];
#pragma unroll
          for (int i = 0; i < 5; ++i) {
            const T* row = pixel<T>(src, clampi(y - 2 + i, src.h), 0);
#pragma unroll
            for (int j = 0; j < 5; ++j)
              v[5 * i + j] = to_float(ldg_elem(row + (i64)clampi(x - 2 + j, src.w) * src.sx + c * src.sc));
          }
#pragma unroll
          for (int i = 0; i < 13; ++i)
#pragma unroll
            for (int j = i + 1; j < 25; ++j) sort2(v[i], v[j]);
          pixel<T>(d, y, x)[c * d.sc] = from_float<T>(v[12]);
        }
      }
    }
  }
}
}  // namespace

template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_median_blur(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                          const float* params, int P, int n) {
  median_tile<T, C, false>(src, dst, params, P, n);
}

// Batches where every sample has k = 3: without the 5x5 code the kernel needs far fewer
// registers (more threads in flight for the loads).
template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_median_blur_3(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                            const float* params, int P, int n) {
  median_tile<T, C, true>(src, dst, params, P, n);
}
