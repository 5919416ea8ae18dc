// Device code shared by the intensity ops (gamma, invert, solarize, posterize, equalize,
// normalize, crop_mirror_normalize): the dtype's value range, a 16-byte-vector driver for
// dense uint8 batches, and the crop/mirror/normalize drivers (generic and vectorised).
#pragma once
#include "common.cuh"

namespace gpuaug {

// The top of the value range of T: 255 for uint8, 1 for floats (torchvision's convention).
template <typename T> __device__ __forceinline__ float maxval() { return 1.f; }
template <> __device__ __forceinline__ float maxval<unsigned char>() { return 255.f; }

template <typename T> struct is_u8 { static constexpr bool value = false; };
template <> struct is_u8<unsigned char> { static constexpr bool value = true; };

// ---------------------------------------------------------------------------------------
// Dense uint8 batches: every sample is nvec 16-byte vectors, back to back, 16-byte aligned
// (Python checks this). blockIdx.y walks the samples, blockIdx.x takes an equal slice of
// one sample, and each thread moves UNROLL vectors per step (several loads in flight).
// Op: setup(p) once per sample per thread (may use shared memory and __syncthreads: every
// thread of the block calls it), then operator()(uint4 v, int j) for vector j of the sample.
constexpr int VEC_UNROLL = 4;

template <typename Op>
__device__ __forceinline__ void u8_vec_driver(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                              int nvec, const float* __restrict__ params, int P,
                                              int n, Op& op) {
  const int per_block = (nvec + gridDim.x - 1) / gridDim.x;
  const int begin = blockIdx.x * per_block;
  const int end = min(nvec, begin + per_block);
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    op.setup(params + (i64)s * P);
    const uint4* a = src + (i64)s * nvec;
    uint4* b = dst + (i64)s * nvec;
    for (int i = begin + (int)threadIdx.x; i < end; i += VEC_UNROLL * (int)blockDim.x) {
      uint4 v[VEC_UNROLL];
#pragma unroll
      for (int u = 0; u < VEC_UNROLL; ++u) {
        const int j = i + u * (int)blockDim.x;
        if (j < end) v[u] = __ldg(a + j);
      }
#pragma unroll
      for (int u = 0; u < VEC_UNROLL; ++u) {
        const int j = i + u * (int)blockDim.x;
        if (j < end) b[j] = op(v[u], j);
      }
    }
  }
}

// Byte k (0..3) of a 32-bit word, and a word from four bytes.
__device__ __forceinline__ unsigned int byte_of(unsigned int w, int k) { return (w >> (8 * k)) & 0xffu; }

// A 256-entry table lookup on each byte of a 16-byte vector (table in shared memory).
__device__ __forceinline__ unsigned int lut_word(const unsigned char* lut, unsigned int w) {
  return (unsigned int)lut[w & 0xffu] | ((unsigned int)lut[(w >> 8) & 0xffu] << 8) |
         ((unsigned int)lut[(w >> 16) & 0xffu] << 16) | ((unsigned int)lut[w >> 24] << 24);
}
__device__ __forceinline__ uint4 lut_vec(const unsigned char* lut, uint4 v) {
  return make_uint4(lut_word(lut, v.x), lut_word(lut, v.y), lut_word(lut, v.z), lut_word(lut, v.w));
}

// ---------------------------------------------------------------------------------------
// crop + mirror + normalize (normalize is the case "no crop, no mirror").
// Parameter row: [pos_y, pos_x, mirror, crop_h, crop_w, mean[C], std[C]]; each thread
// computes scale = 1/std, bias = -mean * scale and out = x * scale + bias = (x - mean) / std.
// The crop window's corner follows DALI: anchor = roundf(pos * (in - crop)) in float32
// (round half away from zero). Output channels CO = C, or 4 when a 3-channel output is
// padded (pad_output): the extra channel is 0.
constexpr int CMN_MEAN = 5;

__device__ __forceinline__ int cmn_anchor(float pos, int in, int crop) {
  return (int)roundf(__fmul_rn(pos, (float)(in - crop)));
}

template <typename T, typename O, int C, int CO>
__device__ __forceinline__ void cmn_generic(const i64* src_tab, const i64* dst_tab,
                                            const float* params, int P, int n) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = sample_at(dst_tab, s);
    if (x >= d.w || y >= d.h) continue;
    const Sample src = sample_at(src_tab, s);
    const float* p = params + (i64)s * P;
    const int ay = cmn_anchor(p[0], src.h, d.h);
    const int ax = cmn_anchor(p[1], src.w, d.w);
    const int sx = p[2] != 0.f ? ax + d.w - 1 - x : ax + x;
    const T* i = pixel<T>(src, ay + y, sx);
    O* o = pixel<O>(d, y, x);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float scale = 1.f / p[CMN_MEAN + C + c];
      o[c * d.sc] = from_float<O>(fmaf(to_float(i[c * src.sc]), scale, -p[CMN_MEAN + c] * scale));
    }
#pragma unroll
    for (int c = C; c < CO; ++c) o[c * d.sc] = from_float<O>(0.f);
  }
}

// Four consecutive values of O, one aligned store (float: 16 bytes; half: 8 bytes).
__device__ __forceinline__ void store4(float* o, float a, float b, float c, float d) {
  *reinterpret_cast<float4*>(o) = make_float4(a, b, c, d);
}
__device__ __forceinline__ void store4(half* o, float a, float b, float c, float d) {
  const unsigned int lo = (unsigned int)from_float<half>(a).bits | ((unsigned int)from_float<half>(b).bits << 16);
  const unsigned int hi = (unsigned int)from_float<half>(c).bits | ((unsigned int)from_float<half>(d).bits << 16);
  *reinterpret_cast<uint2*>(o) = make_uint2(lo, hi);
}

// N consecutive 32-bit words of bytes starting at p, any alignment: aligned loads only
// (a word holding one byte of the run lies inside its allocation), funnel-shifted.
template <int N>
__device__ __forceinline__ void load_words(const unsigned char* p, unsigned int (&w)[N]) {
  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
  const unsigned int* q = reinterpret_cast<const unsigned int*>(a & ~3ull);
  const unsigned int sh = (unsigned int)(a & 3ull) * 8u;
  unsigned int r[N + 1];
#pragma unroll
  for (int k = 0; k < N; ++k) r[k] = __ldg(q + k);
  r[N] = sh ? __ldg(q + N) : 0u;
#pragma unroll
  for (int k = 0; k < N; ++k) w[k] = __funnelshift_r(r[k], r[k + 1], sh);
}

// Byte j of the words w as a float: the byte becomes the mantissa of 2^23 + byte (one
// byte permute) and 2^23 is subtracted, exact; cheaper than an integer conversion.
template <int N>
__device__ __forceinline__ float byte_float(const unsigned int (&w)[N], int j) {
  const unsigned int bits = __byte_perm(w[j >> 2], 0x4B000000u, (unsigned int)(j & 3) | 0x7440u);
  return __uint_as_float(bits) - 8388608.f;
}

// Vectorised crop/mirror/normalize: each thread makes CMN_PX consecutive output pixels of
// a row in R rows (strided by blockDim.y; R = CMN_ROWS, or 1 for the 4x taller grids of
// small batches), with one parameter fetch for all of them. Loads go through the source strides (any layout); stores are aligned 4-value
// vectors, planar (PLANAR: d.sx == 1, channels d.sc apart: NCHW) or interleaved
// (d.sx == CO, d.sc == 1: NHWC). Python checks: every output width % 4 == 0, addresses
// and strides aligned to 4 values of O.
constexpr int CMN_PX = 4;
constexpr int CMN_ROWS = 4;

template <typename T, typename O, int C, int CO, bool PLANAR, int R = CMN_ROWS>
__device__ __forceinline__ void cmn_vec(const i64* src_tab, const i64* dst_tab,
                                        const float* params, int P, int n) {
  const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * CMN_PX;
  const int ybase = blockIdx.y * blockDim.y * R + threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = sample_at(dst_tab, s);
    if (x0 >= d.w || ybase >= d.h) continue;
    const Sample src = sample_at(src_tab, s);
    const float* p = params + (i64)s * P;
    const int ay = cmn_anchor(p[0], src.h, d.h);
    const int ax = cmn_anchor(p[1], src.w, d.w);
    const bool mirror = p[2] != 0.f;
    float scale[C], bias[C];
#pragma unroll
    for (int c = 0; c < C; ++c) {
      scale[c] = 1.f / p[CMN_MEAN + C + c];
      bias[c] = -p[CMN_MEAN + c] * scale[c];
    }
    // Source column of output pixel x0 + k is sx0 + k * dx.
    const int sx0 = mirror ? ax + d.w - 1 - x0 : ax + x0;
    const int dx = mirror ? -1 : 1;
    const int ssx = (int)src.sx, ssc = (int)src.sc;
    const bool packed_u8 = is_u8<T>::value && ssx == C && ssc == 1;
    // uint8 pixels packed C bytes apart: the CMN_PX pixels of a row are 4*C consecutive
    // bytes, read as C aligned words (C + 1 when unaligned, funnel-shifted); every row's
    // loads are issued before the first store.
    unsigned int w[R][C];
    if (packed_u8) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int y = ybase + r * blockDim.y;
        if (y < d.h) {
          const T* row = pixel<T>(src, ay + y, sx0);
          load_words<C>(reinterpret_cast<const unsigned char*>(row) - (mirror ? (CMN_PX - 1) * C : 0), w[r]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int y = ybase + r * blockDim.y;
      if (y >= d.h) break;
      float v[CMN_PX][CO];
      if (packed_u8) {
#pragma unroll
        for (int k = 0; k < CMN_PX; ++k) {
#pragma unroll
          for (int c = 0; c < C; ++c) {
            const float a = mirror ? byte_float<C>(w[r], (CMN_PX - 1 - k) * C + c) : byte_float<C>(w[r], k * C + c);
            v[k][c] = fmaf(a, scale[c], bias[c]);
          }
        }
      } else {
        const T* row = pixel<T>(src, ay + y, sx0);
#pragma unroll
        for (int k = 0; k < CMN_PX; ++k) {
#pragma unroll
          for (int c = 0; c < C; ++c)
            v[k][c] = fmaf(to_float(row[k * dx * ssx + c * ssc]), scale[c], bias[c]);
        }
      }
#pragma unroll
      for (int k = 0; k < CMN_PX; ++k) {
#pragma unroll
        for (int c = C; c < CO; ++c) v[k][c] = 0.f;
      }
      O* o = pixel<O>(d, y, x0);
      if (PLANAR) {
#pragma unroll
        for (int c = 0; c < CO; ++c) store4(o + c * d.sc, v[0][c], v[1][c], v[2][c], v[3][c]);
      } else {
        // Interleaved: the CMN_PX * CO values are contiguous, pixel-major.
#pragma unroll
        for (int q = 0; q < CO; ++q) {
          float a[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) a[e] = v[(q * 4 + e) / CO][(q * 4 + e) % CO];
          store4(o + q * 4, a[0], a[1], a[2], a[3]);
        }
      }
    }
  }
}

}  // namespace gpuaug
