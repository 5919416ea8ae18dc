// Autocontrast per image and channel, as torchvision's autocontrast, in two steps:
//   1. gpuaug_autocontrast_parts<T, C>: blocks reduce the per-channel min and max over
//      slices of each sample; gpuaug_autocontrast_rows<T, C> combines them into the sample's
//      parameter row of step 2,
//      [lo (C), scale (C), bound]: bound = 255 (uint8) or 1 (floats),
//      scale = (max - min) *f32 (1 / bound); a channel with max == min gets lo = 0, scale = 1
//      (left as it is, then clamped, as torchvision does).
//   2. gpuaug_autocontrast<T, C>: out = clamp((x - lo[c]) / scale[c], 0, bound) in float32
//      (uint8 stored as every gpuaug op stores, floor(v + 0.5); torchvision truncates).
// Dense uint8 NHWC batches (every sample nvec 16-byte vectors, 16-byte aligned) take two
// launches instead: gpuaug_autocontrast_parts_u8<C> (16-byte loads, integer min/max; the same
// parts as 1a) and gpuaug_autocontrast_u8<C>, whose blocks combine their sample's parts into
// step 2's row themselves (the same float operations as 1b) and map every byte through a
// 256-entry table per channel made from it with step 2's float operations: bit for bit the
// same output as the three launches.
#include "intensity.cuh"

namespace {
constexpr int AC_THREADS = 256;

// Step 1b for channel c of one sample: its lo and scale from the sample's nparts parts q.
template <int C>
__device__ __forceinline__ void ac_channel_row(const float* q, int nparts, int c, float bound, float& lo,
                                               float& scale) {
  float a = 3.0e38f, b = -3.0e38f;
  for (int k = 0; k < nparts; ++k) {
    a = fminf(a, q[k * 2 * C + c]);
    b = fmaxf(b, q[k * 2 * C + C + c]);
  }
  const bool flat = a == b;
  lo = flat ? 0.f : a;
  scale = flat ? 1.f : (b - a) * (1.f / bound);
}

// Step 2's value of x (before the store).
__device__ __forceinline__ float ac_value(float x, float lo, float scale, float bound) {
  return fminf(fmaxf((x - lo) / scale, 0.f), bound);
}

template <typename T, int C>
struct AutocontrastFn {
  __device__ __forceinline__ void operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, float* v) const {
#pragma unroll
    for (int c = 0; c < C; ++c) v[c] = ac_value(gpuaug::load<T>(s, y, x, c), p[c], p[C + c], p[2 * C]);
  }
};
}  // namespace

// Step 1a's end, shared by both of its kernels: the block's per-channel minimum and maximum of
// every thread's lo / hi (a tree over the block's shared smin / smax), written by thread 0 as the
// part q = [min (C), max (C)] in float. Every thread of the block calls it.
__device__ __forceinline__ float ac_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float ac_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ unsigned ac_min(unsigned a, unsigned b) { return min(a, b); }
__device__ __forceinline__ unsigned ac_max(unsigned a, unsigned b) { return max(a, b); }

template <int C, typename V>
__device__ __forceinline__ void ac_write_part(const V (&lo)[C], const V (&hi)[C], V (&smin)[C][AC_THREADS],
                                              V (&smax)[C][AC_THREADS], float* q) {
#pragma unroll
  for (int c = 0; c < C; ++c) { smin[c][threadIdx.x] = lo[c]; smax[c][threadIdx.x] = hi[c]; }
  __syncthreads();
  for (int off = AC_THREADS / 2; off > 0; off >>= 1) {
    if ((int)threadIdx.x < off)
#pragma unroll
      for (int c = 0; c < C; ++c) {
        smin[c][threadIdx.x] = ac_min(smin[c][threadIdx.x], smin[c][threadIdx.x + off]);
        smax[c][threadIdx.x] = ac_max(smax[c][threadIdx.x], smax[c][threadIdx.x + off]);
      }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
#pragma unroll
    for (int c = 0; c < C; ++c) { q[c] = (float)smin[c][0]; q[C + c] = (float)smax[c][0]; }
  }
  __syncthreads();
}

// Step 1a: grid (nparts, N), block AC_THREADS: block b reduces the per-channel min and max of
// its slice of sample s's pixels (ceil(H W / nparts) of them; possibly none) into
// parts[s][b] = [min (C), max (C)]. Every part is written (no zeroed or initialised memory).
template <typename T, int C>
__global__ void gpuaug_autocontrast_parts(const gpuaug::i64* src_tab, float* __restrict__ parts, int nparts, int n) {
  __shared__ float smin[C][AC_THREADS];
  __shared__ float smax[C][AC_THREADS];
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const gpuaug::Sample src = gpuaug::sample_at(src_tab, s);
    float lo[C], hi[C];
#pragma unroll
    for (int c = 0; c < C; ++c) { lo[c] = 3.0e38f; hi[c] = -3.0e38f; }
    const gpuaug::i64 npix = (gpuaug::i64)src.h * src.w;
    const gpuaug::i64 per = (npix + nparts - 1) / nparts;
    const gpuaug::i64 begin = per * blockIdx.x, end = min(npix, begin + per);
    for (gpuaug::i64 i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const int y = (int)(i / src.w), x = (int)(i - (gpuaug::i64)y * src.w);
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const float v = gpuaug::load<T>(src, y, x, c);
        lo[c] = fminf(lo[c], v);
        hi[c] = fmaxf(hi[c], v);
      }
    }
    ac_write_part<C>(lo, hi, smin, smax, parts + ((gpuaug::i64)s * nparts + blockIdx.x) * (2 * C));
  }
}

// Step 1b: one thread per sample: the parameter row of step 2 from its nparts parts,
// [lo (C), scale (C), bound] (min and max do not depend on the order they are taken in).
template <typename T, int C>
__global__ void gpuaug_autocontrast_rows(const float* __restrict__ parts, int nparts, float* __restrict__ params,
                                         int P, int n) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n) return;
  const float bound = gpuaug::maxval<T>();
  const float* q = parts + (gpuaug::i64)s * nparts * (2 * C);
  float* p = params + (gpuaug::i64)s * P;
#pragma unroll
  for (int c = 0; c < C; ++c) ac_channel_row<C>(q, nparts, c, bound, p[c], p[C + c]);
  p[2 * C] = bound;
}

// Step 2.
template <typename T, int C>
__global__ void gpuaug_autocontrast(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params, int P, int n) {
  gpuaug::value_driver<T, C>(src, dst, params, P, n, AutocontrastFn<T, C>());
}

// Byte-wise minimum / maximum of four unsigned bytes in a word.
__device__ __forceinline__ unsigned ac_vmin(unsigned a, unsigned b) { return __vminu4(a, b); }
__device__ __forceinline__ unsigned ac_vmax(unsigned a, unsigned b) { return __vmaxu4(a, b); }

// Step 1a for dense uint8 NHWC batches: grid (nparts, N), block AC_THREADS; sample s has nvec
// 16-byte vectors, taken in units of U: 3 vectors (48 bytes, 16 RGB pixels) for C = 3, so that
// byte k of a unit always holds channel k % C, else 1 (RGB: 16 nvec = 3 pixels, a multiple of 3).
// Block b takes an equal slice of the sample's units and writes parts[s][b] = [min (C),
// max (C)] as floats (255 and 0 for a block with no units: the identities over uint8).
template <int C>
__global__ void __launch_bounds__(AC_THREADS) gpuaug_autocontrast_parts_u8(const uint4* __restrict__ src, int nvec,
                                                                           float* __restrict__ parts, int n) {
  constexpr int U = C == 3 ? 3 : 1;
  constexpr int PW = U;  // words of one channel pattern: word q holds the channels of word q % PW
  __shared__ unsigned slo[C][AC_THREADS];
  __shared__ unsigned shi[C][AC_THREADS];
  const int units = nvec / U;
  const int per_block = (units + gridDim.x - 1) / gridDim.x;
  const int begin = blockIdx.x * per_block;
  const int end = min(units, begin + per_block);
  for (int s0 = blockIdx.y; s0 < n; s0 += gridDim.y) {
    const int s = n - 1 - s0;  // last to first: the map that follows starts where L2 is warm
    const uint4* a = src + (gpuaug::i64)s * nvec;
    unsigned lo[PW], hi[PW];  // byte-wise minima and maxima of the words of each pattern
#pragma unroll
    for (int q = 0; q < PW; ++q) { lo[q] = 0xFFFFFFFFu; hi[q] = 0u; }
    for (int j = begin + (int)threadIdx.x; j < end; j += AC_THREADS) {
      uint4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = __ldg(a + (gpuaug::i64)j * U + u);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const unsigned w[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          lo[(4 * u + e) % PW] = ac_vmin(lo[(4 * u + e) % PW], w[e]);
          hi[(4 * u + e) % PW] = ac_vmax(hi[(4 * u + e) % PW], w[e]);
        }
      }
    }
    unsigned clo[C], chi[C];
#pragma unroll
    for (int c = 0; c < C; ++c) { clo[c] = 255u; chi[c] = 0u; }
#pragma unroll
    for (int k = 0; k < 4 * PW; ++k) {  // byte k of the pattern holds channel k % C
      clo[k % C] = min(clo[k % C], gpuaug::byte_of(lo[k >> 2], k & 3));
      chi[k % C] = max(chi[k % C], gpuaug::byte_of(hi[k >> 2], k & 3));
    }
    ac_write_part<C>(clo, chi, slo, shi, parts + ((gpuaug::i64)s * gridDim.x + blockIdx.x) * (2 * C));
  }
}

namespace {
// Step 2 for dense uint8 NHWC batches (u8_vec_driver): params row s = the sample's nparts
// parts of gpuaug_autocontrast_parts_u8, P = nparts * 2C. setup() combines them into step
// 1b's [lo, scale] and tabulates step 2's value of every byte per channel.
template <int C>
struct AutocontrastVec {
  unsigned char* lut;  // [C][256], shared
  float* row;          // [2C], shared
  int nparts;
  __device__ __forceinline__ void setup(const float* p) {
    __syncthreads();  // the previous sample's lookups are done
    const int t = threadIdx.x;
    if (t < C) ac_channel_row<C>(p, nparts, t, 255.f, row[t], row[C + t]);
    __syncthreads();
    for (int i = threadIdx.x; i < C * 256; i += blockDim.x) {
      const int c = i >> 8;
      lut[i] = gpuaug::from_float<unsigned char>(ac_value((float)(i & 255), row[c], row[C + c], 255.f));
    }
    __syncthreads();
  }
  __device__ __forceinline__ uint4 operator()(uint4 v, int j) const {
    // byte k of vector j holds channel (16 j + k) % C; (16 j) % 3 == j % 3
    const int c0 = C == 3 ? j % 3 : 0;
    unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      unsigned o = 0;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = (c0 + q * 4 + e) % C;
        o |= (unsigned)lut[c * 256 + gpuaug::byte_of(w[q], e)] << (8 * e);
      }
      w[q] = o;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};
}  // namespace

// Step 2, dense uint8 NHWC: grid vec_grid(N, nvec), block 256; params = the parts, P = nparts * 2C.
template <int C>
__global__ void __launch_bounds__(256) gpuaug_autocontrast_u8(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                              int nvec, GPUAUG_PARAMS params, int P,
                                                              int n) {
  __shared__ unsigned char lut[C * 256];
  __shared__ float row[2 * C];
  AutocontrastVec<C> op{lut, row, P / (2 * C)};
  gpuaug::u8_vec_driver(src, dst, nvec, params, P, n, op);
}
