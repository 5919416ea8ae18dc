// The fused augmentation pipeline (gpuaug.Compose): per output pixel, one resampling through
// a per-sample 3x3 destination -> source matrix, a per-sample colour program, and the write
// (per-channel scale and bias: normalisation, dtype scaling), stored once in any layout.
//
// Parameter row (float32, one per sample; see gpuaug/policy/_fused.py, which builds it):
//   [0] interp (0 nearest, 1 bilinear)     [1] unused (the border is a template argument)
//   [2..10] a00 .. a22, destination -> source, row-major (affine: a20 = a21 = 0, a22 = 1)
//   [11..14] fill per channel, in raw source units (border "constant")
//   [15..18] write scale, [19..22] write bias per channel: out = v * scale + bias
//   [23] in_scale: semantic units per raw source unit (1, or 1/255 when a leading ToDtype
//        turned uint8 into [0, 1] floats)
//   [24..] the colour program's parameters, step after step (kParams each)
// Slots 0..10 match the warp kernels' rows, so warp_common.cuh's Map reads them as they are.
//
// Values run in the *semantic* range: SEMI (integer semantics, uint8 images: [0, 255], the
// grayscale floored as torchvision does) or float semantics ([0, 1]). The colour program is
// a compile-time list of steps (PROG: 4 bits per step, first step in the lowest bits), each
// built once per sample and thread from its parameters:
//   1 JITTER   [brightness, contrast, saturation, hue]: gpuaug.color_jitter's maths exactly
//              (contrast's mean from the pre-pass, see gpuaug_fused_sum)
//   2 GRAY     [on]: r = g = b = luma (gpuaug.grayscale's maths)
//   3 AFFINE   [3x4 row-major]: rgb' = M[:, :3] rgb + M[:, 3] * max (gpuaug.color_twist)
//   4 GAMMA    [gamma, gain]    5 SOLARIZE [threshold]    6 POSTERIZE [bits, 0: off]
//   7 INVERT   [on]
// With SEMI, every step's output is rounded to the uint8 grid (floor(v + 0.5), saturated),
// where a chain of gpuaug ops would store uint8; the resampled values enter the program
// unrounded (and steps defined on the grid -- gamma, solarize, posterize, invert -- round
// their input when they come first). JITTER's uint8 outputs carry the rounding's + 0.5, as in
// color_jitter.cu, so that both round identically.
#pragma once
#include "warp_common.cuh"
#include "colour.cuh"

namespace gpuaug {
namespace fused {

enum : int { P_INTERP = 0, P_MAP = 2, P_FILL = 11, P_SCALE = 15, P_BIAS = 19, P_IN = 23, P_COLOUR = 24 };
enum : int { OP_NONE = 0, OP_JITTER = 1, OP_GRAY = 2, OP_AFFINE = 3, OP_GAMMA = 4, OP_SOLARIZE = 5,
             OP_POSTERIZE = 6, OP_INVERT = 7 };

__host__ __device__ constexpr int op_params(int op) {
  return op == OP_JITTER ? 4 : op == OP_AFFINE ? 12 : op == OP_GAMMA ? 2 : op == OP_NONE ? 0 : 1;
}
// Parameters of a whole program (the offset of the step after it).
__host__ __device__ constexpr int prog_params(unsigned long long prog) {
  return prog == 0ull ? 0 : op_params((int)(prog & 15ull)) + prog_params(prog >> 4);
}

// The semantic type: its Range (colour.cuh) gives the maximum and whether it is integer.
template <bool SEMI> struct SemType { typedef float type; };
template <> struct SemType<true> { typedef unsigned char type; };

// floor(v) for 0 <= v < 2^23 in two full-rate adds (no conversion instruction).
__device__ __forceinline__ float floor_pos(float v) {
  return __fadd_rd(v, GPUAUG_MAGIC) - GPUAUG_MAGIC;
}

// The uint8 grid: floor(v + 0.5) saturated to [0, 255] (common.cuh's store rule), as a float.
// BIASED: v already holds v + 0.5.
template <bool BIASED>
__device__ __forceinline__ float to_grid(float v) {
  return floor_pos(fminf(fmaxf(BIASED ? v : v + 0.5f, 0.f), 255.5f));
}

template <int OP, bool SEMI, int C> struct Step;

// color_jitter.cu's Jitter on values in the semantic range (its a[c] are raw uint8 or [0, 1]
// floats, which is what SEMI / float semantics mean here).
template <bool SEMI, int C>
struct Step<OP_JITTER, SEMI, C> {
  typedef typename SemType<SEMI>::type S;
  static constexpr int kParams = 4;
  static constexpr bool kGrid = false;
  static constexpr int kBiased = SEMI ? (C < 3 ? 1 : 3) : 0;  // leading channels holding v + 0.5
  static constexpr float M = Range<S>::max;
  static constexpr float kHalf = SEMI ? 0.5f : 0.f;
  float b, cf, cm, sf, gs;
  HueRotation rot;
  bool hue;
  __device__ __forceinline__ Step(const float* p, float mean)
      : b(GPUAUG_LDP(p) * (1.f / M)), cf(GPUAUG_LDP(p + 1)), cm((1.f - cf) * mean * (1.f / M)), sf(GPUAUG_LDP(p + 2)),
        gs((1.f - sf) * (1.f / M)), rot(GPUAUG_LDP(p + 3)), hue(C >= 3 && GPUAUG_LDP(p + 3) != 0.f) {}
  __device__ __forceinline__ void operator()(float* v) const {
    constexpr int K = C < 3 ? 1 : 3;
    float x[K];
#pragma unroll
    for (int c = 0; c < K; ++c) x[c] = __saturatef(fmaf(cf, __saturatef(b * v[c]), cm));
    if constexpr (C >= 3) {
      const float g = gs * luma_floor_norm<S>(x[0], x[1], x[2]);
#pragma unroll
      for (int c = 0; c < 3; ++c) x[c] = __saturatef(fmaf(sf, x[c], g));
      if (hue) {
        rot(x[0], x[1], x[2], M, kHalf);
      } else {
#pragma unroll
        for (int c = 0; c < 3; ++c) x[c] = fmaf(x[c], M, kHalf);
      }
    } else {
      x[0] = fmaf(x[0], M, kHalf);
    }
#pragma unroll
    for (int c = 0; c < K; ++c) v[c] = x[c];
  }
};

template <bool SEMI, int C>
struct Step<OP_GRAY, SEMI, C> {
  typedef typename SemType<SEMI>::type S;
  static constexpr int kParams = 1;
  static constexpr bool kGrid = false;
  static constexpr int kBiased = 0;
  bool on;
  __device__ __forceinline__ Step(const float* p, float) : on(GPUAUG_LDP(p) != 0.f) {}
  __device__ __forceinline__ void operator()(float* v) const {
    if constexpr (C >= 3) {
      if (on) {
        const float g = luma<S>(v[0], v[1], v[2]);
        v[0] = v[1] = v[2] = g;
      }
    }
  }
};

template <bool SEMI, int C>
struct Step<OP_AFFINE, SEMI, C> {
  typedef typename SemType<SEMI>::type S;
  static constexpr int kParams = 12;
  static constexpr bool kGrid = false;
  static constexpr int kBiased = 0;
  float m[12];
  __device__ __forceinline__ Step(const float* p, float) {
#pragma unroll
    for (int k = 0; k < 12; ++k) m[k] = GPUAUG_LDP(p + k);
#pragma unroll
    for (int r = 0; r < 3; ++r) m[4 * r + 3] *= Range<S>::max;
  }
  __device__ __forceinline__ void operator()(float* v) const {
    if constexpr (C >= 3) {
      float o[3];
#pragma unroll
      for (int r = 0; r < 3; ++r) o[r] = fmaf(m[4 * r], v[0], fmaf(m[4 * r + 1], v[1], fmaf(m[4 * r + 2], v[2], m[4 * r + 3])));
#pragma unroll
      for (int r = 0; r < 3; ++r) v[r] = o[r];
    }
  }
};

// gamma.cu's gamma_value on every channel.
template <bool SEMI, int C>
struct Step<OP_GAMMA, SEMI, C> {
  typedef typename SemType<SEMI>::type S;
  static constexpr int kParams = 2;
  static constexpr bool kGrid = true;
  static constexpr int kBiased = 0;
  float g, gain;
  __device__ __forceinline__ Step(const float* p, float) : g(GPUAUG_LDP(p)), gain(GPUAUG_LDP(p + 1)) {}
  __device__ __forceinline__ void operator()(float* v) const {
    constexpr float M = Range<S>::max;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float r = gain * powf(fmaxf(v[c], 0.f) / M, g);
      v[c] = M * fminf(fmaxf(r, 0.f), 1.f);
    }
  }
};

template <bool SEMI, int C>
struct Step<OP_SOLARIZE, SEMI, C> {
  typedef typename SemType<SEMI>::type S;
  static constexpr int kParams = 1;
  static constexpr bool kGrid = true;
  static constexpr int kBiased = 0;
  float t;
  __device__ __forceinline__ Step(const float* p, float) : t(GPUAUG_LDP(p)) {}
  __device__ __forceinline__ void operator()(float* v) const {
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = v[c] >= t ? Range<S>::max - v[c] : v[c];
  }
};

// posterize.cu's rule: uint8 keeps the top bits, floats floor to 2^bits levels; bits 0: off.
template <bool SEMI, int C>
struct Step<OP_POSTERIZE, SEMI, C> {
  static constexpr int kParams = 1;
  static constexpr bool kGrid = true;
  static constexpr int kBiased = 0;
  int bits;
  __device__ __forceinline__ Step(const float* p, float) : bits(min(max((int)GPUAUG_LDP(p), 0), 8)) {}
  __device__ __forceinline__ void operator()(float* v) const {
    if (bits == 0) return;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      if constexpr (SEMI) {
        const unsigned m = (0xff00u >> bits) & 0xffu;
        v[c] = (float)((unsigned)v[c] & m);
      } else {
        const float levels = (float)(1 << bits);
        v[c] = fminf(fmaxf(floorf(v[c] * levels), 0.f), levels - 1.f) / levels;
      }
    }
  }
};

template <bool SEMI, int C>
struct Step<OP_INVERT, SEMI, C> {
  typedef typename SemType<SEMI>::type S;
  static constexpr int kParams = 1;
  static constexpr bool kGrid = true;
  static constexpr int kBiased = 0;
  bool on;
  __device__ __forceinline__ Step(const float* p, float) : on(GPUAUG_LDP(p) != 0.f) {}
  __device__ __forceinline__ void operator()(float* v) const {
    if (!on) return;
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = Range<S>::max - v[c];
  }
};

// Channels [0, B) hold v + 0.5, the rest v.
template <int C, int B>
__device__ __forceinline__ void grid_all(float* v) {
#pragma unroll
  for (int c = 0; c < C; ++c) v[c] = c < B ? to_grid<true>(v[c]) : to_grid<false>(v[c]);
}

// The colour program PROG (steps in its 4-bit digits, lowest first) with its parameters at
// p + OFF; constructed once per sample, applied per pixel (or per tap).
template <bool SEMI, int C, unsigned long long PROG, int OFF, bool FIRST = true>
struct Prog {
  typedef Step<(int)(PROG & 15ull), SEMI, C> Head;
  Head head;
  Prog<SEMI, C, (PROG >> 4), OFF + Head::kParams, false> tail;
  __device__ __forceinline__ Prog(const float* p, float mean) : head(p + OFF, mean), tail(p, mean) {}
  __device__ __forceinline__ void operator()(float* v) const {
    if constexpr (SEMI && FIRST && Head::kGrid) grid_all<C, 0>(v);
    head(v);
    if constexpr (SEMI) grid_all<C, Head::kBiased>(v);
    tail(v);
  }
};
template <bool SEMI, int C, int OFF, bool FIRST>
struct Prog<SEMI, C, 0ull, OFF, FIRST> {
  __device__ __forceinline__ Prog(const float*, float) {}
  __device__ __forceinline__ void operator()(float*) const {}
};

// Number of steps of a program.
__host__ __device__ constexpr int prog_len(unsigned long long prog) {
  return prog == 0ull ? 0 : 1 + prog_len(prog >> 4);
}

// One output pixel's value through the whole stage.
//   GEO: 0 none (output pixel (y, x) reads source pixel (y, x)), 1 affine, 2 perspective;
//   BORDER: warp_common's (0 constant with fill, 1 replicate); PRE: the colour program runs
//   on the source taps before they are interpolated (a policy whose colour transforms come
//   before its geometry), else on the resampled value.
template <typename T, int C, bool SEMI, int GEO, int BORDER, bool PRE, unsigned long long PROG>
struct Pipe {
  warp::Source<T, C, BORDER> src;
  warp::Map<GEO == 2> map;
  Prog<SEMI, C, PROG, P_COLOUR> prog;
  float in_scale;
  float scale[C], bias[C];
  int interp;

  __device__ __forceinline__ Pipe(const Sample& s, const float* p, float mean, bool dense) : prog(p, mean) {
    src.init(s, p + P_FILL, dense);
    if (GEO) map.load(p);
    interp = (int)p[P_INTERP];
    in_scale = p[P_IN];
#pragma unroll
    for (int c = 0; c < C; ++c) {
      scale[c] = p[P_SCALE + c];
      bias[c] = p[P_BIAS + c];
    }
  }

  // Tap (y, x) through the border rule, then the colour program (PRE); fill taps are taken
  // as they are (the fill is what a warp after the colour ops would blend in).
  __device__ __forceinline__ void pre_tap(int y, int x, float* v) const {
    const int yy = border_index(y, src.s.h, BORDER), xx = border_index(x, src.s.w, BORDER);
    if (yy < 0 || xx < 0) {
#pragma unroll
      for (int c = 0; c < C; ++c) v[c] = src.fill[c] * in_scale;
      return;
    }
    const T* q = pixel<T>(src.s, yy, xx);
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = ldg_float(q + c * src.s.sc) * in_scale;
    prog(v);
  }

  __device__ __forceinline__ void at(int x, int y, float* v) const {
    float fx = (float)x, fy = (float)y;
    if (GEO) map.at((float)x, (float)y, fx, fy);
    if constexpr (PRE) {
      fx = clamp_coord(fx);
      fy = clamp_coord(fy);
      if (interp == warp::NEAREST) {
        pre_tap(__float2int_rd(fy + 0.5f), __float2int_rd(fx + 0.5f), v);
      } else {
        const float y0f = floorf(fy), x0f = floorf(fx);
        const float wy = fy - y0f, wx = fx - x0f;
        const int y0 = (int)y0f, x0 = (int)x0f;
        float a[C], b[C], e[C], d[C];
        pre_tap(y0, x0, a);
        pre_tap(y0, x0 + 1, b);
        pre_tap(y0 + 1, x0, e);
        pre_tap(y0 + 1, x0 + 1, d);
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const float top = a[c] + wx * (b[c] - a[c]);
          const float bot = e[c] + wx * (d[c] - e[c]);
          v[c] = top + wy * (bot - top);
        }
      }
    } else {
      if (GEO) {
        src.sample(interp, fx, fy, v);
      } else {
        const T* q = pixel<T>(src.s, y, x);
#pragma unroll
        for (int c = 0; c < C; ++c) v[c] = ldg_float(q + c * src.s.sc);
      }
      if constexpr (!SEMI) {  // uint8 semantics only come from uint8 sources: in_scale is 1
#pragma unroll
        for (int c = 0; c < C; ++c) v[c] *= in_scale;
      }
      prog(v);
    }
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = fmaf(v[c], scale[c], bias[c]);
  }
};

// The sample's contrast mean (0 when the stage has none): colour.cuh's sample_mean, a
// whole-warp shuffle in a fixed order, so every lane of the warp must call it.
__device__ __forceinline__ float stage_mean(const double* partials, int nparts, int s, float count) {
  return nparts > 0 ? sample_mean(partials, nparts, s, count) : 0.f;
}

}  // namespace fused
}  // namespace gpuaug
