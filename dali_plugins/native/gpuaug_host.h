// Host-side logic of gpuaug__Kernel that must match gpuaug's Python exactly (so the operator
// launches the kernels gpuaug launches, with the same parameter rows): plain C++ with no DALI or
// CUDA dependency, so tests/test_dali_native.py compiles it alone and checks it against the
// Python functions it mirrors, on machines without a GPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gpuaug_host {

// cos and sin of degrees, exact at multiples of 90 (gpuaug.geometry._cos_sin).
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

}  // namespace gpuaug_host
