// Element and 16-byte vector access for the noise and filter kernels (gaussian_noise,
// salt_and_pepper, gaussian_blur, box_blur, median_blur).
#pragma once
#include "common.cuh"

namespace gpuaug {

// A dense row (pixels and channels packed: stride_x == C, stride_c == 1) is moved as 16-byte
// vectors where aligned; vget / vset read and write element j of such a vector as float.
struct alignas(16) vec16 { unsigned int w[4]; };

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}
__device__ __forceinline__ vec16 load16(const void* p) {
  const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
  vec16 v;
  v.w[0] = u.x; v.w[1] = u.y; v.w[2] = u.z; v.w[3] = u.w;
  return v;
}
__device__ __forceinline__ void store16(void* p, const vec16& v) {
  *reinterpret_cast<uint4*>(p) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
}

template <typename T> struct vec16_elem;
template <> struct vec16_elem<unsigned char> {
  static __device__ __forceinline__ unsigned int get(const vec16& v, int j) {
    return (v.w[j >> 2] >> (8 * (j & 3))) & 0xFFu;
  }
  static __device__ __forceinline__ void set(vec16& v, int j, unsigned int b) {
    const int sh = 8 * (j & 3);
    v.w[j >> 2] = (v.w[j >> 2] & ~(0xFFu << sh)) | (b << sh);
  }
};
template <> struct vec16_elem<half> {
  static __device__ __forceinline__ unsigned int get(const vec16& v, int j) {
    return (v.w[j >> 1] >> (16 * (j & 1))) & 0xFFFFu;
  }
  static __device__ __forceinline__ void set(vec16& v, int j, unsigned int b) {
    const int sh = 16 * (j & 1);
    v.w[j >> 1] = (v.w[j >> 1] & ~(0xFFFFu << sh)) | (b << sh);
  }
};
template <> struct vec16_elem<float> {
  static __device__ __forceinline__ unsigned int get(const vec16& v, int j) { return v.w[j]; }
  static __device__ __forceinline__ void set(vec16& v, int j, unsigned int b) { v.w[j] = b; }
};

// Raw bits <-> element values, for vget / vset.
template <typename T> __device__ __forceinline__ T from_bits(unsigned int b);
template <> __device__ __forceinline__ unsigned char from_bits<unsigned char>(unsigned int b) {
  return (unsigned char)b;
}
template <> __device__ __forceinline__ half from_bits<half>(unsigned int b) {
  half h;
  h.bits = (unsigned short)b;
  return h;
}
template <> __device__ __forceinline__ float from_bits<float>(unsigned int b) { return __uint_as_float(b); }
__device__ __forceinline__ unsigned int to_bits(unsigned char v) { return v; }
__device__ __forceinline__ unsigned int to_bits(half v) { return v.bits; }
__device__ __forceinline__ unsigned int to_bits(float v) { return __float_as_uint(v); }

// Read-only-cache load of one element (float16 as its raw bits).
__device__ __forceinline__ unsigned char ldg_elem(const unsigned char* p) { return __ldg(p); }
__device__ __forceinline__ float ldg_elem(const float* p) { return __ldg(p); }
__device__ __forceinline__ half ldg_elem(const half* p) {
  return from_bits<half>(__ldg(reinterpret_cast<const unsigned short*>(p)));
}

template <typename T> __device__ __forceinline__ T vget(const vec16& v, int j) {
  return from_bits<T>(vec16_elem<T>::get(v, j));
}
template <typename T> __device__ __forceinline__ void vset(vec16& v, int j, T x) {
  vec16_elem<T>::set(v, j, to_bits(x));
}

// -- exact conversions without I2F / F2I ----------------------------------------------------
// sm_90 converts int <-> float at 16 per clock per SM (FP32 arithmetic: 128), which made the
// uint8 kernels conversion-bound. These give the same values with FP32 adds and bit ops:
// fast_float(uint8 v) = 2^23 + v (as float bits) - 2^23, exact; fast_store<T>(v) ==
// from_float<T>(v) (uint8: floor(v + 0.5f) saturated, via a round-down add of 2^23).
__device__ __forceinline__ float fast_float(unsigned char v) {
  return __fsub_rn(__uint_as_float(0x4B000000u | v), 8388608.f);
}
__device__ __forceinline__ float fast_float(float v) { return v; }
__device__ __forceinline__ float fast_float(half v) { return to_float(v); }

template <typename T> __device__ __forceinline__ T fast_store(float v) { return from_float<T>(v); }
template <> __device__ __forceinline__ unsigned char fast_store<unsigned char>(float v) {
  const float x = fminf(fmaxf(__fadd_rn(v, 0.5f), 0.f), 255.f);  // NaN -> 0, as from_float
  return (unsigned char)(__float_as_uint(__fadd_rd(x, 8388608.f)) & 0xFFu);
}

// -- shared-memory tiles for the stencil kernels ---------------------------------------------
// load_tile: tile[r][q * C + c] = src(row ys + r, col xs + q, channel c) for r < rows, q < cols,
// rows and columns outside the image mapped by border_index(mode); tile rows are ``pitch``
// elements apart (default cols * C). The block's threads take consecutive elements of the
// whole tile, so a warp reads consecutive addresses of a row (coalesced even for uint8):
//   - uint8 rows of packed pixels away from the side borders, into word-aligned tile rows
//     (pitch and tile a multiple of 4 bytes): 32-bit words, a thread per word (aligned
//     loads, funnel-shifted);
//   - other packed-pixel rows: a thread per pixel, C elements;
//   - anything else: a warp per row, a lane per element.
// rows and cols are compile-time constants at every call (the divisions by them are cheap).
// S: the tile's element type, T (as loaded) or float for uint8 (converted once here, exact).
// Call from all threads of the block; synchronise before reading the tile.
template <typename S, typename T> __device__ __forceinline__ S tile_elem(T v) { return v; }
template <> __device__ __forceinline__ float tile_elem<float, unsigned char>(unsigned char v) { return fast_float(v); }

template <typename T, int C, typename S = T>
__device__ __forceinline__ void load_tile(const Sample& s, int ys, int xs, int rows, int cols, int mode,
                                          S* tile, int pitch = 0) {
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int nthreads = blockDim.x * blockDim.y;
  const int len = cols * C;
  if (pitch == 0) pitch = len;
  const bool packed = s.sx == C && s.sc == 1;
  const bool contiguous = packed && xs >= 0 && xs + cols <= s.w;
  if constexpr (sizeof(T) == 1) {
    if (contiguous && (pitch & 3) == 0 &&
        (reinterpret_cast<unsigned long long>(tile) & (4ull * sizeof(S) - 1)) == 0) {
      // output word k of row r = source bytes 4k .. 4k + 3 of the row = its aligned words k and
      // k + 1 (after the word of the row's first byte), shifted; a word is read only if it holds
      // a byte of the row
      const int nw = (len + 3) >> 2;
      for (int i = tid; i < rows * nw; i += nthreads) {
        const int r = i / nw, k = i - r * nw;
        const T* first = pixel<T>(s, border_index(ys + r, s.h, mode), xs);
        const unsigned long long a = reinterpret_cast<unsigned long long>(first);
        const unsigned* q = reinterpret_cast<const unsigned*>(a & ~3ull);
        const int b0 = (int)(a & 3ull);
        const unsigned lo = __ldg(q + k);
        const unsigned hi = b0 && 4 * (k + 1) < b0 + len ? __ldg(q + k + 1) : 0u;
        const unsigned w = __funnelshift_r(lo, hi, 8u * b0);
        if constexpr (sizeof(S) == 1) {
          reinterpret_cast<unsigned*>(tile + r * pitch)[k] = w;
        } else {  // float: the four bytes converted, one 16-byte store
          vec16 f;
#pragma unroll
          for (int e = 0; e < 4; ++e) f.w[e] = __float_as_uint(tile_elem<S>((unsigned char)(w >> (8 * e))));
          store16(tile + r * pitch + 4 * k, f);
        }
      }
      return;
    }
  }
  if (packed) {
    for (int i = tid; i < rows * cols; i += nthreads) {
      const int r = i / cols, q = i - r * cols;
      const T* px = pixel<T>(s, border_index(ys + r, s.h, mode), border_index(xs + q, s.w, mode));
      S* out = tile + r * pitch + q * C;
#pragma unroll
      for (int c = 0; c < C; ++c) out[c] = tile_elem<S>(ldg_elem(px + c));
    }
    return;
  }
  const int lane = tid & 31, warp = tid >> 5, nwarps = nthreads >> 5;
  for (int r = warp; r < rows; r += nwarps) {
    const T* rp = pixel<T>(s, border_index(ys + r, s.h, mode), 0);
    S* out = tile + r * pitch;
    for (int e = lane; e < len; e += 32) {
      const int q = e / C, c = e - q * C;
      out[e] = tile_elem<S>(ldg_elem(rp + (i64)border_index(xs + q, s.w, mode) * s.sx + (i64)c * s.sc));
    }
  }
}

// store_tile: dst(row y0 + r, col x0 + q, c) = tile[r][q * C + c] for the rows and columns
// inside the image (rows and cols: compile-time constants at every call). uint8 tiles whose
// rows are whole 32-bit words go out as words where the destination rows are word-aligned and
// packed, a thread per word of the whole tile; else a warp per row, a lane per element
// (coalesced for packed rows).
template <typename T, int C>
__device__ __forceinline__ void store_tile(const Sample& d, int y0, int x0, int rows, int cols, const T* tile) {
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int nthreads = blockDim.x * blockDim.y;
  const int ncols = min(cols, d.w - x0), nrows = min(rows, d.h - y0);
  const int len = ncols * C;
  const bool dense = d.sx == C && d.sc == 1;
  if (sizeof(T) == 1 && dense && ((cols * C) & 3) == 0 &&
      ((reinterpret_cast<unsigned long long>(pixel<T>(d, y0, x0)) | reinterpret_cast<unsigned long long>(tile) |
        (unsigned long long)(d.sy * (i64)sizeof(T))) & 3ull) == 0) {
    const int nw = (cols * C) >> 2;  // words per tile row; a row's last word may hold bytes past ncols
    for (int i = tid; i < nrows * nw; i += nthreads) {
      const int r = i / nw, k = i - r * nw;
      const unsigned w = reinterpret_cast<const unsigned*>(tile + r * cols * C)[k];
      unsigned char* o = reinterpret_cast<unsigned char*>(pixel<T>(d, y0 + r, x0)) + 4 * k;
      if (4 * k + 4 <= len) {
        *reinterpret_cast<unsigned*>(o) = w;
      } else {
        for (int e = 0; 4 * k + e < len; ++e) o[e] = (unsigned char)(w >> (8 * e));
      }
    }
    return;
  }
  const int lane = tid & 31, warp = tid >> 5, nwarps = nthreads >> 5;
  for (int r = warp; r < nrows; r += nwarps) {
    T* rp = pixel<T>(d, y0 + r, x0);
    const T* in = tile + r * cols * C;
    if (dense) {
      for (int e = lane; e < len; e += 32) rp[e] = in[e];
    } else {
      for (int e = lane; e < len; e += 32) {
        const int q = e / C, c = e - q * C;
        rp[(i64)q * d.sx + (i64)c * d.sc] = in[e];
      }
    }
  }
}

// -- whole-pixel replacement over row chunks (salt_and_pepper, erase, grid_mask) --------------
// Launch: grid (ceil(max_n(h * chunks) / blockDim.x), min(N, 65535)), 1-D blocks; a thread
// owns PPT = 16 / sizeof(T) pixels of one row (C 16-byte vectors when the row is dense and
// aligned). Op (copied per thread, so it may cache values in its members) provides
//   void prepare(const float* p): once per sample, e.g. convert the fill values;
//   void decide(const float* p, const Sample& d, int s, int y, int x0, int (&what)[PPT]):
//       0 keeps pixel x0 + j, w > 0 replaces it by value(w, c) (channel c);
//   T value(int w, int c).
__host__ __device__ constexpr int replace_ppt(int itemsize) { return 16 / itemsize; }

template <typename T, int C, typename Op>
__device__ __forceinline__ void replace_rows(const i64* src_tab, const i64* dst_tab, const float* params,
                                             int P, int n, Op op) {
  constexpr int PPT = replace_ppt(sizeof(T));
  const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const Sample d = sample_at(dst_tab, s);
    const unsigned int cpr = (d.w + PPT - 1) / PPT;
    if (t >= cpr * (unsigned int)d.h) continue;
    const Sample src = sample_at(src_tab, s);
    const int y = (int)(t / cpr);
    const int x0 = (int)(t - (unsigned int)y * cpr) * PPT;
    const float* p = params + (i64)s * P;
    op.prepare(p);
    int what[PPT];
    op.decide(p, d, s, y, x0, what);
    const T* srow = pixel<T>(src, y, 0);
    T* drow = pixel<T>(d, y, 0);
    const bool dense = src.sx == C && src.sc == 1 && d.sx == C && d.sc == 1;
    if (dense && x0 + PPT <= d.w && aligned16(srow + x0 * C) && aligned16(drow + x0 * C)) {
#pragma unroll
      for (int v = 0; v < C; ++v) {  // vector v: elements [v PPT, (v + 1) PPT) of the chunk
        vec16 a = load16(srow + x0 * C + v * PPT);
#pragma unroll
        for (int j = 0; j < PPT; ++j) {
          const int w = what[(v * PPT + j) / C];
          if (w) vset<T>(a, j, op.value(w, (v * PPT + j) % C));
        }
        store16(drow + x0 * C + v * PPT, a);
      }
    } else {
#pragma unroll
      for (int j = 0; j < PPT; ++j) {
        const int x = x0 + j;
        if (x < d.w) {
          const T* i = pixel<T>(src, y, x);
          T* o = pixel<T>(d, y, x);
#pragma unroll
          for (int c = 0; c < C; ++c) o[c * d.sc] = what[j] ? op.value(what[j], c) : ldg_elem(i + c * src.sc);
        }
      }
    }
  }
}

// -- bytes across 32-bit words (the one-vector-per-thread stencil kernels) -----------------------
// The word of the bytes that start O bytes after the start of word i of w (O may be negative;
// little-endian: byte b of word i is the window's byte 4 i + b). O = -PB gives each byte's left
// neighbour pixel's, O = PB its right one's.
template <int O>
__device__ __forceinline__ unsigned int bytes_at(const unsigned int* w, int i) {
  constexpr int A = O >= 0 ? O / 4 : -((-O + 3) / 4), B = O - 4 * A;
  return B == 0 ? w[i + A] : __funnelshift_r(w[i + A], w[i + A + 1], 8 * B);
}

}  // namespace gpuaug
