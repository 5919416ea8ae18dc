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

}  // namespace gpuaug
