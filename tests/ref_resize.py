"""NumPy references for resize and resized_crop: float64 maths on one HWC sample.

Written from the documented conventions (OpenCV pixel centres), independently of the
library's kernels: every output axis is a (out x in) weight matrix applied to the image,
``out = My @ img @ Mx.T`` per channel, with reads outside the image replicating its edge.

- nearest: ``src = floor(top + dst * box / out)`` (exact rational maths);
- bilinear: ``src = top + (dst + 0.5) * box / out - 0.5``, taps ``floor(src)`` and the next
  one, weights ``1 - frac`` and ``frac``;
- area: the box average of the footprint ``[top + dst * s, top + (dst + 1) * s)`` with
  ``s = box / out``, source pixel ``i`` covering ``[i, i + 1)``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np


def _nearest_index(top, box, out, size):
    # top and box are dyadic (float32-exact) values in the tests: Fraction is exact.
    t, b = Fraction(float(top)), Fraction(float(box))
    idx = [int((t + Fraction(d) * b / out).__floor__()) for d in range(out)]
    return np.clip(np.array(idx, np.int64), 0, size - 1)


def _bilinear_matrix(top, box, out, size):
    m = np.zeros((out, size))
    scale = box / out
    for d in range(out):
        f = top + (d + 0.5) * scale - 0.5
        i0 = np.floor(f)
        w = f - i0
        i0 = int(i0)
        m[d, min(max(i0, 0), size - 1)] += 1.0 - w
        m[d, min(max(i0 + 1, 0), size - 1)] += w
    return m


def _area_matrix(top, box, out, size):
    m = np.zeros((out, size))
    scale = box / out
    for d in range(out):
        a = top + d * scale
        b = a + scale
        for i in range(int(np.floor(a)), int(np.ceil(b))):
            lo = max(a, i)
            hi = min(b, i + 1)
            if hi > lo:
                m[d, min(max(i, 0), size - 1)] += (hi - lo) / scale
    return m


def resized_crop(img, box, size, interpolation):
    """``img`` (h, w, C) float64; ``box`` (top, left, height, width); ``size`` (H, W)."""
    top, left, bh, bw = (float(v) for v in box)
    h, w = img.shape[:2]
    oh, ow = size
    if interpolation == "nearest":
        ys = _nearest_index(top, bh, oh, h)
        xs = _nearest_index(left, bw, ow, w)
        return img[ys][:, xs]
    make = _bilinear_matrix if interpolation == "bilinear" else _area_matrix
    my = make(top, bh, oh, h)
    mx = make(left, bw, ow, w)
    rows = np.tensordot(my, img, axes=(1, 0))                     # (H, w, C)
    return np.tensordot(rows, mx, axes=(1, 1)).transpose(0, 2, 1)  # (H, W, C)


def resize(img, size, interpolation):
    h, w = img.shape[:2]
    return resized_crop(img, (0, 0, h, w), size, interpolation)
