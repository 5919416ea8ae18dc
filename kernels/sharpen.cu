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
                                                      const float* params, int P, int n) {
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
