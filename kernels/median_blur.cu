// gpuaug_median_blur<T, C>: median of the k x k window (k = 3 or 5 per sample, params [k]),
// per channel, replicated borders (OpenCV's medianBlur uses BORDER_REPLICATE).
//
// Launch: block (32, 8), grid (ceil(W / 128), ceil(H / 8), N): a block makes a 128 x 8
// output tile, a thread 4 adjacent outputs of one row. The input tile (with a halo of
// R = 2, or 1 for gpuaug_median_blur_3) is loaded into shared memory with coalesced row
// reads, and the outputs are staged there and written back row by row.
// k = 3: the 6 columns of 3 a thread needs are sorted once and shared, and each median is
// med3(max of the lows, med3 of the middles, min of the highs) (exact for 3 sorted columns).
// k = 5: 13 passes of selection over the 25 values in registers.
#include "common.cuh"
#include "rowvec.cuh"

namespace {
constexpr int MED_TW = 128, MED_TH = 8;

__device__ __forceinline__ void sort2(float& a, float& b) {
  const float lo = fminf(a, b);
  b = fmaxf(a, b);
  a = lo;
}
__device__ __forceinline__ float med3(float a, float b, float c) {
  return fmaxf(fminf(a, b), fminf(fmaxf(a, b), c));
}

template <typename T, int C, bool ONLY3>
__device__ __forceinline__ void median_tile(const gpuaug::i64* src_tab, const gpuaug::i64* dst_tab,
                                            const float* params, int P, int n) {
  using namespace gpuaug;
  constexpr int R = ONLY3 ? 1 : 2, ROWS = MED_TH + 2 * R, COLS = MED_TW + 2 * R;
  __shared__ T tile[ROWS * COLS * C];
  __shared__ T otile[MED_TH * MED_TW * C];
  const int x0 = blockIdx.x * MED_TW, y0 = blockIdx.y * MED_TH;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = sample_at(dst_tab, s);
    if (x0 >= d.w || y0 >= d.h) continue;  // the whole block skips: varshape tail
    const Sample src = sample_at(src_tab, s);
    const int k = ONLY3 ? 3 : (int)params[(i64)s * P];
    __syncthreads();  // the previous sample is done with the tiles
    load_tile<T, C>(src, y0 - R, x0 - R, ROWS, COLS, BORDER_REPLICATE, tile);
    __syncthreads();
    if (k == 3) {
      const T* base = tile + ((ty + R - 1) * COLS + 4 * tx + R - 1) * C;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float lo[6], mid[6], hi[6];
#pragma unroll
        for (int j = 0; j < 6; ++j) {
          float a = fast_float(base[j * C + c]);
          float b = fast_float(base[(COLS + j) * C + c]);
          float e = fast_float(base[(2 * COLS + j) * C + c]);
          sort2(a, b); sort2(b, e); sort2(a, b);
          lo[j] = a; mid[j] = b; hi[j] = e;
        }
#pragma unroll
        for (int o = 0; o < 4; ++o) {
          const float m = med3(fmaxf(fmaxf(lo[o], lo[o + 1]), lo[o + 2]), med3(mid[o], mid[o + 1], mid[o + 2]),
                               fminf(fminf(hi[o], hi[o + 1]), hi[o + 2]));
          otile[(ty * MED_TW + 4 * tx + o) * C + c] = fast_store<T>(m);
        }
      }
    } else {  // k == 5 (only in the general kernel, R = 2)
      const T* base = tile + (ty * COLS + 4 * tx) * C;
#pragma unroll 1
      for (int o = 0; o < 4; ++o) {
#pragma unroll 1
        for (int c = 0; c < C; ++c) {
          float v[25];
#pragma unroll
          for (int i = 0; i < 5; ++i)
#pragma unroll
            for (int j = 0; j < 5; ++j) v[5 * i + j] = fast_float(base[(i * COLS + o + j) * C + c]);
#pragma unroll
          for (int i = 0; i < 13; ++i)
#pragma unroll
            for (int j = i + 1; j < 25; ++j) sort2(v[i], v[j]);
          otile[(ty * MED_TW + 4 * tx + o) * C + c] = fast_store<T>(v[12]);
        }
      }
    }
    __syncthreads();
    store_tile<T, C>(d, y0, x0, MED_TH, MED_TW, otile);
  }
}
}  // namespace

template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_median_blur(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                          GPUAUG_PARAMS params, int P, int n) {
  median_tile<T, C, false>(src, dst, params, P, n);
}

// Batches where every sample has k = 3: a smaller halo, and without the 5x5 code the
// kernel needs far fewer registers.
template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_median_blur_3(const gpuaug::i64* src, const gpuaug::i64* dst,
                                                            GPUAUG_PARAMS params, int P, int n) {
  median_tile<T, C, true>(src, dst, params, P, n);
}

// gpuaug_median_blur_3_packed<PB>: uint8 batches with every k = 3, dense, 16-byte aligned, whose
// rows are whole 16-byte vectors; PB bytes per pixel (1..4: the NHWC channels, or 1 for the
// planes of NCHW; the planes per sample are not needed: one k for all). A thread makes one 16-byte vector of one row (grid: x over a plane's vectors,
// y over the planes): the 3 rows' words are sorted per byte (__vminu4 / __vmaxu4, four pixels'
// channels at once), the neighbours at -PB / +PB bytes are funnel shifts of the sorted words,
// and each median is med3(max of the lows, med3 of the middles, min of the highs), as above.
// Replicated borders: rows clamp, and the first / last pixel of a row is its own neighbour.
namespace {
__device__ __forceinline__ void sort2u4(unsigned int& a, unsigned int& b) {
  const unsigned int lo = __vminu4(a, b);
  b = __vmaxu4(a, b);
  a = lo;
}
__device__ __forceinline__ unsigned int med3u4(unsigned int a, unsigned int b, unsigned int c) {
  return __vmaxu4(__vminu4(a, b), __vminu4(__vmaxu4(a, b), c));
}
}  // namespace

template <int PB>
__global__ void __launch_bounds__(256) gpuaug_median_blur_3_packed(const uint4* __restrict__ src,
                                                                   uint4* __restrict__ dst, const float*, int,
                                                                   int, int planes, int, int vpr, int h) {
  const int nvec = vpr * h;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= nvec) return;
  const int y = j / vpr, q = j - y * vpr;
  const int rows[3] = {max(y - 1, 0), y, min(y + 1, h - 1)};
  for (int s = blockIdx.y; s < planes; s += gridDim.y) {
    const uint4* plane = src + (gpuaug::i64)s * nvec;
    unsigned int lo[6], mid[6], hi[6];  // words -1 .. 4 of the vector's window, sorted over the rows
#pragma unroll
    for (int r = 0; r < 3; ++r) {
      const uint4* row = plane + (gpuaug::i64)rows[r] * vpr;
      const uint4 v = __ldg(row + q);
      const unsigned int* words = reinterpret_cast<const unsigned int*>(row + q);
      unsigned int w[6];
      w[1] = v.x, w[2] = v.y, w[3] = v.z, w[4] = v.w;
      w[0] = q > 0 ? __ldg(words - 1) : v.x << (32 - 8 * PB);      // first pixel: its own neighbour
      w[5] = q < vpr - 1 ? __ldg(words + 4) : v.w >> (32 - 8 * PB);  // last pixel too
#pragma unroll
      for (int k = 0; k < 6; ++k) {
        if (r == 0) {
          lo[k] = w[k];
        } else if (r == 1) {
          mid[k] = w[k];
          sort2u4(lo[k], mid[k]);
        } else {
          hi[k] = w[k];
          sort2u4(mid[k], hi[k]);
          sort2u4(lo[k], mid[k]);
        }
      }
    }
    unsigned int out[4];
#pragma unroll
    for (int k = 1; k <= 4; ++k) {
      const unsigned int mx = __vmaxu4(__vmaxu4(gpuaug::bytes_at<-PB>(lo, k), lo[k]), gpuaug::bytes_at<PB>(lo, k));
      const unsigned int mn = __vminu4(__vminu4(gpuaug::bytes_at<-PB>(hi, k), hi[k]), gpuaug::bytes_at<PB>(hi, k));
      const unsigned int md = med3u4(gpuaug::bytes_at<-PB>(mid, k), mid[k], gpuaug::bytes_at<PB>(mid, k));
      out[k - 1] = med3u4(mx, md, mn);
    }
    dst[(gpuaug::i64)s * nvec + j] = make_uint4(out[0], out[1], out[2], out[3]);
  }
}
