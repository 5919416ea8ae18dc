// rotate's per-sample inverse map (the (n, 6) affine matrices, float64) from parameters on the
// GPU: gpuaug.ops._warp.rotation_inverse's maths for device angles, in one launch of the
// library's launcher (formerly a CuPy ElementwiseKernel, whose call costs the host several
// times a launch). Compiled with --fmad=false (gpuaug.ops._warp): every product and sum
// rounds as the host's NumPy maths rounds it.
//
// Each input (angle a, scale s, centre cx, cy) is a device column read at p[i * stride] or,
// where its pointer is null, the value after it (one value for the batch).
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

// The inverse map of sample i from its angle a, scale s and centre (cx, cy), as six doubles.
__device__ __forceinline__ void rotation_inverse_of(double a, double s, double cx, double cy, double* m) {
  double r = a * (M_PI / 180);
  double c = cos(r), sn = sin(r);
  double q90 = a / 90.0;
  double q = rint(q90);
  if (q90 == q) {  // multiples of 90 degrees: exact, as geometry.cos_sin
    double md = fmod(q, 4.0);
    if (md < 0) md += 4.0;
    int k = (int)md;
    c = k == 0 ? 1.0 : (k == 2 ? -1.0 : 0.0);
    sn = k == 1 ? 1.0 : (k == 3 ? -1.0 : 0.0);
  }
  double ks = 1.0 / s;
  double a00 = c * ks, a01 = -sn * ks;
  m[0] = a00; m[1] = a01; m[3] = -a01; m[4] = a00;
  m[2] = (cx - a00 * cx) - a01 * cy;
  m[5] = (cy + a01 * cx) - a00 * cy;
}

#define GPUAUG_ROTATION_INPUTS                                                      \
  int i = blockIdx.x * blockDim.x + threadIdx.x;                                  \
  if (i >= n) return;                                                             \
  double a = pa ? pa[i * sa] : va, s = ps ? ps[i * ss] : vs;                      \
  double cx = pcx ? pcx[i * scx] : vcx, cy = pcy ? pcy[i * scy] : vcy;            \
  double m[6];                                                                    \
  rotation_inverse_of(a, s, cx, cy, m);

extern "C" __global__ void gpuaug_rotation_inverse(
    const double* __restrict__ pa, long long sa, double va,
    const double* __restrict__ ps, long long ss, double vs,
    const double* __restrict__ pcx, long long scx, double vcx,
    const double* __restrict__ pcy, long long scy, double vcy,
    double* __restrict__ inv, int n) {
  GPUAUG_ROTATION_INPUTS
  for (int j = 0; j < 6; ++j) inv[6 * i + j] = m[j];
}

// The whole float32 parameter row of rotate's warp kernels for sample i (the layout of
// gpuaug.ops._warp.params_matrix: interpolation, border, the six map values, then c fill
// values), for device parameters with one fill for the batch: what params_matrix and the
// gather kernel would make from the (n, 6) matrices above, converted to float the same way,
// without the matrices' round trip through memory and the gather's launch.
extern "C" __global__ void gpuaug_rotation_rows(
    const double* __restrict__ pa, long long sa, double va,
    const double* __restrict__ ps, long long ss, double vs,
    const double* __restrict__ pcx, long long scx, double vcx,
    const double* __restrict__ pcy, long long scy, double vcy,
    float* __restrict__ rows, int n, double interp, double border, double fill, int c) {
  GPUAUG_ROTATION_INPUTS
  float* r = rows + (long long)i * (8 + c);
  r[0] = (float)interp; r[1] = (float)border;
  for (int j = 0; j < 6; ++j) r[2 + j] = (float)m[j];
  for (int j = 0; j < c; ++j) r[8 + j] = (float)fill;
}
