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

extern "C" __global__ void gpuaug_rotation_inverse(
    const double* __restrict__ pa, long long sa, double va,
    const double* __restrict__ ps, long long ss, double vs,
    const double* __restrict__ pcx, long long scx, double vcx,
    const double* __restrict__ pcy, long long scy, double vcy,
    double* __restrict__ inv, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double a = pa ? pa[i * sa] : va, s = ps ? ps[i * ss] : vs;
  double cx = pcx ? pcx[i * scx] : vcx, cy = pcy ? pcy[i * scy] : vcy;
  double r = a * (M_PI / 180);
  double c = cos(r), sn = sin(r);
  double q90 = a / 90.0;
  double q = rint(q90);
  if (q90 == q) {  // multiples of 90 degrees: exact, as geometry.cos_sin
    double m = fmod(q, 4.0);
    if (m < 0) m += 4.0;
    int k = (int)m;
    c = k == 0 ? 1.0 : (k == 2 ? -1.0 : 0.0);
    sn = k == 1 ? 1.0 : (k == 3 ? -1.0 : 0.0);
  }
  double ks = 1.0 / s;
  double a00 = c * ks, a01 = -sn * ks;
  inv[6 * i + 0] = a00; inv[6 * i + 1] = a01; inv[6 * i + 3] = -a01; inv[6 * i + 4] = a00;
  inv[6 * i + 2] = (cx - a00 * cx) - a01 * cy;
  inv[6 * i + 5] = (cy + a01 * cx) - a00 * cy;
}
