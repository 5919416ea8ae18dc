// Resampling of a per-sample box to the output size, shared by resize.cu and
// resized_crop.cu (resize is the box (0, 0, h, w)).
//
// params row (P = 12, so rows are 16-byte aligned and load as float4):
// [top, left, scale_y, scale_x, box_h, box_w, out_h, out_w, mode, 0, 0, 0],
// scale = box / out (precomputed on the host). MODE (template): 0 nearest, 1 bilinear,
// 2 area (the mode column is for the Numba twin). Conventions (OpenCV's, on the box as
// if it were the image):
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

// A descriptor-table row (see common.cuh) in three 16-byte read-only loads (rows are
// 48 bytes from a 256-byte aligned upload), instead of six 8-byte ones per thread.
__device__ __forceinline__ Sample load_sample(const i64* table, int n) {
  const longlong2* r = reinterpret_cast<const longlong2*>(table + (i64)n * 6);
  const longlong2 a = __ldg(r), b = __ldg(r + 1), c = __ldg(r + 2);
  Sample s;
  s.ptr = reinterpret_cast<char*>(a.x);
  s.h = (int)a.y;
  s.w = (int)b.x;
  s.sy = b.y;
  s.sx = c.x;
  s.sc = c.y;
  return s;
}

// v[C] for output pixel (y, x) of sample s resampled into d. q: params[0..3], box: [4..5].
// PACKED: s.sc == 1 (adjacent channels, NHWC), so channel offsets are immediates.
template <typename T, int C, int MODE, bool PACKED>
struct Resample {
  __device__ __forceinline__ void operator()(const Sample& s, const Sample& d, const float4& q,
                                             const float* p, int y, int x, float v[C]) const {
    if (MODE == RESIZE_NEAREST) {
      const float2 box = GPUAUG_LDP(reinterpret_cast<const float2*>(p + 4));
      const int sy = nearest_index(q.x, box.x, d.h, y, s.h);
      const int sx = nearest_index(q.y, box.y, d.w, x, s.w);
      const T* px = reinterpret_cast<const T*>(s.ptr) + (i64)sy * s.sy + (i64)sx * s.sx;
      const int sc = PACKED ? 1 : (int)s.sc;
#pragma unroll
      for (int c = 0; c < C; ++c) v[c] = ldg_float(px + c * sc);
    } else if (MODE == RESIZE_BILINEAR) {
      const float fy = fmaf((float)y + 0.5f, q.z, q.x - 0.5f);
      const float fx = fmaf((float)x + 0.5f, q.w, q.y - 0.5f);
      sample_bilinear_clamped<T, C, PACKED>(s, fy, fx, v);
    } else {
      const float ay = fmaf((float)y, q.z, q.x), ax = fmaf((float)x, q.w, q.y);
      const Footprint fy(ay, ay + q.z, s.h), fx(ax, ax + q.w, s.w);
      const int sx = (int)s.sx, sc = PACKED ? 1 : (int)s.sc;
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

// One thread per output pixel, all C channels; blockIdx.z walks the samples (as
// value_driver in common.cuh, with vector loads of the tables and params, and 32-bit
// offsets within an output row). P must be 12 (float4-aligned rows).
template <typename T, int C, int MODE>
__device__ __forceinline__ void resample_driver(const i64* __restrict__ src_tab,
                                                const i64* __restrict__ dst_tab,
                                                const float* __restrict__ params, int P, int n) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = load_sample(dst_tab, s);
    if (x >= d.w || y >= d.h) continue;
    const Sample src = load_sample(src_tab, s);
    const float* p = params + (i64)s * P;
    const float4 q = GPUAUG_LDP(reinterpret_cast<const float4*>(p));
    float v[C];
    T* o = reinterpret_cast<T*>(d.ptr) + (i64)y * d.sy + x * (int)d.sx;
    // Dense NHWC (the common case) on both sides gets fixed channel offsets.
    if (src.sc == 1 && d.sc == 1) {
      Resample<T, C, MODE, true>()(src, d, q, p, y, x, v);
#pragma unroll
      for (int c = 0; c < C; ++c) o[c] = from_float<T>(v[c]);
    } else {
      Resample<T, C, MODE, false>()(src, d, q, p, y, x, v);
      const int dc = (int)d.sc;
#pragma unroll
      for (int c = 0; c < C; ++c) o[c * dc] = from_float<T>(v[c]);
    }
  }
}

}  // namespace gpuaug
