// gpuaug_flip<T, C>: per-sample horizontal / vertical flip (params: [horizontal, vertical]).
//
// Two kernels: gpuaug_flip (any strides, varshape; one thread per pixel) and
// gpuaug_flip_rows (contiguous rows: NHWC batches, or NCHW batches seen as N*C one-channel
// planes). The row kernel stages whole source rows in shared memory with 16-byte loads,
// then writes each 16-byte output chunk from bytes gathered out of shared memory, so both
// global streams are 16-byte vectors whatever the pixel size (3-byte RGB included).
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
__global__ void gpuaug_flip(const gpuaug::i64* src, const gpuaug::i64* dst, const float* params,
                            int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, FlipMap());
}

// PB: bytes per pixel of a row (element size * channels in NHWC, element size in NCHW).
// Rows are numbered r = plane * H + y over all planes; a plane belongs to sample
// plane / planes_per_sample. A block handles rows_per_block consecutive rows; the row
// pitch is row_bytes = W * PB (contiguous batch). vec: rows and bases are 16-byte aligned.
template <int PB>
__global__ void gpuaug_flip_rows(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                                 const float* __restrict__ params, int P, int planes,
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
