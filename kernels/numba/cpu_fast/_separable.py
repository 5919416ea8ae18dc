"""Separable filters (gaussian_blur, box_blur) on the CPU: row buffers, float32 maths.

Per image plane: each row is copied once into a float32 buffer with its reflect-101
border (k//2 pixels each side), filtered horizontally into a float32 image, then each
output row sums k rows of that image. Both passes run over whole rows (W*C contiguous
floats), so the inner loops vectorise; the weights are symmetric (checked), which halves
the multiplies. uint8 stores round half up and saturate, as ``_driver.store`` does.
box_blur on uint8 (equal weights) sums whole numbers instead (see ``_box_u8``).
"""
from __future__ import annotations

import numpy as np
from numba import prange

from .._filters import reflect101
from . import dense, kernel, per_plane, planes


def _sep(src, dst, wts, ks, c, rnd):
    # Inner loops index slices from 0 (never pad[a + i]): Numba then knows the index is
    # non-negative, drops its wrap-around check and the loops vectorise (~10x).
    n_, h, wc = src.shape
    w = wc // c
    for p in prange(n_):
        k = ks[p]
        r = k // 2
        wt = wts[p]
        pad = np.empty((w + 2 * r) * c, np.float32)
        tmp = np.empty((h, wc), np.float32)
        acc = np.empty(wc, np.float32)
        wm = wt[r]
        base = r * c
        for y in range(h):
            row = src[p, y]
            mid = pad[base:base + wc]
            for i in range(wc):
                mid[i] = row[i]
            for x in range(r):
                sl = reflect101(x - r, w) * c
                sr = reflect101(w + x, w) * c
                for ch in range(c):
                    pad[x * c + ch] = row[sl + ch]
                    pad[(w + r + x) * c + ch] = row[sr + ch]
            t = tmp[y]
            for i in range(wc):
                t[i] = wm * mid[i]
            for j in range(r):
                wj = wt[j]
                pa = pad[j * c:j * c + wc]
                pb = pad[(k - 1 - j) * c:(k - 1 - j) * c + wc]
                for i in range(wc):
                    t[i] += wj * (pa[i] + pb[i])
        for y in range(h):
            t = tmp[y]
            for i in range(wc):
                acc[i] = wm * t[i]
            for j in range(r):
                wj = wt[j]
                ta = tmp[reflect101(y + j - r, h)]
                tb = tmp[reflect101(y + r - j, h)]
                for i in range(wc):
                    acc[i] += wj * (ta[i] + tb[i])
            d = dst[p, y]
            if rnd:
                for i in range(wc):
                    v = acc[i] + np.float32(0.5)
                    v = min(max(v, np.float32(0.0)), np.float32(255.0))
                    d[i] = int(v)
            else:
                for i in range(wc):
                    d[i] = acc[i]


def _box_u8(src, dst, ks, c, proto):
    # box_blur on uint8: whole-number sums (exact), vertical first: a running sum of the k
    # source rows of the window (add the row entering, subtract the row leaving; reflect-101
    # rows included), copied into a row buffer with its reflect-101 border, summed over the
    # k horizontal taps, then S / k^2 rounded half up. Sums in ``proto``'s type (int16 while
    # 255 k^2 fits, else float32, exact below 2^24): Numba keeps those lanes narrow.
    n_, h, wc = src.shape
    w = wc // c
    for p in prange(n_):
        k = ks[p]
        r = k // 2
        inv = np.float32(1.0 / (k * k))
        acc = np.zeros(wc, proto.dtype)
        pad = np.empty((w + 2 * r) * c, proto.dtype)
        out = np.empty(wc, proto.dtype)
        base = r * c
        mid = pad[base:base + wc]
        for j in range(-r, r + 1):
            sj = src[p, reflect101(j, h)]
            for i in range(wc):
                acc[i] += sj[i]
        for y in range(h):
            if y > 0:
                sa = src[p, reflect101(y + r, h)]
                sb = src[p, reflect101(y - 1 - r, h)]
                for i in range(wc):
                    acc[i] += sa[i]
                for i in range(wc):
                    acc[i] -= sb[i]
            for i in range(wc):
                mid[i] = acc[i]
            for x in range(r):
                sl = reflect101(x - r, w) * c
                sr = reflect101(w + x, w) * c
                for ch in range(c):
                    pad[x * c + ch] = acc[sl + ch]
                    pad[(w + r + x) * c + ch] = acc[sr + ch]
            for i in range(wc):
                out[i] = mid[i]
            for j in range(k):
                if j != r:
                    pj = pad[j * c:j * c + wc]
                    for i in range(wc):
                        out[i] += pj[i]
            d = dst[p, y]
            for i in range(wc):
                d[i] = np.int32(out[i] * inv + np.float32(0.5))


def separable(src, dst, params, lo, hi, rnd):
    """Fast path of ``_filters.separable_kernel`` (same arguments); False if not applicable."""
    if src.dtype not in (np.uint8, np.float32) or dst.dtype != src.dtype:
        return False
    ks = params[:, 0].astype(np.int64)
    wts = params[:, 1:]
    kmax = int(ks.max())
    taps = np.arange(kmax)[None, :] < ks[:, None]
    mirror = np.where(taps, ks[:, None] - 1 - np.arange(kmax)[None, :], 0)  # tap j <-> k - 1 - j
    if not (np.take_along_axis(wts, mirror, 1) == wts[:, :kmax])[taps].all():
        return False  # the kernel folds taps in pairs: symmetric weights only
    done = None
    pl = planes(src, dst)
    if pl is None:  # strided views: through dense copies, so their bits equal a dense batch's
        src, dst, done = dense(src, dst)
        pl = planes(src, dst)
    s, d, c, per = pl
    p_, h, w = s.shape[:3]
    if rnd and ((wts[:, :kmax] == wts[:, :1]) | ~taps).all():  # box_blur: equal taps in every image
        proto = np.zeros(1, np.int16 if 255 * kmax * kmax < 32768 else np.float32)
        kernel(_box_u8)(s.reshape(p_, h, w * c), d.reshape(p_, h, w * c), per_plane(ks, per), c, proto)
        if done is not None:
            done()
        return True
    wts32 = np.ascontiguousarray(per_plane(wts, per), np.float32)
    kernel(_sep)(s.reshape(p_, h, w * c), d.reshape(p_, h, w * c), wts32, per_plane(ks, per), c,
                 bool(rnd))
    if done is not None:
        done()
    return True

