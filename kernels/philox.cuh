// Counter-based random numbers for the noise ops: Philox4x32-10 (Salmon et al., SC'11, as
// in Random123) and a Box-Muller transform whose float maths gives the same bits as the
// Numba twin (kernels/numba/_philox.py), which is the reference for this file.
//
// Reproducibility rules (both files follow them line by line):
// - every multiply-add is an explicit __fmaf_rn; no product feeds an addition (NVRTC
//   would fuse it, the CPU would not), except products by powers of two, which are exact;
// - only correctly rounded operations otherwise: + - *, __fsqrt_rn, int -> float;
// - log / sin / cos are short polynomials (Cephes coefficients), not libm calls.
#pragma once
#include "common.cuh"
#include "rowvec.cuh"

namespace gpuaug {

struct u32x4 { unsigned int v[4]; };

namespace philox_const {
// The float32 constants, bit for bit those of kernels/numba/_philox.py (hex literals: no
// decimal rounding in between). Cephes logf on [sqrt(1/2)-1, sqrt(2)-1], sinf/cosf on [0, pi/4].
constexpr float LP0 = 0x1.204376p-4f;
constexpr float LP1 = -0x1.d7a37p-4f;
constexpr float LP2 = 0x1.de4a34p-4f;
constexpr float LP3 = -0x1.fcba9ep-4f;
constexpr float LP4 = 0x1.23d37ep-3f;
constexpr float LP5 = -0x1.555cap-3f;
constexpr float LP6 = 0x1.999d58p-3f;
constexpr float LP7 = -0x1.fffff8p-3f;
constexpr float LP8 = 0x1.555554p-2f;
constexpr float LN2 = 0x1.62e43p-1f;
constexpr float PIO4 = 0x1.921fb6p-1f;
constexpr float SIN0 = -0x1.9943f2p-13f;
constexpr float SIN1 = 0x1.11073cp-7f;
constexpr float SIN2 = -0x1.555546p-3f;
constexpr float COS0 = 0x1.99eb9cp-16f;
constexpr float COS1 = -0x1.6c0c34p-10f;
constexpr float COS2 = 0x1.55554ap-5f;
constexpr float TWO_M32 = 0x1p-32f;
constexpr float TWO_M24 = 0x1p-24f;
}  // namespace philox_const

// Philox4x32-10: counter (c0..c3), key (k0, k1) -> four random 32-bit words.
__device__ __forceinline__ u32x4 philox4x32_10(unsigned int c0, unsigned int c1, unsigned int c2,
                                               unsigned int c3, unsigned int k0, unsigned int k1) {
#pragma unroll
  for (int i = 0; i < 10; ++i) {
    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  u32x4 r;
  r.v[0] = c0; r.v[1] = c1; r.v[2] = c2; r.v[3] = c3;
  return r;
}

// Key from a 64-bit seed stored in four params as 16-bit chunks (exact in float32).
__device__ __forceinline__ void seed_key(const float* p, unsigned int& k0, unsigned int& k1) {
  k0 = (unsigned int)p[0] | ((unsigned int)p[1] << 16);
  k1 = (unsigned int)p[2] | ((unsigned int)p[3] << 16);
}

// A 33-bit threshold (0..2^32) stored as (low 16 bits, the rest); compares r < t exactly.
__device__ __forceinline__ unsigned long long threshold(const float* p) {
  return (unsigned long long)(unsigned int)p[0] | ((unsigned long long)(unsigned int)p[1] << 16);
}

// Two standard normal values from two random words: radius sqrt(-2 ln u1) with
// u1 = (ra + 1) / 2^32 in (0, 1], angle 2 pi floor(rb / 32) / 2^27 (the top 3 bits of rb
// pick the octant exactly, the next 24 the position in it).
__device__ __forceinline__ void box_muller(unsigned int ra, unsigned int rb, float& z0, float& z1) {
  using namespace philox_const;
  float r = 0.f;
  if (ra != 0xFFFFFFFFu) {
    const unsigned int k = ra + 1u;
    int e = __clz(k);
    const unsigned int m = k << e;  // u1 = m 2^(-32-e), m in [2^31, 2^32)
    int d;
    if (m < 0xB504F334u) {  // ceil(sqrt(1/2) 2^32): s = 2y - 1 (y = m 2^-32), exactly
      d = (int)(m + m);     // 2m - 2^32, wrapping
      e += 1;
    } else {
      d = (int)m;           // m - 2^32
    }
    const float s = __fmul_rn(__int2float_rn(d), TWO_M32);  // exact
    const float s2 = s * s;
    float p = __fmaf_rn(LP0, s, LP1);
    p = __fmaf_rn(p, s, LP2);
    p = __fmaf_rn(p, s, LP3);
    p = __fmaf_rn(p, s, LP4);
    p = __fmaf_rn(p, s, LP5);
    p = __fmaf_rn(p, s, LP6);
    p = __fmaf_rn(p, s, LP7);
    p = __fmaf_rn(p, s, LP8);
    const float lnv = __fadd_rn(s, __fmaf_rn(-0.5f, s2, __fmul_rn(__fmul_rn(p, s), s2)));
    const float ef = __fsub_rn(__uint_as_float(0x4B000000u | (unsigned int)e), 8388608.f);  // = e, no I2F
    float a = __fmaf_rn(ef, LN2, -lnv);  // -ln u1
    a = __fadd_rn(a, a);
    if (a > 0.f) r = __fsqrt_rn(a);
  }
  const unsigned int o = rb >> 29;
  // t = ((rb >> 5) & 0xFFFFFF) 2^-24, exactly, without an I2F: (1 + (v >> 1) 2^-23) - 1, plus 2^-24 for odd v
  const unsigned int v = (rb >> 5) & 0xFFFFFFu;
  float t = __fadd_rn(__fsub_rn(__uint_as_float(0x3F800000u | (v >> 1)), 1.f), (v & 1u) ? TWO_M24 : 0.f);
  if (o & 1u) t = __fsub_rn(1.f, t);
  const float ph = __fmul_rn(t, PIO4);
  const float z2 = __fmul_rn(ph, ph);
  const float sp = __fmaf_rn(
      __fmul_rn(__fmaf_rn(__fmaf_rn(SIN0, z2, SIN1), z2, SIN2), z2),
      ph, ph);
  const float cp = __fadd_rn(
      __fmaf_rn(-0.5f, z2,
                __fmul_rn(__fmul_rn(__fmaf_rn(__fmaf_rn(COS0, z2, COS1),
                                              z2, COS2), z2), z2)),
      1.f);
  float cs = cp, sn = sp;
  if ((o + 1u) & 2u) { cs = sp; sn = cp; }
  if (((o + 2u) >> 2) & 1u) cs = -cs;
  if (o >= 4u) sn = -sn;
  z0 = __fmul_rn(r, cs);
  z1 = __fmul_rn(r, sn);
}

}  // namespace gpuaug
