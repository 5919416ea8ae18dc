"""Copy ops (flip, crop, pad) on the CPU: whole-row copies and per-pixel moves on flat rows.

Exact element moves, as the generic copy driver makes (float16 travels as uint16 bits).
Indices into a row are unsigned (``uint64``): Numba then skips its negative-index
wrap-around check, which otherwise keeps LLVM from vectorising the loops (about 10x).
"""
from __future__ import annotations

import numpy as np
from numba import prange, uint64

from .._dual import dual
from ..pad import border_index
from . import _nothing, dense, kernel, per_plane, planes


@dual
def copy_span(dr, o, sr, q, m):
    """dr[o:o + m] = sr[q:q + m]"""
    o = uint64(o)
    q = uint64(q)
    for i in range(uint64(m)):
        dr[o + i] = sr[q + i]


@dual
def fill_span(dr, o, npx, fl, c):
    """Pixels o // c .. + npx of a flat row set to the fill value ``fl`` (c elements)."""
    for x in range(npx):
        for ch in range(c):
            dr[uint64(o + x * c + ch)] = fl[ch]


def _flip(src, dst, params, c):
    # Flat 1-D views and unsigned offsets: no per-row array views (each costs two reference
    # count updates, as much as copying a short row).
    n_, h, wc = src.shape
    w = wc // c
    sf = src.ravel()
    df = dst.ravel()
    img = uint64(h * wc)
    uwc = uint64(wc)
    for u in prange(n_ * h):
        p = u // h
        y = u - p * h
        sy = h - 1 - y if params[p, 1] != 0 else y
        sr = uint64(p) * img + uint64(sy) * uwc
        dr = uint64(p) * img + uint64(y) * uwc
        if params[p, 0] == 0:
            for i in range(uwc):
                df[dr + i] = sf[sr + i]
        elif c == 3:
            for x in range(w):
                q = sr + uint64(wc - 3 - 3 * x)
                o = dr + uint64(3 * x)
                df[o] = sf[q]
                df[o + uint64(1)] = sf[q + uint64(1)]
                df[o + uint64(2)] = sf[q + uint64(2)]
        elif c == 1:
            for x in range(w):
                df[dr + uint64(x)] = sf[sr + uint64(w - 1 - x)]
        elif c == 4:
            for x in range(w):
                q = sr + uint64(wc - 4 - 4 * x)
                o = dr + uint64(4 * x)
                df[o] = sf[q]
                df[o + uint64(1)] = sf[q + uint64(1)]
                df[o + uint64(2)] = sf[q + uint64(2)]
                df[o + uint64(3)] = sf[q + uint64(3)]
        else:
            for x in range(w):
                q = sr + uint64((w - 1 - x) * c)
                o = dr + uint64(x * c)
                for ch in range(uint64(c)):
                    df[o + ch] = sf[q + ch]


def _crop(src, dst, params, fills, c):
    n_, sh, swc = src.shape
    h, wc = dst.shape[1], dst.shape[2]
    sw = swc // c
    w = wc // c
    for u in prange(n_ * h):
        p = u // h
        y = u - p * h
        top = int(params[p, 0])
        left = int(params[p, 1])
        dr = dst[p, y]
        fl = fills[p]
        sy = y + top
        x0 = min(max(-left, 0), w)
        x1 = max(min(sw - left, w), x0)
        if sy < 0 or sy >= sh:
            x0 = w
            x1 = w
        fill_span(dr, 0, x0, fl, c)
        if x1 > x0:
            copy_span(dr, x0 * c, src[p, sy], (x0 + left) * c, (x1 - x0) * c)
        fill_span(dr, x1 * c, w - x1, fl, c)


def _pad(src, dst, params, fills, c):
    n_, sh, swc = src.shape
    h, wc = dst.shape[1], dst.shape[2]
    sw = swc // c
    w = wc // c
    for u in prange(n_ * h):
        p = u // h
        y = u - p * h
        top = int(params[p, 0])
        left = int(params[p, 1])
        mode = int(params[p, 2])
        dr = dst[p, y]
        fl = fills[p]
        sy = border_index(y - top, sh, mode)
        if sy < 0:
            fill_span(dr, 0, w, fl, c)
            continue
        sr = src[p, sy]
        x0 = min(max(left, 0), w)  # [x0, x1): inside the source
        x1 = max(min(left + sw, w), x0)
        for x in range(x0):
            sx = border_index(x - left, sw, mode)
            if sx < 0:
                fill_span(dr, x * c, 1, fl, c)
            else:
                copy_span(dr, x * c, sr, sx * c, c)
        if x1 > x0:
            copy_span(dr, x0 * c, sr, (x0 - left) * c, (x1 - x0) * c)
        for x in range(x1, w):
            sx = border_index(x - left, sw, mode)
            if sx < 0:
                fill_span(dr, x * c, 1, fl, c)
            else:
                copy_span(dr, x * c, sr, sx * c, c)


def _flat(a, c):
    return a.reshape(a.shape[0], a.shape[1], a.shape[2] * c)


def flip(src, dst, params, fills):
    """Fast path of the flip copy kernel (same arguments); False if not applicable."""
    if src.shape != dst.shape:
        return False
    done = _nothing
    pl = planes(src, dst)
    if pl is None:  # strided views: through dense copies
        src, dst, done = dense(src, dst)
        pl = planes(src, dst)
    s, d, c, per = pl
    kernel(_flip)(_flat(s, c), _flat(d, c), np.ascontiguousarray(per_plane(params, per)), c)
    done()
    return True


def _copy_op(fn, src, dst, params, fills):
    done = _nothing
    pl = planes(src, dst)
    if pl is None:  # strided views: through dense copies
        src, dst, done = dense(src, dst)
        pl = planes(src, dst)
    s, d, c, per = pl
    fl = np.ascontiguousarray(fills).reshape(s.shape[0], c)  # NCHW: plane n*C + ch gets fills[n, ch]
    kernel(fn)(_flat(s, c), _flat(d, c), np.ascontiguousarray(per_plane(params, per)), fl, c)
    done()
    return True


def crop(src, dst, params, fills):
    """Fast path of the crop copy kernel (same arguments); False if not applicable."""
    return _copy_op(_crop, src, dst, params, fills)


def pad(src, dst, params, fills):
    """Fast path of the pad copy kernel (same arguments); False if not applicable."""
    return _copy_op(_pad, src, dst, params, fills)
