// Resampling of a per-sample box to the output size, shared by resize.cu and
// resized_crop.cu (resize is the box (0, 0, h, w)).
//
// params row (P >= 9): [top, left, box_h, box_w, scale_y, scale_x, mode, out_h, out_w],
// scale = box / out (precomputed on the host). MODE (template): 0 nearest, 1 bilinear,
// 2 area. Conventions (OpenCV's, on the box as if it were the image):
//   nearest:  sy = floor(top + y * box_h / out_h), exact (double, no float drift);
//   bilinear: fy = top + (y + 0.5) * scale_y - 0.5, four taps, replicate border;
//   area:     average over the footprint [top + y*s, top + (y+1)*s) of the source, pixel i
//             covering [i, i+1), separable; reads outside the image replicate the edge.
// Every tap outside the image is clamped to its edge (replicate).
#pragma once
#include "common.cuh"
#include "interp.cuh"

namespace gpuaug {

enum { RESIZE_NEAREST = 0, RESIZE_BILINEAR = 1, RESIZE_AREA = 2 };

// floor(top + i * box / out) exactly: top * out + i * box is exact in double for float32
// top/box, and a correctly rounded quotient is an integer exactly when the true one is.
__device__ __forceinline__ int nearest_index(float top, float box, int out, int i, int size) {
  const double num = (double)top * out + (double)i * box;
  const double q = floor(num / (double)out);
  const double c = fmin(fmax(q, 0.0), (double)(size - 1));
  return (int)c;
}

// The footprint [a, b) of one output pixel along an axis of `size` pixels, as a run of
// source indices [i0, i1] and the weight of each: overlap with [i, i+1), where pixel 0
// also owns everything below 0 and pixel size-1 everything above size (replicate).
struct Footprint {
  float a, b;
  int i0, i1, size;
  __device__ __forceinline__ Footprint(float a_, float b_, int size_) : a(a_), b(b_), size(size_) {
    i0 = min(max(__float2int_rd(clamp_coord(a)), 0), size - 1);
    i1 = min(max(__float2int_ru(clamp_coord(b)) - 1, 0), size - 1);
  }
  __device__ __forceinline__ float weight(int i) const {
    const float lo = i == 0 ? a : fmaxf(a, (float)i);
    const float hi = i == size - 1 ? b : fminf(b, (float)(i + 1));
    return fmaxf(hi - lo, 0.f);
  }
};

template <typename T, int C, int MODE>
struct Resample {
  __device__ __forceinline__ void operator()(const Sample& s, const Sample& d, const float* p, int y,
                                             int x, float v[C]) const {
    if (MODE == RESIZE_NEAREST) {
      const int sy = nearest_index(p[0], p[2], d.h, y, s.h);
      const int sx = nearest_index(p[1], p[3], d.w, x, s.w);
      const T* px = reinterpret_cast<const T*>(s.ptr) + (i64)sy * s.sy + (i64)sx * s.sx;
      const int sc = (int)s.sc;
#pragma unroll
      for (int c = 0; c < C; ++c) v[c] = ldg_float(px + c * sc);
    } else if (MODE == RESIZE_BILINEAR) {
      const float fy = fmaf((float)y + 0.5f, p[4], p[0] - 0.5f);
      const float fx = fmaf((float)x + 0.5f, p[5], p[1] - 0.5f);
      sample_bilinear_clamped<T, C>(s, fy, fx, v);
    } else {
      const float ay = fmaf((float)y, p[4], p[0]), ax = fmaf((float)x, p[5], p[1]);
      const Footprint fy(ay, ay + p[4], s.h), fx(ax, ax + p[5], s.w);
      const int sx = (int)s.sx, sc = (int)s.sc;
      float acc[C];
#pragma unroll
      for (int c = 0; c < C; ++c) acc[c] = 0.f;
      float wsum_y = 0.f, wsum_x = 0.f;
      for (int j = fx.i0; j <= fx.i1; ++j) wsum_x += fx.weight(j);
      for (int i = fy.i0; i <= fy.i1; ++i) {
        const float wy = fy.weight(i);
        wsum_y += wy;
        const T* row = reinterpret_cast<const T*>(s.ptr) + (i64)i * s.sy;
        float r[C];
#pragma unroll
        for (int c = 0; c < C; ++c) r[c] = 0.f;
        for (int j = fx.i0; j <= fx.i1; ++j) {
          const float wx = fx.weight(j);
          const T* px = row + j * sx;
#pragma unroll
          for (int c = 0; c < C; ++c) r[c] = fmaf(wx, ldg_float(px + c * sc), r[c]);
        }
#pragma unroll
        for (int c = 0; c < C; ++c) acc[c] = fmaf(wy, r[c], acc[c]);
      }
      // Normalise by the summed weights (= the footprint area up to float rounding). A
      // footprint too thin for float32 to resolve (zero weight) reads its first pixel.
      const float area = wsum_y * wsum_x;
      if (area > 0.f) {
        const float inv = 1.f / area;
#pragma unroll
        for (int c = 0; c < C; ++c) v[c] = acc[c] * inv;
      } else {
        const T* px = reinterpret_cast<const T*>(s.ptr) + (i64)fy.i0 * s.sy + fx.i0 * sx;
#pragma unroll
        for (int c = 0; c < C; ++c) v[c] = ldg_float(px + c * sc);
      }
    }
  }
};

}  // namespace gpuaug
