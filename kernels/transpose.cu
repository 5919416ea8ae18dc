// gpuaug_transpose<T, C>: swap height and width; output pixel (y, x) reads src(x, y).
#include "common.cuh"

namespace {
struct TransposeMap {
  __device__ __forceinline__ bool operator()(const gpuaug::Sample&, const gpuaug::Sample&,
                                             const float*, int y, int x, int& sy, int& sx) const {
    sy = x;
    sx = y;
    return true;
  }
  __device__ __forceinline__ float fill(const float*, int) const { return 0.f; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_transpose(const gpuaug::i64* src, const gpuaug::i64* dst,
                                 GPUAUG_PARAMS params, int P, int n) {
  gpuaug::copy_driver<T, C>(src, dst, params, P, n, TransposeMap());
}

// gpuaug_transpose_tiles<PB, TS>: the fast path of transpose and odd-k rot90 for dense
// batches (contiguous NHWC, or NCHW seen as N*C one-channel planes; PB = bytes per pixel
// of a plane row). A block moves a TS x TS-pixel tile through shared memory (TS = 64 for
// pixels of up to 4 bytes, so each thread has several loads in flight; 32 above): it reads
// source rows (coalesced) and writes output rows (coalesced), the output W x H being the
// source H x W turned. Output pixel (oy, ox) reads source (sy, sx) with
//   transpose: (ox, oy)   rot90 k=1 (fx): (ox, W-1-oy)   rot90 k=3 (fy): (H-1-ox, oy),
// k taken per plane from params[sample * P + kcol] (kcol < 0: transpose). Tiles are
// aligned to TS pixels in source columns and output columns, so with `words` (source and
// output rows a multiple of 4 bytes, 4-byte aligned bases) every global access is an
// aligned 32-bit word; otherwise bytes. The shared pitch (PW words) makes the column
// reads of the store phase fall in distinct banks: odd for byte pixels, PB/4 mod 32 for
// word pixels (so consecutive output words walk consecutive banks).
template <int PB, int TS>
__global__ void gpuaug_transpose_tiles(const unsigned char* __restrict__ src,
                                       unsigned char* __restrict__ dst,
                                       GPUAUG_PARAMS params, int P, int kcol,
                                       int planes, int planes_per_sample, int H, int W, int words) {
  constexpr int PW = TS * PB / 4 + (PB % 4 == 0 ? PB / 4 : 1);
  __shared__ unsigned int tile_w[TS * PW];
  unsigned char* tile = reinterpret_cast<unsigned char*>(tile_w);
  const int ox0 = blockIdx.x * TS, sx0 = blockIdx.y * TS;
  const int ny = min(TS, H - ox0);  // tile output columns = source rows
  const int nx = min(TS, W - sx0);  // tile source columns = output rows
  const int srow = W * PB, orow = H * PB;
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int plane = blockIdx.z; plane < planes; plane += gridDim.z) {
    bool fx = false, fy = false;
    if (kcol >= 0) {
      int k = __float2int_rn(params[(plane / planes_per_sample) * P + kcol]) % 4;
      if (k < 0) k += 4;
      fx = k == 1;
      fy = k == 3;
    }
    const int sy0 = fy ? H - ox0 - ny : ox0;
    const unsigned char* sp = src + ((long long)plane * H + sy0) * srow + sx0 * PB;
    unsigned char* dp = dst + (long long)plane * W * orow + ox0 * PB;
    if (words) {
      const int nw = nx * PB / 4;
      for (int k = tid; k < ny * nw; k += nt) {
        const int r = k / nw, q = k - r * nw;
        tile_w[r * PW + q] = __ldg(reinterpret_cast<const unsigned int*>(sp + (long long)r * srow) + q);
      }
    } else {
      const int nb = nx * PB;
      for (int k = tid; k < ny * nb; k += nt) {
        const int r = k / nb, b = k - r * nb;
        tile[r * PW * 4 + b] = __ldg(sp + (long long)r * srow + b);
      }
    }
    __syncthreads();
    // Output row j of the tile is source column sx0 + j; its byte b is byte c of tile
    // pixel i (source row sy0 + r, r = i or ny-1-i).
    if (words) {
      const int nwo = ny * PB / 4;
      for (int k = tid; k < nx * nwo; k += nt) {
        const int j = k / nwo, q = k - j * nwo;
        const int oy = fx ? W - 1 - sx0 - j : sx0 + j;
        unsigned int v;
        if (PB % 4 == 0) {
          const int i = 4 * q / PB, c = 4 * q - i * PB;
          const int r = fy ? ny - 1 - i : i;
          v = tile_w[r * PW + (j * PB + c) / 4];
        } else {
          v = 0;
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int b = 4 * q + e;
            const int i = b / PB, c = b - i * PB;
            const int r = fy ? ny - 1 - i : i;
            v |= (unsigned int)tile[r * PW * 4 + j * PB + c] << (8 * e);
          }
        }
        reinterpret_cast<unsigned int*>(dp + (long long)oy * orow)[q] = v;
      }
    } else {
      const int nbo = ny * PB;
      for (int k = tid; k < nx * nbo; k += nt) {
        const int j = k / nbo, b = k - j * nbo;
        const int oy = fx ? W - 1 - sx0 - j : sx0 + j;
        const int i = b / PB, c = b - i * PB;
        const int r = fy ? ny - 1 - i : i;
        dp[(long long)oy * orow + b] = tile[r * PW * 4 + j * PB + c];
      }
    }
    __syncthreads();  // the tile is refilled for the next plane
  }
}
