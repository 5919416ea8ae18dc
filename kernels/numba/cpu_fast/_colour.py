"""Colour ops (brightness, contrast, color_jitter) and normalize / crop_mirror_normalize
on the CPU: contiguous passes over pixels.

brightness and contrast: one vectorised float64 pass over each flat image with the twin's
formula (bit-identical). color_jitter: its brightness-then-contrast step through a
256-entry table per image for uint8 (built with the twin's ``jitter_step``), saturation
and hue per pixel with the twin's float64 maths (``luma_floor``, ``hue_rgb``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange, uint64

from .._colour import clampv, hue_rgb, luma_floor
from .._dual import dual
from .._driver import store
from ..color_jitter import jitter_step
from ..crop_mirror_normalize import cmn_anchor
from . import dense, kernel

BRIGHTNESS, CONTRAST, JITTER = 0, 1, 2


@dual
def clamp_sel(v, hi):
    """``clampv`` as selects (vectorises; NaN passes, as there)."""
    v = 0.0 if v < 0.0 else v
    return hi if v > hi else v


def _pointwise(src, dst, params, c, op, rnd):
    # src, dst: (N, H*W*c) flat images; channels >= 3 (alpha) are copied. v -> a v + b,
    # clamped to [0, max] (brightness: b = 0; contrast: b = (1 - f) mean), float64 as the twin;
    # uint8: + 0.5 and truncated (= the store's floor, the value being >= 0).
    n_, m = src.shape
    for p in prange(n_):
        pp = params[p]
        s = src[p]
        d = dst[p]
        a = pp[0]
        mx = pp[1]
        b = 0.0 if op == BRIGHTNESS else (1.0 - pp[0]) * pp[2]
        if op == JITTER:  # one channel: a table (uint8) or the step per value
            if rnd:
                lut = np.empty(256, np.uint8)
                for v in range(256):
                    lut[v] = store(jitter_step(float(v), pp), 0.0, 255.0, True)
                for i in range(m):
                    d[i] = lut[int(s[i])]  # int(): the line must type for float images too
            else:
                for i in range(m):
                    d[i] = jitter_step(float(s[i]), pp)
            continue
        if c <= 3:
            if rnd:
                for i in range(m):
                    d[i] = clamp_sel(a * float(s[i]) + b, mx) + 0.5
            else:
                for i in range(m):
                    d[i] = clamp_sel(a * float(s[i]) + b, mx)
        else:
            for i in range(0, m, c):
                for ch in range(3):
                    v = clamp_sel(a * float(s[uint64(i + ch)]) + b, mx)
                    d[uint64(i + ch)] = v + 0.5 if rnd else v
                for ch in range(3, c):
                    d[uint64(i + ch)] = s[uint64(i + ch)]


@dual
def hue_w(k):
    """``_colour.hue_weight`` as selects."""
    d = min(abs(k - 2.0), abs(k - 8.0))
    w = 2.0 - d
    w = 0.0 if w < 0.0 else w
    return 1.0 if w > 1.0 else w


def _jitter(src, dst, params, c, rnd):
    # color_jitter with 3 or 4 channels, one row of pixels at a time in three float64
    # planes (r, g, b): brightness and contrast per channel (a table for uint8), then
    # saturation and hue over the planes (selects, no branches: the loops vectorise), then
    # the store. The maths is color_jitter_value's, operation for operation.
    n_, h, wc = src.shape
    w = wc // c
    luts = np.empty((n_, 256), np.float64)
    if rnd:
        for p in range(n_):
            for v in range(256):
                luts[p, v] = jitter_step(float(v), params[p])
    for u in prange(n_ * h):
        p = u // h
        y = u - p * h
        pp = params[p]
        s = src[p, y]
        d = dst[p, y]
        mx = pp[4]
        integer = mx > 1.0
        sat = pp[2]
        shift = pp[3]
        s6 = 6.0 * (shift - math.floor(shift))
        rr = np.empty(w, np.float64)
        gg = np.empty(w, np.float64)
        bb = np.empty(w, np.float64)
        if rnd:
            lut = luts[p]
            for x in range(w):
                q = uint64(x * c)
                rr[x] = lut[int(s[q])]
                gg[x] = lut[int(s[q + uint64(1)])]
                bb[x] = lut[int(s[q + uint64(2)])]
        else:
            for x in range(w):
                q = uint64(x * c)
                rr[x] = jitter_step(float(s[q]), pp)
                gg[x] = jitter_step(float(s[q + uint64(1)]), pp)
                bb[x] = jitter_step(float(s[q + uint64(2)]), pp)
        for x in range(w):
            r = rr[x]
            g = gg[x]
            b = bb[x]
            gray = (1.0 - sat) * luma_floor(r, g, b, integer)
            rr[x] = clamp_sel(sat * r + gray, mx)
            gg[x] = clamp_sel(sat * g + gray, mx)
            bb[x] = clamp_sel(sat * b + gray, mx)
        if shift != 0.0:
            for x in range(w):
                r = rr[x]
                g = gg[x]
                b = bb[x]
                hi = max(r, max(g, b))
                rng = hi - min(r, min(g, b))
                div = rng if rng > 0.0 else 1.0
                hh = (g - b) / div if hi == r else ((2.0 + (b - r) / div) if hi == g else 4.0 + (r - g) / div)
                hh += s6
                hh = hh - 6.0 if hh > 5.0 else hh
                rr[x] = hi - rng * hue_w(hh + 5.0)
                gg[x] = hi - rng * hue_w(hh + 3.0)
                bb[x] = hi - rng * hue_w(hh + 1.0)
        for x in range(w):
            q = uint64(x * c)
            if rnd:
                d[q] = min(max(rr[x] + 0.5, 0.0), 255.0)
                d[q + uint64(1)] = min(max(gg[x] + 0.5, 0.0), 255.0)
                d[q + uint64(2)] = min(max(bb[x] + 0.5, 0.0), 255.0)
            else:
                d[q] = rr[x]
                d[q + uint64(1)] = gg[x]
                d[q + uint64(2)] = bb[x]
            for ch in range(3, c):
                d[q + uint64(ch)] = s[q + uint64(ch)]


def _flat(a):
    return a.reshape(a.shape[0], -1)


def _point_op(src, dst, params, rnd, op):
    if src.shape != dst.shape or src.dtype not in (np.uint8, np.float32) or dst.dtype != src.dtype:
        return False
    src, dst, done = dense(src, dst)  # strided views and NCHW through dense copies
    kernel(_pointwise)(_flat(src), _flat(dst), np.ascontiguousarray(params), src.shape[3], op, bool(rnd))
    done()
    return True


def brightness(src, dst, params, lo, hi, rnd):
    """Fast path of the brightness value kernel (same arguments); False if not applicable."""
    return _point_op(src, dst, params, rnd, BRIGHTNESS)


def contrast(src, dst, params, lo, hi, rnd):
    """Fast path of the contrast value kernel (same arguments); False if not applicable."""
    return _point_op(src, dst, params, rnd, CONTRAST)


def color_jitter(src, dst, params, lo, hi, rnd):
    """Fast path of the color_jitter value kernel (same arguments); False if not applicable."""
    if src.shape[3] < 3:
        return _point_op(src, dst, params, rnd, JITTER)
    if src.shape != dst.shape or src.dtype not in (np.uint8, np.float32) or dst.dtype != src.dtype:
        return False
    src, dst, done = dense(src, dst)  # strided views and NCHW through dense copies
    n, h, w, c = src.shape
    kernel(_jitter)(src.reshape(n, h, w * c), dst.reshape(n, h, w * c), np.ascontiguousarray(params), c,
                    bool(rnd))
    done()
    return True


def _cmn(src, dst, params, anchors, nc):
    # dst: (N, h, w, co) in any strides (NHWC or an NHWC view of NCHW); co >= nc pads with 0
    n_, h, w, co = dst.shape
    for u in prange(n_ * h):
        p = u // h
        y = u - p * h
        sy = uint64(anchors[p, 0] + y)
        ax = anchors[p, 1]
        mirror = params[p, 2] != 0
        for x in range(w):
            sx = uint64(ax + w - 1 - x) if mirror else uint64(ax + x)
            for ch in range(nc):
                dst[p, y, x, ch] = (src[p, sy, sx, ch] - params[p, 5 + ch]) / params[p, 5 + nc + ch]
            for ch in range(nc, co):
                dst[p, y, x, ch] = 0.0


def _cmn_rows(src, dst, params, anchors, nc):
    # Dense NHWC in and out, no mirror, no padded channel: per output row one flat pass with
    # the mean and std repeated along the row (the loop vectorises; same division).
    n_, h, wc = dst.shape
    w = wc // nc
    mrows = np.empty((n_, wc), np.float64)
    srows = np.empty((n_, wc), np.float64)
    for p in range(n_):
        for x in range(w):
            for ch in range(nc):
                mrows[p, x * nc + ch] = params[p, 5 + ch]
                srows[p, x * nc + ch] = params[p, 5 + nc + ch]
    for u in prange(n_ * h):
        p = u // h
        y = u - p * h
        mrow = mrows[p]
        srow = srows[p]
        a = uint64(anchors[p, 1] * nc)
        s = src[p, anchors[p, 0] + y]  # a whole row (C-contiguous; a slice would not be)
        d = dst[p, y]
        t = np.empty(wc, np.float64)
        for i in range(wc):
            t[i] = s[a + uint64(i)] - mrow[i]
        np.divide(t, srow, t)  # NumPy's division: no zero check per element (a Python "/" has one)
        for i in range(wc):
            d[i] = t[i]


def normalize(src, dst, params, lo, hi, rnd):
    """Fast path of the normalize / crop_mirror_normalize value kernel (same arguments)."""
    if src.dtype not in (np.uint8, np.float32) or dst.dtype != np.float32:
        return False
    n, h, w, nc = src.shape
    anchors = np.empty((n, 2), np.int64)
    for i in range(n):  # the twin's own formula (DALI's float32 rounding), in Python
        anchors[i, 0] = cmn_anchor(params[i, 0], h, int(params[i, 3]))
        anchors[i, 1] = cmn_anchor(params[i, 1], w, int(params[i, 4]))
    par = np.ascontiguousarray(params)
    if (src.flags.c_contiguous and dst.flags.c_contiguous and dst.shape[3] == nc and
            not params[:, 2].any()):
        kernel(_cmn_rows)(src.reshape(n, h, w * nc), dst.reshape(n, dst.shape[1], dst.shape[2] * nc), par,
                          anchors, nc)
        return True
    kernel(_cmn)(src, dst, par, anchors, nc)
    return True


def _gray_sums(src, sums, params, c, jitter, integer):
    # Per image: the sum of contrast_gray / jitter_gray over its pixels. uint8 grays are
    # whole numbers (luma_floor), summed exactly as int64 (so the order does not matter and
    # the loop vectorises); float grays in float64, in pixel order as the twin sums them.
    n_, m = src.shape
    for p in prange(n_):
        pp = params[p]
        s = src[p]
        f = pp[0]
        mx = pp[4] if jitter else pp[1]
        big = mx > 1.0
        npx = m // c
        if integer and not jitter and c == 3:
            # luma_floor of whole numbers is exactly (2989 r + 5870 g + 1140 b) // 10000 (see
            # _colour.luma: the float form's quotients lie on a 1e-4 grid, its 5e-5 bias never
            # crosses an integer): integer maths, which vectorises
            acc = 0
            for i in range(npx):
                q = uint64(3 * i)
                acc += (np.int32(2989) * np.int32(s[q]) + np.int32(5870) * np.int32(s[q + uint64(1)])
                        + np.int32(1140) * np.int32(s[q + uint64(2)])) // np.int32(10000)
            sums[p] = float(acc)
        elif integer:
            acc = 0
            if c == 3:
                for i in range(npx):
                    q = uint64(3 * i)
                    r = float(s[q])
                    g = float(s[q + uint64(1)])
                    b = float(s[q + uint64(2)])
                    if jitter:
                        r = clamp_sel(f * r, mx)
                        g = clamp_sel(f * g, mx)
                        b = clamp_sel(f * b, mx)
                    acc += int(luma_floor(r, g, b, big))
            else:
                for i in range(npx):
                    q = uint64(c * i)
                    if c < 3:  # contrast's one-channel gray: the value itself
                        acc += int(s[q])
                        continue
                    r = float(s[q])
                    g = float(s[q + uint64(1)])
                    b = float(s[q + uint64(2)])
                    if jitter:
                        r = clamp_sel(f * r, mx)
                        g = clamp_sel(f * g, mx)
                        b = clamp_sel(f * b, mx)
                    acc += int(luma_floor(r, g, b, big))
            sums[p] = float(acc)
        else:
            acc = 0.0
            for i in range(npx):
                q = uint64(c * i)
                r = float(s[q])
                if c < 3:
                    acc += clampv(f * r, mx) if jitter else r
                    continue
                g = float(s[q + uint64(1)])
                b = float(s[q + uint64(2)])
                if jitter:
                    r = clampv(f * r, mx)
                    g = clampv(f * g, mx)
                    b = clampv(f * b, mx)
                acc += luma_floor(r, g, b, big)
            sums[p] = acc


def _gray(src, sums, params, jitter):
    if src.dtype not in (np.uint8, np.float32):
        return False
    src = np.ascontiguousarray(src)  # strided views and NCHW through a dense copy
    c = src.shape[3]
    integer = src.dtype == np.uint8 and (c >= 3 or not jitter)  # jitter's 1-channel gray is not whole
    kernel(_gray_sums)(_flat(src), sums, np.ascontiguousarray(params), c, jitter, integer)
    return True


def contrast_gray(src, sums, params):
    """Fast path of the contrast grayscale-sum kernel (``_colour.mean_kernel``'s arguments)."""
    return _gray(src, sums, params, False)


def jitter_gray(src, sums, params):
    """Fast path of the color_jitter grayscale-sum kernel (``_colour.mean_kernel``'s arguments)."""
    return _gray(src, sums, params, True)
