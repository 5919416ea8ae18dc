// Shared device code for the colour ops (brightness, contrast, saturation, hue, color_jitter,
// color_twist, grayscale, channel_shuffle).
//
// Values keep their dtype's units: uint8 in [0, 255], float16/float32 in [0, 1] (torchvision's
// convention); maths runs in float32 and every output element is stored once (common.cuh's
// rounding). An op is a small functor built once per thread from its sample's parameter row:
//
//   struct Op {
//     static constexpr bool kMean;          // needs the sample's grayscale mean (contrast)
//     __device__ Op(const float* p, float mean);
//     __device__ void operator()(const float* in, float* out) const;  // CI values -> CO values
//   };
//
// For uint8, operator() must return values within [0, 255] (the packed store relies on it).
// Two drivers run an op over a batch:
// - strided_map: one thread per pixel through the descriptor tables (any strides, NCHW,
//   varshape); grid (w/32, h/8, N), block (32, 8).
// - packed_map: samples stored as packed HWC (sx == C, sc == 1, sy == w * C) with src and dst
//   16-byte aligned at the same pixel; every thread moves G = 16 / sizeof(T) pixels as CI
//   16-byte loads and CO 16-byte stores (uint8 RGB: 16 pixels = three uint4). The up to 15
//   pixels before the first aligned one and the tail are done one per thread. grid (groups /
//   256, N), block 256.
// The per-sample grayscale mean (contrast) is reduced beforehand by gpuaug_gray_sum into
// `nparts` (<= 32) double partial sums per sample; every warp of the map kernel adds them up.
//
// GPUAUG_HOST_EMULATION (tests/colour_host_shim.h): the same code compiled as host C++ and run
// one thread at a time; the three places that need other threads (warp shuffles, the block
// reduction) and the inline PTX take a sequential path there.
#pragma once

#include "common.cuh"

namespace gpuaug {

template <typename T> struct Range {
  static constexpr float max = 1.f;
  static constexpr bool integer = false;
};
template <> struct Range<unsigned char> {
  static constexpr float max = 255.f;
  static constexpr bool integer = true;
};

__device__ __forceinline__ float clamp_to(float v, float hi) { return fminf(fmaxf(v, 0.f), hi); }

struct OpBase {
  static constexpr bool kMean = false;
  static constexpr int kVariants = 1;
  static constexpr bool kBiased = false;
  __device__ __forceinline__ int variant() const { return 0; }
};

// 1 / x (x > 0, normal): MUFU.RCP without __fdividef's denormal rescaling.
__device__ __forceinline__ float rcp_approx(float x) {
#ifdef GPUAUG_HOST_EMULATION
  return 1.f / x;
#else
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#endif
}

// torchvision's rgb_to_grayscale weights: 0.2989 r + 0.587 g + 0.114 b. For uint8 the sum is formed
// as (2989 r + 5870 g + 1140 b) * 1e-4 + 5e-5: the integer part is exact in float32 for integer
// inputs (< 2^24), the quotients lie on a 1e-4 grid, so the 5e-5 bias (above the float32 product's
// error, below half the grid) makes floor() and round-half-up of it exact.
template <typename T>
__device__ __forceinline__ float luma(float r, float g, float b) {
  if (Range<T>::integer) return fmaf(fmaf(2989.f, r, fmaf(5870.f, g, 1140.f * b)), 1e-4f, 5e-5f);
  return fmaf(0.2989f, r, fmaf(0.587f, g, 0.114f * b));
}

// torchvision floors the grayscale of integer images before blending with it (contrast,
// saturation); float images use it as is.
template <typename T>
__device__ __forceinline__ float luma_floor(float r, float g, float b) {
  return Range<T>::integer ? floorf(luma<T>(r, g, b)) : luma<T>(r, g, b);
}

// luma_floor<T>(max * (r, g, b)) for values normalised to [0, 1], max folded into the weights
// (rounded differently from luma_floor: not exact for integer inputs).
template <typename T>
__device__ __forceinline__ float luma_floor_norm(float r, float g, float b) {
  if (Range<T>::integer)
    return floorf(fmaf(0.2989f * 255.f, r, fmaf(0.587f * 255.f, g, fmaf(0.114f * 255.f, b, 5e-5f))));
  return luma<T>(r, g, b);
}

// torchvision's adjust_hue (RGB -> HSV, h = (h + shift) mod 1, HSV -> RGB) in closed form. A hue
// rotation keeps each pixel's maximum (V) and minimum (V (1 - S)); channel c becomes
// max - range * w(k_c), w(k) = clamp(min(k, 4 - k), 0, 1) on k = (n_c + 6 h) mod 6, n = 5, 3, 1
// for r, g, b (the usual HSV -> RGB formula). Scale-free, so it runs on raw uint8 values. One
// reciprocal and no floor per pixel: with 6 h in (-1, 5] the periodic distance in w only needs
// the centres 2 and 8, w(k) = sat(2 - min(|k - 2|, |k - 8|)), whose offsets are folded below.
struct HueRotation {
  float b0, b2, b4;  // sector base (0, 2, 4: red, green, blue maximum) + 6 * shift mod 6
  __device__ __forceinline__ explicit HueRotation(float shift) {
    const float s6 = 6.f * (shift - floorf(shift));  // [0, 6]
    b0 = s6;
    b2 = s6 + 2.f;
    b4 = s6 + 4.f;
  }

  // Rotates (r, g, b) in place; the results come out as scale * value + add.
  __device__ __forceinline__ void operator()(float& r, float& g, float& b, float scale = 1.f,
                                             float add = 0.f) const {
    const float mx = fmaxf(r, fmaxf(g, b));
    const float mn = fminf(r, fminf(g, b));
    const float range = mx - mn;
    // torchvision's sector choice: red if it is the maximum, else green if it is, else blue.
    const bool rmax = mx == r, gmax = mx == g;
    float num = r - g, base = b4;
    num = gmax ? b - r : num;
    base = gmax ? b2 : base;
    num = rmax ? g - b : num;
    base = rmax ? b0 : base;
    float h = fmaf(num, rcp_approx(range > 0.f ? range : 1.f), base);  // in (-1, 11]
    h = h > 5.f ? h - 6.f : h;                                         // in (-1, 5]
    const float sr = range * scale, sm = fmaf(mx, scale, add);
    r = fmaf(-sr, __saturatef(2.f - fminf(fabsf(h + 3.f), fabsf(h - 3.f))), sm);
    g = fmaf(-sr, __saturatef(2.f - fminf(fabsf(h + 1.f), fabsf(h - 5.f))), sm);
    b = fmaf(-sr, __saturatef(2.f - fminf(fabsf(h - 1.f), fabsf(h - 7.f))), sm);
  }
};

// The block's sum of every thread's ``acc``, stored by thread 0 into *out: a warp shuffle, then
// the warps' sums in a fixed order (the same bits run after run). Every thread of the block
// calls it (two barriers); warp_sums is the block's __shared__ double[32]. The contrast
// reductions (gray_sum here, gpuaug_fused_sum in fused.cu) share it. Host emulation: the
// threads run in turn and add into the zeroed *out.
__device__ __forceinline__ void block_partial(double acc, double* warp_sums, double* out) {
#ifdef GPUAUG_HOST_EMULATION
  *out += acc;
  return;
#endif
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += warp_sums[w];
    *out = t;
  }
  __syncthreads();
}

// The sample's grayscale mean from its partial sums; every lane of the (full) warp gets the same
// value, summed in a fixed order.
__device__ __forceinline__ float sample_mean(const double* partials, int nparts, int s, float count) {
#ifdef GPUAUG_HOST_EMULATION
  double t = 0.0;
  for (int k = 0; k < nparts; ++k) t += partials[(i64)s * nparts + k];
  return (float)t / count;
#endif
  const int lane = threadIdx.x & 31;
  double v = lane < nparts ? partials[(i64)s * nparts + lane] : 0.0;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  v = __shfl_sync(0xffffffffu, v, 0);
  return (float)v / count;
}

// G = 16 / sizeof(T) pixels of C channels held as C 16-byte words.
template <typename T, int C>
struct Vec {
  static constexpr int G = 16 / sizeof(T);
  union {
    uint4 q[C];
    T e[G * C];
  };
  __device__ __forceinline__ void load_stream(const T* p) {
    const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < C; ++k) q[k] = __ldcs(v + k);
  }
  __device__ __forceinline__ void load(const T* p) {
    const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < C; ++k) q[k] = __ldg(v + k);
  }
  __device__ __forceinline__ void store(T* p) const {
    uint4* v = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int k = 0; k < C; ++k) __stcs(v + k, q[k]);
  }
  __device__ __forceinline__ void clear() {}
  __device__ __forceinline__ float get(int i) const { return to_float(e[i]); }
  template <bool BIASED = false>
  __device__ __forceinline__ void set(int i, float v) { e[i] = from_float<T>(v); }
};

// uint8 converts through the float bit pattern of 2^23 + b (one PRMT and one FADD each way)
// rather than I2F/F2I, which issue at a fraction of the FP32 rate and would bound these kernels.
template <int C>
struct Vec<unsigned char, C> {
  static constexpr int G = 16;
  union {
    uint4 q[C];
    unsigned w[4 * C];
  };
  __device__ __forceinline__ void load_stream(const unsigned char* p) {
    const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < C; ++k) q[k] = __ldcs(v + k);
  }
  __device__ __forceinline__ void load(const unsigned char* p) {
    const uint4* v = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < C; ++k) q[k] = __ldg(v + k);
  }
  __device__ __forceinline__ void store(unsigned char* p) const {
    uint4* v = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int k = 0; k < C; ++k) __stcs(v + k, q[k]);
  }
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int k = 0; k < 4 * C; ++k) w[k] = 0u;
  }
  __device__ __forceinline__ float get(int i) const {
    return __uint_as_float(__byte_perm(w[i >> 2], 0x4B000000u, 0x7440u | (i & 3))) - 8388608.f;
  }
  // v in [0, 255]: floor(v + 0.5) (the store rule) is the low byte of 2^23 + floor(v + 0.5);
  // BIASED: v already holds v + 0.5.
  template <bool BIASED = false>
  __device__ __forceinline__ void set(int i, float v) {
    const unsigned b = __float_as_uint(__fadd_rd(BIASED ? v : v + 0.5f, 8388608.f));
    const int m = i & 3;
    w[i >> 2] = __byte_perm(w[i >> 2], b, (0x3210u & ~(0xFu << (4 * m))) | (4u << (4 * m)));
  }
};

// First pixel index k in [0, 16) at which both src + k * CI and dst + k * CO elements are
// 16-byte aligned; 16 if none (the host checks that one exists before choosing packed_map).
template <typename T, int CI, int CO>
__device__ __forceinline__ int packed_head(const void* src, const void* dst) {
  const unsigned long long a = reinterpret_cast<unsigned long long>(src);
  const unsigned long long b = reinterpret_cast<unsigned long long>(dst);
  int k = 0;
  while (k < 16 && (((a + (unsigned long long)k * CI * sizeof(T)) & 15u) != 0 ||
                    ((b + (unsigned long long)k * CO * sizeof(T)) & 15u) != 0))
    ++k;
  return k;
}

// An op's output as stored: BIASED integer outputs already carry the rounding's + 0.5.
template <typename T, bool BIASED>
__device__ __forceinline__ T store_value(float v) {
  if constexpr (BIASED && Range<T>::integer) {
    return (T)min(max(__float2int_rd(v), 0), 255);
  } else {
    return from_float<T>(v);
  }
}

template <int V, typename T, int CI, int CO, typename Op>
__device__ __forceinline__ void map_pixel(const Op& op, const T* ip, i64 si, T* o, i64 so) {
  float a[CI], b[CO];
#pragma unroll
  for (int c = 0; c < CI; ++c) a[c] = to_float(ip[c * si]);
  op.template apply<V>(a, b);
#pragma unroll
  for (int c = 0; c < CO; ++c) o[c * so] = store_value<T, Op::kBiased>(b[c]);
}

template <int V, typename T, int CI, int CO, typename Op>
__device__ __forceinline__ void map_group(const Op& op, const Vec<T, CI>& in, T* dst) {
  Vec<T, CO> out;
  out.clear();
#pragma unroll
  for (int p = 0; p < Vec<T, CI>::G; ++p) {
    float a[CI], b[CO];
#pragma unroll
    for (int c = 0; c < CI; ++c) a[c] = in.get(p * CI + c);
    op.template apply<V>(a, b);
#pragma unroll
    for (int c = 0; c < CO; ++c) out.template set<Op::kBiased>(p * CO + c, b[c]);
  }
  out.store(dst);
}

// Item j of a packed sample (head pixels, then ng groups of G pixels, then the tail): groups
// j < ng take ``in`` (loaded by the caller), the other items one pixel each.
template <typename T, int CI, int CO, typename Op>
__device__ __forceinline__ void map_item(const Op& op, const T* sp, T* dp, int head, int ng, int hw, int j,
                                         const Vec<T, CI>& in) {
  constexpr int G = Vec<T, CI>::G;
  if (j < ng) {
    T* o = dp + (i64)(head + j * G) * CO;
    if (Op::kVariants > 1 && op.variant())
      map_group<1, T, CI, CO>(op, in, o);
    else
      map_group<0, T, CI, CO>(op, in, o);
  } else if (j < hw - ng * (G - 1)) {  // the head and tail pixels, one per thread
    const int k = j - ng;
    const i64 pix = k < head ? k : k + ng * G;
    if (Op::kVariants > 1 && op.variant())
      map_pixel<1, T, CI, CO>(op, sp + pix * CI, 1, dp + pix * CO, 1);
    else
      map_pixel<0, T, CI, CO>(op, sp + pix * CI, 1, dp + pix * CO, 1);
  }
}

template <typename T, int CI, int CO, typename Op>
__device__ __forceinline__ void packed_map(const i64* src_tab, const i64* dst_tab, const float* params,
                                           int P, int n, const double* partials, int nparts) {
  constexpr int G = Vec<T, CI>::G;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const i64* rs = src_tab + (i64)s * 6;
    const T* sp = reinterpret_cast<const T*>(rs[0]);
    T* dp = reinterpret_cast<T*>(dst_tab[(i64)s * 6]);
    const int hw = (int)(rs[1] * rs[2]);
    const int head = packed_head<T, CI, CO>(sp, dp);
    const int ng = hw > head ? (hw - head) / G : 0;
    Vec<T, CI> in;
    if (j < ng) in.load_stream(sp + (i64)(head + j * G) * CI);  // in flight while the op is set up
    const float mean = Op::kMean ? sample_mean(partials, nparts, s, (float)hw) : 0.f;
    const Op op(params + (i64)s * P, mean);
    map_item<T, CI, CO, Op>(op, sp, dp, head, ng, hw, j, in);
  }
}

template <typename T, int CI, int CO, typename Op>
__device__ __forceinline__ void strided_map(const i64* src_tab, const i64* dst_tab, const float* params,
                                            int P, int n, const double* partials, int nparts) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample src = sample_at(src_tab, s);
    // before the bounds check: the mean is a whole-warp shuffle (blockDim.x == 32)
    const float mean = Op::kMean ? sample_mean(partials, nparts, s, (float)src.h * src.w) : 0.f;
    const Sample d = sample_at(dst_tab, s);
    if (x >= d.w || y >= d.h) continue;
    const Op op(params + (i64)s * P, mean);
    if (Op::kVariants > 1 && op.variant())
      map_pixel<1, T, CI, CO>(op, pixel<T>(src, y, x), src.sc, pixel<T>(d, y, x), d.sc);
    else
      map_pixel<0, T, CI, CO>(op, pixel<T>(src, y, x), src.sc, pixel<T>(d, y, x), d.sc);
  }
}

// The grayscale contrast blends with: luma (floored for uint8) of RGB, or the value itself for one
// channel; with BRIGHT the pixel is first scaled by `bf` and clamped (color_jitter's brightness).
// bn: the brightness factor / max (so its clamp is a .sat), as color_jitter computes it.
template <typename T, int C, int BRIGHT>
__device__ __forceinline__ float contrast_gray(const float* a, float bn) {
  if constexpr (BRIGHT) {
    if constexpr (C < 3) {
      return __saturatef(bn * a[0]) * Range<T>::max;
    } else {
      return luma_floor_norm<T>(__saturatef(bn * a[0]), __saturatef(bn * a[1]), __saturatef(bn * a[2]));
    }
  } else if constexpr (C < 3) {
    return a[0];
  } else {
    return luma_floor<T>(a[0], a[1], a[2]);
  }
}

// contrast_gray summed over item j of a packed sample (a group of G pixels in float, as a float,
// or one head / tail pixel): what gray_sum and fused_mean_map add up.
template <typename T, int C, int BRIGHT>
__device__ __forceinline__ float gray_item(const T* sp, int head, int ng, int j, float bf) {
  constexpr int G = Vec<T, C>::G;
  if (j < ng) {
    Vec<T, C> in;
    in.load(sp + (i64)(head + j * G) * C);
    float part = 0.f;
#pragma unroll
    for (int p = 0; p < G; ++p) {
      float a[C];
#pragma unroll
      for (int c = 0; c < C; ++c) a[c] = in.get(p * C + c);
      part += contrast_gray<T, C, BRIGHT>(a, bf);
    }
    return part;
  }
  const int k = j - ng;
  const T* ip = sp + (i64)(k < head ? k : k + ng * G) * C;
  float a[C];
#pragma unroll
  for (int c = 0; c < C; ++c) a[c] = to_float(ip[c]);
  return contrast_gray<T, C, BRIGHT>(a, bf);
}

// Per-sample partial sums of contrast_gray: block x of sample s writes partials[s * nparts + x];
// with BRIGHT, params[s, bcol] is the brightness factor.
// Samples are visited last to first: the map kernel that follows starts with sample 0, which is
// then the most recently read and likely still in L2. Sums are double (per-thread too), so the
// mean does not depend on the image size's rounding; the order is fixed, so results repeat.
template <typename T, int C, int BRIGHT, bool PACKED>
__device__ __forceinline__ void gray_sum(const i64* src_tab, const float* params, int P, int n, int bcol,
                                         double* partials, int nparts) {
  __shared__ double warp_sums[32];
  const int stride = nparts * blockDim.x;
  for (int s0 = blockIdx.y; s0 < n; s0 += gridDim.y) {
    const int s = n - 1 - s0;
    const Sample src = sample_at(src_tab, s);
    const float bf = BRIGHT ? params[(i64)s * P + bcol] * (1.f / Range<T>::max) : 1.f;
    const int hw = src.h * src.w;
    double acc = 0.0;
    if (PACKED) {
      constexpr int G = Vec<T, C>::G;
      const T* sp = reinterpret_cast<const T*>(src.ptr);
      const int head = packed_head<T, C, C>(sp, sp);
      const int ng = hw > head ? (hw - head) / G : 0;
      const int items = hw - ng * (G - 1);
      for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < items; j += stride)
        acc += gray_item<T, C, BRIGHT>(sp, head, ng, j, bf);
    } else {
      for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < hw; i += stride) {
        const int y = i / src.w, x = i - y * src.w;
        const T* ip = pixel<T>(src, y, x);
        float a[C];
#pragma unroll
        for (int c = 0; c < C; ++c) a[c] = to_float(ip[c * src.sc]);
        acc += contrast_gray<T, C, BRIGHT>(a, bf);
      }
    }
    block_partial(acc, warp_sums, partials + (i64)s * nparts + blockIdx.x);
  }
}

// contrast's mean and map in one launch, one block per sample (packed samples, uint8 only): the
// block sums the sample's grays (gray_item), then maps it (map_item) with the mean, which is
// bit for bit the two-launch mean: uint8 grays are integers (for BRIGHT with C >= 3), so every
// partial and total is an exact integer in double whatever the order of the sums.
template <typename T, int C, int BRIGHT, typename Op>
__device__ __forceinline__ void fused_mean_map(const i64* src_tab, const i64* dst_tab, const float* params, int P,
                                               int n, int bcol) {
  static_assert(Range<T>::integer && (!BRIGHT || C >= 3), "fused_mean_map: integer grays only");
  __shared__ double warp_sums[32];
  __shared__ double total;
  constexpr int G = Vec<T, C>::G;
  for (int s = blockIdx.x; s < n; s += gridDim.x) {
    const i64* rs = src_tab + (i64)s * 6;
    const T* sp = reinterpret_cast<const T*>(rs[0]);
    T* dp = reinterpret_cast<T*>(dst_tab[(i64)s * 6]);
    const int hw = (int)(rs[1] * rs[2]);
    const float bf = BRIGHT ? params[(i64)s * P + bcol] * (1.f / Range<T>::max) : 1.f;
    const int head1 = packed_head<T, C, C>(sp, sp);
    const int ng1 = hw > head1 ? (hw - head1) / G : 0;
    const int items1 = hw - ng1 * (G - 1);
    double acc = 0.0;
    for (int j = threadIdx.x; j < items1; j += blockDim.x) acc += gray_item<T, C, BRIGHT>(sp, head1, ng1, j, bf);
    block_partial(acc, warp_sums, &total);  // every thread reads total after its last barrier
    const float mean = (float)total / (float)hw;
    const Op op(params + (i64)s * P, mean);
    const int head = packed_head<T, C, C>(sp, dp);
    const int ng = hw > head ? (hw - head) / G : 0;
    const int items = hw - ng * (G - 1);
    for (int j = threadIdx.x; j < items; j += blockDim.x) {
      Vec<T, C> in;
      if (j < ng) in.load(sp + (i64)(head + j * G) * C);  // mostly from L2: pass 1 just read it
      map_item<T, C, C, Op>(op, sp, dp, head, ng, hw, j, in);
    }
  }
}

}  // namespace gpuaug

// Kernel signature shared by every colour op (run()'s (src, dst, params, P, n) plus the mean's
// partial sums, null and 0 for ops without a mean).
#define GPUAUG_COLOUR_ARGS                                                                          \
  const gpuaug::i64 *src, const gpuaug::i64 *dst, GPUAUG_PARAMS params, int P, int n,             \
      const double *partials, int nparts
#define GPUAUG_COLOUR_CALL src, dst, params, P, n, partials, nparts

// Defines NAME<T, C> (strided) and NAME_packed<T, C> running OP<T, C> with CI == CO == C.
#define GPUAUG_COLOUR_KERNELS(NAME, OP)                                                              \
  template <typename T, int C>                                                                      \
  __global__ void __launch_bounds__(256) NAME(GPUAUG_COLOUR_ARGS) {                                 \
    gpuaug::strided_map<T, C, C, OP<T, C>>(GPUAUG_COLOUR_CALL);                                     \
  }                                                                                                 \
  template <typename T, int C>                                                                      \
  __global__ void __launch_bounds__(256) NAME##_packed(GPUAUG_COLOUR_ARGS) {                        \
    gpuaug::packed_map<T, C, C, OP<T, C>>(GPUAUG_COLOUR_CALL);                                      \
  }

// NAME_fused<T, C>: OP (an op with a mean, BRIGHT as its gray_sum) as fused_mean_map, one block of
// FUSED_THREADS per sample (grid (min(N, 65535))): args src, dst, params, P, n, bcol.
#define GPUAUG_COLOUR_FUSED_THREADS 512
#define GPUAUG_COLOUR_FUSED(NAME, OP, BRIGHT)                                                        \
  template <typename T, int C>                                                                      \
  __global__ void __launch_bounds__(GPUAUG_COLOUR_FUSED_THREADS, 1)                                 \
      NAME##_fused(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params, int P, int n, \
                   int bcol) {                                                                      \
    gpuaug::fused_mean_map<T, C, BRIGHT, OP<T, C>>(src, dst, params, P, n, bcol);                   \
  }

// gpuaug_gray_sum<T, C, BRIGHT> / gpuaug_gray_sum_packed<T, C, BRIGHT>: the partial sums behind
// contrast's mean (grid (nparts, N), block 256); BRIGHT = 1: params[:, bcol] (brightness) first.
template <typename T, int C, int BRIGHT>
__global__ void __launch_bounds__(256) gpuaug_gray_sum(const gpuaug::i64* src, GPUAUG_PARAMS params, int P,
                                                       int n, int bcol, double* partials, int nparts) {
  gpuaug::gray_sum<T, C, BRIGHT, false>(src, params, P, n, bcol, partials, nparts);
}
template <typename T, int C, int BRIGHT>
__global__ void __launch_bounds__(256) gpuaug_gray_sum_packed(const gpuaug::i64* src, GPUAUG_PARAMS params,
                                                              int P, int n, int bcol, double* partials,
                                                              int nparts) {
  gpuaug::gray_sum<T, C, BRIGHT, true>(src, params, P, n, bcol, partials, nparts);
}
