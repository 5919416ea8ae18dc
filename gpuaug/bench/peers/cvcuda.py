"""CV-CUDA peers (GPU only, NHWC tensors)."""
from __future__ import annotations

import math

import numpy as np

from ._common import ONE_PER_BATCH, _forward, _import, _k, _sigma_k, cycle, f0, hw, peer, s0


def _cv(batch):
    batch.need_gpu("CV-CUDA")
    cv = _import("cvcuda", "cvcuda")
    import cupy

    stream = cv.as_stream(int(cupy.cuda.get_current_stream().ptr))
    tensors = [cv.as_tensor(a, "NHWC") for a in batch.nhwc()]
    return cv, stream, tensors


@peer("flip", "cvcuda")
def _cv_flip(batch, kw):
    cv, st, ts = _cv(batch)
    h, v = bool(s0(kw.get("horizontal", True))), bool(s0(kw.get("vertical", False)))
    code = -1 if (h and v) else (0 if v else 1)
    return cycle(ts, lambda t: cv.flip(t, flipCode=code, stream=st), variant="cvcuda.flip", note=ONE_PER_BATCH)


@peer("resize", "cvcuda")
def _cv_resize(batch, kw):
    cv, st, ts = _cv(batch)
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    it = {"nearest": cv.Interp.NEAREST, "area": cv.Interp.AREA}.get(interp, cv.Interp.LINEAR)
    return cycle(ts, lambda t: cv.resize(t, (batch.n, h, w, batch.c), it, stream=st),
                 variant=f"cvcuda.resize({interp})")


@peer("warp_affine", "cvcuda")
def _cv_warp_affine(batch, kw):
    cv, st, ts = _cv(batch)
    inv = np.linalg.inv(_forward(kw, batch.n)[0])[:2, :].astype(np.float32)
    return cycle(ts, lambda t: cv.warp_affine(t, inv, cv.Interp.LINEAR | cv.Interp.WARP_INVERSE_MAP,
                                              border_mode=cv.Border.CONSTANT, border_value=[0.0], stream=st),
                 variant="cvcuda.warp_affine", note="one matrix for the batch (sample 0's)")


@peer("warp_perspective", "cvcuda")
def _cv_warp_perspective(batch, kw):
    cv, st, ts = _cv(batch)
    inv = np.linalg.inv(_forward(kw, batch.n, dims=3)[0]).astype(np.float32)
    return cycle(ts, lambda t: cv.warp_perspective(t, inv, cv.Interp.LINEAR | cv.Interp.WARP_INVERSE_MAP,
                                                   border_mode=cv.Border.CONSTANT, border_value=[0.0], stream=st),
                 variant="cvcuda.warp_perspective", note="one matrix for the batch (sample 0's)")


@peer("rotate", "cvcuda")
def _cv_rotate(batch, kw):
    cv, st, ts = _cv(batch)
    a = f0(kw.get("angle", 0))
    # cvcuda.rotate turns about the origin then shifts; shift so the centre stays put.
    cx, cy = (batch.w - 1) / 2, (batch.h - 1) / 2
    r = math.radians(a)
    sx = cx - (cx * math.cos(r) + cy * math.sin(r))
    sy = cy - (-cx * math.sin(r) + cy * math.cos(r))
    return cycle(ts, lambda t: cv.rotate(t, a, (sx, sy), cv.Interp.LINEAR, stream=st), variant="cvcuda.rotate",
                 note=ONE_PER_BATCH)


@peer("grayscale", "cvcuda")
def _cv_grayscale(batch, kw):
    cv, st, ts = _cv(batch)
    return cycle(ts, lambda t: cv.cvtcolor(t, cv.ColorConversion.RGB2GRAY, stream=st), variant="cvcuda.cvtcolor")


@peer("gaussian_blur", "cvcuda")
def _cv_gaussian_blur(batch, kw):
    cv, st, ts = _cv(batch)
    s, k = _sigma_k(kw)
    return cycle(ts, lambda t: cv.gaussian(t, (k, k), (s, s), cv.Border.REFLECT101, stream=st),
                 variant=f"cvcuda.gaussian({k}x{k})", note=ONE_PER_BATCH)


@peer("box_blur", "cvcuda")
def _cv_box_blur(batch, kw):
    cv, st, ts = _cv(batch)
    k = _k(kw)
    return cycle(ts, lambda t: cv.averageblur(t, (k, k), (-1, -1), cv.Border.REFLECT101, stream=st),
                 variant=f"cvcuda.averageblur({k}x{k})")


@peer("median_blur", "cvcuda")
def _cv_median_blur(batch, kw):
    cv, st, ts = _cv(batch)
    k = _k(kw)
    return cycle(ts, lambda t: cv.median_blur(t, (k, k), stream=st), variant=f"cvcuda.median_blur({k}x{k})")
