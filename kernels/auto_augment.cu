// Automatic augmentation policies (RandAugment, TrivialAugmentWide, AutoAugment) on dense
// uint8 NHWC batches with C channels (1 or 3): one "step" applies to every sample the op the
// host drew for it (a per-sample op id and parameters), so a policy of K ops per sample is K
// steps, whatever ops were picked. Formulas are torchvision's tensor ops (truncating uint8
// casts, nearest-neighbour warps through grid_sample's coordinates, fill 0).
//
// Per-sample parameter row (P floats): [op, t0..t5, a, b]
//   geometric ops (1..5): t = torchvision's inverse affine matrix divided by (W/2, H/2)
//     (affine_grid's rescaled theta): g = (x' t0 + y' t1) + t2 with x' = x + 0.5 - W/2, source
//     column ix = rint(((g + 1) W - 1) / 2) (grid_sample, align_corners=False); outside -> 0.
//     a = 1: bilinear instead (grid_sample's corners, zero padding, then rint as torchvision rounds).
//   6 Brightness: out = trunc(clamp(x *f a, 0, 255))
//   7 Color / 8 Contrast: out = trunc(clamp(x a + g (1 - a)))  (a: ratio, b = 1 - ratio)
//     with g = floor(0.2989 r + 0.587 g + 0.114 b) per pixel (Color) or its image mean (Contrast)
//   9 Sharpness: inner pixels x + b (rint(blur) - x), blur = 3x3 [1 1 1; 1 5 1; 1 1 1] / 13
//   10 Posterize: x & a (a: the bit mask)   11 Solarize: x >= a ? 255 - x : x
//   12 AutoContrast: (x - min) / ((max - min) / 255), per channel; unchanged when max == min
//   13 Equalize: lut[c][x] (tables from equalize.cu's gpuaug_equalize_lut)   14 Invert: 255 - x
//   0 Identity (also a skipped AutoAugment op): copy.
// Every float operation is an explicit _rn intrinsic so the NumPy twin (gpuaug/policy/auto.py)
// computes the same bits (no contraction into FMAs except where torchvision has one).
#if !defined(__CUDACC__)  // host emulation (tests/cuda_emu.py): the few intrinsics used here
#include <atomic>
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline float rintf(float a) { return std::nearbyint(a); }
template <class T> static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline unsigned atomicMax(unsigned* p, unsigned v) {
  unsigned o = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v > o && !__atomic_compare_exchange_n(p, &o, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return o;
}
#endif

namespace {
typedef long long aa_i64;
enum { AA_P = 9 };
enum {
  OP_IDENTITY = 0, OP_SHEARX, OP_SHEARY, OP_TRANSLATEX, OP_TRANSLATEY, OP_ROTATE, OP_BRIGHTNESS,
  OP_COLOR, OP_CONTRAST, OP_SHARPNESS, OP_POSTERIZE, OP_SOLARIZE, OP_AUTOCONTRAST, OP_EQUALIZE, OP_INVERT
};

__device__ __forceinline__ unsigned char trunc_u8(float v) {
  v = fminf(fmaxf(v, 0.f), 255.f);
  return (unsigned char)(int)v;
}

// floor(0.2989 r + 0.587 g + 0.114 b) as torchvision computes it: r.mul(0.2989).add_(g, alpha=0.587)
// .add_(b, alpha=0.114) in float32 (add with alpha is a fused multiply-add in ATen).
__device__ __forceinline__ float gray_floor(const unsigned char* p) {
  float g = __fmul_rn((float)p[0], 0.2989f);
  g = __fmaf_rn((float)p[1], 0.587f, g);
  g = __fmaf_rn((float)p[2], 0.114f, g);
  return floorf(g);
}
}  // namespace

// Per-sample statistics for the reduction ops of this step: per channel min/max (AutoContrast),
// 256-bin histograms (Equalize) and the sum of floor(gray) (Contrast). Blocks of samples that
// need none of them return at once. Grid (blocks per sample, N), 256 threads.
// minmax: (N, 2C) unsigned [255 - min (C), max (C)] (so that all three buffers start as zeros:
// one memset); hist: (N, C, 256); gsum: (N,); all zeroed before the launch.
template <int C>
__global__ void gpuaug_autoaug_stats(const unsigned char* __restrict__ src, int H, int W,
                                     const float* __restrict__ params, unsigned* __restrict__ minmax,
                                     unsigned* __restrict__ hist, unsigned long long* __restrict__ gsum, int n) {
  __shared__ unsigned sh[C * 256];
  __shared__ unsigned smm[2 * C];
  __shared__ unsigned long long ssum;
  const int s = blockIdx.y;
  if (s >= n) return;
  const int op = (int)params[(aa_i64)s * AA_P];
  if (op != OP_CONTRAST && op != OP_AUTOCONTRAST && op != OP_EQUALIZE) return;  // uniform per block
  const bool eq = op == OP_EQUALIZE;
  for (int i = threadIdx.x; i < C * 256; i += blockDim.x) sh[i] = 0u;
  if (threadIdx.x < 2 * C) smm[threadIdx.x] = 0u;
  if (threadIdx.x == 0) ssum = 0ull;
  __syncthreads();
  const aa_i64 npix = (aa_i64)H * W;
  const unsigned char* img = src + (aa_i64)s * npix * C;
  unsigned mn[C], mx[C];
  for (int c = 0; c < C; ++c) { mn[c] = 255u; mx[c] = 0u; }
  unsigned sum = 0u;  // < 2^31 / 256 pixels a thread (a block of 256 at least) x 255: fits 32 bits
  for (aa_i64 i = (aa_i64)blockIdx.x * blockDim.x + threadIdx.x; i < npix; i += (aa_i64)gridDim.x * blockDim.x) {
    const unsigned char* p = img + i * C;
    for (int c = 0; c < C; ++c) {
      const unsigned v = p[c];
      mn[c] = min(mn[c], v);
      mx[c] = max(mx[c], v);
      if (eq) atomicAdd(&sh[c * 256 + v], 1u);
    }
    if (op == OP_CONTRAST) sum += (unsigned)(C == 3 ? gray_floor(p) : (float)p[0]);
  }
  if (op == OP_AUTOCONTRAST)
    for (int c = 0; c < C; ++c) { atomicMax(&smm[c], 255u - mn[c]); atomicMax(&smm[C + c], mx[c]); }
  if (op == OP_CONTRAST && sum) atomicAdd(&ssum, (unsigned long long)sum);
  __syncthreads();
  if (eq)
    for (int i = threadIdx.x; i < C * 256; i += blockDim.x)
      if (sh[i]) atomicAdd(&hist[(aa_i64)s * C * 256 + i], sh[i]);
  if (op == OP_AUTOCONTRAST && threadIdx.x < 2 * C)
    atomicMax(&minmax[(aa_i64)s * 2 * C + threadIdx.x], smm[threadIdx.x]);
  if (op == OP_CONTRAST && threadIdx.x == 0 && ssum) atomicAdd(&gsum[s], ssum);
}

// One step: every sample's op. Grid (ceil(H W / 256), N), 256 threads, one pixel per thread.
// lut: (N, LP) float rows from gpuaug_equalize_lut (read only for Equalize samples).
template <int C>
__global__ void gpuaug_autoaug_apply(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                                     int H, int W, const float* __restrict__ params,
                                     const unsigned* __restrict__ minmax, const unsigned long long* __restrict__ gsum,
                                     const float* __restrict__ lut, int LP, int n) {
  const int s = blockIdx.y;
  if (s >= n) return;
  const aa_i64 npix = (aa_i64)H * W;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;  // H W < 2^31 (checked by the caller)
  if (i >= npix) return;
  const int y = i / W, x = i - y * W;  // 32-bit division: the 64-bit one is a long emulated sequence
  const float* p = params + (aa_i64)s * AA_P;
  const int op = (int)p[0];
  const unsigned char* img = src + (aa_i64)s * npix * C;
  const unsigned char* q = img + (aa_i64)i * C;
  unsigned char* o = dst + (aa_i64)s * npix * C + (aa_i64)i * C;
  if (op >= OP_SHEARX && op <= OP_ROTATE) {
    const float xp = __fadd_rn((float)x, __fsub_rn(0.5f, 0.5f * (float)W));
    const float yp = __fadd_rn((float)y, __fsub_rn(0.5f, 0.5f * (float)H));
    const float gx = __fadd_rn(__fadd_rn(__fmul_rn(xp, p[1]), __fmul_rn(yp, p[2])), p[3]);
    const float gy = __fadd_rn(__fadd_rn(__fmul_rn(xp, p[4]), __fmul_rn(yp, p[5])), p[6]);
    const float ix = __fmul_rn(__fsub_rn(__fmul_rn(__fadd_rn(gx, 1.f), (float)W), 1.f), 0.5f);
    const float iy = __fmul_rn(__fsub_rn(__fmul_rn(__fadd_rn(gy, 1.f), (float)H), 1.f), 0.5f);
    if (p[7] != 0.f) {  // bilinear (AugMix's default): grid_sample's four corners, zeros outside, rint
      const float x0f = floorf(ix), y0f = floorf(iy);
      const int x0 = (int)x0f, y0 = (int)y0f;
      const float wx1 = __fsub_rn(ix, x0f), wx0 = __fsub_rn(__fadd_rn(x0f, 1.f), ix);
      const float wy1 = __fsub_rn(iy, y0f), wy0 = __fsub_rn(__fadd_rn(y0f, 1.f), iy);
      const float wt[4] = {__fmul_rn(wx0, wy0), __fmul_rn(wx1, wy0), __fmul_rn(wx0, wy1), __fmul_rn(wx1, wy1)};
      float acc[C];
      for (int c = 0; c < C; ++c) acc[c] = 0.f;
      for (int k = 0; k < 4; ++k) {
        const int xx = x0 + (k & 1), yy = y0 + (k >> 1);
        if (xx < 0 || xx >= W || yy < 0 || yy >= H) continue;
        const unsigned char* r = img + ((aa_i64)yy * W + xx) * C;
        for (int c = 0; c < C; ++c) acc[c] = __fadd_rn(acc[c], __fmul_rn((float)r[c], wt[k]));
      }
      for (int c = 0; c < C; ++c) o[c] = trunc_u8(rintf(acc[c]));
      return;
    }
    const float fx = rintf(ix), fy = rintf(iy);
    const bool in = fx >= 0.f && fx <= (float)(W - 1) && fy >= 0.f && fy <= (float)(H - 1);
    const unsigned char* r = in ? img + ((aa_i64)(int)fy * W + (int)fx) * C : nullptr;
    for (int c = 0; c < C; ++c) o[c] = in ? r[c] : (unsigned char)0;
    return;
  }
  const float a = p[7], b = p[8];
  switch (op) {
    case OP_BRIGHTNESS:
      for (int c = 0; c < C; ++c) o[c] = trunc_u8(__fmul_rn((float)q[c], a));
      return;
    case OP_COLOR:
    case OP_CONTRAST: {
      if (op == OP_COLOR && C != 3) break;
      float g;
      if (op == OP_COLOR) g = gray_floor(q);
      else g = __fdiv_rn((float)gsum[s], (float)npix);
      const float gb = __fmul_rn(g, b);
      for (int c = 0; c < C; ++c) o[c] = trunc_u8(__fadd_rn(__fmul_rn((float)q[c], a), gb));
      return;
    }
    case OP_SHARPNESS: {
      if (H <= 2 || W <= 2 || y == 0 || x == 0 || y == H - 1 || x == W - 1) break;
      const float w1 = 1.f / 13.f, w5 = 5.f / 13.f;
      for (int c = 0; c < C; ++c) {
        float acc = 0.f;
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx)
            acc = __fadd_rn(acc, __fmul_rn(dy == 0 && dx == 0 ? w5 : w1, (float)q[((aa_i64)dy * W + dx) * C + c]));
        const float xc = (float)q[c];
        o[c] = trunc_u8(__fmaf_rn(__fsub_rn(rintf(acc), xc), b, xc));
      }
      return;
    }
    case OP_POSTERIZE: {
      const unsigned m = (unsigned)(int)a;
      for (int c = 0; c < C; ++c) o[c] = (unsigned char)(q[c] & m);
      return;
    }
    case OP_SOLARIZE:
      for (int c = 0; c < C; ++c) o[c] = (float)q[c] >= a ? (unsigned char)(255 - q[c]) : q[c];
      return;
    case OP_AUTOCONTRAST: {
      const unsigned* mm = minmax + (aa_i64)s * 2 * C;
      for (int c = 0; c < C; ++c) {
        const float lo = (float)(255u - mm[c]), hi = (float)mm[C + c];
        if (lo == hi) { o[c] = q[c]; continue; }
        const float inv = __fmul_rn(__fsub_rn(hi, lo), 1.f / 255.f);
        o[c] = trunc_u8(__fdiv_rn(__fsub_rn((float)q[c], lo), inv));
      }
      return;
    }
    case OP_EQUALIZE: {
      const float* t = lut + (aa_i64)s * LP;
      for (int c = 0; c < C; ++c) o[c] = (unsigned char)(int)t[c * 256 + q[c]];
      return;
    }
    case OP_INVERT:
      for (int c = 0; c < C; ++c) o[c] = (unsigned char)(255 - q[c]);
      return;
    default:
      break;
  }
  for (int c = 0; c < C; ++c) o[c] = q[c];
}

// ---------------------------------------------------------------------------------------------
// Fused path: up to AA_KMAX steps in one launch. The value of a pixel after k steps is
// aa_eval<C, k>: the op of step k-1 applied to aa_eval<C, k-1> at the positions it reads (one
// for point-wise ops, the mapped source pixel for nearest warps, four corners for bilinear
// ones, nine neighbours for Sharpness), down to the input at k = 0. Every step's output is
// uint8, carried as an exact float, and each op uses the same float operations as
// gpuaug_autoaug_apply, so the result equals the step-by-step path bit for bit; the batch is
// written once. A reduction op at step i (Contrast, AutoContrast, Equalize) needs the image
// after i steps: gpuaug_autoaug_stats_fused<C, i> evaluates aa_eval<C, i> for its statistics
// first (launched in step order, each reading the statistics of the steps before it).
// Rows: (K, N, AA_P) for the launch's K steps; statistics per step: minmax (K, N, 2C),
// gsum (K, N), lut (K, N, LP).
#if !defined(__CUDACC__)
#define __noinline__
#endif
namespace {
struct AACtx {
  const unsigned char* img;
  int H, W, n, s, LP;
  const float* rows;
  const unsigned* minmax;
  const unsigned long long* gsum;
  const float* lut;
};

template <int C>
__device__ __forceinline__ void aa_point(const AACtx& t, int step, int op, const float* p, float* v) {
  const float a = p[7], b = p[8];
  const aa_i64 row = (aa_i64)step * t.n + t.s;
  switch (op) {
    case OP_BRIGHTNESS:
      for (int c = 0; c < C; ++c) v[c] = (float)trunc_u8(__fmul_rn(v[c], a));
      return;
    case OP_COLOR:
    case OP_CONTRAST: {
      if (op == OP_COLOR && C != 3) return;
      float g;
      if (op == OP_COLOR) {
        g = __fmul_rn(v[0], 0.2989f);
        g = __fmaf_rn(v[C > 1 ? 1 : 0], 0.587f, g);
        g = floorf(__fmaf_rn(v[C > 2 ? 2 : 0], 0.114f, g));
      } else {
        g = __fdiv_rn((float)t.gsum[row], (float)((aa_i64)t.H * t.W));
      }
      const float gb = __fmul_rn(g, b);
      for (int c = 0; c < C; ++c) v[c] = (float)trunc_u8(__fadd_rn(__fmul_rn(v[c], a), gb));
      return;
    }
    case OP_POSTERIZE: {
      const unsigned m = (unsigned)(int)a;
      for (int c = 0; c < C; ++c) v[c] = (float)((unsigned)(int)v[c] & m);
      return;
    }
    case OP_SOLARIZE:
      for (int c = 0; c < C; ++c) v[c] = v[c] >= a ? 255.f - v[c] : v[c];
      return;
    case OP_AUTOCONTRAST: {
      const unsigned* mm = t.minmax + row * 2 * C;
      for (int c = 0; c < C; ++c) {
        const float lo = (float)(255u - mm[c]), hi = (float)mm[C + c];
        if (lo == hi) continue;
        const float inv = __fmul_rn(__fsub_rn(hi, lo), 1.f / 255.f);
        v[c] = (float)trunc_u8(__fdiv_rn(__fsub_rn(v[c], lo), inv));
      }
      return;
    }
    case OP_EQUALIZE: {
      const float* l = t.lut + row * t.LP;
      for (int c = 0; c < C; ++c) v[c] = (float)(int)l[c * 256 + (int)v[c]];
      return;
    }
    case OP_INVERT:
      for (int c = 0; c < C; ++c) v[c] = 255.f - v[c];
      return;
    default:
      return;
  }
}

template <int C, int K>
struct AAEval {
  // Two call sites of the level below: one position (point-wise ops, nearest warps, the
  // image border of Sharpness) or a loop over several (bilinear: 4 corners, rint; Sharpness:
  // 3x3, blend), so inlining every level gives 2^K copies of the level below. The weights are
  // computed where they are used (an indexed weight array lived in local memory).
  static __device__ __forceinline__ void run(const AACtx& t, int y, int x, float* v) {
    const float* p = t.rows + ((aa_i64)(K - 1) * t.n + t.s) * AA_P;
    const int op = (int)p[0];
    const int H = t.H, W = t.W;
    int y0 = y, x0 = x, many = 0;  // many: 0 one position, 4 bilinear corners, 9 Sharpness taps
    bool inside = true;
    float wx0 = 0.f, wx1 = 0.f, wy0 = 0.f, wy1 = 0.f;
    const bool warp = op >= OP_SHEARX && op <= OP_ROTATE;
    if (warp) {
      const float xp = __fadd_rn((float)x, __fsub_rn(0.5f, 0.5f * (float)W));
      const float yp = __fadd_rn((float)y, __fsub_rn(0.5f, 0.5f * (float)H));
      const float gx = __fadd_rn(__fadd_rn(__fmul_rn(xp, p[1]), __fmul_rn(yp, p[2])), p[3]);
      const float gy = __fadd_rn(__fadd_rn(__fmul_rn(xp, p[4]), __fmul_rn(yp, p[5])), p[6]);
      const float ix = __fmul_rn(__fsub_rn(__fmul_rn(__fadd_rn(gx, 1.f), (float)W), 1.f), 0.5f);
      const float iy = __fmul_rn(__fsub_rn(__fmul_rn(__fadd_rn(gy, 1.f), (float)H), 1.f), 0.5f);
      if (p[7] != 0.f) {
        const float x0f = floorf(ix), y0f = floorf(iy);
        x0 = (int)x0f;
        y0 = (int)y0f;
        wx1 = __fsub_rn(ix, x0f);
        wx0 = __fsub_rn(__fadd_rn(x0f, 1.f), ix);
        wy1 = __fsub_rn(iy, y0f);
        wy0 = __fsub_rn(__fadd_rn(y0f, 1.f), iy);
        many = 4;
      } else {
        const float fx = rintf(ix), fy = rintf(iy);
        inside = fx >= 0.f && fx <= (float)(W - 1) && fy >= 0.f && fy <= (float)(H - 1);
        x0 = inside ? (int)fx : 0;
        y0 = inside ? (int)fy : 0;
      }
    } else if (op == OP_SHARPNESS && !(H <= 2 || W <= 2 || y == 0 || x == 0 || y == H - 1 || x == W - 1)) {
      many = 9;
    }
    if (!many) {
      if (!inside) {  // outside a nearest warp: fill 0
        for (int c = 0; c < C; ++c) v[c] = 0.f;
        return;
      }
      AAEval<C, K - 1>::run(t, y0, x0, v);
      if (!warp) aa_point<C>(t, K - 1, op, p, v);
      return;
    }
    float acc[C], u[C], xc[C];
    for (int c = 0; c < C; ++c) { acc[c] = 0.f; xc[c] = 0.f; }
    const float w1 = 1.f / 13.f, w5 = 5.f / 13.f;
    for (int k = 0; k < many; ++k) {
      int yy, xx;
      float wk;
      if (many == 4) {
        xx = x0 + (k & 1);
        yy = y0 + (k >> 1);
        if (xx < 0 || xx >= W || yy < 0 || yy >= H) continue;
        wk = __fmul_rn(k & 1 ? wx1 : wx0, k >> 1 ? wy1 : wy0);
      } else {  // Sharpness, rows then columns
        yy = y + k / 3 - 1;
        xx = x + k % 3 - 1;
        wk = k == 4 ? w5 : w1;
      }
      AAEval<C, K - 1>::run(t, yy, xx, u);
      for (int c = 0; c < C; ++c) {
        acc[c] = __fadd_rn(acc[c], __fmul_rn(u[c], wk));
        if (k == 4) xc[c] = u[c];
      }
    }
    if (many == 4) {
      for (int c = 0; c < C; ++c) v[c] = (float)trunc_u8(rintf(acc[c]));
    } else {
      for (int c = 0; c < C; ++c) v[c] = (float)trunc_u8(__fmaf_rn(__fsub_rn(rintf(acc[c]), xc[c]), p[8], xc[c]));
    }
  }
};

template <int C>
struct AAEval<C, 0> {
  static __device__ __forceinline__ void run(const AACtx& t, int y, int x, float* v) {
    const unsigned char* q = t.img + ((aa_i64)y * t.W + x) * C;
    for (int c = 0; c < C; ++c) v[c] = (float)q[c];
  }
};
}  // namespace

// Pixels per thread of gpuaug_autoaug_fused: pixel j of a thread is blockDim.x j pixels after
// its first (a block covers 256 GPUAUG_AA_PX consecutive pixels; loads and stores stay
// coalesced), so the sample's decoding is shared and the evaluations overlap.
#ifndef GPUAUG_AA_PX
#define GPUAUG_AA_PX 2  // gpuaug/policy/auto.py's _FUSED_PX sizes the grid
#endif

// Blocks per SM asked of the register allocator (tests/gpu/ra_px.py times others): 6 for up to
// two steps, 5 beyond (a few spilled registers cost less than the occupancy they buy: H100,
// RandAugment(2, 9)'s pass 225 -> 176 us with GPUAUG_AA_PX 2, RandAugment(3, 9)'s 577 -> 435).
#ifdef GPUAUG_AA_MINB_ALL
#define GPUAUG_AA_MINB(K) GPUAUG_AA_MINB_ALL
#else
#define GPUAUG_AA_MINB(K) ((K) <= 2 ? 6 : 5)
#endif

// K steps in one pass. Grid (ceil(H W / (256 GPUAUG_AA_PX)), N), 256 threads.
template <int C, int K>
__global__ void __launch_bounds__(256, GPUAUG_AA_MINB(K)) gpuaug_autoaug_fused(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                                     int H, int W, const float* __restrict__ rows, int n,
                                     const unsigned* __restrict__ minmax, const unsigned long long* __restrict__ gsum,
                                     const float* __restrict__ lut, int LP) {
  const int s = blockIdx.y;
  if (s >= n) return;
  const int npix = H * W;
  const AACtx t{src + (aa_i64)s * npix * C, H, W, n, s, LP, rows, minmax, gsum, lut};
  unsigned char* o = dst + (aa_i64)s * npix * C;
#pragma unroll
  for (int j = 0; j < GPUAUG_AA_PX; ++j) {
    const int i = (blockIdx.x * GPUAUG_AA_PX + j) * blockDim.x + threadIdx.x;
    if (i >= npix) return;
    const int y = i / W, x = i - y * W;
    float v[C];
    AAEval<C, K>::run(t, y, x, v);
    for (int c = 0; c < C; ++c) o[(aa_i64)i * C + c] = (unsigned char)(int)v[c];
  }
}


// Statistics of step I's input (the image after I steps) for the samples whose op at step I
// reduces. Grid (blocks per sample, samples), 256 threads: grid row y is sample active[y]
// (the host lists the samples that reduce at step I, so that no block is spent on the others
// and the blocks per sample fill the GPU), or sample y when active is null. Buffers as
// gpuaug_autoaug_stats, per step.
#ifndef GPUAUG_AA_SMINB  // blocks per SM of the statistics launches (tests/gpu/ra_px.py)
#define GPUAUG_AA_SMINB 1
#endif

template <int C, int I>
__global__ void __launch_bounds__(256, GPUAUG_AA_SMINB) gpuaug_autoaug_stats_fused(const unsigned char* __restrict__ src, int H, int W,
                                           const float* __restrict__ rows, int n, unsigned* __restrict__ minmax,
                                           unsigned* __restrict__ hist, unsigned long long* __restrict__ gsum,
                                           const float* __restrict__ lut, int LP, const int* __restrict__ active) {
  __shared__ unsigned sh[C * 256];
  __shared__ unsigned smm[2 * C];
  __shared__ unsigned long long ssum;
  const int s = active ? active[blockIdx.y] : (int)blockIdx.y;
  if (s < 0 || s >= n) return;
  const int op = (int)rows[((aa_i64)I * n + s) * AA_P];
  if (op != OP_CONTRAST && op != OP_AUTOCONTRAST && op != OP_EQUALIZE) return;  // uniform per block
  const bool eq = op == OP_EQUALIZE;
  for (int i = threadIdx.x; i < C * 256; i += blockDim.x) sh[i] = 0u;
  if (threadIdx.x < 2 * C) smm[threadIdx.x] = 0u;
  if (threadIdx.x == 0) ssum = 0ull;
  __syncthreads();
  const int npix = H * W;
  const AACtx t{src + (aa_i64)s * npix * C, H, W, n, s, LP, rows, minmax, gsum, lut};
  unsigned mn[C], mx[C];
  for (int c = 0; c < C; ++c) { mn[c] = 255u; mx[c] = 0u; }
  unsigned sum = 0u;  // < 2^31 / 256 pixels a thread (a block of 256 at least) x 255: fits 32 bits
  auto add = [&](const unsigned char* b) {
    for (int c = 0; c < C; ++c) {
      mn[c] = min(mn[c], (unsigned)b[c]);
      mx[c] = max(mx[c], (unsigned)b[c]);
      if (eq) atomicAdd(&sh[c * 256 + b[c]], 1u);
    }
    if (op == OP_CONTRAST) sum += (unsigned)(C == 3 ? gray_floor(b) : (float)b[0]);
  };
  const int i0 = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
  if (I == 0 && C == 3 && (npix & 15) == 0 && (reinterpret_cast<size_t>(t.img) & 15) == 0) {
    // the input itself, 16 pixels (three 16-byte loads) at a time: byte loads kept too few
    // bytes in flight, this launch was latency bound at a tenth of the memory's speed
    const uint4* q = reinterpret_cast<const uint4*>(t.img);
    for (int k = i0; k < npix / 16; k += step) {
      const uint4 a = q[3 * k], b = q[3 * k + 1], d = q[3 * k + 2];
      const unsigned w[12] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, d.x, d.y, d.z, d.w};
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        unsigned char px[C];
#pragma unroll
        for (int c = 0; c < C; ++c) px[c] = (unsigned char)(w[(3 * j + c) >> 2] >> (8 * ((3 * j + c) & 3)));
        add(px);
      }
    }
  } else {
    // (y, x) of pixel i, stepped without a division per pixel
    const int dy = step / W, dx = step - dy * W;
    int y = i0 / W, x = i0 - y * W;
    for (int i = i0; i < npix; i += step) {
      float f[C];
      AAEval<C, I>::run(t, y, x, f);
      unsigned char b[C];
      for (int c = 0; c < C; ++c) b[c] = (unsigned char)(int)f[c];
      add(b);
      x += dx;
      y += dy;
      if (x >= W) {
        x -= W;
        ++y;
      }
    }
  }
  if (op == OP_AUTOCONTRAST)
    for (int c = 0; c < C; ++c) { atomicMax(&smm[c], 255u - mn[c]); atomicMax(&smm[C + c], mx[c]); }
  if (op == OP_CONTRAST && sum) atomicAdd(&ssum, (unsigned long long)sum);
  __syncthreads();
  const aa_i64 row = (aa_i64)I * n + s;
  if (eq)
    for (int i = threadIdx.x; i < C * 256; i += blockDim.x)
      if (sh[i]) atomicAdd(&hist[row * C * 256 + i], sh[i]);
  if (op == OP_AUTOCONTRAST && threadIdx.x < 2 * C) atomicMax(&minmax[row * 2 * C + threadIdx.x], smm[threadIdx.x]);
  if (op == OP_CONTRAST && threadIdx.x == 0 && ssum) atomicAdd(&gsum[row], ssum);
}

// AugMix in one pass: K chains of D steps (rows (K D, N, AA_P), statistics per step in the
// same order), out = trunc(clamp(w0 x + sum_j w_{j+1} chain_j(x), 0, 255)) in float32, summed
// in chain order (weights: (N, 1 + K)). Grid (ceil(H W / 256), N), 256 threads.
template <int C, int D>
__global__ void gpuaug_augmix_fused(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                                    int H, int W, const float* __restrict__ rows, int n, int K,
                                    const unsigned* __restrict__ minmax, const unsigned long long* __restrict__ gsum,
                                    const float* __restrict__ lut, int LP, const float* __restrict__ weights) {
  const int s = blockIdx.y;
  if (s >= n) return;
  const int npix = H * W;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= npix) return;
  const int y = i / W, x = i - y * W;
  const unsigned char* img = src + (aa_i64)s * npix * C;
  const float* w = weights + (aa_i64)s * (K + 1);
  float mix[C], v[C];
  for (int c = 0; c < C; ++c) mix[c] = __fmul_rn(w[0], (float)img[(aa_i64)i * C + c]);
  for (int j = 0; j < K; ++j) {
    const aa_i64 st = (aa_i64)j * D * n;  // first statistics row of chain j
    const AACtx t{img, H, W, n, s, LP, rows + st * AA_P, minmax + st * 2 * C, gsum + st, lut + st * LP};
    AAEval<C, D>::run(t, y, x, v);
    for (int c = 0; c < C; ++c) mix[c] = __fadd_rn(mix[c], __fmul_rn(w[j + 1], v[c]));
  }
  unsigned char* o = dst + ((aa_i64)s * npix + i) * C;
  for (int c = 0; c < C; ++c) o[c] = trunc_u8(mix[c]);
}
