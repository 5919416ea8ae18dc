// gpuaug_sharpen<T, C>: torchvision's adjust_sharpness. params: [factor, bound (255 or 1),
// round_blur (1 for uint8)]. Inner pixels: b = (sum of the 8 neighbours + 5 x) / 13, rounded
// for uint8; out = x + (1 - factor) (b - x), clamped to [0, bound]. The one-pixel border
// keeps x (clamped too), and images of height or width <= 2 are returned unchanged.
//
// Launch: block (32, 8), grid (ceil(W / 32), ceil(H / 32), N): a block makes a 32 x 32
// output tile from a 34 x 34 input tile in shared memory (coalesced row reads, edge rows
// replicated; they only feed border pixels, which keep x); a thread makes 4 rows of one
// column, and the outputs are staged in shared memory and written back row by row.
#include "common.cuh"
#include "rowvec.cuh"

namespace {
constexpr int SH_T = 32;
}

template <typename T, int C>
__global__ void __launch_bounds__(256) gpuaug_sharpen(const gpuaug::i64* src_tab, const gpuaug::i64* dst_tab,
                                                      GPUAUG_PARAMS params, int P, int n) {
  using namespace gpuaug;
  constexpr int COLS = SH_T + 2;
  __shared__ T tile[COLS * COLS * C];
  __shared__ T otile[SH_T * SH_T * C];
  const int x0 = blockIdx.x * SH_T, y0 = blockIdx.y * SH_T;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = sample_at(dst_tab, s);
    if (x0 >= d.w || y0 >= d.h) continue;  // the whole block skips: varshape tail
    const Sample src = sample_at(src_tab, s);
    const float* p = params + (i64)s * P;
    const float f = p[0], bound = p[1];
    const bool round_blur = p[2] != 0.f, tiny = src.h <= 2 || src.w <= 2;
    __syncthreads();  // the previous sample is done with the tiles
    load_tile<T, C>(src, y0 - 1, x0 - 1, COLS, COLS, BORDER_REPLICATE, tile);
    __syncthreads();
    const int x = x0 + tx;
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      const int r = 4 * ty + o, y = y0 + r;
      const bool border = y == 0 || x == 0 || y >= src.h - 1 || x >= src.w - 1;
      const T* t = tile + ((r + 1) * COLS + tx + 1) * C;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const float xc = fast_float(t[c]);
        float v = xc;
        if (!border) {
          float sum = 4.f * xc;  // 5 x + 8 neighbours, minus x counted in the 3x3 loop
#pragma unroll
          for (int dy = -1; dy <= 1; ++dy)
#pragma unroll
            for (int dx = -1; dx <= 1; ++dx) sum += fast_float(t[(dy * COLS + dx) * C + c]);
          float b = sum / 13.f;
          if (round_blur)  // floor(b + 0.5) for uint8's b in [0, 255], without the slow FRND
            b = __fsub_rn(__fadd_rd(__fadd_rn(b, 0.5f), 8388608.f), 8388608.f);
          v = __fmaf_rn(1.f - f, b - xc, xc);
        }
        if (!tiny) v = fminf(fmaxf(v, 0.f), bound);
        otile[(r * SH_T + tx) * C + c] = fast_store<T>(v);
      }
    }
    __syncthreads();
    store_tile<T, C>(d, y0, x0, SH_T, SH_T, otile);
  }
}

// gpuaug_sharpen_packed<PB>: dense uint8 batches, 16-byte aligned, whose rows are whole 16-byte
// vectors; PB bytes per pixel (1..4: the NHWC channels, or 1 for the planes of NCHW, pps planes
// per sample). A thread makes one 16-byte vector of one row (grid: x over a plane's vectors, y
// over the planes). The 3 x 3 sums (5 x + 8 neighbours) are added as integers in 16-bit lanes,
// even and odd bytes apart (at most 13 * 255); b = floor(sum / 13 + 0.5) is exact in integers
// (sum / 13 is never within 1/26 of a half), and the blend, clamp and rounding are gpuaug_sharpen's
// float32 operations, so both kernels give the same bytes. Border pixels keep x.
template <int PB>
__global__ void __launch_bounds__(256) gpuaug_sharpen_packed(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                             GPUAUG_PARAMS params, int P, int n,
                                                             int planes, int pps, int vpr, int h) {
  constexpr unsigned int EVEN = 0x00FF00FFu;
  const int nvec = vpr * h;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= nvec) return;
  const int y = j / vpr, q = j - y * vpr;
  const bool edge_row = y == 0 || y == h - 1;
  const int row_bytes = 16 * vpr;
  for (int s = blockIdx.y; s < planes; s += gridDim.y) {
    const uint4* plane = src + (gpuaug::i64)s * nvec;
    const uint4 c = __ldg(plane + (gpuaug::i64)y * vpr + q);
    uint4 o = c;
    if (!edge_row) {
      const float g = 1.f - params[(gpuaug::i64)(s / pps) * P];
      const unsigned int cw[4] = {c.x, c.y, c.z, c.w};
      unsigned int se[4], so[4];  // 16-bit lane sums: even bytes, odd bytes
#pragma unroll
      for (int k = 0; k < 4; ++k) se[k] = 4u * (cw[k] & EVEN), so[k] = 4u * ((cw[k] >> 8) & EVEN);
#pragma unroll
      for (int r = -1; r <= 1; ++r) {
        const uint4* row = plane + (gpuaug::i64)(y + r) * vpr + q;
        const unsigned int* words = reinterpret_cast<const unsigned int*>(row);
        const uint4 v = r == 0 ? c : __ldg(row);
        unsigned int w[6];
        w[1] = v.x, w[2] = v.y, w[3] = v.z, w[4] = v.w;
        w[0] = q > 0 ? __ldg(words - 1) : 0u;          // only pixel 0 (a border pixel) reads these
        w[5] = q < vpr - 1 ? __ldg(words + 4) : 0u;    // only the last pixel (border) reads these
#pragma unroll
        for (int k = 1; k <= 4; ++k) {
          const unsigned int a = gpuaug::bytes_at<-PB>(w, k), b = w[k], d = gpuaug::bytes_at<PB>(w, k);
          se[k - 1] += (a & EVEN) + (b & EVEN) + (d & EVEN);
          so[k - 1] += ((a >> 8) & EVEN) + ((b >> 8) & EVEN) + ((d >> 8) & EVEN);
        }
      }
      unsigned int out[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        unsigned int word = 0;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const unsigned int x = (cw[k] >> (8 * m)) & 0xFFu;
          const int pos = 16 * q + 4 * k + m;  // the byte's place in its row
          unsigned int byte = x;
          if (pos >= PB && pos < row_bytes - PB) {
            const unsigned int sum = ((m & 1 ? so[k] : se[k]) >> (16 * (m >> 1))) & 0xFFFFu;
            const float b = gpuaug::fast_float((unsigned char)((2u * sum + 13u) / 26u));
            const float xf = gpuaug::fast_float((unsigned char)x);
            const float v = fminf(fmaxf(__fmaf_rn(g, b - xf, xf), 0.f), 255.f);
            byte = gpuaug::fast_store<unsigned char>(v);
          }
          word |= byte << (8 * m);
        }
        out[k] = word;
      }
      o = make_uint4(out[0], out[1], out[2], out[3]);
    }
    dst[(gpuaug::i64)s * nvec + j] = o;
  }
}
