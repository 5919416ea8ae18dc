// The warp driver shared by warp_affine, rotate (affine) and warp_perspective.
//
// Parameters, one float32 row per sample (see gpuaug/ops/_warp.py):
//   [interp, border, a00 a01 a02 a10 a11 a12 (a20 a21 a22 when PERSP), fill_0 .. fill_{C-1}]
// where a is the destination -> source map (the inverse of the user's matrix, computed
// before the launch). interp / border also arrive as template arguments (INTERP, BORDER)
// so the per-pixel code carries no branches on them; the row copies are for the Numba twins.
//
// Sampling is interp.cuh's (pixel centres at integers, nearest = floor(u + 0.5), bilinear
// lerps, each tap outside the image follows the border rule); this file adds the fast
// paths and the launch geometry:
// - a thread computes every channel of its pixel, and walks rows with a grid stride, so
//   a launch with fewer rows of threads than output rows (Kernels.rows_per_thread)
//   amortises the per-sample setup (descriptors, matrix, fill) over several pixels;
// - when the 2x2 footprint lies inside the image (nearly every pixel), taps are read
//   directly with 32-bit offsets, no border logic; uint8 images with packed pixels
//   (stride_x == C, stride_c == 1) read the two horizontally adjacent taps of a row as
//   2-3 aligned 32-bit words (funnel shift + byte permute), 4-6 loads per output pixel
//   instead of 4*C byte loads, all through the read-only cache (__ldg);
// - bytes become floats with the 2^23 trick (byte permute into a float's mantissa, one
//   subtraction) instead of integer-to-float conversions, which run at quarter rate.
#pragma once
#include "interp.cuh"

namespace gpuaug {
namespace warp {

enum { NEAREST = 0, BILINEAR = 1 };

// Element offsets of a sample (or its output) fit in 32-bit ints.
__device__ __forceinline__ bool fits32(const Sample& s, int C) {
  const i64 ay = s.sy < 0 ? -s.sy : s.sy, ax = s.sx < 0 ? -s.sx : s.sx, ac = s.sc < 0 ? -s.sc : s.sc;
  return (i64)(s.h - 1) * ay + (i64)(s.w - 1) * ax + (i64)(C - 1) * ac + 1 < 2147483647LL;
}

// Byte k (0..3) of w as a float: 0x4B0000bb is the float 2^23 + bb.
__device__ __forceinline__ float byte_f(unsigned w, int k) {
  return __int_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | k)) - 8388608.f;
}

// Bytes [0, NB) starting at p (any alignment) as two words lo (bytes 0-3), hi (4-7),
// reading only aligned words that hold at least one wanted byte (so never past the end
// of the allocation).
template <int NB>
__device__ __forceinline__ void load_bytes(const unsigned char* p, unsigned& lo, unsigned& hi) {
  const size_t addr = reinterpret_cast<size_t>(p);
  const unsigned* w = reinterpret_cast<const unsigned*>(addr & ~(size_t)3);
  const int off = (int)(addr & 3);
  const unsigned w0 = __ldg(w);
  const unsigned w1 = (off + NB > 4) ? __ldg(w + 1) : 0u;
  const unsigned w2 = (off + NB > 8) ? __ldg(w + 2) : 0u;
  lo = __funnelshift_r(w0, w1, off * 8);
  hi = __funnelshift_r(w1, w2, off * 8);
}

template <int C>
__device__ __forceinline__ void unpack(unsigned lo, unsigned hi, int first, float* v) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int k = first + c;
    v[c] = byte_f(k < 4 ? lo : hi, k & 3);
  }
}

// One source sample as the per-pixel code sees it.
template <typename T, int C, int BORDER>
struct Source {
  Sample s;
  const T* base;
  int sy, sx, sc;  // 32-bit strides, valid when small
  bool small;      // 32-bit offsets are safe
  bool packed;     // uint8 with pixels of C contiguous bytes
  float fill[C];

  // Pixel (y, x), inside the image.
  __device__ __forceinline__ void load1(int y, int x, float* v) const {
    const T* p = base + (y * sy + x * sx);
    if constexpr (sizeof(T) == 1) {
      if (packed) {
        unsigned lo, hi;
        load_bytes<C>(reinterpret_cast<const unsigned char*>(p), lo, hi);
        unpack<C>(lo, hi, 0, v);
        return;
      }
    }
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = ldg_float(p + c * sc);
  }

  // Pixels (y, x) and (y, x + 1), both inside the image.
  __device__ __forceinline__ void load2(int y, int x, float* a, float* b) const {
    const T* p = base + (y * sy + x * sx);
    if constexpr (sizeof(T) == 1) {
      if (packed) {
        unsigned lo, hi;
        load_bytes<2 * C>(reinterpret_cast<const unsigned char*>(p), lo, hi);
        unpack<C>(lo, hi, 0, a);
        unpack<C>(lo, hi, C, b);
        return;
      }
    }
#pragma unroll
    for (int c = 0; c < C; ++c) {
      a[c] = ldg_float(p + c * sc);
      b[c] = ldg_float(p + sx + c * sc);
    }
  }

  __device__ __forceinline__ void nearest(float fx, float fy, float* v) const {
    const int x = __float2int_rd(clamp_coord(fx) + 0.5f);
    const int y = __float2int_rd(clamp_coord(fy) + 0.5f);
    if (small && (unsigned)x < (unsigned)s.w && (unsigned)y < (unsigned)s.h) {
      load1(y, x, v);
    } else {
      tap<T, C>(s, y, x, BORDER, fill, v);
    }
  }

  // interp.cuh's sample_bilinear, with the in-image fast path.
  __device__ __forceinline__ void bilinear(float fx, float fy, float* v) const {
    fx = clamp_coord(fx);
    fy = clamp_coord(fy);
    const float x0f = floorf(fx), y0f = floorf(fy);
    const float wx = fx - x0f, wy = fy - y0f;
    const int x0 = (int)x0f, y0 = (int)y0f;
    float a[C], b[C], c_[C], d[C];
    if (small && (unsigned)x0 < (unsigned)(s.w - 1) && (unsigned)y0 < (unsigned)(s.h - 1)) {
      load2(y0, x0, a, b);
      load2(y0 + 1, x0, c_, d);
    } else {
      tap<T, C>(s, y0, x0, BORDER, fill, a);
      tap<T, C>(s, y0, x0 + 1, BORDER, fill, b);
      tap<T, C>(s, y0 + 1, x0, BORDER, fill, c_);
      tap<T, C>(s, y0 + 1, x0 + 1, BORDER, fill, d);
    }
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float top = a[c] + wx * (b[c] - a[c]);
      const float bot = c_[c] + wx * (d[c] - c_[c]);
      v[c] = top + wy * (bot - top);
    }
  }
};

// Store C floats as pixel (y, x) of the output.
template <typename T, int C>
__device__ __forceinline__ void store_pixel(const Sample& d, bool small, bool word4, int y, int x,
                                            const float* v) {
  T* o = reinterpret_cast<T*>(d.ptr) +
         (small ? (i64)(y * (int)d.sy + x * (int)d.sx) : (i64)y * d.sy + (i64)x * d.sx);
  if constexpr (sizeof(T) == 1 && C == 4) {
    if (word4) {  // one 32-bit store
      unsigned w = 0;
#pragma unroll
      for (int c = 0; c < 4; ++c) w |= (unsigned)from_float<unsigned char>(v[c]) << (8 * c);
      *reinterpret_cast<unsigned*>(o) = w;
      return;
    }
  }
#pragma unroll
  for (int c = 0; c < C; ++c) o[c * d.sc] = from_float<T>(v[c]);
}

// The whole kernel body. PERSP: the map is a homography (divide by w).
template <typename T, int C, int INTERP, int BORDER, bool PERSP>
__device__ __forceinline__ void warp_driver(const i64* src_tab, const i64* dst_tab, const float* params,
                                            int P, int n) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y_first = blockIdx.y * blockDim.y + threadIdx.y;
  const int y_step = gridDim.y * blockDim.y;
  const int K = PERSP ? 11 : 8;  // where the fill values start
  for (int sn = blockIdx.z; sn < n; sn += gridDim.z) {
    const Sample d = sample_at(dst_tab, sn);
    if (x >= d.w || y_first >= d.h) continue;
    const float* p = params + (i64)sn * P;
    Source<T, C, BORDER> src;
    src.s = sample_at(src_tab, sn);
    src.base = reinterpret_cast<const T*>(src.s.ptr);
    src.small = fits32(src.s, C);
    src.sy = (int)src.s.sy;
    src.sx = (int)src.s.sx;
    src.sc = (int)src.s.sc;
    src.packed = sizeof(T) == 1 && src.s.sx == C && src.s.sc == 1;
#pragma unroll
    for (int c = 0; c < C; ++c) src.fill[c] = p[K + c];
    const bool dsmall = fits32(d, C);
    const bool word4 = sizeof(T) == 1 && C == 4 && d.sx == 4 && d.sc == 1 && (d.sy & 3) == 0 &&
                       (reinterpret_cast<size_t>(d.ptr) & 3) == 0;
    const float a00 = p[2], a01 = p[3], a02 = p[4], a10 = p[5], a11 = p[6], a12 = p[7];
    float a20 = 0.f, a21 = 0.f, a22 = 1.f;
    if (PERSP) {
      a20 = p[8];
      a21 = p[9];
      a22 = p[10];
    }
    const float xf = (float)x;
    for (int y = y_first; y < d.h; y += y_step) {
      const float yf = (float)y;
      float fx = fmaf(xf, a00, fmaf(yf, a01, a02));
      float fy = fmaf(xf, a10, fmaf(yf, a11, a12));
      if (PERSP) {
        const float w = fmaf(xf, a20, fmaf(yf, a21, a22));
        if (w == 0.f) {  // a point at infinity: far outside
          fx = fy = -GPUAUG_COORD_LIMIT;
        } else {
          const float r = __frcp_rn(w);
          fx *= r;
          fy *= r;
        }
      }
      float v[C];
      if (INTERP == NEAREST) {
        src.nearest(fx, fy, v);
      } else {
        src.bilinear(fx, fy, v);
      }
      store_pixel<T, C>(d, dsmall, word4, y, x, v);
    }
  }
}

}  // namespace warp
}  // namespace gpuaug
