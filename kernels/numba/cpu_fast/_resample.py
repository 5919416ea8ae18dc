"""resize (nearest, bilinear) and warp_affine / rotate on the CPU.

resize: source rows and columns, and bilinear weights, are computed once per image
(``nearest_index`` and the twin's coordinate formulas); each output row blends two
horizontally interpolated source rows (float32), kept while consecutive output rows
share them. Area resizing runs the generic twin.

warp_affine / rotate: per output pixel the twin's float64 coordinates and weights, shared
by all channels; pixels whose taps all fall inside the image skip the border rules (the
generic ``_interp`` sampling handles the others), so results equal the generic twin's.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange, uint64

from .._dual import dual
from .._interp import border_index, clamp_coord, clamp_index
from ..resize import nearest_index
from . import dense, kernel


@dual
def store_px(v, rnd):
    """``_driver.store`` for uint8 (rnd) or floats: v + 0.5 clamped, truncated by the store."""
    if rnd:
        return min(max(v + 0.5, 0.0), 255.0)
    return v


@dual
def hinterp(sr, xa, xb, wx, out, c, ow):
    """out[x, ch] = a + wx (b - a) for the taps xa[x], xb[x] of one source row."""
    if c == 3:  # unrolled: the common case
        for x in range(ow):
            qa = uint64(xa[x] * 3)
            qb = uint64(xb[x] * 3)
            f = wx[x]
            o = uint64(x * 3)
            a = float(sr[qa])
            out[o] = a + f * (float(sr[qb]) - a)
            a = float(sr[qa + uint64(1)])
            out[o + uint64(1)] = a + f * (float(sr[qb + uint64(1)]) - a)
            a = float(sr[qa + uint64(2)])
            out[o + uint64(2)] = a + f * (float(sr[qb + uint64(2)]) - a)
        return
    for x in range(ow):
        qa = uint64(xa[x] * c)
        qb = uint64(xb[x] * c)
        f = wx[x]
        o = uint64(x * c)
        for ch in range(c):
            a = float(sr[qa + uint64(ch)])
            out[o + uint64(ch)] = a + f * (float(sr[qb + uint64(ch)]) - a)


def _resize_linear(src, dst, params, c, rnd):
    n_, h, wc = src.shape
    w = wc // c
    oh, owc = dst.shape[1], dst.shape[2]
    ow = owc // c
    for p in prange(n_):
        pp = params[p]
        xa = np.empty(ow, np.int64)
        xb = np.empty(ow, np.int64)
        wx = np.empty(ow, np.float64)
        for x in range(ow):
            fx = clamp_coord(pp[1] + (x + 0.5) * pp[3] - 0.5)
            x0 = math.floor(fx)
            wx[x] = fx - x0
            xa[x] = clamp_index(int(x0), w)
            xb[x] = clamp_index(int(x0) + 1, w)
        r0 = np.empty(owc, np.float64)
        r1 = np.empty(owc, np.float64)
        i0 = -1
        i1 = -1
        for y in range(oh):
            fy = clamp_coord(pp[0] + (y + 0.5) * pp[2] - 0.5)
            y0 = math.floor(fy)
            wy = fy - y0
            ya = clamp_index(int(y0), h)
            yb = clamp_index(int(y0) + 1, h)
            if ya == i1:  # slide the pair down
                r0, r1 = r1, r0
                i0, i1 = i1, i0
            if ya != i0:
                hinterp(src[p, ya], xa, xb, wx, r0, c, ow)
                i0 = ya
            if yb != i1:
                if yb == i0:
                    r1[:] = r0
                else:
                    hinterp(src[p, yb], xa, xb, wx, r1, c, ow)
                i1 = yb
            d = dst[p, y]
            if rnd:
                for i in range(owc):
                    t = r0[i]
                    d[i] = min(max(t + wy * (r1[i] - t) + 0.5, 0.0), 255.0)
            else:
                for i in range(owc):
                    t = r0[i]
                    d[i] = t + wy * (r1[i] - t)


def _halve_u8(src, dst, c):
    # Bilinear at exactly half size: every weight is 1/2, so the twin's blend is the mean of
    # a 2x2 block, exactly (as OpenCV, which also switches to block means here); uint8
    # round half up: (sum + 2) >> 2.
    n_, h, wc = src.shape
    oh, owc = dst.shape[1], dst.shape[2]
    ow = owc // c
    uc = uint64(c)
    for u in prange(n_ * oh):
        p = u // oh
        y = u - p * oh
        s0 = src[p, 2 * y]
        s1 = src[p, 2 * y + 1]
        d = dst[p, y]
        if c == 3:  # literal strides: the loop vectorises
            for x in range(ow):
                q = uint64(6 * x)
                o = uint64(3 * x)
                d[o] = (np.int32(s0[q]) + np.int32(s0[q + uint64(3)]) + np.int32(s1[q])
                        + np.int32(s1[q + uint64(3)]) + 2) >> 2
                d[o + uint64(1)] = (np.int32(s0[q + uint64(1)]) + np.int32(s0[q + uint64(4)])
                                    + np.int32(s1[q + uint64(1)]) + np.int32(s1[q + uint64(4)]) + 2) >> 2
                d[o + uint64(2)] = (np.int32(s0[q + uint64(2)]) + np.int32(s0[q + uint64(5)])
                                    + np.int32(s1[q + uint64(2)]) + np.int32(s1[q + uint64(5)]) + 2) >> 2
            continue
        for x in range(ow):
            q = uint64(2 * x) * uc
            o = uint64(x) * uc
            for ch in range(c):
                t = (np.int32(s0[q]) + np.int32(s0[q + uc]) + np.int32(s1[q]) + np.int32(s1[q + uc]) + 2) >> 2
                d[o] = t
                q += uint64(1)
                o += uint64(1)


def _resize_nearest(src, dst, params, c):
    n_, h, wc = src.shape
    w = wc // c
    oh, owc = dst.shape[1], dst.shape[2]
    ow = owc // c
    for p in prange(n_):
        pp = params[p]
        xs = np.empty(ow, np.int64)
        for x in range(ow):
            xs[x] = nearest_index(pp[1], pp[5], int(pp[7]), x, w) * c
        for y in range(oh):
            sr = src[p, nearest_index(pp[0], pp[4], int(pp[6]), y, h)]
            d = dst[p, y]
            for x in range(ow):
                q = uint64(xs[x])
                o = uint64(x * c)
                for ch in range(c):
                    d[o + uint64(ch)] = sr[q + uint64(ch)]


def resize(src, dst, params, lo, hi, rnd):
    """Fast path of the resize value kernel (same arguments); False if not applicable."""
    if src.dtype != dst.dtype:
        return False
    modes = params[:, 8]
    if not (modes == modes[0]).all() or modes[0] not in (0, 1):
        return False
    src, dst, done = dense(src, dst)  # strided views through dense copies
    n, h, w, c = src.shape
    s = src.reshape(n, h, w * c)
    d = dst.reshape(n, dst.shape[1], dst.shape[2] * c)
    par = np.ascontiguousarray(params)
    if modes[0] == 0:
        kernel(_resize_nearest)(s, d, par, c)
    elif _halving(params, h, w, dst.shape[1], dst.shape[2]) and src.dtype == np.uint8:
        kernel(_halve_u8)(s, d, c)
    else:
        kernel(_resize_linear)(s, d, par, c, bool(rnd))
    done()
    return True


#: output rows per parallel work item of the warps (their row buffers are made once per band)
BAND = 16


@dual
def clampc(f):
    """``_interp.clamp_coord`` as selects (vectorises)."""
    f = f if f > -16777216.0 else -16777216.0
    return f if f < 16777216.0 else 16777216.0


@dual
def tapf(sf, img, rs, c, y, x, ch, h, w, border, fill):
    """Channel ``ch`` of pixel (y, x) of a flat image at ``img`` under ``border`` (or fill)."""
    yy = border_index(y, h, border)
    xx = border_index(x, w, border)
    if yy < 0 or xx < 0:
        return fill
    return float(sf[img + uint64(yy) * rs + uint64(xx * c + ch)])


def _warp(src, dst, params, c, rnd):
    # Per output row: coordinates and weights first (a vectorised pass), then the taps.
    # Flat views with unsigned offsets: no per-pixel array views (each costs a reference
    # count) and no wrap-around checks. Pixels with a tap outside the image follow
    # _interp's border rules (or take the fill).
    n_, h, w = src.shape[0], src.shape[1], src.shape[2]
    oh, ow = dst.shape[1], dst.shape[2]
    sf = src.ravel()
    df = dst.ravel()
    rs = uint64(w * c)
    uc = uint64(c)
    nb = (oh + BAND - 1) // BAND
    for ub in prange(n_ * nb):  # bands of rows: work for every thread, buffers once per band
        p = ub // nb
        yb = (ub - p * nb) * BAND
        wxs = np.empty(ow, np.float64)
        wys = np.empty(ow, np.float64)
        x0s = np.empty(ow, np.int64)
        y0s = np.empty(ow, np.int64)
        for y in range(yb, min(yb + BAND, oh)):
            u = p * oh + y
            nearest = params[p, 0] == 0
            border = int(params[p, 1])
            a00, a01, a02 = params[p, 2], params[p, 3], params[p, 4]
            a10, a11, a12 = params[p, 5], params[p, 6], params[p, 7]
            for x in range(ow):
                fx = clampc(a00 * x + a01 * y + a02)
                fy = clampc(a10 * x + a11 * y + a12)
                if nearest:  # the nearest pixel: floor(f + 0.5)
                    fx = fx + 0.5
                    fy = fy + 0.5
                x0f = math.floor(fx)
                y0f = math.floor(fy)
                x0s[x] = int(x0f)
                y0s[x] = int(y0f)
                wxs[x] = fx - x0f
                wys[x] = fy - y0f
            img = uint64(p * h) * rs
            o = uint64(u * ow) * uc
            if nearest:
                for x in range(ow):
                    xi = x0s[x]
                    yi = y0s[x]
                    if xi >= 0 and xi < w and yi >= 0 and yi < h:
                        q = img + uint64(yi) * rs + uint64(xi) * uc
                        for ch in range(c):
                            df[o] = sf[q]
                            o += uint64(1)
                            q += uint64(1)
                    else:
                        for ch in range(c):
                            df[o] = store_px(tapf(sf, img, rs, c, yi, xi, ch, h, w, border, params[p, 8 + ch]), rnd)
                            o += uint64(1)
                continue
            for x in range(ow):
                x0 = x0s[x]
                y0 = y0s[x]
                wx = wxs[x]
                wy = wys[x]
                if x0 >= 0 and x0 + 1 < w and y0 >= 0 and y0 + 1 < h:
                    q = img + uint64(y0) * rs + uint64(x0) * uc
                    if c == 3:  # unrolled: the common case
                        for ch in range(3):
                            a = float(sf[q])
                            b = float(sf[q + uint64(3)])
                            cc = float(sf[q + rs])
                            dd = float(sf[q + rs + uint64(3)])
                            top = a + wx * (b - a)
                            bot = cc + wx * (dd - cc)
                            df[o] = store_px(top + wy * (bot - top), rnd)
                            o += uint64(1)
                            q += uint64(1)
                    else:
                        for ch in range(c):
                            a = float(sf[q])
                            b = float(sf[q + uc])
                            cc = float(sf[q + rs])
                            dd = float(sf[q + rs + uc])
                            top = a + wx * (b - a)
                            bot = cc + wx * (dd - cc)
                            df[o] = store_px(top + wy * (bot - top), rnd)
                            o += uint64(1)
                            q += uint64(1)
                elif border == 0 and (x0 + 1 < 0 or x0 >= w or y0 + 1 < 0 or y0 >= h):
                    for ch in range(c):  # every tap outside: the fill (blended with itself)
                        f = params[p, 8 + ch]
                        top = f + wx * (f - f)
                        df[o] = store_px(top + wy * (top - top), rnd)
                        o += uint64(1)
                else:
                    for ch in range(c):
                        f = params[p, 8 + ch]
                        a = tapf(sf, img, rs, c, y0, x0, ch, h, w, border, f)
                        b = tapf(sf, img, rs, c, y0, x0 + 1, ch, h, w, border, f)
                        cc = tapf(sf, img, rs, c, y0 + 1, x0, ch, h, w, border, f)
                        dd = tapf(sf, img, rs, c, y0 + 1, x0 + 1, ch, h, w, border, f)
                        top = a + wx * (b - a)
                        bot = cc + wx * (dd - cc)
                        df[o] = store_px(top + wy * (bot - top), rnd)
                        o += uint64(1)


def warp_affine(src, dst, params, lo, hi, rnd):
    """Fast path of the warp_affine / rotate value kernel (same arguments); False if not
    applicable."""
    if src.dtype != dst.dtype:
        return False
    src, dst, done = dense(src, dst)  # strided views and NCHW through dense copies: the same bits
    kernel(_warp)(src, dst, np.ascontiguousarray(params), src.shape[3], bool(rnd))
    done()
    return True


def _halving(params, h, w, oh, ow):
    """Every sample resized to exactly half its size from (0, 0): bilinear weights all 1/2."""
    return (2 * oh == h and 2 * ow == w and (params[:, 0] == 0).all() and (params[:, 1] == 0).all()
            and (params[:, 2] == 2.0).all() and (params[:, 3] == 2.0).all())
