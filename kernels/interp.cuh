// Interpolation helpers shared by the resampling ops (resize, resized_crop, warps).
//
// Coordinates are in source pixel units with pixel centres at integers, as OpenCV's
// warpAffine / remap use them: (fy, fx) = (0, 0) is the centre of the top-left pixel,
// (-0.5, -0.5) its top-left corner. Samples are read through gpuaug::Sample (any strides),
// with a border rule from common.cuh (BORDER_CONSTANT takes fill[c] for every tap that
// falls outside the image, as OpenCV does). Results are floats (not yet stored).
#pragma once
#include "common.cuh"

namespace gpuaug {

// A read-only (__ldg) load of one element, as float. float16 travels as its raw bits
// because __ldg has no overload for the bit-holder struct.
template <typename T> __device__ __forceinline__ float ldg_float(const T* p) { return to_float(__ldg(p)); }
template <> __device__ __forceinline__ float ldg_float<half>(const half* p) {
  half h;
  h.bits = __ldg(reinterpret_cast<const unsigned short*>(p));
  return to_float(h);
}

// Coordinates beyond this are clamped before conversion to int: far enough out that every
// border rule already decides (constant/replicate), and no int overflow (NaN -> -limit).
#define GPUAUG_COORD_LIMIT 16777216.f

__device__ __forceinline__ float clamp_coord(float f) {
  return fminf(fmaxf(f, -GPUAUG_COORD_LIMIT), GPUAUG_COORD_LIMIT);
}

// v[c] = pixel (y, x) under the border rule, or fill[c] where it says "outside".
template <typename T, int C>
__device__ __forceinline__ void tap(const Sample& s, int y, int x, int border, const float* fill,
                                    float v[C]) {
  const int yy = border_index(y, s.h, border), xx = border_index(x, s.w, border);
  if (yy < 0 || xx < 0) {
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = fill[c];
    return;
  }
  const T* p = pixel<T>(s, yy, xx);
#pragma unroll
  for (int c = 0; c < C; ++c) v[c] = ldg_float(p + c * s.sc);
}

// Nearest neighbour at (fy, fx): the pixel whose centre is nearest, ties rounding up
// (floor(f + 0.5), OpenCV's warp rule). fill: C floats, read only for BORDER_CONSTANT.
template <typename T, int C>
__device__ __forceinline__ void sample_nearest(const Sample& s, float fy, float fx, int border,
                                               const float* fill, float v[C]) {
  const int y = __float2int_rd(clamp_coord(fy) + 0.5f);
  const int x = __float2int_rd(clamp_coord(fx) + 0.5f);
  tap<T, C>(s, y, x, border, fill, v);
}

// Bilinear at (fy, fx): the four pixels around the point, weighted by (1 - wy, wy) x
// (1 - wx, wx) with wy = fy - floor(fy); each tap follows the border rule on its own
// (so BORDER_CONSTANT blends the fill in at the edges, as OpenCV's warpAffine does).
template <typename T, int C>
__device__ __forceinline__ void sample_bilinear(const Sample& s, float fy, float fx, int border,
                                                const float* fill, float v[C]) {
  fy = clamp_coord(fy);
  fx = clamp_coord(fx);
  const float y0f = floorf(fy), x0f = floorf(fx);
  const float wy = fy - y0f, wx = fx - x0f;
  const int y0 = (int)y0f, x0 = (int)x0f;
  float a[C], b[C], c_[C], d[C];
  tap<T, C>(s, y0, x0, border, fill, a);
  tap<T, C>(s, y0, x0 + 1, border, fill, b);
  tap<T, C>(s, y0 + 1, x0, border, fill, c_);
  tap<T, C>(s, y0 + 1, x0 + 1, border, fill, d);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const float top = a[c] + wx * (b[c] - a[c]);
    const float bot = c_[c] + wx * (d[c] - c_[c]);
    v[c] = top + wy * (bot - top);
  }
}

// Replicate-border bilinear with the taps clamped into the image (no fill, no branches
// on the border rule): the common case of resize-like sampling. PACKED: the caller knows
// the channels are adjacent (s.sc == 1), so a pixel's channels load at fixed offsets.
template <typename T, int C, bool PACKED = false>
__device__ __forceinline__ void sample_bilinear_clamped(const Sample& s, float fy, float fx, float v[C]) {
  fy = clamp_coord(fy);
  fx = clamp_coord(fx);
  const float y0f = floorf(fy), x0f = floorf(fx);
  const float wy = fy - y0f, wx = fx - x0f;
  const int y0 = (int)y0f, x0 = (int)x0f;
  const int ya = min(max(y0, 0), s.h - 1), yb = min(max(y0 + 1, 0), s.h - 1);
  const int xa = min(max(x0, 0), s.w - 1), xb = min(max(x0 + 1, 0), s.w - 1);
  const T* r0 = reinterpret_cast<const T*>(s.ptr) + (i64)ya * s.sy;
  const T* r1 = reinterpret_cast<const T*>(s.ptr) + (i64)yb * s.sy;
  // Offsets within a row fit 32 bits for any image whose row does.
  const int sx = (int)s.sx, sc = PACKED ? 1 : (int)s.sc;
  const T *pa = r0 + xa * sx, *pb = r0 + xb * sx, *pc = r1 + xa * sx, *pd = r1 + xb * sx;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const float a = ldg_float(pa + c * sc), b = ldg_float(pb + c * sc);
    const float cc = ldg_float(pc + c * sc), d = ldg_float(pd + c * sc);
    const float top = a + wx * (b - a);
    const float bot = cc + wx * (d - cc);
    v[c] = top + wy * (bot - top);
  }
}

}  // namespace gpuaug
