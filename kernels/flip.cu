// gpuaug_flip<T, C>: per-sample horizontal / vertical flip (params: [horizontal, vertical]).
//
// Three kernels, fastest first:
// - gpuaug_flip_groups: dense batches whose width is a multiple of 16 (224, 1920, ...):
//   a thread moves 16 pixels (PB 16-byte vectors) and reverses their order in registers
//   with compile-time byte positions, so it needs no shared memory and few instructions;
// - gpuaug_flip_rows: other dense batches (NHWC, or NCHW seen as N*C one-channel planes):
//   whole source rows staged in shared memory with 16-byte loads, output bytes gathered;
// - gpuaug_flip: any strides and varshape batches, one thread per pixel.
#include "common.cuh"

namespace {
struct FlipMap {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample& s, const gpuaug::Sample&,
                                             const float* p, int y, int x, int& sy, int& sx) const {
    sx = p[0] != 0.f ? s.w - 1 - x : x;
    sy = p[1] != 0.f ? s.h - 1 - y : y;
    return true;
  }
  __device__ __forceinline__ float fill(const float*, int) const { return 0.f; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_flip(const gpuaug::i64* src, const gpuaug::i64* dst, GPUAUG_PARAMS params,
                            int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, FlipMap());
}

// PB: bytes per pixel of a row (element size * channels in NHWC, element size in NCHW).
// Rows are numbered r = plane * H + y over all planes; a plane belongs to sample
// plane / planes_per_sample. A block handles rows_per_block consecutive rows; the row
// pitch is row_bytes = W * PB (contiguous batch). vec: rows and bases are 16-byte aligned.
template <int PB>
__global__ void gpuaug_flip_rows(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                                 GPUAUG_PARAMS params, int P, int planes,
                                 int planes_per_sample, int H, int W, int rows_per_block, int vec) {
  extern __shared__ uint4 smem4[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem4);
  const int row_bytes = W * PB;
  const long long total_rows = (long long)planes * H;
  const long long r0 = (long long)blockIdx.x * rows_per_block;
  const int nrows = (int)min((long long)rows_per_block, total_rows - r0);
  if (nrows <= 0) return;
  // Load: output row r0+i reads source row sy of the same plane.
  if (vec) {
    const int chunks = row_bytes >> 4;
    for (int k = threadIdx.x; k < nrows * chunks; k += blockDim.x) {
      const int i = k / chunks, j = k - i * chunks;
      const long long r = r0 + i;
      const int plane = (int)(r / H), y = (int)(r - (long long)plane * H);
      const float* p = params + (long long)(plane / planes_per_sample) * P;
      const int sy = p[1] != 0.f ? H - 1 - y : y;
      const uint4* s = reinterpret_cast<const uint4*>(src + ((long long)plane * H + sy) * row_bytes);
      smem4[i * chunks + j] = __ldg(s + j);
    }
  } else {
    for (int k = threadIdx.x; k < nrows * row_bytes; k += blockDim.x) {
      const int i = k / row_bytes, j = k - i * row_bytes;
      const long long r = r0 + i;
      const int plane = (int)(r / H), y = (int)(r - (long long)plane * H);
      const float* p = params + (long long)(plane / planes_per_sample) * P;
      const int sy = p[1] != 0.f ? H - 1 - y : y;
      smem[k] = __ldg(src + ((long long)plane * H + sy) * row_bytes + j);
    }
  }
  __syncthreads();
  // Store: output byte b of row i is byte b % PB of pixel x = b / PB, read from source
  // pixel W-1-x (horizontal) or x.
  unsigned char* out = dst + r0 * row_bytes;
  if (vec) {
    const int chunks = row_bytes >> 4;
    for (int k = threadIdx.x; k < nrows * chunks; k += blockDim.x) {
      const int i = k / chunks, j = k - i * chunks;
      const int plane = (int)((r0 + i) / H);
      const bool hf = params[(long long)(plane / planes_per_sample) * P] != 0.f;
      const unsigned char* row = smem + i * row_bytes;
      unsigned int w[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        unsigned int v = 0;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int b = j * 16 + q * 4 + e;
          const int x = b / PB, c = b - x * PB;
          const int sx = hf ? W - 1 - x : x;
          v |= (unsigned int)row[sx * PB + c] << (8 * e);
        }
        w[q] = v;
      }
      reinterpret_cast<uint4*>(out + (long long)i * row_bytes)[j] = make_uint4(w[0], w[1], w[2], w[3]);
    }
  } else {
    for (int k = threadIdx.x; k < nrows * row_bytes; k += blockDim.x) {
      const int i = k / row_bytes, b = k - i * row_bytes;
      const int plane = (int)((r0 + i) / H);
      const bool hf = params[(long long)(plane / planes_per_sample) * P] != 0.f;
      const int x = b / PB, c = b - x * PB;
      const int sx = hf ? W - 1 - x : x;
      out[k] = smem[i * row_bytes + sx * PB + c];
    }
  }
}

// PB: bytes per pixel; W % 16 == 0, rows 16-byte aligned. total = planes * H * W / 16
// (< 2^32, checked on the host). A thread handles output pixels [16g, 16g + 16) of a row.
template <int PB>
__global__ void gpuaug_flip_groups(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                   GPUAUG_PARAMS params, int P, int planes_per_sample,
                                   unsigned int H, unsigned int W, unsigned int total) {
  const unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const unsigned int gpr = W >> 4;  // 16-pixel groups per row
  const unsigned int row = idx / gpr, g = idx - row * gpr;
  const unsigned int plane = row / H, y = row - plane * H;
  const float* p = params + (size_t)(plane / planes_per_sample) * P;
  const bool hf = p[0] != 0.f;
  const unsigned int sy = p[1] != 0.f ? H - 1 - y : y;
  const unsigned int sg = hf ? gpr - 1 - g : g;
  const uint4* s = src + ((size_t)(plane * H + sy) * gpr + sg) * PB;
  uint4* d = dst + ((size_t)row * gpr + g) * PB;
  unsigned int in[4 * PB], out[4 * PB];
#pragma unroll
  for (int k = 0; k < PB; ++k) {
    const uint4 v = __ldg(s + k);
    in[4 * k] = v.x; in[4 * k + 1] = v.y; in[4 * k + 2] = v.z; in[4 * k + 3] = v.w;
  }
  if (hf) {
    if (PB % 4 == 0) {  // whole words per pixel: move words
      constexpr int WP = PB / 4;
#pragma unroll
      for (int i = 0; i < 4 * PB; ++i) out[i] = in[(15 - i / WP) * WP + i % WP];
    } else {  // output byte i = byte i % PB of source pixel 15 - i / PB
#pragma unroll
      for (int i = 0; i < 4 * PB; ++i) out[i] = 0u;
#pragma unroll
      for (int i = 0; i < 16 * PB; ++i) {
        const int sb = (15 - i / PB) * PB + i % PB;
        out[i >> 2] |= ((in[sb >> 2] >> ((sb & 3) * 8)) & 0xffu) << ((i & 3) * 8);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4 * PB; ++i) out[i] = in[i];
  }
#pragma unroll
  for (int k = 0; k < PB; ++k) d[k] = make_uint4(out[4 * k], out[4 * k + 1], out[4 * k + 2], out[4 * k + 3]);
}
