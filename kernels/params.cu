// Per-sample parameter matrix from device columns: one launch gathers every column of an op's
// (n, P) parameter matrix (O = float, what every kernel reads, or double) from its sources (device arrays of any numeric dtype and any
// strides, including the 0 strides of a broadcast value, and the block of host columns that
// arrived in one pinned upload), converting to double. It replaces a CuPy astype per column,
// a concatenate and a copy (about five launches per call).
//
// desc: per column group g, 6 int64 values: address, dtype code, row stride and column stride
// (in elements), column count k, first output column. Groups cover [0, P) without gaps.
// Dtype codes: 0 bool/uint8, 1 int8, 2 int32, 3 int64, 4 float32, 5 float64, 6 uint32, 7 int16,
// 8 uint16, 9 float16 (raw bits); 10: columns of the host block (`host`, n x d[2] doubles),
// the address field then holding the first column's index in that block.
#include "common.cuh"

template <typename O>
__global__ void gpuaug_gather_params(const long long* __restrict__ desc, int groups,
                                     const double* __restrict__ host, O* __restrict__ out,
                                     int P, int n) {
  long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)n * P) return;
  int row = (int)(idx / P), col = (int)(idx % P);
  for (int g = 0; g < groups; ++g) {
    const long long* d = desc + 6 * g;
    int first = (int)d[5], k = (int)d[4];
    if (col < first || col >= first + k) continue;
    long long e = (long long)row * d[2] + (long long)(col - first) * d[3];
    if (d[1] == 10) {  // a column of the host block: (n, d[2]) doubles, from column d[0]
      out[idx] = (O)host[e + d[0]];
      return;
    }
    const char* p = reinterpret_cast<const char*>(d[0]);
    double v;
    switch ((int)d[1]) {
      case 0: v = reinterpret_cast<const unsigned char*>(p)[e]; break;
      case 1: v = reinterpret_cast<const signed char*>(p)[e]; break;
      case 2: v = reinterpret_cast<const int*>(p)[e]; break;
      case 3: v = (double)reinterpret_cast<const long long*>(p)[e]; break;
      case 4: v = reinterpret_cast<const float*>(p)[e]; break;
      case 5: v = reinterpret_cast<const double*>(p)[e]; break;
      case 6: v = reinterpret_cast<const unsigned int*>(p)[e]; break;
      case 7: v = reinterpret_cast<const short*>(p)[e]; break;
      case 8: v = reinterpret_cast<const unsigned short*>(p)[e]; break;
      default: v = gpuaug::to_float(reinterpret_cast<const gpuaug::half*>(p)[e]); break;
    }
    out[idx] = (O)v;
    return;
  }
}
