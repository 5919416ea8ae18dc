// Host-side logic of gpuaug__Kernel that must match gpuaug's Python exactly (so the operator
// launches the kernels gpuaug launches, with the same parameter rows): plain C++ with no DALI or
// CUDA dependency, so tests/test_dali_native.py compiles it alone and checks it against the
// Python functions it mirrors, on machines without a GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace gpuaug_host {

// cos and sin of degrees, exact at multiples of 90 (gpuaug.geometry.cos_sin).
inline void cos_sin_deg(double deg, double *c, double *s) {
  const double r = deg * (M_PI / 180.0);  // numpy.deg2rad
  *c = std::cos(r);
  *s = std::sin(r);
  const double q90 = deg / 90.0;
  const double q = std::nearbyint(q90);  // numpy.round: half to even (default rounding mode)
  if (q90 == q) {
    const int k = static_cast<int>(((static_cast<long long>(q) % 4) + 4) % 4);
    static const double cs[4] = {1.0, 0.0, -1.0, 0.0}, sn[4] = {0.0, 1.0, 0.0, -1.0};
    *c = cs[k];
    *s = sn[k];
  }
}

// The "rotation" program, gpuaug/ops/_warp.py's rotation_inverse + params_matrix:
// r = [angle, scale, cx, cy, interp, border, fill as uint8, float16, float32] (cx/cy NaN: the
// image centre ((w - 1) / 2, (h - 1) / 2)) -> out = [interp, border, inverse (6), fill * C].
// ti: 0 uint8, 1 float16, 2 float32. Returns 1 when scale is 0.
inline int rotation_row(const float *r, int64_t h, int64_t w, int C, int ti, float *out) {
  const double angle = r[0], scale = r[1];
  if (scale == 0.0) return 1;
  const double cx = std::isnan(r[2]) ? (double(w) - 1) / 2 : double(r[2]);
  const double cy = std::isnan(r[3]) ? (double(h) - 1) / 2 : double(r[3]);
  double c, sn;
  cos_sin_deg(angle, &c, &sn);
  const double k = 1.0 / scale;
  const double a00 = c * k, a01 = -sn * k;
  out[0] = r[4];
  out[1] = r[5];
  out[2] = float(a00);
  out[3] = float(a01);
  out[4] = float(cx - a00 * cx - a01 * cy);
  out[5] = float(-a01);
  out[6] = float(a00);
  out[7] = float(cy + a01 * cx - a00 * cy);
  for (int ch = 0; ch < C; ++ch) out[8 + ch] = r[6 + ti];
  return 0;
}

// The "affine" program, _warp.invert_affine + check_invertible + params_matrix:
// r = [m (2 x 3, source -> destination), inverse_map, interp, border, fill as uint8 / float16 /
// float32] -> out = [interp, border, destination -> source (6), fill * C]. Returns 1 for a
// singular (or numerically singular) matrix; *det receives its determinant.
inline int affine_row(const float *r, int C, int ti, float *out, double *det) {
  const double a = r[0], b = r[1], c = r[2], d = r[3], e = r[4], f = r[5];
  double inv[6];
  *det = 0;
  if (r[6] != 0.f) {
    for (int k = 0; k < 6; ++k) inv[k] = r[k];
  } else {
    *det = a * e - b * d;
    const double norms = std::hypot(a, b) * std::hypot(d, e);
    const double q = 1.0 / *det;
    inv[0] = e * q;
    inv[1] = -b * q;
    inv[3] = -d * q;
    inv[4] = a * q;
    inv[2] = -(inv[0] * c + inv[1] * f);
    inv[5] = -(inv[3] * c + inv[4] * f);
    bool finite = true;
    for (double v : inv) finite = finite && std::isfinite(v);
    if (!(std::fabs(*det) > 1e-12 * norms) || !finite) return 1;  // _warp.SINGULAR_RATIO
  }
  out[0] = r[7];
  out[1] = r[8];
  for (int k = 0; k < 6; ++k) out[2 + k] = float(inv[k]);
  for (int ch = 0; ch < C; ++ch) out[8 + ch] = r[9 + ti];
  return 0;
}

// The "perspective" program, _warp.invert_perspective + check_invertible + params_matrix:
// r = [m (3 x 3, source -> destination), inverse_map, interp, border, fill as uint8 / float16 /
// float32] -> out = [interp, border, destination -> source (9), fill * C]. Returns 1 for a
// singular (or numerically singular) matrix; *det receives its determinant.
inline int perspective_row(const float *r, int C, int ti, float *out, double *det) {
  double m[9], inv[9];
  for (int k = 0; k < 9; ++k) m[k] = r[k];
  *det = 0;
  if (r[9] != 0.f) {
    for (int k = 0; k < 9; ++k) inv[k] = m[k];
  } else {
    const double a = m[0], b = m[1], c = m[2], d = m[3], e = m[4], f = m[5], g = m[6], h = m[7], i = m[8];
    inv[0] = e * i - f * h, inv[3] = f * g - d * i, inv[6] = d * h - e * g;
    *det = a * inv[0] + b * inv[3] + c * inv[6];
    inv[1] = c * h - b * i, inv[4] = a * i - c * g, inv[7] = b * g - a * h;
    inv[2] = b * f - c * e, inv[5] = c * d - a * f, inv[8] = a * e - b * d;
    const double q = 1.0 / *det;
    bool finite = true;
    for (double &v : inv) {
      v *= q;
      finite = finite && std::isfinite(v);
    }
    double norms = 1.0;
    for (int row = 0; row < 3; ++row)
      norms *= std::sqrt(m[3 * row] * m[3 * row] + m[3 * row + 1] * m[3 * row + 1] + m[3 * row + 2] * m[3 * row + 2]);
    if (!(std::fabs(*det) > 1e-12 * norms) || !finite) return 1;  // _warp.SINGULAR_RATIO
  }
  out[0] = r[10];
  out[1] = r[11];
  for (int k = 0; k < 9; ++k) out[2 + k] = float(inv[k]);
  for (int ch = 0; ch < C; ++ch) out[11 + ch] = r[12 + ti];
  return 0;
}

// v rounded to float16 (round to nearest even, as NumPy's astype(float16)), back as a double;
// no compiler half type needed.
inline double round_half(double v) {
  if (!std::isfinite(v) || v == 0.0) return v;
  const double a = std::fabs(v);
  if (a >= 65520.0) return std::copysign(INFINITY, v);
  int e;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  const int lead = std::max(e - 1, -14);  // the leading bit's exponent; subnormals below 2^-14
  const double ulp = std::ldexp(1.0, lead - 10);
  return std::copysign(std::nearbyint(a / ulp) * ulp, v);
}

// gpuaug.ops.crop's center_offset: torchvision's centre-crop offset along one axis (negative:
// zero padding before the image).
inline int64_t center_offset(int64_t size, int64_t crop) {
  if (crop > size) return -((crop - size) / 2);
  return static_cast<int64_t>(std::nearbyint(double(size - crop) / 2.0));  // Python's round: half to even
}

// gpuaug/ops/_colour.py's packed_layout: every sample packed HWC (tables of 6 int64 per sample:
// address, h, w, stride_y, stride_x, stride_c in elements) and 16-byte aligned at a common pixel
// k < 16 in src and dst (dst may be null). *items: the largest per-sample work-item count.
inline bool packed_layout(const int64_t *st, const int64_t *dt, int n, int ci, int co, int es, long long *items) {
  const int g = 16 / es;
  *items = 0;
  auto packed = [](const int64_t *t, int c) { return t[5] == 1 && t[4] == c && (t[3] == t[2] * c || t[1] == 1); };
  for (int i = 0; i < n; ++i) {
    const int64_t *a = st + 6 * i, *b = dt ? dt + 6 * i : nullptr;
    if (!packed(a, ci) || (b && !packed(b, co))) return false;
    int head = -1;
    for (int k = 0; k < 16 && head < 0; ++k) {
      bool hit = (uint64_t(a[0]) + uint64_t(k) * ci * es) % 16 == 0;
      if (b) hit = hit && (uint64_t(b[0]) + uint64_t(k) * co * es) % 16 == 0;
      if (hit) head = k;
    }
    if (head < 0) return false;
    const long long hw = a[1] * a[2];
    const long long ng = hw > head ? (hw - head) / g : 0;
    *items = std::max(*items, hw - ng * (g - 1));
  }
  return true;
}

// _colour.plan's partial sums per sample for the grayscale mean.
inline int mean_parts(int sms, int n, long long items) {
  const long long a = (4LL * sms + n - 1) / n, b = (items + 255) / 256;
  return static_cast<int>(std::max<long long>(1, std::min<long long>(32, std::min(a, b))));
}

// Every sample h x w x C, back to back from the first one, in the input and in the output
// (_warp.dense_fast's C-contiguous batches).
inline bool dense_batch(const int64_t *st, const int64_t *dt, int n, int C, int es) {
  const int64_t bytes = st[1] * st[2] * C * es, obytes = dt[1] * dt[2] * C * es;
  for (int i = 0; i < n; ++i) {
    const int64_t *a = st + 6 * i, *b = dt + 6 * i;
    if (a[1] != st[1] || a[2] != st[2] || b[1] != dt[1] || b[2] != dt[2] || a[0] != st[0] + i * bytes ||
        b[0] != dt[0] + i * obytes)
      return false;
  }
  return true;
}

// _intensity.cmn_vec_fast: 1 (planar, CHW) or 0 (interleaved) when the vector kernel can store
// four output values at a time (every row a whole number of aligned 4-value vectors), else -1.
// dt: the output's tables (strides in elements); osz: output element size.
inline int cmn_vec_layout(const int64_t *dt, int n, int co, int osz) {
  const int64_t unit = 4 * osz;
  bool planar = true, inter = true;
  for (int i = 0; i < n; ++i) {
    const int64_t *t = dt + 6 * i;
    planar = planar && t[4] == 1;
    inter = inter && t[4] == co && t[5] == 1;
  }
  if (!planar && !inter) return -1;
  for (int i = 0; i < n; ++i) {
    const int64_t *t = dt + 6 * i;
    if (t[2] % 4 || t[0] % unit || (t[3] * osz) % unit) return -1;
    if (planar && co > 1 && (t[5] * osz) % unit) return -1;
  }
  return planar ? 1 : 0;
}

// ---- gpuaug.Compose's fused stage (gpuaug/policy/_fused.py's build) -------------------------
// A stage's parameter row, per sample, from uniform [0, 1) numbers (the policy's own generator,
// replayed by Pcg64 below; or DALI's fn.random.uniform of the stage's width) and the image's size: the
// transforms' own sampling rules (gpuaug/policy/transforms.py's sample(): value = lo + (hi - lo)
// u, applied when u < p), the composed destination -> source matrix (geometry), the colour
// program's blocks, the write's per-channel scale and bias. The plan (what the graph side knows
// when it defines the pipeline) is a list of geometry codes and a list of colour codes with
// their constants (doubles, parsed from text: exact); the draws are read in the same order.
// A range that is not given is (neutral, neutral).
//
// Geometry (codes, constants, uniforms per sample):
//   1 HFLIP / 2 VFLIP       [p]                                   [apply]
//   3 ROTATE                [has_center, cx, cy (pixel-centre units), lo, hi]    [angle]
//   4 AFFINE                [has_center, cx, cy, translate fx, fy, angle lo, hi, scale lo, hi,
//                            shear_x lo, hi, shear_y lo, hi]     [angle, tx, ty, scale, shear_x, shear_y]
//                           (tx = rint(fx w (2 u - 1)), as gpuaug.random.affine)
//   5 RESIZE / 6 CENTER_CROP [H, W]                                -
// Colour (codes as kernels/fused.cuh's steps):
//   1 JITTER   [p, brightness lo, hi, contrast lo, hi, saturation lo, hi, hue lo, hi]
//                                                                 [apply, b, c, s, h]
//   2 GRAY     [p] [apply]      4 GAMMA [p, lo, hi] (percent) [apply, gamma]
//   5 SOLARIZE [p, threshold] [apply]      6 POSTERIZE [p, bits] [apply]     7 INVERT [p] [apply]
enum { G_HFLIP = 1, G_VFLIP = 2, G_ROTATE = 3, G_AFFINE = 4, G_RESIZE = 5, G_CENTER_CROP = 6 };
enum { K_JITTER = 1, K_GRAY = 2, K_AFFINE = 3, K_GAMMA = 4, K_SOLARIZE = 5, K_POSTERIZE = 6, K_INVERT = 7 };
enum { F_INTERP = 0, F_MAP = 2, F_FILL = 11, F_SCALE = 15, F_BIAS = 19, F_IN = 23, F_COLOUR = 24 };
static const double kGrayWeights[3] = {0.2989, 0.587, 0.114};

struct PolicyPlan {
  const int *geo = nullptr;
  int ngeo = 0;
  const double *geo_args = nullptr;
  const int *colour = nullptr;
  int ncolour = 0;
  const double *colour_args = nullptr;
  int bilinear = 0, has_fill = 0, sem_uint8 = 1;
  const double *fill = nullptr;  // 1 value (every channel) or one per channel
  int nfill = 0;
  double in_scale = 1.0;
  const double *write = nullptr;  // C=1: scale, bias; C=3: scale (3), bias (3); C=4: scale (4), bias (4)
};

inline int geo_args_of(int code) {
  return code == G_ROTATE ? 5 : code == G_AFFINE ? 13 : code >= G_RESIZE ? 2 : 1;
}
inline int geo_draws_of(int code) { return code == G_AFFINE ? 6 : code >= G_RESIZE ? 0 : 1; }
inline int colour_args_of(int code) {
  return code == K_JITTER ? 9 : code == K_GAMMA ? 3 : code == K_SOLARIZE || code == K_POSTERIZE ? 2 : 1;
}
// gpuaug.random.uniform's rule: lo + (hi - lo) u.
inline double lerp(const double *lohi, double u) { return lohi[0] + (lohi[1] - lohi[0]) * u; }
// gpuaug.random.bernoulli's rule: u < p.
inline bool coin(double p, double u) { return u < p; }
inline int colour_draws_of(int code) { return code == K_JITTER ? 5 : code == K_GAMMA ? 2 : 1; }
inline int step_width(int code) { return code == K_JITTER ? 4 : code == K_AFFINE ? 12 : code == K_GAMMA ? 2 : 1; }

// Values per sample the stage reads from its draws.
inline int policy_draws(const PolicyPlan &p) {
  int k = 0;
  for (int i = 0; i < p.ngeo; ++i) k += geo_draws_of(p.geo[i]);
  for (int i = 0; i < p.ncolour; ++i) k += colour_draws_of(p.colour[i]);
  return k;
}

// The output size of an h x w image.
inline void policy_out_size(const PolicyPlan &p, int64_t h, int64_t w, int64_t *oh, int64_t *ow) {
  const double *a = p.geo_args;
  for (int i = 0; i < p.ngeo; ++i) {
    if (p.geo[i] >= G_RESIZE) {
      h = int64_t(a[0]);
      w = int64_t(a[1]);
    }
    a += geo_args_of(p.geo[i]);
  }
  *oh = h;
  *ow = w;
}

// The colour program's step codes (float semantics: runs of GRAY / AFFINE multiplied into one
// AFFINE, as _fused.colour_program does) into codes[] (at most 15); returns their count.
inline int policy_codes(const PolicyPlan &p, int *codes) {
  int n = 0;
  for (int i = 0; i < p.ncolour; ++i) {
    int c = p.colour[i];
    if (!p.sem_uint8 && (c == K_GRAY || c == K_AFFINE)) {
      if (n && codes[n - 1] == K_AFFINE) continue;
      c = K_AFFINE;
    }
    if (n < 15) codes[n] = c;
    ++n;
  }
  return n;
}

inline int policy_row_width(const PolicyPlan &p) {
  int codes[32], w = F_COLOUR;
  const int n = policy_codes(p, codes);
  for (int i = 0; i < n && i < 15; ++i) w += step_width(codes[i]);
  return w;
}

typedef double Mat3[3][3];

inline void mat_mul(const Mat3 a, const Mat3 b, Mat3 r) {  // r = a @ b (r may not alias)
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) r[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
}

// transforms.affine_matrices for one sample.
inline void affine_matrix(double h, double w, double angle, double tx, double ty, double scale, double shx, double shy,
                          bool has_center, double ccx, double ccy, Mat3 m) {
  const double cx = has_center ? ccx : (w - 1) / 2, cy = has_center ? ccy : (h - 1) / 2;
  double cr, sr;
  cos_sin_deg(angle, &cr, &sr);
  double a, b, c, d;
  if (shx != 0.0 || shy != 0.0) {
    const double sx = shx * (M_PI / 180.0), sy = shy * (M_PI / 180.0);
    const double cos_sy = std::cos(sy), tan_sx = std::tan(sx);
    double crs, srs;
    cos_sin_deg(angle - shy, &crs, &srs);
    a = crs / cos_sy;
    c = srs / cos_sy;
    b = -(a * tan_sx + sr);
    d = cr - c * tan_sx;
  } else {
    a = cr, b = -sr, c = sr, d = cr;
  }
  m[0][0] = a * scale, m[0][1] = b * scale, m[1][0] = c * scale, m[1][1] = d * scale;
  m[0][2] = cx + tx - m[0][0] * cx - m[0][1] * cy;
  m[1][2] = cy + ty - m[1][0] * cx - m[1][1] * cy;
  m[2][0] = m[2][1] = 0.0;
  m[2][2] = 1.0;
}

// One sample's row (P floats, P = policy_row_width) from its draws d. Returns 0, or 1 for a
// singular geometry, 2 when fill has neither 1 nor C values, 3 when the write has no C-channel
// form (Normalize's mean / std given for other channel counts), 4 for a row wider than 15 steps.
inline int policy_row(const PolicyPlan &p, const double *d, int64_t h0, int64_t w0, int C, float *row, int P) {
  // at most F_COLOUR + 15 steps of 12 values (policy_codes' cap): no allocation per sample
  double r[F_COLOUR + 15 * 12] = {0.0};
  if (P > F_COLOUR + 15 * 12) return 4;
  double h = double(h0), w = double(w0);
  if (p.ngeo) {
    Mat3 m = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    const double *a = p.geo_args;
    for (int i = 0; i < p.ngeo; ++i) {
      Mat3 mi = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, t;
      const int g = p.geo[i];
      if (g == G_HFLIP || g == G_VFLIP) {
        const double on = coin(a[0], d[0]) ? 1.0 : 0.0;
        const int k = g == G_HFLIP ? 0 : 1;
        mi[k][k] = 1.0 - 2.0 * on;
        mi[k][2] = on * ((k == 0 ? w : h) - 1.0);
      } else if (g == G_ROTATE) {
        affine_matrix(h, w, -lerp(a + 3, d[0]), 0.0, 0.0, 1.0, 0.0, 0.0, a[0] != 0, a[1], a[2], mi);
      } else if (g == G_AFFINE) {
        const double mx = a[3] * w, my = a[4] * h;
        const double tx = std::nearbyint(mx * (2 * d[1] - 1));
        const double ty = std::nearbyint(my * (2 * d[2] - 1));
        affine_matrix(h, w, lerp(a + 5, d[0]), tx, ty, lerp(a + 7, d[3]), lerp(a + 9, d[4]), lerp(a + 11, d[5]),
                      a[0] != 0, a[1], a[2], mi);
      } else if (g == G_RESIZE) {
        const double fy = a[0] / h, fx = a[1] / w;
        mi[0][0] = fx, mi[1][1] = fy;
        mi[0][2] = 0.5 * fx - 0.5;
        mi[1][2] = 0.5 * fy - 0.5;
      } else if (g == G_CENTER_CROP) {
        mi[0][2] = -std::nearbyint((w - a[1]) / 2.0);
        mi[1][2] = -std::nearbyint((h - a[0]) / 2.0);
      }
      if (g >= G_RESIZE) h = a[0], w = a[1];
      mat_mul(mi, m, t);
      std::memcpy(m, t, sizeof(Mat3));
      a += geo_args_of(g);
      d += geo_draws_of(g);
    }
    // _fused._inverse (adjugate / determinant, NumPy's order of operations)
    const double A_ = m[0][0], B = m[0][1], Cc = m[0][2], D = m[1][0], E = m[1][1], F = m[1][2], G = m[2][0],
                 H = m[2][1], I = m[2][2];
    double inv[9];
    inv[0] = E * I - F * H, inv[3] = F * G - D * I, inv[6] = D * H - E * G;
    const double det = A_ * inv[0] + B * inv[3] + Cc * inv[6];
    inv[1] = Cc * H - B * I, inv[4] = A_ * I - Cc * G, inv[7] = B * G - A_ * H;
    inv[2] = B * F - Cc * E, inv[5] = Cc * D - A_ * F, inv[8] = A_ * E - B * D;
    bool finite = det != 0.0;
    for (double &v : inv) {
      v /= det;
      finite = finite && std::isfinite(v);
    }
    if (!finite) return 1;
    for (int k = 0; k < 9; ++k) r[F_MAP + k] = inv[k];
    // _fused._integer_maps: pixel centres onto pixel centres -> nearest is exact
    bool integer = true;
    for (int k = 0; k < 6; ++k) integer = integer && inv[k] == std::nearbyint(inv[k]);
    if (integer) {
      const double a0 = std::fabs(inv[0]), a1 = std::fabs(inv[1]), a3 = std::fabs(inv[3]), a4 = std::fabs(inv[4]);
      integer = a0 + a1 == 1 && a3 + a4 == 1 && a0 + a3 == 1 && inv[6] == 0 && inv[7] == 0 && inv[8] == 1;
    }
    r[F_INTERP] = p.bilinear && !integer ? 1.0 : 0.0;
    if (p.has_fill) {
      if (p.nfill != 1 && p.nfill != C) return 2;
      for (int c = 0; c < C; ++c) r[F_FILL + c] = p.fill[p.nfill == 1 ? 0 : c] / p.in_scale;
    }
  }
  r[F_IN] = p.in_scale;
  // the colour program
  int o = F_COLOUR;
  const double *ca = p.colour_args;
  bool merged_affine = false;  // the last step written is an AFFINE (float semantics)
  for (int i = 0; i < p.ncolour; ++i) {
    const int k = p.colour[i];
    const bool on = coin(ca[0], d[0]);
    if (k == K_JITTER) {
      const double nb[4] = {1.0, 1.0, 1.0, 0.0};
      for (int j = 0; j < 4; ++j) r[o + j] = on ? lerp(ca + 1 + 2 * j, d[1 + j]) : nb[j];
      o += 4;
      merged_affine = false;
    } else if (k == K_GRAY && p.sem_uint8) {
      r[o++] = on ? 1.0 : 0.0;
    } else if (k == K_GRAY) {
      double m[3][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}};
      if (on)
        for (int y = 0; y < 3; ++y)
          for (int x = 0; x < 3; ++x) m[y][x] = kGrayWeights[x];
      if (merged_affine) {  // m @ [prev; 0 0 0 1]
        double prev[4][4] = {{0}}, out[3][4];
        for (int y = 0; y < 3; ++y)
          for (int x = 0; x < 4; ++x) prev[y][x] = r[o - 12 + 4 * y + x];
        prev[3][3] = 1.0;
        for (int y = 0; y < 3; ++y)
          for (int x = 0; x < 4; ++x)
            out[y][x] = m[y][0] * prev[0][x] + m[y][1] * prev[1][x] + m[y][2] * prev[2][x] + m[y][3] * prev[3][x];
        for (int y = 0; y < 3; ++y)
          for (int x = 0; x < 4; ++x) r[o - 12 + 4 * y + x] = out[y][x];
      } else {
        for (int y = 0; y < 3; ++y)
          for (int x = 0; x < 4; ++x) r[o + 4 * y + x] = m[y][x];
        o += 12;
        merged_affine = true;
      }
    } else if (k == K_GAMMA) {
      r[o] = on ? lerp(ca + 1, d[1]) / 100.0 : 1.0;
      r[o + 1] = 1.0;
      o += 2;
      merged_affine = false;
    } else if (k == K_SOLARIZE) {
      r[o++] = on ? ca[1] : INFINITY;
      merged_affine = false;
    } else if (k == K_POSTERIZE) {
      r[o++] = on ? ca[1] : 0.0;
      merged_affine = false;
    } else if (k == K_INVERT) {
      r[o++] = on ? 1.0 : 0.0;
      merged_affine = false;
    }
    if (p.sem_uint8) merged_affine = false;
    ca += colour_args_of(k);
    d += colour_draws_of(k);
  }
  const int wo = C == 1 ? 0 : C == 3 ? 2 : 8;
  for (int c = 0; c < C; ++c) {
    const double sc = p.write[wo + c], bi = p.write[wo + C + c];
    if (std::isnan(sc) || std::isnan(bi)) return 3;
    r[F_SCALE + c] = sc;
    r[F_BIAS + c] = bi;
  }
  for (int k = 0; k < P; ++k) row[k] = float(r[k]);
  return 0;
}

// ---- the policy's own random numbers: NumPy's PCG64 (gpuaug.random's Generator) ---------------
// gpuaug.Compose draws each call's parameters from numpy.random.default_rng(seed) (PCG64,
// XSL-RR output) with Generator.random: one double (next_uint64 >> 11) * 2^-53 per value, in
// blocks rng.random((rows, n)) per transform, row-major, transforms in policy order. The
// operator holds a copy of the generator's state (taken when the pipeline is defined) and
// consumes the same numbers per batch, so batch i gets what the policy's i-th call would draw.
struct Pcg64 {
  unsigned __int128 state = 0, inc = 0;
  static unsigned __int128 u128(uint64_t hi, uint64_t lo) {
    return (static_cast<unsigned __int128>(hi) << 64) | lo;
  }
  void set(uint64_t state_hi, uint64_t state_lo, uint64_t inc_hi, uint64_t inc_lo) {
    state = u128(state_hi, state_lo);
    inc = u128(inc_hi, inc_lo);
  }
  uint64_t next64() {
    static const unsigned __int128 kMul = u128(2549297995355413924ULL, 4865540595714422341ULL);
    state = state * kMul + inc;
    const uint64_t v = static_cast<uint64_t>(state >> 64) ^ static_cast<uint64_t>(state);
    const unsigned rot = static_cast<unsigned>(state >> 122);
    return (v >> rot) | (v << ((64 - rot) & 63));
  }
  double next_double() { return double(next64() >> 11) * (1.0 / 9007199254740992.0); }
};

// One batch's draws for one fused stage: the policy consumes `nrows` blocks of n doubles (every
// transform's rng.random rows, in policy order); slots[r] >= 0 puts row r's value for sample i at
// d[i * width + slots[r]] (the stage's own transforms), -1 skips it (other stages' transforms).
// Draw slots no row fills stay 0 (ranges the transform was not given: their value is neutral
// whatever the draw).
inline void policy_draws(Pcg64 &g, const int *slots, int nrows, int n, int width, double *d) {
  for (int64_t k = 0; k < int64_t(n) * width; ++k) d[k] = 0.0;
  for (int r = 0; r < nrows; ++r) {
    const int s = slots[r];
    for (int i = 0; i < n; ++i) {
      const double u = g.next_double();
      if (s >= 0) d[int64_t(i) * width + s] = u;
    }
  }
}

}  // namespace gpuaug_host
