// MixUp and CutMix (and Mosaic, at the end of the file) on dense batches: N samples of
// E = H*W*C contiguous elements, NHWC or NCHW. One launch per call does the images and the soft
// labels: `gpuaug_mix<T, CUT, VEC>`.
//
// Per-sample records, int32 rows of 8 (one staged upload per call, gpuaug/policy/mixing.py):
//   rec[i] = [partner_i, lam_i (float32 bits), y0_i, x0_i, y1_i, x1_i, order_i, 0]
// Column 6 is the launch order, not a property of sample i: slot t works on output order_t.
// The draws make order_{t+1} the partner of order_t (a walk along the partner cycle), so the
// partner's pixels read for output t are still in L2 when output t+1 reads them as its own:
// MixUp then moves about a copy's DRAM bytes, not 1.5x (CutMix reads each pixel once anyway).
//
// MixUp:  out[i] = lam * x[i] + (1 - lam) * x[partner] in float32, each operation rounded
//         (__fmul_rn / __fadd_rn: no FMA contraction, the NumPy twin's bits); uint8 stores
//         floor(v + 0.5) saturated to [0, 255] (the gpuaug rule).
// CutMix: out[i] = x[partner] inside rows [y0, y1) and columns [x0, x1), x[i] elsewhere; each
//         pixel is read from one source only.
// Soft labels (label_kind 1: int32 class ids (N,), 2: int64 ids, 3: float32 (N, K); 0: none):
//   soft[i, k] = lam_i * l[i, k] + (1 - lam_i) * l[partner_i, k]   (float32, rounded as above;
//   ids act as one-hot rows, an id outside [0, K) as a zero row).
//
// Grid: 1-D. Blocks [0, label_blocks) mix the labels (rows strided over those blocks, threads
// over K); block label_blocks + g * bps + c does chunk c of the outputs in slots
// [g * seg, (g + 1) * seg), one after the other. A chunk is MX_UNROLL * 256 units; a unit is 16
// bytes (VEC: uint4 loads and stores; needs E * sizeof(T) % 16 == 0, 16-byte aligned samples
// and, for CutMix, rows of a multiple of 16 bytes) or one element. Each thread issues all its
// loads of an output before any store (MX_UNROLL units in flight). MixUp with seg > 1 keeps the
// partner's units in registers for the next slot when that slot's output is the partner (the
// cyclic order makes it so): seg + 1 reads for seg outputs, whatever L2 keeps.
// uint8 MixUp avoids the conversion unit: a byte b becomes float exactly as
// __int_as_float(0x4B000000 | b) - 2^23, and floor(t) of t in [0, 255] is the low byte of
// __fadd_rd(t, 2^23)'s bits.
#if !defined(__CUDACC__)  // host emulation (tests/cuda_emu.py): the intrinsics used here
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
static inline float __fadd_rd(float a, float b) {  // exact in double for the sums used here
  const double s = (double)a + (double)b;
  float f = (float)s;
  if ((double)f > s) f = std::nextafter(f, -INFINITY);
  return f;
}
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFFu) << (8 * i);
  return r;
}
#define __launch_bounds__(n)
#endif

namespace {
typedef long long mx_i64;
enum { MX_THREADS = 256, MX_UNROLL = 4, MX_REC = 8 };

// One uint8 byte (byte e of w) as float, exactly, without a conversion instruction.
__device__ __forceinline__ float mx_byte_f(unsigned w, unsigned e) {
  return __int_as_float((int)__byte_perm(w, 0x4B000000u, 0x7540u | e)) - 8388608.f;
}

// floor(clamp(v + 0.5, 0, 255)) in the low byte of the result (the float bits of 2^23 + that).
// CLAMP false: for lam in [0, 1], where v + 0.5 lies in [0.5, 255.5001] and the clamp changes
// nothing (two min/max a byte saved on the half-rate pipe).
template <bool CLAMP> __device__ __forceinline__ unsigned mx_round_u8(float v) {
  float t = __fadd_rn(v, 0.5f);
  if (CLAMP) t = fminf(fmaxf(t, 0.f), 255.f);
  return __float_as_uint(__fadd_rd(t, 8388608.f));
}

// MixUp of four packed uint8 values.
template <bool CLAMP> __device__ __forceinline__ unsigned mx_mix_u8x4(unsigned a, unsigned b, float lam, float mu) {
  unsigned r[4];
#pragma unroll
  for (unsigned e = 0; e < 4; ++e)
    r[e] = mx_round_u8<CLAMP>(__fadd_rn(__fmul_rn(lam, mx_byte_f(a, e)), __fmul_rn(mu, mx_byte_f(b, e))));
  return __byte_perm(__byte_perm(r[0], r[1], 0x0040u), __byte_perm(r[2], r[3], 0x0040u), 0x5410u);
}
template <bool CLAMP> __device__ __forceinline__ uint4 mx_mix_u8x16(uint4 a, uint4 b, float lam, float mu) {
  return make_uint4(mx_mix_u8x4<CLAMP>(a.x, b.x, lam, mu), mx_mix_u8x4<CLAMP>(a.y, b.y, lam, mu),
                    mx_mix_u8x4<CLAMP>(a.z, b.z, lam, mu), mx_mix_u8x4<CLAMP>(a.w, b.w, lam, mu));
}

__device__ __forceinline__ float mx_mixf(float a, float b, float lam, float mu) {
  return __fadd_rn(__fmul_rn(lam, a), __fmul_rn(mu, b));
}

// The unit a thread moves: 16 bytes (VEC) or one element, and MixUp on it.
template <typename T, int VEC> struct MxUnit {
  typedef T type;
  enum { ELEMS = 1 };
  static __device__ __forceinline__ T mix(T a, T b, float lam, float mu);
};
template <> __device__ __forceinline__ unsigned char MxUnit<unsigned char, 0>::mix(unsigned char a, unsigned char b,
                                                                                   float lam, float mu) {
  const float v = fminf(fmaxf(floorf(__fadd_rn(mx_mixf((float)a, (float)b, lam, mu), 0.5f)), 0.f), 255.f);
  return (unsigned char)(int)v;
}
template <> __device__ __forceinline__ float MxUnit<float, 0>::mix(float a, float b, float lam, float mu) {
  return mx_mixf(a, b, lam, mu);
}
template <typename T> struct MxUnit<T, 1> {
  typedef uint4 type;
  enum { ELEMS = 16 / sizeof(T) };
  static __device__ __forceinline__ uint4 mix(uint4 a, uint4 b, float lam, float mu);
};
template <> __device__ __forceinline__ uint4 MxUnit<unsigned char, 1>::mix(uint4 a, uint4 b, float lam, float mu) {
  // the block's lam is uniform: no divergence
  return lam >= 0.f && lam <= 1.f ? mx_mix_u8x16<false>(a, b, lam, mu) : mx_mix_u8x16<true>(a, b, lam, mu);
}
template <> __device__ __forceinline__ uint4 MxUnit<float, 1>::mix(uint4 a, uint4 b, float lam, float mu) {
  return make_uint4(__float_as_uint(mx_mixf(__int_as_float((int)a.x), __int_as_float((int)b.x), lam, mu)),
                    __float_as_uint(mx_mixf(__int_as_float((int)a.y), __int_as_float((int)b.y), lam, mu)),
                    __float_as_uint(mx_mixf(__int_as_float((int)a.z), __int_as_float((int)b.z), lam, mu)),
                    __float_as_uint(mx_mixf(__int_as_float((int)a.w), __int_as_float((int)b.w), lam, mu)));
}

// Bytes [lo, hi) of 32-bit word q of a 16-byte unit, as a byte mask.
__device__ __forceinline__ unsigned mx_low(int m) { return m >= 4 ? 0xFFFFFFFFu : (1u << (8 * m)) - 1u; }
__device__ __forceinline__ unsigned mx_mask(int lo, int hi, int q) {
  const int l = min(max(lo - 4 * q, 0), 4), h = min(max(hi - 4 * q, 0), 4);
  return mx_low(h) & ~mx_low(l);
}
__device__ __forceinline__ unsigned mx_sel(unsigned a, unsigned b, unsigned m) { return (a & ~m) | (b & m); }

// Soft labels of samples blockIdx.x, blockIdx.x + label_blocks, ... (see the file comment).
__device__ __forceinline__ void mx_labels(const int* __restrict__ rec, int n, int label_blocks,
                                          const void* __restrict__ labels, float* __restrict__ soft, int K,
                                          int label_kind) {
  for (int i = blockIdx.x; i < n; i += label_blocks) {
    const int* r = rec + (mx_i64)i * MX_REC;
    const int p = r[0];
    const float lam = __int_as_float(r[1]), mu = 1.f - lam;
    float* o = soft + (mx_i64)i * K;
    if (label_kind == 3) {
      const float* a = static_cast<const float*>(labels) + (mx_i64)i * K;
      const float* b = static_cast<const float*>(labels) + (mx_i64)p * K;
      for (int k = threadIdx.x; k < K; k += blockDim.x) o[k] = mx_mixf(a[k], b[k], lam, mu);
    } else {
      const mx_i64 ya = label_kind == 1 ? static_cast<const int*>(labels)[i] : static_cast<const mx_i64*>(labels)[i];
      const mx_i64 yb = label_kind == 1 ? static_cast<const int*>(labels)[p] : static_cast<const mx_i64*>(labels)[p];
      for (int k = threadIdx.x; k < K; k += blockDim.x)
        o[k] = mx_mixf(k == ya ? 1.f : 0.f, k == yb ? 1.f : 0.f, lam, mu);
    }
  }
}
}  // namespace

// CUT: 0 MixUp, 1 CutMix. VEC: 1 for 16-byte units (see the file comment), 0 for elements.
// T: unsigned char or float (MixUp); unsigned char, unsigned short (float16 bits) or float (CutMix).
template <typename T, int CUT, int VEC>
__global__ void __launch_bounds__(256)
gpuaug_mix(const T* __restrict__ src, T* __restrict__ dst, const int* __restrict__ rec, int n, int H, int W, int C,
           int nchw, int bps, int seg, int label_blocks, const void* __restrict__ labels, float* __restrict__ soft,
           int K, int label_kind) {
  if ((int)blockIdx.x < label_blocks) {
    mx_labels(rec, n, label_blocks, labels, soft, K, label_kind);
    return;
  }
  typedef MxUnit<T, VEC> Unit;
  typedef typename Unit::type U;
  const int VE = Unit::ELEMS;
  const int b = (int)blockIdx.x - label_blocks;
  const int g = b / bps, chunk = b - g * bps;
  const int t0 = g * seg, t1 = min(t0 + seg, n);
  const int E = H * W * C, NU = E / VE;  // elements and units per sample
  const int base = chunk * (MX_UNROLL * MX_THREADS) + (int)threadIdx.x;
  U va[MX_UNROLL], vb[MX_UNROLL];
  int prev = -1;  // the partner of the block's previous output: its units are in vb
  for (int t = t0; t < t1; ++t) {
    const int s = rec[(mx_i64)t * MX_REC + 6];
    const int* r = rec + (mx_i64)s * MX_REC;
    const int partner = r[0];
    const U* a = reinterpret_cast<const U*>(src + (mx_i64)s * E);
    const U* pb = reinterpret_cast<const U*>(src + (mx_i64)partner * E);
    U* o = reinterpret_cast<U*>(dst + (mx_i64)s * E);
    if constexpr (!CUT) {
      const float lam = __int_as_float(r[1]), mu = 1.f - lam;
      const bool reuse = s == prev;  // this output's own pixels are the previous one's partner's
#pragma unroll
      for (int k = 0; k < MX_UNROLL; ++k) {
        const int u = base + k * MX_THREADS;
        if (u < NU) {
          va[k] = reuse ? vb[k] : a[u];
          vb[k] = partner == s ? va[k] : pb[u];
        }
      }
#pragma unroll
      for (int k = 0; k < MX_UNROLL; ++k) {
        const int u = base + k * MX_THREADS;
        if (u < NU) o[u] = Unit::mix(va[k], vb[k], lam, mu);
      }
      prev = partner;
    } else {
      // CutMix: a row is RL elements (W * C in NHWC, W in NCHW); the box covers elements
      // [x0 * P, x1 * P) of rows y0..y1-1 (of every channel plane in NCHW). A unit never spans two
      // rows (VEC needs RL % VE == 0), so elements [lo, hi) of it come from the partner.
      const int y0 = r[2], x0 = r[3], y1 = r[4], x1 = r[5];
      const int P = nchw ? 1 : C, RL = W * P, bx0 = x0 * P, bx1 = x1 * P;
      int lo[MX_UNROLL], hi[MX_UNROLL];
#pragma unroll
      for (int k = 0; k < MX_UNROLL; ++k) {
        const int u = base + k * MX_THREADS;
        lo[k] = hi[k] = 0;
        if (u < NU) {
          const int e0 = u * VE, row = e0 / RL, col = e0 - row * RL;
          const int y = nchw ? row % H : row;
          if (y >= y0 && y < y1) {
            lo[k] = min(max(bx0 - col, 0), VE);
            hi[k] = min(max(bx1 - col, 0), VE);
          }
          if (hi[k] <= lo[k]) lo[k] = hi[k] = 0;
          if (lo[k] != 0 || hi[k] != VE) va[k] = a[u];  // some of it is the sample's own
          if (hi[k] > lo[k]) vb[k] = pb[u];             // some of it is the partner's
        }
      }
#pragma unroll
      for (int k = 0; k < MX_UNROLL; ++k) {
        const int u = base + k * MX_THREADS;
        if (u >= NU) continue;
        if (hi[k] <= lo[k]) {
          o[u] = va[k];
        } else if (lo[k] == 0 && hi[k] == VE) {
          o[u] = vb[k];
        } else {
          if constexpr (VEC) {
            const int l = lo[k] * (int)sizeof(T), h = hi[k] * (int)sizeof(T);  // bytes
            o[u] = make_uint4(mx_sel(va[k].x, vb[k].x, mx_mask(l, h, 0)), mx_sel(va[k].y, vb[k].y, mx_mask(l, h, 1)),
                              mx_sel(va[k].z, vb[k].z, mx_mask(l, h, 2)), mx_sel(va[k].w, vb[k].w, mx_mask(l, h, 3)));
          }
        }
      }
    }
  }
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
