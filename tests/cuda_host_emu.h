// Host emulation of the few CUDA features the intensity kernels use, so their CUDA C can
// be compiled with g++ and checked on a machine without a GPU (tests/test_intensity_cuda_host.py).
// Blocks run one after another; a block's threads are OS threads and __syncthreads is a
// barrier; __shared__ arrays become statics (one block at a time owns them). It checks
// indexing and arithmetic, not timing, memory ordering or float16 (inline PTX).
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>
#include <algorithm>
#include <atomic>
#include <cstring>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__ static
struct dim3 { unsigned x = 1, y = 1, z = 1; };
// Internal linkage (static, not inline): other host-emulation libraries loaded into the same
// process define the same names, and inline variables would be merged across libraries
// (GNU unique symbols); the test also builds with -fvisibility=hidden -fno-gnu-unique.
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<>* g_bar = nullptr;
static inline void __syncthreads() { g_bar->arrive_and_wait(); }
struct uint4 { unsigned int x, y, z, w; };
struct uint2 { unsigned int x, y; };
struct float4 { float x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
template <typename T> inline T __ldg(const T* p) { return *p; }
using std::min; using std::max;
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline int __float2int_rd(float v) { return (int)std::floor(v); }
inline unsigned int __vcmpgeu4(unsigned int a, unsigned int b) {
  unsigned r = 0;
  for (int k = 0; k < 4; ++k) if (((a >> 8 * k) & 255) >= ((b >> 8 * k) & 255)) r |= 255u << 8 * k;
  return r;
}
inline unsigned int __vminu4(unsigned int a, unsigned int b) {
  unsigned r = 0;
  for (int k = 0; k < 4; ++k) r |= std::min((a >> 8 * k) & 255, (b >> 8 * k) & 255) << 8 * k;
  return r;
}
inline unsigned int __vmaxu4(unsigned int a, unsigned int b) {
  unsigned r = 0;
  for (int k = 0; k < 4; ++k) r |= std::max((a >> 8 * k) & 255, (b >> 8 * k) & 255) << 8 * k;
  return r;
}
template <typename T> inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicMax(int* p, int v) { int o = *p; while (o < v && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return o; }
#include <math.h>

template <typename F>
static void launch(dim3 g, dim3 b, F body) {
  gridDim = g; blockDim = b;
  int nt = b.x * b.y * b.z;
  for (unsigned bz = 0; bz < g.z; ++bz) for (unsigned by = 0; by < g.y; ++by) for (unsigned bx = 0; bx < g.x; ++bx) {
    std::barrier<> bar(nt); g_bar = &bar;
    std::vector<std::thread> ts;
    for (int t = 0; t < nt; ++t) ts.emplace_back([&, t] {
      blockIdx = {bx, by, bz};
      threadIdx = {(unsigned)(t % b.x), (unsigned)((t / b.x) % b.y), (unsigned)(t / (b.x * b.y))};
      body();
    });
    for (auto& th : ts) th.join();
  }
}
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int sh) {
  sh &= 31; unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned int)(v >> sh); }
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  unsigned long long v = ((unsigned long long)y << 32) | x; unsigned r = 0;
  for (int i = 0; i < 4; ++i) { unsigned sel = (s >> (4 * i)) & 7; r |= (unsigned)((v >> (8 * sel)) & 255) << (8 * i); }
  return r; }
inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
