// gpuaug_crop<T, C>: per-sample window (params: [top, left]); output pixel (y, x) reads
// src(y + top, x + left). Pixels outside the source are written as zero: that is
// center_crop's zero padding (negative offsets), and it keeps windows whose offsets came
// from the GPU (not checked on the host) from reading out of bounds.
#include "common.cuh"

namespace {
struct CropMap {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, int& sy, int& sx) const {
    sy = y + __float2int_rn(p[0]);
    sx = x + __float2int_rn(p[1]);
    return sy >= 0 && sy < s.h && sx >= 0 && sx < s.w;
  }
  __device__ __forceinline__ float fill(const float*, int) const { return 0.f; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_crop(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                            int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, CropMap());
}

// gpuaug_window_rows<T, V>: the fast path of crop, center_crop and pad for dense batches
// (contiguous NHWC, or NCHW seen as N*C one-channel planes; PB = bytes per pixel of a
// plane row). Output pixel (oy, x) of plane `plane` reads source pixel
// (border(oy + dy), border(x + dx)), (dy, dx) = sign * (params[0], params[1]): sign +1 for
// a crop's (top, left), -1 for a pad's. One thread per V output bytes (V = 16, 8 or 4,
// dividing the output row, so every store is one aligned vector). Chunks wholly inside
// the source row (all of a crop's) are a shifted copy: aligned 32-bit loads joined by
// funnel shifts, so source alignment does not matter. Chunks at the borders (pad, or a
// window partly outside) resolve byte by byte with border_index (mode: common.cuh codes;
// constant writes the fill, params[fill_col], or 0 when fill_col < 0).
// 32-bit index math: the host sends only outputs of fewer than 2^31 chunks.
namespace {
template <typename T> __device__ __forceinline__ unsigned int fill_word(float v);
template <> __device__ __forceinline__ unsigned int fill_word<unsigned char>(float v) {
  return gpuaug::from_float<unsigned char>(v);
}
template <> __device__ __forceinline__ unsigned int fill_word<gpuaug::half>(float v) {
  return gpuaug::from_float<gpuaug::half>(v).bits;
}
template <> __device__ __forceinline__ unsigned int fill_word<float>(float v) {
  return __float_as_uint(v);
}

template <int V> struct Vec;
template <> struct Vec<4> {
  static __device__ __forceinline__ void store(unsigned char* p, const unsigned int* w) {
    *reinterpret_cast<unsigned int*>(p) = w[0];
  }
};
template <> struct Vec<8> {
  static __device__ __forceinline__ void store(unsigned char* p, const unsigned int* w) {
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  }
};
template <> struct Vec<16> {
  static __device__ __forceinline__ void store(unsigned char* p, const unsigned int* w) {
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
};
}  // namespace

template <typename T, int V>
__global__ void gpuaug_window_rows(const unsigned char* __restrict__ src,
                                   unsigned char* __restrict__ dst,
                                   GPUAUG_PARAMS params, int P, int sign, int fill_col,
                                   int mode, int planes, int planes_per_sample, int H, int W,
                                   int OH, int OW, int PB) {
  constexpr int NW = V / 4;
  const int row_bytes = W * PB;
  const int cpr = OW * PB / V;  // chunks per output row
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= planes * OH * cpr) return;
  const int row = t / cpr, j = t - row * cpr;
  const int plane = row / OH, oy = row - plane * OH;
  const float* p = params + (plane / planes_per_sample) * P;
  const int dy = sign * __float2int_rn(p[0]), dx = sign * __float2int_rn(p[1]);
  const int sy = gpuaug::border_index(oy + dy, H, mode);
  const int b0 = j * V;          // first output byte of the chunk in its row
  const int lo = -dx * PB;       // output byte where the source row begins
  const unsigned char* srow = src + ((long long)plane * H + (sy < 0 ? 0 : sy)) * row_bytes;
  unsigned int w[NW];
  if (sy >= 0 && b0 >= lo && b0 + V <= lo + row_bytes) {
    const unsigned char* a = srow + (b0 - lo);
    const int s = (int)(reinterpret_cast<unsigned long long>(a) & 3);
    // Every aligned word read holds a byte of the chunk, so no read leaves the allocation.
    const unsigned int* aw = reinterpret_cast<const unsigned int*>(a - s);
    if (V == 16 && (reinterpret_cast<unsigned long long>(a) & 15) == 0) {
      const uint4 u = __ldg(reinterpret_cast<const uint4*>(a));
      w[0] = u.x; w[1 % NW] = u.y; w[2 % NW] = u.z; w[3 % NW] = u.w;
    } else if (s == 0) {
#pragma unroll
      for (int q = 0; q < NW; ++q) w[q] = __ldg(aw + q);
    } else {
      unsigned int cur = __ldg(aw);
#pragma unroll
      for (int q = 0; q < NW; ++q) {
        const unsigned int nxt = __ldg(aw + q + 1);
        w[q] = __funnelshift_r(cur, nxt, 8 * s);
        cur = nxt;
      }
    }
  } else {
    // The fill as a word: PB is a multiple of sizeof(T) and chunks start on words, so
    // every word of fill is the element's bits repeated.
    unsigned int fw = fill_col >= 0 ? fill_word<T>(p[fill_col]) : 0u;
    if (sizeof(T) == 1) fw *= 0x01010101u;
    if (sizeof(T) == 2) fw |= fw << 16;
    if (sy < 0) {  // a whole row of fill (constant mode, above or below the image)
#pragma unroll
      for (int q = 0; q < NW; ++q) w[q] = fw;
    } else {
      int x = b0 / PB, c = b0 - x * PB;
      int sx = gpuaug::border_index(x + dx, W, mode);
#pragma unroll
      for (int q = 0; q < NW; ++q) {
        unsigned int v = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const unsigned int byte = sx >= 0 ? (unsigned int)__ldg(srow + sx * PB + c)
                                            : (fw >> (8 * e)) & 0xffu;
          v |= byte << (8 * e);
          if (++c == PB) {
            c = 0;
            sx = gpuaug::border_index(++x + dx, W, mode);
          }
        }
        w[q] = v;
      }
    }
  }
  Vec<V>::store(dst + (long long)row * (OW * PB) + b0, w);
}
