// gpuaug_salt_and_pepper<T, C>: whole pixels become salt (p[8]: 255 or 1.0), pepper (0),
// or stay. Pixel x of row y of sample n draws r = lane x % 4 of
// philox4x32_10(x / 4, y, n, 1; seed): salt if r < t_salt, pepper if r < t_noisy.
// params: [t_noisy lo16, hi, t_salt lo16, hi, seed chunks 0..3, salt value, n].
// Same integer decisions as the Numba twin (kernels/numba/salt_and_pepper.py).
//
// Launch: grid (ceil(max_n(h * chunks) / blockDim.x), min(N, 65535)); a thread owns
// PPT = 16 / sizeof(T) pixels of a row (PPT / 4 Philox calls), i.e. C 16-byte vectors
// where the row is dense and aligned.
#include "common.cuh"
#include "philox.cuh"

template <typename T, int C>
__global__ void gpuaug_salt_and_pepper(const gpuaug::i64* src_tab, const gpuaug::i64* dst_tab,
                                       const float* params, int P, int n) {
  using namespace gpuaug;
  constexpr int PPT = 16 / sizeof(T);
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (int s = blockIdx.y; s < n; s += gridDim.y) {
    const Sample d = sample_at(dst_tab, s);
    const int cpr = (d.w + PPT - 1) / PPT;
    if (t >= (long long)cpr * d.h) continue;
    const Sample src = sample_at(src_tab, s);
    const int y = (int)(t / cpr);
    const int x0 = (int)(t - (long long)y * cpr) * PPT;
    const float* p = params + (i64)s * P;
    const unsigned long long t_noisy = threshold(p), t_salt = threshold(p + 2);
    unsigned int k0, k1;
    seed_key(p + 4, k0, k1);
    const T salt = from_float<T>(p[8]), pepper = from_float<T>(0.f);
    // 0: keep, 1: pepper, 2: salt
    int what[PPT];
#pragma unroll
    for (int j = 0; j < PPT / 4; ++j) {
      const u32x4 r = philox4x32_10((unsigned int)(x0 / 4 + j), (unsigned int)y, (unsigned int)p[9], 1u, k0, k1);
#pragma unroll
      for (int l = 0; l < 4; ++l)
        what[4 * j + l] = r.v[l] < t_salt ? 2 : (r.v[l] < t_noisy ? 1 : 0);
    }
    const T* srow = pixel<T>(src, y, 0);
    T* drow = pixel<T>(d, y, 0);
    const bool dense = src.sx == C && src.sc == 1 && d.sx == C && d.sc == 1;
    if (dense && x0 + PPT <= d.w && aligned16(srow + x0 * C) && aligned16(drow + x0 * C)) {
#pragma unroll
      for (int v = 0; v < C; ++v) {  // vector v holds elements [16 v, 16 v + 16) bytes of the chunk
        vec16 a = load16(srow + x0 * C + v * PPT);
#pragma unroll
        for (int j = 0; j < PPT; ++j) {
          const int w = what[(v * PPT + j) / C];
          if (w) vset<T>(a, j, w == 2 ? salt : pepper);
        }
        store16(drow + x0 * C + v * PPT, a);
      }
    } else {
#pragma unroll
      for (int j = 0; j < PPT; ++j) {
        const int x = x0 + j;
        if (x < d.w) {
          const T* i = pixel<T>(src, y, x);
          T* o = pixel<T>(d, y, x);
#pragma unroll
          for (int c = 0; c < C; ++c)
            o[c * d.sc] = what[j] == 2 ? salt : (what[j] == 1 ? pepper : ldg_elem(i + c * src.sc));
        }
      }
    }
  }
}
