// gpuaug_salt_and_pepper<T, C>: whole pixels become salt (p[8]: 255 or 1.0), pepper (0),
// or stay. Pixel x of row y of sample n draws r = lane x % 4 of
// philox4x32_10(x / 4, y, n, 1; seed): salt if r < t_salt, pepper if r < t_noisy.
// params: [t_noisy lo16, hi, t_salt lo16, hi, seed chunks 0..3, salt value, n].
// Same integer decisions as the Numba twin (kernels/numba/salt_and_pepper.py).
// Launch: replace_rows (rowvec.cuh); a thread's 16 / sizeof(T) pixels take 1-4 Philox calls.
#include "common.cuh"
#include "philox.cuh"

namespace {
template <typename T>
struct SaltPepper {
  static constexpr int PPT = gpuaug::replace_ppt(sizeof(T));
  __device__ __forceinline__ void decide(const float* p, const gpuaug::Sample&, int, int y, int x0,
                                         int (&what)[PPT]) const {
    using namespace gpuaug;
    const unsigned long long t_noisy = threshold(p), t_salt = threshold(p + 2);
    unsigned int k0, k1;
    seed_key(p + 4, k0, k1);
#pragma unroll
    for (int j = 0; j < PPT / 4; ++j) {
      const u32x4 r = philox4x32_10((unsigned int)(x0 / 4 + j), (unsigned int)y, (unsigned int)p[9], 1u, k0, k1);
#pragma unroll
      for (int l = 0; l < 4; ++l) what[4 * j + l] = r.v[l] < t_salt ? 2 : (r.v[l] < t_noisy ? 1 : 0);
    }
  }
  T salt, pepper;
  __device__ __forceinline__ void prepare(const float* p) {
    salt = gpuaug::from_float<T>(p[8]);
    pepper = gpuaug::from_float<T>(0.f);
  }
  // 1: pepper, 2: salt
  __device__ __forceinline__ T value(int w, int) const { return w == 2 ? salt : pepper; }
};
}  // namespace

template <typename T, int C>
__global__ void gpuaug_salt_and_pepper(const gpuaug::i64* src_tab, const gpuaug::i64* dst_tab,
                                       GPUAUG_PARAMS params, int P, int n) {
  gpuaug::replace_rows<T, C>(src_tab, dst_tab, params, P, n, SaltPepper<T>());
}
