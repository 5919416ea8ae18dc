// gpuaug.Compose's fused stage: a whole run of geometric, colour and write transforms in one
// pass over the pixels (device code in fused.cuh, which documents the parameter rows).
//
// gpuaug_fused<T, C, O, SEMI, GEO, BORDER, PRE, PROG>: any batch (descriptor tables: strided,
//   NCHW, varshape source and output). 256-thread blocks over (ceil(W / 32), ceil(H / 8) or
//   fewer, samples); a warp covers 8 x 4 output pixels (compact source footprint at any
//   angle), rows beyond the grid are walked with a grid stride.
// gpuaug_fused_dense<T, C, O, SEMI, GEO, BORDER, PROG, PLANAR>: dense NHWC source (h x w x C
//   per sample, back to back) to a dense output, NHWC or NCHW (PLANAR), each sample under 2^31
//   elements: base pointers only, 32-bit offsets, warp_common's fast in-image sampling, ROWS
//   output rows per thread (the per-sample setup -- matrix, program, write -- amortised).
//   Grid (ceil(W / 32), ceil(H / (8 ROWS)), min(n, 65535)), 256 threads.
// gpuaug_fused_sum<T, C, SEMI, PROG>: contrast's per-sample mean for programs whose JITTER
//   follows other steps (or whose source is scaled on load): PROG is the stage's program up to
//   and including that JITTER; partial sums of the grayscale of (the steps before it, then its
//   brightness) over each source image, grid
//   (nparts, n), 256 threads, into partials[s * nparts + blockIdx.x] (double). Programs that
//   start with the JITTER use colour.cuh's gpuaug_gray_sum<T, C, 1> instead, color_jitter's
//   own reduction, so that the mean -- and the result -- equal gpuaug.color_jitter's.
#include "fused.cuh"

#ifndef GPUAUG_FUSED_ROWS
#define GPUAUG_FUSED_ROWS 4
#endif

template <typename T, int C, typename O, bool SEMI, int GEO, int BORDER, bool PRE, unsigned long long PROG>
__global__ void __launch_bounds__(256) gpuaug_fused(const gpuaug::i64* src_tab, const gpuaug::i64* dst_tab,
                                                    const float* params, int P, int n, const double* partials,
                                                    int nparts) {
  using namespace gpuaug;
  int x, y_first;
  warp::tile_xy(threadIdx.y * blockDim.x + threadIdx.x, blockIdx.x, blockIdx.y, x, y_first);
  const int y_step = gridDim.y * 8;
  for (int sn = blockIdx.z; sn < n; sn += gridDim.z) {
    const Sample s = sample_at(src_tab, sn);
    const float mean = fused::stage_mean(partials, nparts, sn, (float)s.h * s.w);  // whole warp
    const Sample d = sample_at(dst_tab, sn);
    if (x >= d.w || y_first >= d.h) continue;
    const fused::Pipe<T, C, SEMI, GEO, BORDER, PRE, PROG> pipe(s, params + (i64)sn * P, mean, false);
    const bool dsmall = warp::fits32(d, C);
    for (int y = y_first; y < d.h; y += y_step) {
      float v[C];
      pipe.at(x, y, v);
      O* o = reinterpret_cast<O*>(d.ptr) + (dsmall ? (i64)(y * (int)d.sy + x * (int)d.sx) : (i64)y * d.sy + (i64)x * d.sx);
#pragma unroll
      for (int c = 0; c < C; ++c) o[c * d.sc] = from_float<O>(v[c]);
    }
  }
}

template <typename T, int C, typename O, bool SEMI, int GEO, int BORDER, unsigned long long PROG, bool PLANAR>
__global__ void __launch_bounds__(256) gpuaug_fused_dense(const T* src_all, O* dst_all, const float* params, int P,
                                                          int n, int h, int w, int H, int W, const double* partials,
                                                          int nparts) {
  using namespace gpuaug;
  constexpr int ROWS = GPUAUG_FUSED_ROWS;
  int x, y0;
  warp::tile_xy(threadIdx.x, blockIdx.x, 0, x, y0);
  y0 += blockIdx.y * 8 * ROWS;
  const int lane = threadIdx.x & 31;
  const int tile_x = x - (lane & 7), tile_y0 = y0 - (lane >> 3);
  const bool word4 = !PLANAR && sizeof(O) == 1 && C == 4 && (reinterpret_cast<size_t>(dst_all) & 3) == 0;
  // uint8 x 3 NHWC rows as words: rows start 4-byte aligned and the warp's 8 x 4 tile is inside
  const bool rows3 = !PLANAR && sizeof(O) == 1 && C == 3 && (W & 3) == 0 &&
                     (reinterpret_cast<size_t>(dst_all) & 3) == 0 && tile_x + 8 <= W;
  const int plane = H * W;
  for (int sn = blockIdx.z; sn < n; sn += gridDim.z) {
    // Every lane gets here (the mean is a whole-warp shuffle); lanes outside the image
    // (only in warps whose tile sticks out, which never take the shuffle store) skip below.
    const float mean = fused::stage_mean(partials, nparts, sn, (float)h * w);
    if (x >= W || y0 >= H) continue;
    Sample smp;
    smp.ptr = const_cast<char*>(reinterpret_cast<const char*>(src_all + (i64)sn * h * w * C));
    smp.h = h;
    smp.w = w;
    smp.sy = (i64)w * C;
    smp.sx = C;
    smp.sc = 1;
    const fused::Pipe<T, C, SEMI, GEO, BORDER, false, PROG> pipe(smp, params + (i64)sn * P, mean, true);
    O* out = dst_all + (i64)sn * C * plane;
#pragma unroll
    for (int k = 0; k < ROWS; ++k) {
      const int y = y0 + 8 * k;
#ifndef GPUAUG_NO_SHUFFLE
      if constexpr (!PLANAR && sizeof(O) == 1 && C == 3) {
        if (rows3 && tile_y0 + 8 * k + 4 <= H) {  // warp-uniform
          float v[C];
          pipe.at(x, y, v);
          warp::store_row_u8c3(reinterpret_cast<unsigned char*>(out + (y * W + tile_x) * 3), lane, v);
          continue;
        }
      }
#endif
      if (y < H) {
        float v[C];
        pipe.at(x, y, v);
        if constexpr (PLANAR) {
#pragma unroll
          for (int c = 0; c < C; ++c) out[c * plane + y * W + x] = from_float<O>(v[c]);
        } else if constexpr (sizeof(O) == 1) {
          warp::store_pixel<O, C>(out + (y * W + x) * C, 1, word4, v);
        } else {
#pragma unroll
          for (int c = 0; c < C; ++c) out[(y * W + x) * C + c] = from_float<O>(v[c]);
        }
      }
    }
  }
}

template <typename T, int C, bool SEMI, unsigned long long PROG>
__global__ void __launch_bounds__(256) gpuaug_fused_sum(const gpuaug::i64* src_tab, const float* params, int P,
                                                        int n, double* partials, int nparts) {
  using namespace gpuaug;
  typedef typename fused::SemType<SEMI>::type S;
  constexpr int J = fused::prog_len(PROG) - 1;  // the contrast JITTER: the program's last step
  static_assert(J >= 0 && ((PROG >> (4 * J)) & 15ull) == fused::OP_JITTER,
                "gpuaug_fused_sum: the program must end with the JITTER whose contrast needs the mean");
  constexpr unsigned long long PREFIX = J == 0 ? 0ull : (PROG & ((1ull << (4 * J)) - 1ull));
  constexpr int JOFF = fused::P_COLOUR + fused::prog_params(PREFIX);
  __shared__ double warp_sums[32];
  const int stride = nparts * blockDim.x;
  for (int s0 = blockIdx.y; s0 < n; s0 += gridDim.y) {
    const int s = n - 1 - s0;  // last sample first: the main kernel starts with sample 0
    const Sample src = sample_at(src_tab, s);
    const float* p = params + (i64)s * P;
    const fused::Prog<SEMI, C, PREFIX, fused::P_COLOUR> prefix(p, 0.f);
    const float in_scale = p[fused::P_IN];
    const float bn = p[JOFF] * (1.f / Range<S>::max);
    const int hw = src.h * src.w;
    double acc = 0.0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < hw; i += stride) {
      const int y = i / src.w, x = i - y * src.w;
      const T* ip = pixel<T>(src, y, x);
      float a[C];
#pragma unroll
      for (int c = 0; c < C; ++c) a[c] = to_float(ip[c * src.sc]) * in_scale;
      prefix(a);
      acc += contrast_gray<S, C, 1>(a, bn);
    }
    block_partial(acc, warp_sums, partials + (i64)s * nparts + blockIdx.x);  // colour.cuh
  }
}
