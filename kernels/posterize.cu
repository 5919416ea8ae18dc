// gpuaug_posterize<T, C>: keep the top `bits` bits; params [bits].
//   uint8:  out = x & (0xff << (8 - bits))  ==  floor(x / 2^(8-bits)) * 2^(8-bits)
//   floats: out = min(floor(x * 2^bits), 2^bits - 1) / 2^bits, at least 0 (torchvision v2)
// gpuaug_posterize_u8: dense uint8 batches, a byte mask on 16 bytes at a time.
#include "intensity.cuh"

namespace {
template <typename T, int C>
struct PosterizeFn {
  __device__ __forceinline__ void operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, float* v) const {
    const int bits = min(max((int)p[0], 0), 8);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float a = gpuaug::load<T>(s, y, x, c);
      if (gpuaug::is_u8<T>::value) {
        const unsigned int m = (0xff00u >> bits) & 0xffu;
        v[c] = (float)((unsigned int)a & m);
      } else {
        const float levels = (float)(1 << bits);  // powers of two: exact
        v[c] = fminf(fmaxf(floorf(a * levels), 0.f), levels - 1.f) / levels;
      }
    }
  }
};

struct PosterizeVec {
  unsigned int m4;
  __device__ __forceinline__ void setup(const float* p) {
    const int bits = min(max((int)p[0], 0), 8);
    m4 = ((0xff00u >> bits) & 0xffu) * 0x01010101u;
  }
  __device__ __forceinline__ uint4 operator()(uint4 v, int) const {
    return make_uint4(v.x & m4, v.y & m4, v.z & m4, v.w & m4);
  }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_posterize(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                                 int P, int n) {
  gpuaug::value_driver<T, C>(src, dst, params, P, n, PosterizeFn<T, C>());
}

extern "C" __global__ void gpuaug_posterize_u8(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                               int nvec, GPUAUG_PARAMS params, int P, int n) {
  PosterizeVec op;
  gpuaug::u8_vec_driver(src, dst, nvec, params, P, n, op);
}
