// Histogram equalisation per image and channel, as torchvision's equalize, in three steps:
//   1. gpuaug_equalize_hist[_u8]: 256-bin histograms (N, C, 256) of the bins b(x) (the
//      dense uint8 kernel: partial histograms, (N, blocks per sample, C, 256)):
//      uint8: b = x; floats: b = clamp(floor(x *f32 255.999f), 0, 255) (torchvision's
//      float -> uint8 conversion, in float32).
//   2. gpuaug_equalize_lut: one block per histogram; PIL's table
//      step = (pixels - count of the last non-empty bin) // 255;
//      lut[0] = 0, lut[k] = min((cum[k-1] + step // 2) // step, 255); identity if step == 0.
//      It writes the tables as the parameter rows of step 3: [lut(C*256), is_float].
//   3. gpuaug_equalize<T, C> (any batch) / gpuaug_equalize_u8<C> (dense uint8 NHWC, table
//      in shared memory): out = lut[c][b(x)], divided by 255 for floats.
#include "intensity.cuh"

namespace {
template <typename T>
__device__ __forceinline__ int eq_bin(T v) {
  const float f = __fmul_rn(gpuaug::to_float(v), 255.999f);
  return min(max((int)floorf(f), 0), 255);
}
template <>
__device__ __forceinline__ int eq_bin<unsigned char>(unsigned char v) { return v; }

// Channel of byte k of a 16-byte vector whose first byte has channel c0 (NHWC, C channels).
template <int C>
__device__ __forceinline__ int chan(int c0, int k) {
  if (C == 1) return 0;
  if (C == 4) return k & 3;
  const int c = c0 + k % 3;
  return c >= 3 ? c - 3 : c;
}
// Channel of the first byte of vector j: (16 j) % C.
template <int C>
__device__ __forceinline__ int chan0(int j) { return C == 3 ? j % 3 : 0; }

template <typename T, int C>
struct EqualizeFn {
  __device__ __forceinline__ void operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, float* v) const {
    const T* i = gpuaug::pixel<T>(s, y, x);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const float t = p[c * 256 + eq_bin<T>(i[c * s.sc])];
      v[c] = gpuaug::is_u8<T>::value ? t : t / 255.f;
    }
  }
};

template <int C>
struct EqualizeVec {
  unsigned char* lut;
  __device__ __forceinline__ void setup(const float* p) {
    __syncthreads();
    for (int i = threadIdx.x; i < C * 256; i += blockDim.x) lut[i] = (unsigned char)p[i];
    __syncthreads();
  }
  __device__ __forceinline__ uint4 operator()(uint4 v, int j) const {
    const int c0 = chan0<C>(j);
    unsigned int w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      unsigned int o = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o |= (unsigned int)lut[chan<C>(c0, q * 4 + e) * 256 + gpuaug::byte_of(w[q], e)] << (8 * e);
      w[q] = o;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};
}  // namespace

// Step 1, any batch: one thread per pixel, global atomics.
template <typename T, int C>
__global__ void gpuaug_equalize_hist(const gpuaug::i64* src_tab, unsigned int* __restrict__ hist, int n) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  for (int s = blockIdx.z; s < n; s += gridDim.z) {
    const gpuaug::Sample src = gpuaug::sample_at(src_tab, s);
    if (x >= src.w || y >= src.h) continue;
    const T* i = gpuaug::pixel<T>(src, y, x);
#pragma unroll
    for (int c = 0; c < C; ++c) atomicAdd(hist + ((gpuaug::i64)s * C + c) * 256 + eq_bin<T>(i[c * src.sc]), 1u);
  }
}

// Step 1, dense uint8 NHWC batches (nvec 16-byte vectors per sample): a shared-memory
// histogram per block, written whole as the block's partial histogram
// parts[sample][blockIdx.x][C * 256] (no atomics, no zeroed memory: step 2 adds the
// gridDim.x partials up), so every byte of the scratch memory is written.
template <int C>
__global__ void gpuaug_equalize_hist_u8(const uint4* __restrict__ src, int nvec,
                                        unsigned int* __restrict__ parts, int n) {
  __shared__ unsigned int h[C * 256];
  const int per_block = (nvec + gridDim.x - 1) / gridDim.x;
  const int begin = blockIdx.x * per_block;
  const int end = min(nvec, begin + per_block);
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    for (int i = threadIdx.x; i < C * 256; i += blockDim.x) h[i] = 0u;
    __syncthreads();
    const uint4* a = src + (gpuaug::i64)s * nvec;
    for (int j = begin + threadIdx.x; j < end; j += blockDim.x) {
      const uint4 v = __ldg(a + j);
      const unsigned int w[4] = {v.x, v.y, v.z, v.w};
      const int c0 = chan0<C>(j);
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int e = 0; e < 4; ++e) atomicAdd(&h[chan<C>(c0, q * 4 + e) * 256 + gpuaug::byte_of(w[q], e)], 1u);
    }
    __syncthreads();
    unsigned int* g = parts + ((gpuaug::i64)s * gridDim.x + blockIdx.x) * (C * 256);
    for (int i = threadIdx.x; i < C * 256; i += blockDim.x) g[i] = h[i];
    __syncthreads();
  }
}

// Step 2: blockIdx.x = sample * C + channel, 256 threads (one per bin). ``hist``: nparts
// partial histograms per sample, (N, nparts, C, 256), added up here (nparts = 1: (N, C, 256)).
__device__ __forceinline__ void equalize_table(const unsigned int* __restrict__ hist, int nparts,
                                               float* __restrict__ lut, int P, int C, int is_float) {
  __shared__ unsigned int cum[256];
  __shared__ unsigned int cnt[256];
  __shared__ int last;
  const int row = blockIdx.x, k = threadIdx.x;
  const int s = row / C, c = row - s * C;
  const unsigned int* h = hist + (gpuaug::i64)s * nparts * C * 256 + c * 256 + k;
  unsigned int hk = 0u;
  for (int b = 0; b < nparts; ++b) hk += h[(gpuaug::i64)b * C * 256];
  if (k == 0) last = 0;
  cnt[k] = hk;
  cum[k] = hk;
  __syncthreads();
  if (hk) atomicMax(&last, k);
  for (int off = 1; off < 256; off <<= 1) {  // inclusive scan
    const unsigned int t = k >= off ? cum[k - off] : 0u;
    __syncthreads();
    cum[k] += t;
    __syncthreads();
  }
  const unsigned int step = (cum[255] - cnt[last]) / 255u;
  float v;
  if (step == 0u) v = (float)k;
  else v = k == 0 ? 0.f : (float)min((cum[k - 1] + step / 2u) / step, 255u);
  float* out = lut + (gpuaug::i64)s * P;
  out[c * 256 + k] = v;
  if (c == 0 && k == 0) out[C * 256] = (float)is_float;
}

// Step 2 of whole histograms (N, C, 256).
extern "C" __global__ void gpuaug_equalize_lut(const unsigned int* __restrict__ hist, float* __restrict__ lut,
                                               int P, int C, int is_float) {
  equalize_table(hist, 1, lut, P, C, is_float);
}

// Step 2 of gpuaug_equalize_hist_u8's partial histograms (N, nparts, C, 256).
extern "C" __global__ void gpuaug_equalize_lut_parts(const unsigned int* __restrict__ hist, int nparts,
                                                     float* __restrict__ lut, int P, int C, int is_float) {
  equalize_table(hist, nparts, lut, P, C, is_float);
}

// Step 3.
template <typename T, int C>
__global__ void gpuaug_equalize(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                                int P, int n) {
  gpuaug::value_driver<T, C>(src, dst, params, P, n, EqualizeFn<T, C>());
}

template <int C>
__global__ void gpuaug_equalize_u8(const uint4* __restrict__ src, uint4* __restrict__ dst, int nvec,
                                   GPUAUG_PARAMS params, int P, int n) {
  __shared__ unsigned char lut[C * 256];
  EqualizeVec<C> op{lut};
  gpuaug::u8_vec_driver(src, dst, nvec, params, P, n, op);
}
