// gpuaug_gaussian_noise<T, C>: out = x + mean + std * z, z ~ N(0, 1) per element.
// params: [mean, std, seed chunks 0..3, n]. Element e = x*C + c of row y of sample n takes
// lane e % 4 of philox4x32_10(e / 4, y, n, 0; seed) through Box-Muller (lanes 0-1, 2-3);
// the Numba twin (kernels/numba/gaussian_noise.py) computes the same bits.
//
// Launch: grid (ceil(max_n(h * chunks) / blockDim.x), min(N, 65535)); each thread owns a
// chunk of 16 bytes of one row (16 / sizeof(T) elements, 1-4 Philox calls, all four
// words used), moved as one vector where the row is dense and aligned.
#include "common.cuh"
#include "philox.cuh"

template <typename T, int C>
__global__ void gpuaug_gaussian_noise(const gpuaug::i64* src_tab, const gpuaug::i64* dst_tab,
                                      GPUAUG_PARAMS params, int P, int n) {
  using namespace gpuaug;
  constexpr int EPT = 16 / sizeof(T);
  const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const Sample d = sample_at(dst_tab, s);
    const int m = d.w * C;
    const unsigned int cpr = (m + EPT - 1) / EPT;
    if (t >= cpr * (unsigned int)d.h) continue;  // 32-bit index maths (a 64-bit division is slow)
    const Sample src = sample_at(src_tab, s);
    const int y = (int)(t / cpr);
    const int e0 = (int)(t - (unsigned int)y * cpr) * EPT;
    const float* p = params + (i64)s * P;
    const float mean = p[0], sd = p[1];
    unsigned int k0, k1;
    seed_key(p + 2, k0, k1);
    float z[EPT];
#pragma unroll
    for (int j = 0; j < EPT / 4; ++j) {
      const u32x4 r = philox4x32_10((unsigned int)(e0 / 4 + j), (unsigned int)y, (unsigned int)p[6], 0u, k0, k1);
      box_muller(r.v[0], r.v[1], z[4 * j], z[4 * j + 1]);
      box_muller(r.v[2], r.v[3], z[4 * j + 2], z[4 * j + 3]);
    }
    const T* srow = pixel<T>(src, y, 0);
    T* drow = pixel<T>(d, y, 0);
    const bool dense = src.sx == C && src.sc == 1 && d.sx == C && d.sc == 1;
    if (dense && e0 + EPT <= m && aligned16(srow + e0) && aligned16(drow + e0)) {
      const vec16 in = load16(srow + e0);
      vec16 out;
#pragma unroll
      for (int j = 0; j < EPT; ++j) {
        const float v = __fmaf_rn(sd, z[j], __fadd_rn(fast_float(vget<T>(in, j)), mean));
        vset<T>(out, j, fast_store<T>(v));
      }
      store16(drow + e0, out);
    } else {
#pragma unroll
      for (int j = 0; j < EPT; ++j) {
        const int e = e0 + j;
        if (e < m) {
          const int x = e / C, c = e - x * C;
          const float xv = fast_float(ldg_elem(pixel<T>(src, y, x) + c * src.sc));
          pixel<T>(d, y, x)[c * d.sc] = fast_store<T>(__fmaf_rn(sd, z[j], __fadd_rn(xv, mean)));
        }
      }
    }
  }
}
