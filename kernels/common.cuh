// Shared device code for every gpuaug CUDA C kernel.
//
// Batches reach kernels as per-sample descriptor tables (int64 rows of
// address, height, width, stride_y, stride_x, stride_c; strides in elements), so one
// kernel serves uniform, strided (NCHW seen as NHWC) and varshape batches. Per-sample
// parameters come as a float32 matrix, one row of P values per sample.
#pragma once

namespace gpuaug {

typedef long long i64;

}  // namespace gpuaug

// Per-sample parameters by value (gpuaug._plan's run() plans): a module built with
// -DGPUAUG_BYVAL=F (F floats: 512, or 4096 where the driver takes 16 KB of arguments) takes its
// kernels' parameter matrix as a block in the launch's own arguments (a __grid_constant__
// parameter: its address is taken without a copy) instead of a device pointer, so a call needs
// no upload (no cudaMemcpyAsync on the stream). Kernels declare the matrix as
// ``GPUAUG_PARAMS params`` and read it through plain loads, or GPUAUG_LDP where the pointer build
// wants __ldg: a load through the read-only path from the parameter space would be undefined.
#ifndef GPUAUG_BYVAL
#define GPUAUG_BYVAL 0
#endif
#if GPUAUG_BYVAL
#define GPUAUG_PARAMS const __grid_constant__ gpuaug::ParamBlock
#define GPUAUG_LDP(p) (*(p))
#else
#define GPUAUG_PARAMS const float* __restrict__
#define GPUAUG_LDP(p) __ldg(p)
#endif

namespace gpuaug {

constexpr int PARAM_BLOCK_FLOATS = GPUAUG_BYVAL > 0 ? GPUAUG_BYVAL : 512;
struct alignas(16) ParamBlock {
  float v[PARAM_BLOCK_FLOATS];
  __device__ __forceinline__ operator const float*() const { return v; }
};

// float16 as raw bits: NVRTC then needs no CUDA headers (cuda_fp16.h) at run time.
struct half { unsigned short bits; };

struct Sample {
  char* ptr;
  int h, w;
  i64 sy, sx, sc;
};

__device__ __forceinline__ Sample sample_at(const i64* table, int n) {
  const i64* r = table + (i64)n * 6;
  Sample s;
  s.ptr = reinterpret_cast<char*>(r[0]);
  s.h = (int)r[1];
  s.w = (int)r[2];
  s.sy = r[3];
  s.sx = r[4];
  s.sc = r[5];
  return s;
}

template <typename T>
__device__ __forceinline__ T* pixel(const Sample& s, int y, int x) {
  return reinterpret_cast<T*>(s.ptr) + (i64)y * s.sy + (i64)x * s.sx;
}

// Loads convert to float; stores round to nearest (floor(v + 0.5), the rule every
// gpuaug backend and the test references share) and saturate for uint8.
__device__ __forceinline__ float to_float(unsigned char v) { return (float)v; }
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(half v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
  return f;
}

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ unsigned char from_float<unsigned char>(float v) {
  int i = __float2int_rd(v + 0.5f);
  return (unsigned char)min(max(i, 0), 255);
}
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ half from_float<half>(float v) {
  half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));
  return h;
}

// Exact copies move raw elements; a fill value arrives as the element's bit pattern.
template <typename T> struct bits_of { typedef T type; };
template <> struct bits_of<half> { typedef unsigned short type; };

template <typename T> __device__ __forceinline__ typename bits_of<T>::type fill_bits(float v) {
  return from_float<T>(v);
}
template <> __device__ __forceinline__ unsigned short fill_bits<half>(float v) {
  return from_float<half>(v).bits;
}

// Border index rules (OpenCV names): return -1 for "use the fill value".
enum Border { BORDER_CONSTANT = 0, BORDER_REPLICATE = 1, BORDER_REFLECT = 2, BORDER_REFLECT101 = 3 };

// reflect: numpy.pad "reflect" / OpenCV BORDER_REFLECT_101 (edge pixel not repeated).
__device__ __forceinline__ int border_index(int i, int n, int mode) {
  if (i >= 0 && i < n) return i;
  if (mode == BORDER_CONSTANT) return -1;
  if (mode == BORDER_REPLICATE) return i < 0 ? 0 : n - 1;
  if (n == 1) return 0;
  if (mode == BORDER_REFLECT101) {  // ...cb|abcd|cb...
    if (i > -n && i <= 2 * n - 2) return i < 0 ? -i : 2 * n - 2 - i;  // one reflection: no division
    int period = 2 * (n - 1);
    i = i % period;
    if (i < 0) i += period;
    return i < n ? i : period - i;
  }
  // BORDER_REFLECT: ...ba|abcd|dc...
  if (i >= -n && i < 2 * n) return i < 0 ? -1 - i : 2 * n - 1 - i;  // one reflection
  int period = 2 * n;
  i = i % period;
  if (i < 0) i += period;
  return i < n ? i : period - 1 - i;
}

// One thread per output pixel; blockIdx.z walks the samples. Map decides, per output
// pixel, the source pixel (sy, sx) to copy, or returns false to write the fill value
// map.fill(p, c) (a float, converted as a store would).
template <typename T, int C, typename Map>
__device__ __forceinline__ void copy_driver(const i64* src_tab, const i64* dst_tab,
                                            const float* params, int P, int n, Map map) {
  typedef typename bits_of<T>::type B;
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = sample_at(dst_tab, s);
    if (x >= d.w || y >= d.h) continue;
    const Sample src = sample_at(src_tab, s);
    const float* p = params + (i64)s * P;
    int sy, sx;
    B* o = pixel<B>(d, y, x);
    if (map(src, d, p, y, x, sy, sx)) {
      const B* i = pixel<B>(src, sy, sx);
#pragma unroll
      for (int c = 0; c < C; ++c) o[c * d.sc] = __ldg(i + c * src.sc);
    } else {
#pragma unroll
      for (int c = 0; c < C; ++c) o[c * d.sc] = fill_bits<T>(map.fill(p, c));
    }
  }
}

// One thread per output pixel, float maths: Fn fills v[C] for pixel (y, x).
template <typename T, int C, typename Fn>
__device__ __forceinline__ void value_driver(const i64* src_tab, const i64* dst_tab,
                                             const float* params, int P, int n, Fn fn) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const Sample d = sample_at(dst_tab, s);
    if (x >= d.w || y >= d.h) continue;
    const Sample src = sample_at(src_tab, s);
    float v[C];
    fn(src, d, params + (i64)s * P, y, x, v);
    T* o = pixel<T>(d, y, x);
#pragma unroll
    for (int c = 0; c < C; ++c) o[c * d.sc] = from_float<T>(v[c]);
  }
}

template <typename T>
__device__ __forceinline__ float load(const Sample& s, int y, int x, int c) {
  return to_float(pixel<T>(s, y, x)[c * s.sc]);
}

}  // namespace gpuaug
