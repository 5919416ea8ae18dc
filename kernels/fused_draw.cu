// gpuaug.Compose's device draws (draws="device"): ONE small launch before the fused stages
// draws every transform's per-sample parameters with Philox4x32-10 keyed by (seed, call
// counter, sample index) and builds the stages' parameter rows (fused.cuh's layout), so a
// call does no per-sample work on the host.
//
// gpuaug_policy_draw(prog, nrec, cst, n, k0, k1, counter, counter_dev, values, V, rows, P):
//   one thread per sample (grid ceil(n / 256) blocks, at most 256, then a grid stride). The policy
//   is a program of records (REC ints each: op, stream, value offset, constant offset, row
//   offset, argument) over double constants, made once per policy and input shape by
//   gpuaug/policy/_draw.py, which documents every op and holds the NumPy twin of the draws.
//   values: (n, V) float64, the drawn parameters (Compose.last_params reads them back);
//   rows: (n, P) float32, every fused stage's rows side by side.
//   The call counter is ``counter``, or, when counter_dev is not null, counter_dev[0], which
//   the launch then advances by one (a captured CUDA graph draws anew at every replay);
//   counter_dev[1] is the blocks' ticket, 0 between launches.
//
// Uniform j of transform ("stream") t for sample s: Philox block (s, t * 256 + j / 2, counter
// low, counter high) with the key, words 0-1 (even j) or 2-3 (odd j) as a 53-bit double,
// exactly as gpuaug.random.philox_uniforms. Every arithmetic step that makes a drawn value
// is an explicit round-to-nearest operation (no contraction into FMAs), so the values equal
// the NumPy twin's bit for bit; the rows' derived maths (cos, sin, matrix products and
// inverses) match the host's to float64 rounding, then round to float32.
#include "philox.cuh"

namespace gpuaug {
namespace draw {

enum : int {
  STAGE = 1, G_CONST = 2, G_FLIP = 3, G_ROT = 4, G_AFFINE = 5, G_RRC = 6, G_CROP = 7, G_END = 8, G_PERSP = 9,
  C_JITTER = 10, C_GRAY = 11, C_PERM = 12, C_GAMMA = 13, C_SOLARIZE = 14, C_POSTERIZE = 15, C_INVERT = 16,
  A_BEGIN = 17, A_END = 18
};
constexpr int REC = 6;
constexpr int P_INTERP = 0, P_MAP = 2;

struct Rng {
  unsigned k0, k1, s, c1, c2, c3;
  __device__ double u(int j) const {
    const u32x4 r = philox4x32_10(s, c1 + (unsigned)(j >> 1), c2, c3, k0, k1);
    const unsigned a = r.v[2 * (j & 1)] >> 5, b = r.v[2 * (j & 1) + 1] >> 6;
    return __dmul_rn(__dadd_rn(__dmul_rn((double)a, 67108864.0), (double)b), 1.0 / 9007199254740992.0);
  }
};

__device__ __forceinline__ double lerp(double lo, double span, double u) { return __dadd_rn(lo, __dmul_rn(span, u)); }

// cos and sin of degrees, exact at multiples of 90 (gpuaug.geometry.cos_sin).
__device__ __forceinline__ void cos_sin(double deg, double& c, double& s) {
  const double q = deg / 90.0, qr = rint(q);
  if (q == qr) {
    const int k = (int)(qr - 4.0 * floor(qr / 4.0));
    c = k == 0 ? 1.0 : k == 2 ? -1.0 : 0.0;
    s = k == 1 ? 1.0 : k == 3 ? -1.0 : 0.0;
    return;
  }
  const double r = deg * 0.017453292519943295;
  c = cos(r);
  s = sin(r);
}

// m = a m (3x3, row-major)
__device__ __forceinline__ void left_mul(const double* a, double* m) {
  double r[9];
#pragma unroll
  for (int i = 0; i < 3; ++i)
#pragma unroll
    for (int j = 0; j < 3; ++j) r[3 * i + j] = a[3 * i] * m[j] + a[3 * i + 1] * m[3 + j] + a[3 * i + 2] * m[6 + j];
#pragma unroll
  for (int k = 0; k < 9; ++k) m[k] = r[k];
}

// torchvision's affine map (policy/transforms.affine_matrices), source -> destination.
__device__ void affine(double angle, double tx, double ty, double scale, double shx, double shy, double cx,
                       double cy, double* m) {
  double cr, sr;
  cos_sin(angle, cr, sr);
  double a = cr, b = -sr, c = sr, d = cr;
  if (shx != 0.0 || shy != 0.0) {
    const double sx = shx * 0.017453292519943295, sy = shy * 0.017453292519943295;
    const double cos_sy = cos(sy), tan_sx = tan(sx);
    double crs, srs;
    cos_sin(angle - shy, crs, srs);
    a = crs / cos_sy;
    c = srs / cos_sy;
    b = -(a * tan_sx + sr);
    d = cr - c * tan_sx;
  }
  m[0] = a * scale; m[1] = b * scale; m[3] = c * scale; m[4] = d * scale;
  m[2] = cx + tx - m[0] * cx - m[1] * cy;
  m[5] = cy + ty - m[3] * cx - m[4] * cy;
  m[6] = m[7] = 0.0; m[8] = 1.0;
}

__device__ __forceinline__ void identity(double* m) {
#pragma unroll
  for (int k = 0; k < 9; ++k) m[k] = (k % 4) == 0 ? 1.0 : 0.0;
}

// rgb' = g [a; 0 0 0 1]: the float-semantics run of grayscale / permutation steps as one 3x4 matrix.
__device__ __forceinline__ void affine_then(const double* g, double* a) {
  double r[12];
#pragma unroll
  for (int i = 0; i < 3; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      r[4 * i + j] = g[4 * i] * a[j] + g[4 * i + 1] * a[4 + j] + g[4 * i + 2] * a[8 + j] +
                     (j == 3 ? g[4 * i + 3] : 0.0);
#pragma unroll
  for (int k = 0; k < 12; ++k) a[k] = r[k];
}

// The homography sending the 4 points src (x, y) onto dst (policy/transforms.homographies, as
// OpenCV's getPerspectiveTransform): the 8 x 8 system by Gaussian elimination, partial pivoting.
__device__ void homography(const double* src, const double* dst, double* m) {
  double a[8][9];
  for (int k = 0; k < 4; ++k) {
    const double x = src[2 * k], y = src[2 * k + 1], u = dst[2 * k], v = dst[2 * k + 1];
    const double r0[9] = {x, y, 1.0, 0.0, 0.0, 0.0, -u * x, -u * y, u};
    const double r1[9] = {0.0, 0.0, 0.0, x, y, 1.0, -v * x, -v * y, v};
    for (int j = 0; j < 9; ++j) {
      a[2 * k][j] = r0[j];
      a[2 * k + 1][j] = r1[j];
    }
  }
  for (int c = 0; c < 8; ++c) {
    int piv = c;
    for (int r = c + 1; r < 8; ++r)
      if (fabs(a[r][c]) > fabs(a[piv][c])) piv = r;
    if (piv != c)
      for (int j = 0; j < 9; ++j) {
        const double t = a[c][j];
        a[c][j] = a[piv][j];
        a[piv][j] = t;
      }
    for (int r = c + 1; r < 8; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int j = c; j < 9; ++j) a[r][j] -= f * a[c][j];
    }
  }
  for (int r = 7; r >= 0; --r) {
    double t = a[r][8];
    for (int j = r + 1; j < 8; ++j) t -= a[r][j] * m[j];
    m[r] = t / a[r][r];
  }
  m[8] = 1.0;
}

__device__ void sample(const int* prog, int nrec, const double* cst, unsigned s, unsigned k0, unsigned k1,
                       unsigned long long ctr, double* val, float* row) {
  double M[9], A[12];
  identity(M);
  for (int k = 0; k < 12; ++k) A[k] = 0.0;
  for (int r = 0; r < nrec; ++r) {
    const int* I = prog + REC * r;
    const int op = I[0];
    const Rng g{k0, k1, s, (unsigned)I[1] << 8, (unsigned)(ctr & 0xFFFFFFFFull), (unsigned)(ctr >> 32)};
    const double* c = cst + I[3];
    double* v = val + I[2];
    float* o = row + I[4];
    double m[9];
    identity(m);
    switch (op) {
      case STAGE:  // the row's constant part (fill, write scale and bias, in_scale, ...)
        for (int k = 0; k < I[5]; ++k) o[k] = __double2float_rn(c[k]);
        identity(M);
        continue;
      case G_CONST:
        for (int k = 0; k < 9; ++k) m[k] = c[k];
        break;
      case G_FLIP: {  // c: p, row (0: x / horizontal, 1: y), size - 1
        const bool on = g.u(0) < c[0];
        v[0] = on ? 1.0 : 0.0;
        const int rr = (int)c[1];
        m[4 * rr] = on ? -1.0 : 1.0;
        m[3 * rr + 2] = on ? c[2] : 0.0;
        break;
      }
      case G_ROT: {  // c: lo, span, cx, cy
        const double ang = lerp(c[0], c[1], g.u(0));
        v[0] = ang;
        affine(-ang, 0.0, 0.0, 1.0, 0.0, 0.0, c[2], c[3], m);
        break;
      }
      case G_AFFINE: {  // c: deg lo, span, has_t, mx, my, has_s, s lo, span, nshear, shx lo, span, shy lo, span, cx, cy
        int j = 0;
        const double ang = lerp(c[0], c[1], g.u(j++));
        double tx = 0.0, ty = 0.0, sc = 1.0, shx = 0.0, shy = 0.0;
        if (c[2] != 0.0) {
          tx = rint(__dmul_rn(c[3], __dsub_rn(2.0 * g.u(j++), 1.0)));
          ty = rint(__dmul_rn(c[4], __dsub_rn(2.0 * g.u(j++), 1.0)));
        }
        if (c[5] != 0.0) sc = lerp(c[6], c[7], g.u(j++));
        if (c[8] >= 2.0) shx = lerp(c[9], c[10], g.u(j++));
        if (c[8] >= 4.0) shy = lerp(c[11], c[12], g.u(j++));
        v[0] = ang; v[1] = tx; v[2] = ty; v[3] = sc; v[4] = shx; v[5] = shy;
        affine(ang, tx, ty, sc, shx, shy, c[13], c[14], m);
        break;
      }
      case G_RRC: {  // c: H W, area scale lo span, log-ratio lo span, fallback h w, out h w, attempts
        const double H = c[0], W = c[1];
        const int attempts = (int)c[10];
        double bh = c[6], bw = c[7];
        bool found = false;
        for (int k = 0; k < attempts && !found; ++k) {
          const double area = __dmul_rn(__dmul_rn(H, W), lerp(c[2], c[3], g.u(k)));
          const double ar = exp(lerp(c[4], c[5], g.u(attempts + k)));
          const double w = rint(sqrt(__dmul_rn(area, ar))), h = rint(sqrt(__ddiv_rn(area, ar)));
          if (w > 0.0 && w <= W && h > 0.0 && h <= H) {
            found = true;
            bh = h;
            bw = w;
          }
        }
        double top, left;
        if (found) {
          const double st = H - bh + 1.0, sl = W - bw + 1.0;
          top = fmin(floor(__dmul_rn(g.u(2 * attempts), st)), st - 1.0);
          left = fmin(floor(__dmul_rn(g.u(2 * attempts + 1), sl)), sl - 1.0);
        } else {
          top = floor((H - bh) / 2.0);
          left = floor((W - bw) / 2.0);
        }
        v[0] = top; v[1] = left; v[2] = bh; v[3] = bw;
        const double fy = c[8] / bh, fx = c[9] / bw;
        m[0] = fx; m[4] = fy;
        m[2] = (0.5 - left) * fx - 0.5;
        m[5] = (0.5 - top) * fy - 0.5;
        break;
      }
      case G_CROP: {  // c: top lo, top span, left lo, left span
        const double top = c[0] + fmin(floor(__dmul_rn(g.u(0), c[1])), c[1] - 1.0);
        const double left = c[2] + fmin(floor(__dmul_rn(g.u(1), c[3])), c[3] - 1.0);
        v[0] = top; v[1] = left;
        m[2] = -left;
        m[5] = -top;
        break;
      }
      case G_PERSP: {  // c: p, H, W, bh, bw (corner ranges), in the host's draw order
        const bool on = g.u(0) < c[0];
        const double H = c[1], W = c[2], bh = c[3], bw = c[4];
        const double lo[8] = {0.0, 0.0, W - bw, 0.0, W - bw, H - bh, 0.0, H - bh};
        double pts[8];
        for (int k = 0; k < 8; ++k) {
          const double span = (k & 1) ? bh : bw;
          pts[k] = lo[k] + fmin(floor(__dmul_rn(g.u(1 + k), span)), span - 1.0);
          v[1 + k] = pts[k];
        }
        v[0] = on ? 1.0 : 0.0;
        if (on) {
          const double start[8] = {0.0, 0.0, W - 1.0, 0.0, W - 1.0, H - 1.0, 0.0, H - 1.0};
          homography(start, pts, m);
        }
        break;
      }
      case G_END: {  // the stage's map: inverse of M, and the interpolation (arg: any bilinear)
        const double a = M[0], b = M[1], cc = M[2], d = M[3], e = M[4], f = M[5], gg = M[6], h = M[7], i = M[8];
        double inv[9];
        inv[0] = e * i - f * h; inv[3] = f * gg - d * i; inv[6] = d * h - e * gg;
        const double det = a * inv[0] + b * inv[3] + cc * inv[6];
        inv[1] = cc * h - b * i; inv[4] = a * i - cc * gg; inv[7] = b * gg - a * h;
        inv[2] = b * f - cc * e; inv[5] = cc * d - a * f; inv[8] = a * e - b * d;
        bool integer = true;
        for (int k = 0; k < 9; ++k) {
          inv[k] /= det;
          if (k < 6) integer &= inv[k] == rint(inv[k]);
          o[P_MAP + k] = __double2float_rn(inv[k]);
        }
        if (integer) {
          const double a0 = fabs(inv[0]), a1 = fabs(inv[1]), a3 = fabs(inv[3]), a4 = fabs(inv[4]);
          integer = a0 + a1 == 1.0 && a3 + a4 == 1.0 && a0 + a3 == 1.0 && inv[6] == 0.0 && inv[7] == 0.0 &&
                    inv[8] == 1.0;
        }
        o[P_INTERP] = (I[5] && !integer) ? 1.f : 0.f;
        continue;
      }
      case C_JITTER: {  // c: p, then (lo, span, given) for brightness, contrast, saturation, hue
        int j = 0;
        const bool on = g.u(j++) < c[0];
        v[0] = on ? 1.0 : 0.0;
        for (int q = 0; q < 4; ++q) {
          const double neutral = q == 3 ? 0.0 : 1.0;
          double x = neutral;
          if (c[1 + 3 * q + 2] != 0.0) {
            x = lerp(c[1 + 3 * q], c[1 + 3 * q + 1], g.u(j++));
            if (!on && c[0] != 1.0) x = neutral;
          }
          v[1 + q] = x;
          o[q] = __double2float_rn(x);
        }
        continue;
      }
      case C_GRAY: {  // c: p, weights r g b; arg 1: into the affine run
        const bool on = g.u(0) < c[0];
        v[0] = on ? 1.0 : 0.0;
        if (I[5]) {
          double gm[12];
          for (int rr = 0; rr < 3; ++rr)
            for (int q = 0; q < 4; ++q) gm[4 * rr + q] = q == 3 ? 0.0 : on ? c[1 + q] : (q == rr ? 1.0 : 0.0);
          affine_then(gm, A);
        } else {
          o[0] = on ? 1.f : 0.f;
        }
        continue;
      }
      case C_PERM: {  // a random order of 3 channels (argsort of 3 uniforms); arg 1: into the affine run
        const double u0 = g.u(0), u1 = g.u(1), u2 = g.u(2);
        int p0, p1, p2;  // argsort, ties broken by index (as a stable sort)
        if (u0 <= u1) {
          if (u1 <= u2) { p0 = 0; p1 = 1; p2 = 2; }
          else if (u0 <= u2) { p0 = 0; p1 = 2; p2 = 1; }
          else { p0 = 2; p1 = 0; p2 = 1; }
        } else {
          if (u0 <= u2) { p0 = 1; p1 = 0; p2 = 2; }
          else if (u1 <= u2) { p0 = 1; p1 = 2; p2 = 0; }
          else { p0 = 2; p1 = 1; p2 = 0; }
        }
        v[0] = p0; v[1] = p1; v[2] = p2;
        double pm[12];
        for (int k = 0; k < 12; ++k) pm[k] = 0.0;
        pm[p0] = 1.0; pm[4 + p1] = 1.0; pm[8 + p2] = 1.0;
        if (I[5]) {
          affine_then(pm, A);
        } else {
          for (int k = 0; k < 12; ++k) o[k] = (float)pm[k];
        }
        continue;
      }
      case C_GAMMA: {  // c: p, lo, span (gamma_limit, before / 100)
        const bool on = g.u(0) < c[0];
        const double gm = lerp(c[1], c[2], g.u(1)) / 100.0;
        v[0] = on ? 1.0 : 0.0;
        v[1] = on ? gm : 1.0;
        o[0] = __double2float_rn(v[1]);
        o[1] = 1.f;
        continue;
      }
      case C_SOLARIZE: {  // c: p, the float32 threshold
        const bool on = g.u(0) < c[0];
        v[0] = on ? 1.0 : 0.0;
        o[0] = on ? __double2float_rn(c[1]) : __int_as_float(0x7f800000);
        continue;
      }
      case C_POSTERIZE: {  // c: p, bits
        const bool on = g.u(0) < c[0];
        v[0] = on ? 1.0 : 0.0;
        o[0] = on ? __double2float_rn(c[1]) : 0.f;
        continue;
      }
      case C_INVERT: {
        const bool on = g.u(0) < c[0];
        v[0] = on ? 1.0 : 0.0;
        o[0] = on ? 1.f : 0.f;
        continue;
      }
      case A_BEGIN:
        for (int k = 0; k < 12; ++k) A[k] = (k % 5) == 0 ? 1.0 : 0.0;
        continue;
      case A_END:
        for (int k = 0; k < 12; ++k) o[k] = __double2float_rn(A[k]);
        continue;
      default:
        continue;
    }
    left_mul(m, M);  // geometry: M = m M
  }
}

}  // namespace draw
}  // namespace gpuaug

__global__ void __launch_bounds__(256) gpuaug_policy_draw(
    const int* prog, int nrec, const double* cst, int n, unsigned k0, unsigned k1, unsigned long long counter,
    unsigned long long* counter_dev, double* values, int V, float* rows, int P) {
  __shared__ unsigned long long ctr_s;
  if (threadIdx.x == 0) ctr_s = counter_dev ? *(volatile unsigned long long*)counter_dev : counter;
  __syncthreads();
  const unsigned long long ctr = ctr_s;
  for (int s = blockIdx.x * blockDim.x + threadIdx.x; s < n; s += gridDim.x * blockDim.x)
    gpuaug::draw::sample(prog, nrec, cst, (unsigned)s, k0, k1, ctr, values + (gpuaug::i64)s * V,
                         rows + (gpuaug::i64)s * P);
  // The device counter advances once every block has read it: the last block to take a ticket
  // (counter_dev[1], reset for the next launch) bumps it.
  if (counter_dev && threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(counter_dev + 1, 1ull) == (unsigned long long)(gridDim.x - 1)) {
      counter_dev[0] = ctr + 1ull;
      counter_dev[1] = 0ull;
    }
  }
}
