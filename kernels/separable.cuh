// Separable filtering (gaussian_blur, box_blur) with reflect-101 borders, in shared-memory tiles.
//
// params row: [k, w_0 .. w_{k-1}, zero padding up to the batch's largest k]; k odd, the
// output is sum_i w_i sum_j w_j x[y + i - k/2, x + j - k/2] (indices reflected as OpenCV's
// BORDER_REFLECT_101), summed in float32 and stored with the library's rounding.
//
// One block of 32 x 8 threads makes a 32 x 32 output tile of one sample (blockIdx.z):
//   1. horizontal pass: for each of the 32 + 2R tile rows (R = k/2, rows reflected),
//      a thread filters 4 adjacent columns from a sliding window of k + 3 input pixels
//      (read through the read-only cache), so each input is loaded once per 4 outputs;
//      results go to shared memory, hbuf[c][row][col];
//   2. vertical pass: a thread filters 4 adjacent rows of one column of hbuf the same way
//      and stores them.
// The weight for "input j, output o" is w[j - o], read from a zero-padded copy in shared
// memory, so the window loops need no bounds tests. CG channels are filtered per pass:
// CG = C normally, CG = 1 when C channels of hbuf would not fit (large kernels).
// separable_tile_k below is the fast path for batches whose largest k is at most 15.
#pragma once
#include "common.cuh"
#include "rowvec.cuh"

namespace gpuaug {

constexpr int SEP_TW = 32;   // tile width (= blockDim.x)
constexpr int SEP_TH = 32;   // tile height (= 4 * blockDim.y)
constexpr int SEP_PAD = 3;   // zero weights on each side of w: w[j - o] for o in 0..3

template <typename T, int C, int CG>
__device__ __forceinline__ void separable_tile(const i64* src_tab, const i64* dst_tab,
                                               const float* params, int P, int n) {
  extern __shared__ float4 sep_smem[];  // float4: 16-byte aligned
  float* smem = reinterpret_cast<float*>(sep_smem);
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int nthreads = blockDim.x * blockDim.y;
  const int wlen = (P - 1 + 2 * SEP_PAD + 3) & ~3;  // keeps hbuf 16-byte aligned
  float* wpad = smem;
  float* hbuf = smem + wlen;
  const int x0 = blockIdx.x * SEP_TW, y0 = blockIdx.y * SEP_TH;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = sample_at(dst_tab, s);
    if (x0 >= d.w || y0 >= d.h) continue;  // the whole block skips: varshape tail
    const Sample src = sample_at(src_tab, s);
    const float* p = params + (i64)s * P;
    const int k = (int)p[0], R = k / 2;
    const int rows = SEP_TH + 2 * R;
    __syncthreads();  // the previous sample's readers of wpad/hbuf are done
    for (int i = tid; i < wlen; i += nthreads) {
      const int j = i - SEP_PAD;
      wpad[i] = (j >= 0 && j < k) ? p[1 + j] : 0.f;
    }
    const bool inner_x = x0 - R >= 0 && x0 + SEP_TW + R <= src.w;
    for (int c0 = 0; c0 < C; c0 += CG) {
      __syncthreads();  // wpad written; previous channel group's vertical pass done
      // 1. horizontal pass: unit u = (tile row r, group g of 4 columns)
      for (int u = tid; u < rows * (SEP_TW / 4); u += nthreads) {
        const int r = u / (SEP_TW / 4), g = u % (SEP_TW / 4);
        const int gy = border_index(y0 - R + r, src.h, BORDER_REFLECT101);
        const int xs = x0 + 4 * g - R;
        float acc[CG][4];
#pragma unroll
        for (int c = 0; c < CG; ++c)
#pragma unroll
          for (int o = 0; o < 4; ++o) acc[c][o] = 0.f;
        float w0 = 0.f, w1 = 0.f, w2 = 0.f, w3 = 0.f;  // w[j], w[j-1], w[j-2], w[j-3]
        const T* row = pixel<T>(src, gy, 0);
        for (int j = 0; j < k + 3; ++j) {
          w3 = w2; w2 = w1; w1 = w0;
          w0 = wpad[j + SEP_PAD];
          const int gx = inner_x ? xs + j : border_index(xs + j, src.w, BORDER_REFLECT101);
          const T* px = row + (i64)gx * src.sx;
#pragma unroll
          for (int c = 0; c < CG; ++c) {
            const float v = fast_float(ldg_elem(px + (i64)(c0 + c) * src.sc));
            acc[c][0] = __fmaf_rn(w0, v, acc[c][0]);
            acc[c][1] = __fmaf_rn(w1, v, acc[c][1]);
            acc[c][2] = __fmaf_rn(w2, v, acc[c][2]);
            acc[c][3] = __fmaf_rn(w3, v, acc[c][3]);
          }
        }
#pragma unroll
        for (int c = 0; c < CG; ++c)
          *reinterpret_cast<float4*>(hbuf + ((c * rows + r) * SEP_TW + 4 * g)) =
              make_float4(acc[c][0], acc[c][1], acc[c][2], acc[c][3]);
      }
      __syncthreads();
      // 2. vertical pass: thread (tx, ty) makes rows 4 ty .. 4 ty + 3 of column tx
      const int tx = threadIdx.x, ty = threadIdx.y;
      float acc[CG][4];
#pragma unroll
      for (int c = 0; c < CG; ++c)
#pragma unroll
        for (int o = 0; o < 4; ++o) acc[c][o] = 0.f;
      float w0 = 0.f, w1 = 0.f, w2 = 0.f, w3 = 0.f;
      for (int j = 0; j < k + 3; ++j) {
        w3 = w2; w2 = w1; w1 = w0;
        w0 = wpad[j + SEP_PAD];
#pragma unroll
        for (int c = 0; c < CG; ++c) {
          const float v = hbuf[(c * rows + 4 * ty + j) * SEP_TW + tx];
          acc[c][0] = __fmaf_rn(w0, v, acc[c][0]);
          acc[c][1] = __fmaf_rn(w1, v, acc[c][1]);
          acc[c][2] = __fmaf_rn(w2, v, acc[c][2]);
          acc[c][3] = __fmaf_rn(w3, v, acc[c][3]);
        }
      }
      const int x = x0 + tx;
      if (x < d.w) {
#pragma unroll
        for (int o = 0; o < 4; ++o) {
          const int y = y0 + 4 * ty + o;
          if (y < d.h) {
            T* out = pixel<T>(d, y, x);
#pragma unroll
            for (int c = 0; c < CG; ++c) out[(i64)(c0 + c) * d.sc] = fast_store<T>(acc[c][o]);
          }
        }
      }
    }
  }
}

// The same filter with the tap count K (odd, 3..15) fixed at compile time: every sample's
// k <= K, its taps centred in K (zero weights outside), so each window loop is fully
// unrolled with the weights in registers and no zero-padded taps: K multiply-adds per
// output per pass. The input tile (32 + 2R rows and columns) is first loaded into shared
// memory with coalesced reads (load_tile): elements of type T, or for uint8 inputs floats
// (each byte converted once, not once per window that reads it), rows padded to a multiple of
// 4 floats so that the horizontal pass reads its window as 16-byte vectors. The output tile
// is staged in the same space and written back row by row (store_tile).
// Dynamic shared memory: sep_k_smem_bytes(T, C, K) = tile + hbuf (the host computes the same:
// gpuaug/ops/_launch.py separable_plan, dali_plugins/native/gpuaug_dali.cc).
template <bool B, typename X, typename Y> struct sep_pick { typedef X type; };
template <typename X, typename Y> struct sep_pick<false, X, Y> { typedef Y type; };

template <typename T, int C, int K>
__device__ __forceinline__ void separable_tile_k(const i64* src_tab, const i64* dst_tab,
                                                 const float* params, int P, int n) {
  constexpr int R = K / 2, ROWS = SEP_TH + 2 * R, COLS = SEP_TW + 2 * R;
  constexpr bool U8 = sizeof(T) == 1;
  typedef typename sep_pick<U8, float, T>::type S;             // tile element type
  constexpr int PITCH = U8 ? (COLS * C + 3) & ~3 : COLS * C;  // elements from one tile row to the next
  constexpr int TILE_BYTES = (ROWS * PITCH * (int)sizeof(S) + 15) & ~15;
  constexpr int NV = ((K + 3) * C + 3) / 4;  // 16-byte vectors a uint8 horizontal unit reads (within its row)
  extern __shared__ float4 sep_smem[];
  S* tile = reinterpret_cast<S*>(sep_smem);      // [ROWS][PITCH]
  T* otile = reinterpret_cast<T*>(sep_smem);     // then the output, [32][32 * C]
  float* hbuf = reinterpret_cast<float*>(reinterpret_cast<char*>(sep_smem) + TILE_BYTES);  // [C][ROWS][32]
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int nthreads = blockDim.x * blockDim.y;
  const int x0 = blockIdx.x * SEP_TW, y0 = blockIdx.y * SEP_TH;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = sample_at(dst_tab, s);
    if (x0 >= d.w || y0 >= d.h) continue;  // the whole block skips: varshape tail
    const Sample src = sample_at(src_tab, s);
    const float* p = params + (i64)s * P;
    const int k = (int)p[0], off = (K - k) / 2;
    float w[K];
#pragma unroll
    for (int j = 0; j < K; ++j) w[j] = (j >= off && j < off + k) ? GPUAUG_LDP(p + 1 + j - off) : 0.f;
    __syncthreads();  // the previous sample is done with the tile
    load_tile<T, C, S>(src, y0 - R, x0 - R, ROWS, COLS, BORDER_REFLECT101, tile, PITCH);
    __syncthreads();
    // 1. horizontal pass: unit u = (tile row r, group g of 4 columns)
    for (int u = tid; u < ROWS * (SEP_TW / 4); u += nthreads) {
      const int r = u / (SEP_TW / 4), g = u % (SEP_TW / 4);
      const S* row = tile + r * PITCH + 4 * g * C;
      float f[U8 ? 4 * NV : 1];
      if constexpr (U8) {
#pragma unroll
        for (int i = 0; i < NV; ++i) {
          const float4 q = reinterpret_cast<const float4*>(row)[i];
          f[4 * i] = q.x; f[4 * i + 1] = q.y; f[4 * i + 2] = q.z; f[4 * i + 3] = q.w;
        }
      }
      float acc[C][4];
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int o = 0; o < 4; ++o) acc[c][o] = 0.f;
#pragma unroll
      for (int j = 0; j < K + 3; ++j) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
          float v;
          if constexpr (U8) {
            v = f[j * C + c];
          } else {
            v = fast_float(row[j * C + c]);
          }
#pragma unroll
          for (int o = 0; o < 4; ++o)
            if (j - o >= 0 && j - o < K) acc[c][o] = __fmaf_rn(w[j - o], v, acc[c][o]);
        }
      }
#pragma unroll
      for (int c = 0; c < C; ++c)
        *reinterpret_cast<float4*>(hbuf + (c * ROWS + r) * SEP_TW + 4 * g) =
            make_float4(acc[c][0], acc[c][1], acc[c][2], acc[c][3]);
    }
    __syncthreads();  // hbuf complete; the input tile is free for the output
    // 2. vertical pass: thread (tx, ty) makes rows 4 ty .. 4 ty + 3 of column tx
    const int tx = threadIdx.x, ty = threadIdx.y;
    float acc[C][4];
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int o = 0; o < 4; ++o) acc[c][o] = 0.f;
#pragma unroll
    for (int j = 0; j < K + 3; ++j) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const float v = hbuf[(c * ROWS + 4 * ty + j) * SEP_TW + tx];
#pragma unroll
        for (int o = 0; o < 4; ++o)
          if (j - o >= 0 && j - o < K) acc[c][o] = __fmaf_rn(w[j - o], v, acc[c][o]);
      }
    }
#pragma unroll
    for (int o = 0; o < 4; ++o)
#pragma unroll
      for (int c = 0; c < C; ++c) otile[((4 * ty + o) * SEP_TW + tx) * C + c] = fast_store<T>(acc[c][o]);
    __syncthreads();
    store_tile<T, C>(d, y0, x0, SEP_TH, SEP_TW, otile);
  }
}

}  // namespace gpuaug
