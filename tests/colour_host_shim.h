// Host C++ stand-ins for the CUDA built-ins the colour kernels use, so tests can compile the
// real kernels/*.cu with a C++ compiler and run them one thread at a time (see
// tests/colour_emulation.py and GPUAUG_HOST_EMULATION in kernels/colour.cuh). Semantics follow
// the CUDA Math API / PTX ISA for the cases the kernels hit; float16 (inline PTX) is not
// emulated.
#pragma once
#define GPUAUG_HOST_EMULATION 1

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>

#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define asm(...) ((void)0)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

struct uint4 {
  unsigned x, y, z, w;
};

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __saturatef(float x) { return x > 0.f ? (x < 1.f ? x : 1.f) : 0.f; }  // NaN -> 0
inline int __float2int_rd(float x) {
  double d = std::floor((double)x);
  return d < -2147483648.0 ? INT32_MIN : d > 2147483647.0 ? INT32_MAX : (int)d;
}
inline int __float2int_rn(float x) {
  double d = std::nearbyint((double)x);
  return d < -2147483648.0 ? INT32_MIN : d > 2147483647.0 ? INT32_MAX : (int)d;
}
inline float __fadd_rd(float a, float b) {  // a + b rounded toward -inf
  const double d = (double)a + (double)b;   // exact for the operands the kernels add
  float f = (float)d;
  if ((double)f > d) f = std::nextafter(f, -INFINITY);
  return f;
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t pool = (uint64_t)x | ((uint64_t)y << 32);
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= (unsigned)((pool >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
  return r;
}
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldcs(const T* p) { return *p; }
template <typename T> inline void __stcs(T* p, T v) { *p = v; }
inline void __syncthreads() {}

// Runs kernel(args...) for every thread of grid x block, one after the other.
template <typename K, typename... A>
void emulate_launch(K kernel, dim3 grid, dim3 block, A... args) {
  gridDim = grid;
  blockDim = block;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx)
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx) {
              blockIdx = {bx, by, bz};
              threadIdx = {tx, ty, tz};
              kernel(args...);
            }
}

// Warp intrinsics: the emulated code paths never reach them (GPUAUG_HOST_EMULATION).
template <typename T> inline T __shfl_down_sync(unsigned, T v, int) { return v; }
template <typename T> inline T __shfl_sync(unsigned, T v, int) { return v; }
