// Boxes and keypoints through per-sample 3x3 maps (gpuaug.targets): one launch per batch for both
// (gpuaug_target_both), or one each (gpuaug_target_boxes, gpuaug_target_points).
//
// mats: one row of 9 doubles per sample, the source -> destination map in the targets' own
// coordinates (normalisation and the pixel-centre shift already folded in on the host), so
// (X, Y, Z) = M (x, y, 1) and the point is (X / Z, Y / Z). Z <= 0 (a perspective that sends
// the point to or beyond infinity) marks the point as lost. All maths in double: the work is
// tiny and the results then agree with the NumPy twin (gpuaug/targets/_apply.py) to ~1e-12.

#define GPUAUG_FULL_MASK 0xffffffffu

__device__ __forceinline__ bool gpuaug_map_point(const double* m, double x, double y, double& ox, double& oy) {
  const double X = m[0] * x + m[1] * y + m[2];
  const double Y = m[3] * x + m[4] * y + m[5];
  const double Z = m[6] * x + m[7] * y + m[8];
  if (!(Z > 0.0)) return false;
  ox = X / Z;
  oy = Y / Z;
  return true;
}

// One warp per sample: lane l handles boxes l, l + 32, ...; kept boxes are packed to the front
// of the sample's span in their input order (ballot + popc prefix), the rest of the span is
// written with zeros and index -1, so every output element is written.
//   src/dst: boxes, 4 values each, sample i's at rows starts[i] .. starts[i] + spans[i]
//   counts:  valid input rows per sample (<= spans[i]);  count_out: kept rows per sample
//   lims:    (W, H) per sample, the clip rectangle [0, W] x [0, H]
//   fmt:     0 xyxy, 1 xywh, 2 cxcywh (input and output)
//   drop:    0: keep every box (clip only); 1: keep a box when its clipped area is > 0 and
//            >= min_vis x the area of its unclipped mapped box (Albumentations' rule)
//   keep_in: with has_keep, one byte per input row: 0 drops the row whatever its map
//            (RandomIoUCrop's boxes whose centre is outside the crop); else not read
#define GPUAUG_BOX_ARGS(T)                                                                                  \
  const T *__restrict__ src, T *__restrict__ dst, int *__restrict__ index, int *__restrict__ count_out,            \
      const long long *__restrict__ starts, const int *__restrict__ counts, const int *__restrict__ spans,          \
      const double *__restrict__ mats, const double *__restrict__ lims, const unsigned char *__restrict__ keep_in, \
      int n, int fmt, double min_vis, int drop, int has_keep
#define GPUAUG_POINT_ARGS(T)                                                                                \
  const T *__restrict__ psrc, T *__restrict__ pdst, const unsigned char *__restrict__ vis_in,                     \
      unsigned char *__restrict__ vis_out, const double *__restrict__ pmats, const double *__restrict__ plims,     \
      int pn, int pk

// Sample w's boxes, by the 32 lanes of one warp (w < n: the whole warp is here).
template <typename T>
__device__ __forceinline__ void gpuaug_boxes_of(int w, int lane, GPUAUG_BOX_ARGS(T)) {
  const long long s0 = starts[w];
  const int span = spans[w];
  const int cnt = min(max(counts[w], 0), span);  // device counts are not checked on the host
  double m[9];
#pragma unroll
  for (int k = 0; k < 9; ++k) m[k] = mats[9 * w + k];
  const double W = lims[2 * w], H = lims[2 * w + 1];
  int base = 0;
  for (int j0 = 0; j0 < cnt; j0 += 32) {
    const int j = j0 + lane;
    bool keep = false;
    double o0 = 0, o1 = 0, o2 = 0, o3 = 0;
    if (j < cnt) {
      const T* b = src + (s0 + j) * 4;
      double x1 = (double)b[0], y1 = (double)b[1], x2 = (double)b[2], y2 = (double)b[3];
      if (fmt == 1) {
        x2 += x1;
        y2 += y1;
      } else if (fmt == 2) {
        const double hw = 0.5 * x2, hh = 0.5 * y2;
        x2 = x1 + hw;
        y2 = y1 + hh;
        x1 -= hw;
        y1 -= hh;
      }
      const double xs[4] = {x1, x2, x2, x1}, ys[4] = {y1, y1, y2, y2};
      bool ok = true;
      double lx = 0, ly = 0, hx = 0, hy = 0;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        double px, py;
        ok &= gpuaug_map_point(m, xs[c], ys[c], px, py);
        if (c == 0) {
          lx = hx = px;
          ly = hy = py;
        } else {
          lx = fmin(lx, px);
          hx = fmax(hx, px);
          ly = fmin(ly, py);
          hy = fmax(hy, py);
        }
      }
      const double area = (hx - lx) * (hy - ly);
      const double cx1 = fmin(fmax(lx, 0.0), W), cx2 = fmin(fmax(hx, 0.0), W);
      const double cy1 = fmin(fmax(ly, 0.0), H), cy2 = fmin(fmax(hy, 0.0), H);
      const double clipped = (cx2 - cx1) * (cy2 - cy1);
      keep = ok && (!drop || (clipped > 0.0 && clipped >= min_vis * area)) && (!has_keep || keep_in[s0 + j]);
      if (fmt == 0) {
        o0 = cx1; o1 = cy1; o2 = cx2; o3 = cy2;
      } else if (fmt == 1) {
        o0 = cx1; o1 = cy1; o2 = cx2 - cx1; o3 = cy2 - cy1;
      } else {
        o0 = 0.5 * (cx1 + cx2); o1 = 0.5 * (cy1 + cy2); o2 = cx2 - cx1; o3 = cy2 - cy1;
      }
    }
    const unsigned ballot = __ballot_sync(GPUAUG_FULL_MASK, keep);
    if (keep) {
      const int pos = base + __popc(ballot & ((1u << lane) - 1u));
      T* d = dst + (s0 + pos) * 4;
      d[0] = (T)o0;
      d[1] = (T)o1;
      d[2] = (T)o2;
      d[3] = (T)o3;
      index[s0 + pos] = j;
    }
    base += __popc(ballot);
  }
  for (int j = base + lane; j < span; j += 32) {
    T* d = dst + (s0 + j) * 4;
    d[0] = d[1] = d[2] = d[3] = (T)0;
    index[s0 + j] = -1;
  }
  if (lane == 0) count_out[w] = base;
}

template <typename T>
__global__ void gpuaug_target_boxes(GPUAUG_BOX_ARGS(T)) {
  const int w = (int)((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5);
  if (w >= n) return;  // whole warps: blockDim.x is a multiple of 32
  gpuaug_boxes_of<T>(w, threadIdx.x & 31, src, dst, index, count_out, starts, counts, spans, mats, lims, keep_in, n,
                     fmt, min_vis, drop, has_keep);
}

// One thread per keypoint (n samples x k points). lims: (x_lo, x_hi, y_lo, y_hi) per sample;
// a point stays visible when it was visible, its map is finite and lo <= coordinate < hi.
// Lost points (Z <= 0) come out as NaN, not visible.
template <typename T>
__device__ __forceinline__ void gpuaug_point_at(long long t, GPUAUG_POINT_ARGS(T)) {
  const int i = (int)(t / pk);
  const double* m = pmats + 9 * i;
  const double* l = plims + 4 * i;
  double x, y;
  const bool ok = gpuaug_map_point(m, (double)psrc[2 * t], (double)psrc[2 * t + 1], x, y);
  if (!ok) x = y = __longlong_as_double(0x7ff8000000000000ll);
  pdst[2 * t] = (T)x;
  pdst[2 * t + 1] = (T)y;
  vis_out[t] = (unsigned char)(vis_in[t] && ok && x >= l[0] && x < l[1] && y >= l[2] && y < l[3]);
}

template <typename T>
__global__ void gpuaug_target_points(GPUAUG_POINT_ARGS(T)) {
  const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t >= (long long)pn * pk) return;
  gpuaug_point_at<T>(t, psrc, pdst, vis_in, vis_out, pmats, plims, pn, pk);
}

// Boxes and keypoints of one batch in ONE launch: blocks [0, box_blocks) map the boxes (a
// warp per sample), the rest the keypoints (a thread per point).
template <typename TB, typename TP>
__global__ void gpuaug_target_both(GPUAUG_BOX_ARGS(TB), GPUAUG_POINT_ARGS(TP), int box_blocks) {
  if ((int)blockIdx.x < box_blocks) {
    const int w = (int)((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5);
    if (w < n)
      gpuaug_boxes_of<TB>(w, threadIdx.x & 31, src, dst, index, count_out, starts, counts, spans, mats, lims, keep_in,
                          n, fmt, min_vis, drop, has_keep);
    return;
  }
  const long long t = (blockIdx.x - (long long)box_blocks) * blockDim.x + threadIdx.x;
  if (t < (long long)pn * pk) gpuaug_point_at<TP>(t, psrc, pdst, vis_in, vis_out, pmats, plims, pn, pk);
}

// ---------------------------------------------------------------------------------------------
// RandomIoUCrop (SSD; torchvision v2's rules) per sample, the crop chosen on the device from
// the sample's boxes. The random numbers come from a counter-based hash of the sample's key
// (gpuaug_mix64: splitmix64's finaliser), so the NumPy twin (gpuaug/targets/safe_crops.py)
// draws the same numbers; the float maths uses __dmul_rn / __dadd_rn (never contracted into an
// FMA), so both twins take the same decisions bit for bit.
//
// Per round r (counter base = r * (2 * trials + 1)): word(base) picks a minimum IoU among opts
// (a value >= 1 means "no crop"); then per trial t, words base + 1 + 2t and base + 2 + 2t give
// four uniforms: scales u0, u1 (width, height), positions u2, u3. A trial is taken when the crop
// is non-empty, its aspect ratio new_w / new_h is within [min_ar, max_ar], some box's centre
// lies strictly inside it and one of those boxes has IoU >= the round's minimum with it. The
// first trial taken wins; after `rounds` rounds without one (or with no boxes) the sample
// keeps its whole image.
__device__ __forceinline__ unsigned long long gpuaug_mix64(unsigned long long key, unsigned long long c) {
  unsigned long long z = key + (c + 1ull) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

#define GPUAUG_TWO_M32 2.3283064365386963e-10  // 2^-32

//   boxes:  xyxy pixel coordinates (double), sample i's at rows starts[i] .. starts[i] + counts[i]
//   sizes:  (h, w) per sample;  keys: one 64-bit key per sample
//   opts:   n_opt minimum IoUs;  cfg: min_scale, max_scale, min_ar, max_ar
//   window: (top, left, height, width) per sample;  within: per row, 1 where the box's centre is
//           inside the chosen crop (every row < counts[i] is written)
__global__ void gpuaug_iou_crop_select(const double* __restrict__ boxes, const long long* __restrict__ starts,
                                       const int* __restrict__ counts, const int* __restrict__ sizes,
                                       const unsigned long long* __restrict__ keys, const double* __restrict__ opts,
                                       const double* __restrict__ cfg, int* __restrict__ window,
                                       unsigned char* __restrict__ within, int n, int n_opt, int rounds, int trials) {
  const int w_ = (int)((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5);
  if (w_ >= n) return;  // whole warps
  const int lane = threadIdx.x & 31;
  const long long s0 = starts[w_];
  const int cnt = counts[w_];
  const int H = sizes[2 * w_], W = sizes[2 * w_ + 1];
  const unsigned long long key = keys[w_];
  const double min_s = cfg[0], max_s = cfg[1], min_ar = cfg[2], max_ar = cfg[3];
  const double ds = max_s - min_s;
  int top = 0, left = 0, ch = H, cw = W;
  bool found = false;
  for (int r = 0; r < rounds && cnt > 0 && !found; ++r) {
    const unsigned long long base = (unsigned long long)r * (2ull * trials + 1ull);
    const unsigned long long wo = gpuaug_mix64(key, base) >> 32;
    const double thr = opts[(int)((wo * (unsigned long long)n_opt) >> 32)];
    if (thr >= 1.0) break;  // "no crop"
    for (int t = 0; t < trials; ++t) {
      const unsigned long long a = gpuaug_mix64(key, base + 1ull + 2ull * t);
      const unsigned long long b = gpuaug_mix64(key, base + 2ull + 2ull * t);
      const double u0 = (double)(a >> 32) * GPUAUG_TWO_M32, u1 = (double)(a & 0xffffffffull) * GPUAUG_TWO_M32;
      const double u2 = (double)(b >> 32) * GPUAUG_TWO_M32, u3 = (double)(b & 0xffffffffull) * GPUAUG_TWO_M32;
      const int nw = (int)__dmul_rn((double)W, __dadd_rn(min_s, __dmul_rn(ds, u0)));
      const int nh = (int)__dmul_rn((double)H, __dadd_rn(min_s, __dmul_rn(ds, u1)));
      if (nw <= 0 || nh <= 0) continue;
      const double ar = (double)nw / (double)nh;
      if (!(min_ar <= ar && ar <= max_ar)) continue;
      const int l = (int)__dmul_rn((double)(W - nw), u2), tp = (int)__dmul_rn((double)(H - nh), u3);
      const double L = l, T = tp, R = l + nw, B = tp + nh;
      const double area_c = __dmul_rn(R - L, B - T);
      bool ok = false;
      for (int j = lane; j < cnt; j += 32) {
        const double* q = boxes + (s0 + j) * 4;
        const double cx = __dmul_rn(0.5, __dadd_rn(q[0], q[2])), cy = __dmul_rn(0.5, __dadd_rn(q[1], q[3]));
        if (!(L < cx && cx < R && T < cy && cy < B)) continue;
        const double iw = fmax(fmin(q[2], R) - fmax(q[0], L), 0.0), ih = fmax(fmin(q[3], B) - fmax(q[1], T), 0.0);
        const double inter = __dmul_rn(iw, ih);
        const double area_b = __dmul_rn(q[2] - q[0], q[3] - q[1]);
        ok |= inter / __dsub_rn(__dadd_rn(area_b, area_c), inter) >= thr;
      }
      if (__ballot_sync(GPUAUG_FULL_MASK, ok)) {  // warp-uniform: every lane drew the same trial
        top = tp;
        left = l;
        ch = nh;
        cw = nw;
        found = true;
        break;
      }
    }
  }
  for (int j = lane; j < cnt; j += 32) {
    const double* q = boxes + (s0 + j) * 4;
    const double cx = __dmul_rn(0.5, __dadd_rn(q[0], q[2])), cy = __dmul_rn(0.5, __dadd_rn(q[1], q[3]));
    within[s0 + j] = (unsigned char)(!found || ((double)left < cx && cx < (double)(left + cw) && (double)top < cy &&
                                                cy < (double)(top + ch)));
  }
  if (lane == 0) {
    window[4 * w_] = top;
    window[4 * w_ + 1] = left;
    window[4 * w_ + 2] = ch;
    window[4 * w_ + 3] = cw;
  }
}

// ---------------------------------------------------------------------------------------------
// Masks of a policy stage: the nearest-neighbour warp of every mask plane (label maps, one-hot
// planes) by its sample's destination -> source map, bit for bit what gpuaug_warp_affine /
// gpuaug_warp_perspective compute with INTERP = nearest (warp_common.cuh's Map::at and
// interp.cuh's sample_nearest: float32 maps, fmaf, __frcp_rn, floor(f + 0.5) of the clamped
// coordinate), so a mask equals the images' nearest resampling. A thread writes a run of
// GPUAUG_MASK_PX consecutive pixels of one output row (a 16-byte store for uint8 planes).
//   msrc / mdst: planes of h x w / H x W elements, back to back; plane p is sample p / per_sample
//   maps:        9 float32 per sample (a00 a01 a02 a10 a11 a12 a20 a21 a22)
//   constant:    1: outside the source reads `fill`; 0: the nearest edge pixel (replicate)
#define GPUAUG_MASK_ARGS(TM)                                                                                  \
  const TM *__restrict__ msrc, TM *__restrict__ mdst, const float *__restrict__ maps, int planes, int per_sample, \
      int mh, int mw, int MH, int MW, int fill, int constant

#define GPUAUG_MASK_LIMIT 16777216.f  // interp.cuh's GPUAUG_COORD_LIMIT

// Pixels per thread (gpuaug/targets/_apply.py's MASK_PX sizes the grid; tests/gpu/mask_tiles.py
// times other values): the index arithmetic is paid once per run.
#ifndef GPUAUG_MASK_PX
#define GPUAUG_MASK_PX 16
#endif

// The mask items of a launch: runs of GPUAUG_MASK_PX pixels (the last of a row may be shorter).
__device__ __forceinline__ long long gpuaug_mask_items(int planes, int MH, int MW) {
  return (long long)planes * MH * ((MW + GPUAUG_MASK_PX - 1) / GPUAUG_MASK_PX);
}

template <typename TM, bool PERSP>
__device__ __forceinline__ TM gpuaug_mask_px(const TM* src, const float* a, float xf, float yf, int mh, int mw,
                                             int fill, int constant) {
  float fx = fmaf(xf, a[0], fmaf(yf, a[1], a[2]));
  float fy = fmaf(xf, a[3], fmaf(yf, a[4], a[5]));
  if (PERSP) {
    const float ww = fmaf(xf, a[6], fmaf(yf, a[7], a[8]));
    if (ww == 0.f) {
      fx = fy = -GPUAUG_MASK_LIMIT;
    } else {
      const float r = __frcp_rn(ww);
      fx *= r;
      fy *= r;
    }
  }
  int ix = __float2int_rd(fminf(fmaxf(fx, -GPUAUG_MASK_LIMIT), GPUAUG_MASK_LIMIT) + 0.5f);
  int iy = __float2int_rd(fminf(fmaxf(fy, -GPUAUG_MASK_LIMIT), GPUAUG_MASK_LIMIT) + 0.5f);
  if (constant) return (ix >= 0 && ix < mw && iy >= 0 && iy < mh) ? src[(long long)iy * mw + ix] : (TM)fill;
  ix = min(max(ix, 0), mw - 1);
  iy = min(max(iy, 0), mh - 1);
  return src[(long long)iy * mw + ix];
}

// Item t (< gpuaug_mask_items): plane p, row y, pixels x0 .. x0 + GPUAUG_MASK_PX - 1.
template <typename TM, bool PERSP>
__device__ __forceinline__ void gpuaug_mask_run(long long t, GPUAUG_MASK_ARGS(TM)) {
  const int WR = (MW + GPUAUG_MASK_PX - 1) / GPUAUG_MASK_PX;
  const long long per_plane = (long long)MH * WR;
  const int p = (int)(t / per_plane);
  const int rem = (int)(t - (long long)p * per_plane);
  const int y = rem / WR, x0 = (rem - y * WR) * GPUAUG_MASK_PX;
  float a[9];
#pragma unroll
  for (int k = 0; k < 9; ++k) a[k] = maps[9 * (p / per_sample) + k];
  const TM* src = msrc + (long long)p * mh * mw;
  TM* row = mdst + (long long)p * MH * MW + (long long)y * MW;
  const float yf = (float)y;
  if (x0 + GPUAUG_MASK_PX <= MW) {
    TM v[GPUAUG_MASK_PX];
#pragma unroll
    for (int k = 0; k < GPUAUG_MASK_PX; ++k)
      v[k] = gpuaug_mask_px<TM, PERSP>(src, a, (float)(x0 + k), yf, mh, mw, fill, constant);
    if (sizeof(TM) == 1 && GPUAUG_MASK_PX % 16 == 0 && ((reinterpret_cast<size_t>(row + x0) & 15) == 0)) {
#pragma unroll
      for (int k = 0; k < GPUAUG_MASK_PX; k += 16) {  // 16 bytes a store
        unsigned w[4];
#pragma unroll
        for (int q = 0; q < 4; ++q)
          w[q] = (unsigned)(unsigned char)v[k + 4 * q] | ((unsigned)(unsigned char)v[k + 4 * q + 1] << 8) |
                 ((unsigned)(unsigned char)v[k + 4 * q + 2] << 16) | ((unsigned)(unsigned char)v[k + 4 * q + 3] << 24);
        *reinterpret_cast<uint4*>(row + x0 + k) = make_uint4(w[0], w[1], w[2], w[3]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < GPUAUG_MASK_PX; ++k) row[x0 + k] = v[k];
    }
  } else {
    for (int x = x0; x < MW; ++x) row[x] = gpuaug_mask_px<TM, PERSP>(src, a, (float)x, yf, mh, mw, fill, constant);
  }
}

template <typename TM, bool PERSP>
__global__ void gpuaug_target_masks(GPUAUG_MASK_ARGS(TM)) {
  const long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t >= gpuaug_mask_items(planes, MH, MW)) return;
  gpuaug_mask_run<TM, PERSP>(t, msrc, mdst, maps, planes, per_sample, mh, mw, MH, MW, fill, constant);
}

// A policy stage's boxes, keypoints and masks in ONE launch: blocks [0, box_blocks) map the
// boxes (a warp per sample), the next point_blocks the keypoints, the rest warp the masks.
// Absent targets come with 0 blocks (their pointers are not read).
template <typename TB, typename TP, typename TM, bool PERSP>
__global__ void gpuaug_target_all(GPUAUG_BOX_ARGS(TB), GPUAUG_POINT_ARGS(TP), GPUAUG_MASK_ARGS(TM), int box_blocks,
                                  int point_blocks) {
  const int b = (int)blockIdx.x;
  if (b < box_blocks) {
    const int w = (int)((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5);
    if (w < n)
      gpuaug_boxes_of<TB>(w, threadIdx.x & 31, src, dst, index, count_out, starts, counts, spans, mats, lims, keep_in,
                          n, fmt, min_vis, drop, has_keep);
    return;
  }
  if (b < box_blocks + point_blocks) {
    const long long t = (b - (long long)box_blocks) * blockDim.x + threadIdx.x;
    if (t < (long long)pn * pk) gpuaug_point_at<TP>(t, psrc, pdst, vis_in, vis_out, pmats, plims, pn, pk);
    return;
  }
  const long long t = (b - (long long)box_blocks - point_blocks) * blockDim.x + threadIdx.x;
  if (t < gpuaug_mask_items(planes, MH, MW))
    gpuaug_mask_run<TM, PERSP>(t, msrc, mdst, maps, planes, per_sample, mh, mw, MH, MW, fill, constant);
}
