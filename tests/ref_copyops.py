"""Independent NumPy references for the copy ops (rot90, transpose, crop, center_crop, pad).

Each takes one float64 HWC sample and returns float64 HWC; they follow the documented
semantics (numpy.rot90, numpy.pad, torchvision's center_crop) by NumPy indexing and know
nothing of gpuaug's code.
"""
from __future__ import annotations

import numpy as np


def rot90(img, k):
    return np.rot90(img, int(k), axes=(0, 1))


def transpose(img):
    return img.transpose(1, 0, 2)


def crop(img, top, left, height, width):
    """``img[top:top+height, left:left+width]``, zeros where the window leaves the image."""
    h, w, c = img.shape
    out = np.zeros((int(height), int(width), c))
    ys = np.arange(int(height)) + int(top)
    xs = np.arange(int(width)) + int(left)
    iy, ix = (ys >= 0) & (ys < h), (xs >= 0) & (xs < w)
    out[np.ix_(iy, ix)] = img[np.ix_(ys[iy], xs[ix])]
    return out


def center_crop(img, size):
    """torchvision.transforms.functional.center_crop, step by step: zero-pad where the crop
    is larger (floor half before, the rest after), then crop at round((H - h) / 2) with
    Python's round (half to even)."""
    ch, cw = (size, size) if np.ndim(size) == 0 else size
    h, w, _ = img.shape
    if cw > w or ch > h:
        pl = (cw - w) // 2 if cw > w else 0
        pt = (ch - h) // 2 if ch > h else 0
        pr = (cw - w + 1) // 2 if cw > w else 0
        pb = (ch - h + 1) // 2 if ch > h else 0
        img = np.pad(img, ((pt, pb), (pl, pr), (0, 0)))
        h, w, _ = img.shape
    top = int(round((h - ch) / 2.0))
    left = int(round((w - cw) / 2.0))
    return img[top:top + ch, left:left + cw]


def pad(img, padding, mode="constant", value=0):
    t, b, l, r = (int(v) for v in padding)
    kw = {"constant_values": float(value)} if mode == "constant" else {}
    return np.pad(img, ((t, b), (l, r), (0, 0)), mode=mode, **kw)


def check_strided_gpu(fn, ref_fn, x, params, *, layout, backend):
    """Run ``fn`` on a non-contiguous CUDA view of ``x`` (every other element of the last
    axis), which the fast paths decline, so the generic kernel runs; compare with
    ``ref_fn(sample_float64, i)``. GPU tests only."""
    import cupy

    from helpers import assert_close, from_layout, to_layout

    xin = to_layout(x, layout)
    view = cupy.asarray(np.repeat(xin, 2, axis=-1))[..., ::2]
    assert not view.flags.c_contiguous
    got = from_layout(cupy.asnumpy(fn(view, layout=layout, backend=backend, **params)), layout)
    ref = np.stack([ref_fn(x[i].astype(np.float64), i) for i in range(x.shape[0])])
    assert_close(got, ref, x.dtype, what=f"strided {backend} {layout}")
