// MixUp, CutMix (and Mosaic, at the end of the file) on dense batches (N samples of E = H*W*C contiguous elements each), one
// launch per batch. Per-sample parameters (float32 rows of 6):
//   [partner, lam, y0, x0, y1, x1]
// MixUp:  out[i] = lam * x[i] + (1 - lam) * x[partner]   (computed in float32; uint8 rounds
//         half up, floor(v + 0.5), and saturates, the gpuaug rule)
// CutMix: out[i] = x[partner] inside rows [y0, y1) and columns [x0, x1), x[i] elsewhere.
// Layout: NHWC (elem -> pixel = elem / C) or NCHW (pixel = elem % (H*W)), from `nchw`.
// Grid (ceil(E / (256 * 4)), N), 256 threads, 4 elements per thread (strided by 256); the _u8v
// variants (uint8, E % 16 == 0, 16-byte aligned samples) take 16 bytes per element instead.
#if !defined(__CUDACC__)
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
#endif

namespace {
typedef long long mx_i64;

template <typename T> __device__ __forceinline__ float mx_load(const T* p) { return (float)*p; }
template <typename T> __device__ __forceinline__ void mx_store(T* p, float v) { *p = (T)v; }
template <> __device__ __forceinline__ void mx_store<unsigned char>(unsigned char* p, float v) {
  v = fminf(fmaxf(floorf(v + 0.5f), 0.f), 255.f);
  *p = (unsigned char)(int)v;
}
}  // namespace

template <typename T>
__global__ void gpuaug_mixup(const T* __restrict__ src, T* __restrict__ dst, mx_i64 E,
                             const float* __restrict__ params, int n) {
  const int s = blockIdx.y;
  if (s >= n) return;
  const float* p = params + (mx_i64)s * 6;
  const int partner = (int)p[0];
  const float lam = p[1], mu = 1.f - lam;
  const T* a = src + (mx_i64)s * E;
  const T* b = src + (mx_i64)partner * E;
  T* o = dst + (mx_i64)s * E;
  const mx_i64 base = (mx_i64)blockIdx.x * blockDim.x * 4 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const mx_i64 i = base + (mx_i64)k * blockDim.x;
    if (i < E) mx_store<T>(o + i, __fadd_rn(__fmul_rn(lam, mx_load<T>(a + i)), __fmul_rn(mu, mx_load<T>(b + i))));
  }
}

template <typename T>
__global__ void gpuaug_cutmix(const T* __restrict__ src, T* __restrict__ dst, int H, int W, int C, int nchw,
                              const float* __restrict__ params, int n) {
  const int s = blockIdx.y;
  if (s >= n) return;
  const mx_i64 HW = (mx_i64)H * W, E = HW * C;
  const float* p = params + (mx_i64)s * 6;
  const int partner = (int)p[0];
  const int y0 = (int)p[2], x0 = (int)p[3], y1 = (int)p[4], x1 = (int)p[5];
  const T* a = src + (mx_i64)s * E;
  const T* b = src + (mx_i64)partner * E;
  T* o = dst + (mx_i64)s * E;
  const mx_i64 base = (mx_i64)blockIdx.x * blockDim.x * 4 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const mx_i64 i = base + (mx_i64)k * blockDim.x;
    if (i >= E) continue;
    const mx_i64 pix = nchw ? i % HW : i / C;
    const int y = (int)(pix / W), x = (int)(pix - (mx_i64)y * W);
    const bool in = y >= y0 && y < y1 && x >= x0 && x < x1;
    o[i] = in ? b[i] : a[i];
  }
}

__device__ __forceinline__ unsigned mx_byte(unsigned w, int e) { return (w >> (8 * e)) & 0xFFu; }

// uint8, E % 16 == 0: E16 = E / 16 vectors per sample.
extern "C" __global__ void gpuaug_mixup_u8v(const uint4* __restrict__ src, uint4* __restrict__ dst, mx_i64 E16,
                                           const float* __restrict__ params, int n) {
  const int s = blockIdx.y;
  if (s >= n) return;
  const float* p = params + (mx_i64)s * 6;
  const int partner = (int)p[0];
  const float lam = p[1], mu = 1.f - lam;
  const uint4* a = src + (mx_i64)s * E16;
  const uint4* b = src + (mx_i64)partner * E16;
  uint4* o = dst + (mx_i64)s * E16;
  const mx_i64 i = (mx_i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= E16) return;
  const uint4 va = a[i], vb = b[i];
  const unsigned wa[4] = {va.x, va.y, va.z, va.w}, wb[4] = {vb.x, vb.y, vb.z, vb.w};
  unsigned wo[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    unsigned r = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = __fadd_rn(__fmul_rn(lam, (float)mx_byte(wa[q], e)), __fmul_rn(mu, (float)mx_byte(wb[q], e)));
      v = fminf(fmaxf(floorf(v + 0.5f), 0.f), 255.f);
      r |= (unsigned)(int)v << (8 * e);
    }
    wo[q] = r;
  }
  o[i] = make_uint4(wo[0], wo[1], wo[2], wo[3]);
}

extern "C" __global__ void gpuaug_cutmix_u8v(const uint4* __restrict__ src, uint4* __restrict__ dst, int H, int W,
                                            int C, int nchw, const float* __restrict__ params, int n) {
  const int s = blockIdx.y;
  if (s >= n) return;
  const mx_i64 HW = (mx_i64)H * W, E16 = HW * C / 16;
  const float* p = params + (mx_i64)s * 6;
  const int partner = (int)p[0];
  const int y0 = (int)p[2], x0 = (int)p[3], y1 = (int)p[4], x1 = (int)p[5];
  const mx_i64 i = (mx_i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= E16) return;
  const uint4* a = src + (mx_i64)s * E16;
  const uint4* b = src + (mx_i64)partner * E16;
  // Whole vector inside or outside the box: one source (the common case).
  const mx_i64 e0 = i * 16, e1 = e0 + 15;
  const mx_i64 p0 = nchw ? e0 % HW : e0 / C, p1 = nchw ? e1 % HW : e1 / C;
  const int ya = (int)(p0 / W), xa = (int)(p0 - (mx_i64)ya * W);
  const int yb = (int)(p1 / W), xb = (int)(p1 - (mx_i64)yb * W);
  const bool ina = ya >= y0 && ya < y1 && xa >= x0 && xa < x1;
  const bool inb = yb >= y0 && yb < y1 && xb >= x0 && xb < x1;
  uint4* o = dst + (mx_i64)s * E16 + i;
  const bool row = ya == yb && (!nchw || p1 == p0 + 15);  // the 16 bytes lie in one row, in order
  const bool spans = ya >= y0 && ya < y1 && xa < x0 && xb >= x1;  // the box sits strictly inside
  if (row && ((ina && inb) || (!ina && !inb && !spans))) { *o = ina ? b[i] : a[i]; return; }
  const uint4 va = a[i], vb = b[i];
  const unsigned wa[4] = {va.x, va.y, va.z, va.w}, wb[4] = {vb.x, vb.y, vb.z, vb.w};
  unsigned wo[4];
  for (int q = 0; q < 4; ++q) {
    unsigned r = 0;
    for (int e = 0; e < 4; ++e) {
      const mx_i64 el = e0 + q * 4 + e;
      const mx_i64 pix = nchw ? el % HW : el / C;
      const int y = (int)(pix / W), x = (int)(pix - (mx_i64)y * W);
      const bool in = y >= y0 && y < y1 && x >= x0 && x < x1;
      r |= (in ? mx_byte(wb[q], e) : mx_byte(wa[q], e)) << (8 * e);
    }
    wo[q] = r;
  }
  *o = make_uint4(wo[0], wo[1], wo[2], wo[3]);
}

// Mosaic (detection): each output sample is a canvas of OH x OW split at its centre (cy, cx)
// into four quadrants, TL, TR, BL, BR; quadrant q shows source sample s_q placed so that its
// corner touches the centre (ultralytics' load_mosaic placement, no rescaling):
//   offsets (oy, ox): TL (cy - H, cx - W), TR (cy - H, cx), BL (cy, cx - W), BR (cy, cx)
//   out[y, x] = src[s_q, y - oy, x - ox] where that lies inside the source, else `fill`.
// Per-sample int32 rows of 6: [s0, s1, s2, s3, cy, cx]. `fill_bits`: the fill value's bits in
// the element type (uint8 value, float16 bits, float32 bits).
// One block per output row (of one channel plane in NCHW): grid (OH * P, N) with P = C for NCHW,
// 1 for NHWC; a row is RC = OW * (NHWC ? C : 1) contiguous elements whose left part [0, cx * PC)
// comes from one source row and right part from another, so each element is a shifted copy
// (no per-element division); 256 threads stride the row, coalesced on both sides.
namespace {
template <typename T> __device__ __forceinline__ T mo_fill(unsigned bits) { return (T)bits; }
template <> __device__ __forceinline__ float mo_fill<float>(unsigned bits) {
  union { unsigned u; float f; } v;
  v.u = bits;
  return v.f;
}
}  // namespace

template <typename T>
__global__ void gpuaug_mosaic(const T* __restrict__ src, T* __restrict__ dst, int H, int W, int C, int OH, int OW,
                              int nchw, const int* __restrict__ params, int n, unsigned fill_bits) {
  const int s = blockIdx.y;
  if (s >= n) return;
  const int* p = params + (mx_i64)s * 6;
  const int cy = p[4], cx = p[5];
  const int y = (int)(blockIdx.x % (unsigned)OH), plane = (int)(blockIdx.x / (unsigned)OH);
  const int PC = nchw ? 1 : C;  // elements per pixel within a row
  const mx_i64 RC = (mx_i64)OW * PC, SRC_ROW = (mx_i64)W * PC, HW = (mx_i64)H * W;
  const T fill = mo_fill<T>(fill_bits);
  const int top = y >= cy ? 2 : 0;
  T* o = dst + (mx_i64)s * OH * RC * (nchw ? C : 1) + ((mx_i64)plane * OH + y) * RC;
  const mx_i64 split = (mx_i64)cx * PC;
  for (int half = 0; half < 2; ++half) {
    const int q = top + half;
    const int sy = y - (q < 2 ? cy - H : cy);
    const mx_i64 shift = (mx_i64)((q & 1) ? cx : cx - W) * PC;  // output element e <- source element e - shift
    const mx_i64 e0 = half ? split : 0, e1 = half ? RC : split;
    const bool row_in = sy >= 0 && sy < H;
    const T* b = src + (nchw ? ((mx_i64)p[q] * C + plane) * HW + (mx_i64)sy * W
                             : (mx_i64)p[q] * HW * C + (mx_i64)sy * SRC_ROW);
    for (mx_i64 e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
      const mx_i64 se = e - shift;
      o[e] = (row_in && se >= 0 && se < SRC_ROW) ? b[se] : fill;
    }
  }
}
