// The warp kernels' bodies, shared by warp_affine, rotate (affine) and warp_perspective.
//
// Parameters, one float32 row per sample (see gpuaug/ops/_warp.py):
//   [interp, border, a00 a01 a02 a10 a11 a12 (a20 a21 a22 when PERSP), fill_0 .. fill_{C-1}]
// where a is the destination -> source map (the inverse of the user's matrix, computed
// before the launch). interp / border also arrive as template arguments (INTERP, BORDER)
// so the per-pixel code has no branches on them; the row copies are for the Numba twins.
//
// Sampling follows interp.cuh (pixel centres at integers, nearest = floor(u + 0.5),
// bilinear lerps, every tap outside the image follows the border rule); interp.cuh's
// functions serve the pixels whose footprint crosses the border. This file adds:
// - an in-image fast path (nearly every pixel): taps read with 32-bit offsets and no
//   border logic; floor() by the 2^23 trick (full-rate adds instead of quarter-rate
//   conversions); uint8 images with packed pixels read the two horizontally adjacent
//   taps of a row (2C bytes) with one or two aligned 8-byte __ldg loads, split by funnel
//   shifts, and turn bytes into floats by permuting them into a float's mantissa;
// - uint8 stores that round (floor(v + 0.5)) and saturate with a round-down add;
// - launch geometry: a warp covers an 8 x 4 pixel tile rather than a 32 x 1 row, so that
//   at any rotation angle its gathers fall in a compact source patch (fewer cache lines
//   per load instruction); a block covers 32 x 8 pixels; a thread does up to ROWS such
//   tiles down the image, so the per-sample setup (matrix, fill, addresses) is amortised.
// Two drivers: warp_driver (descriptor tables: any strides, NCHW views, varshape) and
// warp_dense (dense NHWC batches: base pointers and sizes only, all offsets 32-bit).
#pragma once
#include "interp.cuh"

namespace gpuaug {
namespace warp {

enum { NEAREST = 0, BILINEAR = 1 };

#define GPUAUG_MAGIC 8388608.f  // 2^23: adding it leaves an integer in the mantissa

// Element offsets of a sample fit in 32-bit ints.
__device__ __forceinline__ bool fits32(const Sample& s, int C) {
  const i64 ay = s.sy < 0 ? -s.sy : s.sy, ax = s.sx < 0 ? -s.sx : s.sx, ac = s.sc < 0 ? -s.sc : s.sc;
  return (i64)(s.h - 1) * ay + (i64)(s.w - 1) * ax + (i64)(C - 1) * ac + 1 < 2147483647LL;
}

// Bytes [0, NB) from p (any alignment, NB <= 8) into lo (bytes 0-3) and hi (4-7). Reads
// the aligned 8-byte block holding p and, only if the bytes run into it, the next one:
// every block read holds a wanted byte, but a block may run up to 7 bytes past the wanted
// ones. Source keeps these loads off an image's last row (hm1 below), where those bytes
// could lie past the end of the allocation (compute-sanitizer's memcheck found that read
// on a 182-byte image); on every other row they belong to the next row.
template <int NB>
__device__ __forceinline__ void load_bytes(const unsigned char* p, unsigned& lo, unsigned& hi) {
  const size_t addr = reinterpret_cast<size_t>(p);
  const uint2* q = reinterpret_cast<const uint2*>(addr & ~(size_t)7);
  const int off = (int)(addr & 7);
  const uint2 a = __ldg(q);
  uint2 b = make_uint2(0u, 0u);
  if (off + NB > 8) b = __ldg(q + 1);
  const bool up = off >= 4;
  const unsigned w0 = up ? a.y : a.x, w1 = up ? b.x : a.y, w2 = up ? b.y : b.x;
  const unsigned sh = (unsigned)(off & 3) * 8u;
  lo = __funnelshift_r(w0, w1, sh);
  hi = (NB > 4) ? __funnelshift_r(w1, w2, sh) : 0u;
}

// Byte k (0..7) of (lo, hi) as the float 2^23 + byte (0x4B0000bb).
__device__ __forceinline__ float magic_byte(unsigned lo, unsigned hi, int k) {
  return __int_as_float(__byte_perm(k < 4 ? lo : hi, 0x4B000000u, 0x7440u | (unsigned)(k & 3)));
}

// floor(f) as int, and f - floor(f), for 0 <= f < 2^22 with two full-rate adds: with
// 1.5 * 2^23 added, floats step by exactly 1 (for sums in [2^23, 2^24)), so
// (f - 0.5) + 1.5 * 2^23 rounds f - 0.5 to the nearest integer: floor(f), except at
// integers f = k, where the tie may give k - 1 (then the weight is 1 instead of 0: the
// same interpolated value).
#define GPUAUG_MAGIC_FLOOR 12582912.f  // 1.5 * 2^23, bits 0x4B400000
__device__ __forceinline__ int floor_magic(float f, float& weight) {
  const float t = (f - 0.5f) + GPUAUG_MAGIC_FLOOR;
  weight = f - (t - GPUAUG_MAGIC_FLOOR);
  return __float_as_int(t) - 0x4B400000;
}

// uint8 store rule (floor(v + 0.5), saturated; as common.cuh's from_float) without a
// conversion instruction: the round-down add leaves floor(v + 0.5) in the low byte.
__device__ __forceinline__ unsigned round_u8(float v) {
  v = fminf(fmaxf(v, 0.f), 255.f);
  return (unsigned)__float_as_int(__fadd_rd(v + 0.5f, GPUAUG_MAGIC)) & 0xFFu;
}

// One source sample as the per-pixel code sees it.
template <typename T, int C, int BORDER>
struct Source {
  Sample s;        // for the border taps (interp.cuh, 64-bit offsets)
  const T* base;
  int sy, sx, sc;  // 32-bit strides, valid when small
  float wm1, hm1;  // w - 1; the last row the fast paths may read + 1 (h - 1, or h - 2 for packed)
  bool small;      // 32-bit offsets and floor_magic are safe (else interp.cuh's path)
  bool packed;     // uint8 with pixels of C contiguous bytes
  float fill[C];

  // dense: the caller knows the offsets fit 32 bits.
  __device__ __forceinline__ void init(const Sample& smp, const float* fills, bool dense) {
    s = smp;
    base = reinterpret_cast<const T*>(smp.ptr);
    // floor_magic needs coordinates below 2^22
    small = (dense || fits32(smp, C)) && smp.w < (1 << 22) && smp.h < (1 << 22);
    sy = (int)smp.sy;
    sx = (int)smp.sx;
    sc = (int)smp.sc;
    wm1 = (float)(smp.w - 1);
    packed = sizeof(T) == 1 && smp.sx == C && smp.sc == 1 && smp.sy > 0;
    // packed uint8 pixels are read as 8-byte blocks: keep them off the last row (and off
    // images whose rows are shorter than a block); the generic path reads those pixels
    hm1 = !packed ? (float)(smp.h - 1) : (smp.w * C >= 8 ? (float)(smp.h - 2) : -1.f);
#pragma unroll
    for (int c = 0; c < C; ++c) fill[c] = fills[c];
  }

  __device__ __forceinline__ void nearest(float fx, float fy, float* v) const {
    const float tx = fx + 0.5f, ty = fy + 0.5f;
    if (small && tx >= 0.f && tx < wm1 + 1.f && ty >= 0.f && ty < hm1 + 1.f) {
      const T* p = base + (__float2int_rd(ty) * sy + __float2int_rd(tx) * sx);
      if constexpr (sizeof(T) == 1) {
        if (packed) {
          unsigned lo, hi;
          load_bytes<C>(reinterpret_cast<const unsigned char*>(p), lo, hi);
#pragma unroll
          for (int c = 0; c < C; ++c) v[c] = magic_byte(lo, hi, c) - GPUAUG_MAGIC;
          return;
        }
      }
#pragma unroll
      for (int c = 0; c < C; ++c) v[c] = ldg_float(p + c * sc);
      return;
    }
    sample_nearest<T, C>(s, fy, fx, BORDER, fill, v);
  }

  __device__ __forceinline__ void bilinear(float fx, float fy, float* v) const {
    if (small && fx >= 0.f && fx < wm1 && fy >= 0.f && fy < hm1) {  // 2x2 footprint inside
      float wx, wy;
      const int x0 = floor_magic(fx, wx), y0 = floor_magic(fy, wy);
      const T* p = base + (y0 * sy + x0 * sx);
      if constexpr (sizeof(T) == 1) {
        if (packed) {
          unsigned l0, h0, l1, h1;
          load_bytes<2 * C>(reinterpret_cast<const unsigned char*>(p), l0, h0);
          load_bytes<2 * C>(reinterpret_cast<const unsigned char*>(p + sy), l1, h1);
#pragma unroll
          for (int c = 0; c < C; ++c) {
            // differences of two 2^23 + byte floats are exact: lerp on them directly
            const float a = magic_byte(l0, h0, c), b = magic_byte(l0, h0, C + c);
            const float e = magic_byte(l1, h1, c), d = magic_byte(l1, h1, C + c);
            const float top = fmaf(wx, b - a, a - GPUAUG_MAGIC);
            const float bot = fmaf(wx, d - e, e - GPUAUG_MAGIC);
            v[c] = fmaf(wy, bot - top, top);
          }
          return;
        }
      }
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const float a = ldg_float(p + c * sc), b = ldg_float(p + sx + c * sc);
        const float e = ldg_float(p + sy + c * sc), d = ldg_float(p + sy + sx + c * sc);
        const float top = fmaf(wx, b - a, a);
        const float bot = fmaf(wx, d - e, e);
        v[c] = fmaf(wy, bot - top, top);
      }
      return;
    }
    sample_bilinear<T, C>(s, fy, fx, BORDER, fill, v);
  }

  __device__ __forceinline__ void sample(int interp, float fx, float fy, float* v) const {
    if (interp == NEAREST) {
      nearest(fx, fy, v);
    } else {
      bilinear(fx, fy, v);
    }
  }
};

// Store C floats at o (element strides sx unused: one pixel; sc between channels).
template <typename T, int C>
__device__ __forceinline__ void store_pixel(T* o, i64 sc, bool word4, const float* v) {
  if constexpr (sizeof(T) == 1) {
    if (C == 4 && word4) {  // one aligned 32-bit store
      const unsigned w = round_u8(v[0]) | (round_u8(v[1]) << 8) | (round_u8(v[2]) << 16) |
                         (round_u8(v[3]) << 24);
      *reinterpret_cast<unsigned*>(o) = w;
      return;
    }
#pragma unroll
    for (int c = 0; c < C; ++c) o[c * sc] = (unsigned char)round_u8(v[c]);
    return;
  }
#pragma unroll
  for (int c = 0; c < C; ++c) o[c * sc] = from_float<T>(v[c]);
}

#ifndef GPUAUG_NO_SHUFFLE  // (the host emulation in the tests runs threads one at a time)
// uint8 x 3 channels: the 8 lanes of a tile row hold 8 consecutive pixels, 24 bytes at a
// 4-byte aligned row_start; lanes 0-5 each assemble one 32-bit word from their own and
// the next lane's pixel (shuffles) and store it: 6 full-word stores instead of 24 byte
// stores, a third of the L2 write transactions. All 32 lanes must call it.
__device__ __forceinline__ void store_row_u8c3(unsigned char* row_start, int lane, const float* v) {
  const unsigned pix = round_u8(v[0]) | (round_u8(v[1]) << 8) | (round_u8(v[2]) << 16);
  const int l = lane & 7, base = lane & ~7;
  const int p = min((4 * l) / 3, 7), r = 4 * l - 3 * ((4 * l) / 3);
  const unsigned lo = __shfl_sync(0xffffffffu, pix, base | p);
  const unsigned hi = __shfl_sync(0xffffffffu, pix, base | min(p + 1, 7));
  // bytes r .. r + 3 of (lo's 3 bytes, hi's 3 bytes)
  if (l < 6) reinterpret_cast<unsigned*>(row_start)[l] = __funnelshift_r(lo | (hi << 24), hi >> 8, 8u * r);
}
#endif

// The destination -> source map of one sample.
template <bool PERSP>
struct Map {
  float a00, a01, a02, a10, a11, a12, a20, a21, a22;

  __device__ __forceinline__ void load(const float* p) {
    a00 = p[2]; a01 = p[3]; a02 = p[4];
    a10 = p[5]; a11 = p[6]; a12 = p[7];
    if (PERSP) {
      a20 = p[8]; a21 = p[9]; a22 = p[10];
    }
  }

  // Source point of output pixel (x, y).
  __device__ __forceinline__ void at(float x, float y, float& fx, float& fy) const {
    fx = fmaf(x, a00, fmaf(y, a01, a02));
    fy = fmaf(x, a10, fmaf(y, a11, a12));
    if (PERSP) {
      const float w = fmaf(x, a20, fmaf(y, a21, a22));
      if (w == 0.f) {  // a point at infinity: far outside
        fx = fy = -GPUAUG_COORD_LIMIT;
      } else {
        const float r = __frcp_rn(w);
        fx *= r;
        fy *= r;
      }
    }
  }
};

// (x, y) of this thread's first pixel: a warp covers 8 x 4 pixels, a 256-thread block
// 32 x 8 (warps 4 across, 2 down), whatever the block's shape.
__device__ __forceinline__ void tile_xy(int tid, int bx, int by, int& x, int& y) {
  const int lane = tid & 31, wid = tid >> 5;
  x = bx * 32 + (wid & 3) * 8 + (lane & 7);
  y = by * 8 + (wid >> 2) * 4 + (lane >> 3);
}

// Descriptor-table driver (any strides, varshape). Launched with 256-thread blocks over
// (ceil(W / 32), ceil(H / 8) or fewer, samples); rows beyond the grid are walked with a
// grid stride, so any grid height covers the image.
template <typename T, int C, int INTERP, int BORDER, bool PERSP>
__device__ __forceinline__ void warp_driver(const i64* src_tab, const i64* dst_tab, const float* params,
                                            int P, int n) {
  int x, y_first;
  tile_xy(threadIdx.y * blockDim.x + threadIdx.x, blockIdx.x, blockIdx.y, x, y_first);
  const int y_step = gridDim.y * 8;
  const int K = PERSP ? 11 : 8;  // where the fill values start
  for (int sn = blockIdx.z; sn < n; sn += gridDim.z) {
    const Sample d = sample_at(dst_tab, sn);
    if (x >= d.w || y_first >= d.h) continue;
    const float* p = params + (i64)sn * P;
    Source<T, C, BORDER> src;
    src.init(sample_at(src_tab, sn), p + K, false);
    Map<PERSP> m;
    m.load(p);
    const bool dsmall = fits32(d, C);
    const bool word4 = sizeof(T) == 1 && C == 4 && d.sx == 4 && d.sc == 1 && (d.sy & 3) == 0 &&
                       (reinterpret_cast<size_t>(d.ptr) & 3) == 0;
    const float xf = (float)x;
    for (int y = y_first; y < d.h; y += y_step) {
      float fx, fy, v[C];
      m.at(xf, (float)y, fx, fy);
      src.sample(INTERP, fx, fy, v);
      const i64 o = dsmall ? (i64)(y * (int)d.sy + x * (int)d.sx) : (i64)y * d.sy + (i64)x * d.sx;
      store_pixel<T, C>(reinterpret_cast<T*>(d.ptr) + o, d.sc, word4, v);
    }
  }
}

// Dense NHWC driver: samples of h x w x C (source) and H x W x C (output) elements back
// to back, each under 2^31 elements. 256-thread blocks over
// (ceil(W / 32), ceil(H / (8 ROWS)), min(n, 65535)).
template <typename T, int C, int INTERP, int BORDER, bool PERSP, int ROWS>
__device__ __forceinline__ void warp_dense(const T* src_all, T* dst_all, const float* params, int P, int n,
                                           int h, int w, int H, int W) {
  int x, y0;
  tile_xy(threadIdx.x, blockIdx.x, 0, x, y0);
  y0 += blockIdx.y * 8 * ROWS;
  // Lanes leave only from warps whose tile sticks out of the image, which never take
  // the shuffle path below (it needs all 32 lanes).
  if (x >= W || y0 >= H) return;
  const int K = PERSP ? 11 : 8;
  const int lane = threadIdx.x & 31;
  const int tile_x = x - (lane & 7), tile_y0 = y0 - (lane >> 3);
  const bool word4 = sizeof(T) == 1 && C == 4 && (reinterpret_cast<size_t>(dst_all) & 3) == 0;
  // uint8 x 3 rows as words: rows start 4-byte aligned, and the 8 x 4 tile is inside
  const bool rows3 = sizeof(T) == 1 && C == 3 && (W & 3) == 0 &&
                     (reinterpret_cast<size_t>(dst_all) & 3) == 0 && tile_x + 8 <= W;
  const float xf = (float)x;
  for (int sn = blockIdx.z; sn < n; sn += gridDim.z) {
    const float* p = params + (i64)sn * P;
    Sample smp;
    smp.ptr = const_cast<char*>(reinterpret_cast<const char*>(src_all + (i64)sn * h * w * C));
    smp.h = h;
    smp.w = w;
    smp.sy = (i64)w * C;
    smp.sx = C;
    smp.sc = 1;
    Source<T, C, BORDER> src;
    src.init(smp, p + K, true);
    Map<PERSP> m;
    m.load(p);
    T* out = dst_all + (i64)sn * H * W * C;
#pragma unroll
    for (int k = 0; k < ROWS; ++k) {
      const int y = y0 + 8 * k;
#ifndef GPUAUG_NO_SHUFFLE
      if constexpr (sizeof(T) == 1 && C == 3) {
        if (rows3 && tile_y0 + 8 * k + 4 <= H) {  // warp-uniform
          float fx, fy, v[C];
          m.at(xf, (float)y, fx, fy);
          src.sample(INTERP, fx, fy, v);
          store_row_u8c3(reinterpret_cast<unsigned char*>(out + (y * W + tile_x) * 3), lane, v);
          continue;
        }
      }
#endif
      if (y < H) {
        float fx, fy, v[C];
        m.at(xf, (float)y, fx, fy);
        src.sample(INTERP, fx, fy, v);
        store_pixel<T, C>(out + (y * W + x) * C, 1, word4, v);
      }
    }
  }
}

}  // namespace warp
}  // namespace gpuaug
