"""OpenCV peers: ``cv2`` on the CPU, one call per image with that image's values
(:data:`CPU_THREADS` threads; ``gpuaug bench --device cpu``)."""
from __future__ import annotations

import math

import numpy as np

from ._common import (CPU_THREADS, Unsupported, _affine_size, _forward, _import, _mean_std, _pad_sides, cycle,
                      f0, hw, peer, per_sample)


def _opencv(batch):
    """cv2 with :data:`CPU_THREADS` threads, and the batch as contiguous NHWC NumPy arrays."""
    if batch.gpu:
        raise Unsupported("the OpenCV peers run on NumPy batches (gpuaug bench --device cpu)")
    cv2 = _import("cv2", "opencv")
    cv2.setNumThreads(CPU_THREADS)
    return cv2, batch.nhwc()


def _per_image(batch, fn, variant, note=""):
    """A callable running ``fn(cv2, i, image)`` on every image of the next buffer."""
    cv2, arrays = _opencv(batch)
    note = "; ".join(x for x in ("one cv2 call per image, per-sample values", note) if x)
    return cycle(arrays, lambda x: [fn(cv2, i, x[i]) for i in range(x.shape[0])], variant=variant, note=note)


_CV_BORDER = {"constant": 0, "replicate": 1, "edge": 1, "reflect": 4}  # cv2.BORDER_* (reflect: REFLECT_101)


@peer("flip", "opencv")
def _ocv_flip(batch, kw):
    h = per_sample(kw.get("horizontal", True), batch.n, dtype=np.int64)
    v = per_sample(kw.get("vertical", False), batch.n, dtype=np.int64)
    codes = [(-1 if (a and b) else (1 if a else 0)) for a, b in zip(h, v)]

    def one(cv2, i, img):
        return cv2.flip(img, codes[i]) if (h[i] or v[i]) else img.copy()

    return _per_image(batch, one, "cv2.flip")


@peer("crop", "opencv")
def _ocv_crop(batch, kw):
    t = per_sample(kw.get("top", 0), batch.n, dtype=np.int64)
    le = per_sample(kw.get("left", 0), batch.n, dtype=np.int64)
    hh, ww = int(kw["height"]), int(kw["width"])
    return _per_image(batch, lambda cv2, i, img: img[t[i]:t[i] + hh, le[i]:le[i] + ww].copy(),
                      "img[window].copy()", note="NumPy slicing: OpenCV has no crop call")


@peer("pad", "opencv")
def _ocv_pad(batch, kw):
    sides = _pad_sides(kw, batch.n)
    mode = kw.get("mode", "constant")
    if mode not in _CV_BORDER:
        raise Unsupported(f"pad mode {mode!r} has no cv2 border")
    value = per_sample(kw.get("value", 0), batch.n, dtype=np.float64)

    def one(cv2, i, img):
        t, b, le, r = (int(v) for v in sides[i])
        return cv2.copyMakeBorder(img, t, b, le, r, _CV_BORDER[mode], value=[float(value[i])] * 4)

    return _per_image(batch, one, f"cv2.copyMakeBorder({mode})")


@peer("resize", "opencv")
def _ocv_resize(batch, kw):
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    code = {"nearest": 0, "bilinear": 1, "area": 3}[interp]  # cv2.INTER_*
    return _per_image(batch, lambda cv2, i, img: cv2.resize(img, (w, h), interpolation=code),
                      f"cv2.resize({interp})")


def _warp_peer(batch, fwd, size, kw, variant):
    interp = 0 if kw.get("interpolation", "bilinear") == "nearest" else 1
    border = _CV_BORDER.get(kw.get("border", "constant"), 0)
    fill = per_sample(kw.get("fill", 0), batch.n, dtype=np.float64)
    mats = [np.ascontiguousarray(m[:2, :], np.float64) for m in fwd]
    h, w = size
    return _per_image(batch, lambda cv2, i, img: cv2.warpAffine(
        img, mats[i], (w, h), flags=interp, borderMode=border, borderValue=[float(fill[i])] * 4), variant)


@peer("warp_affine", "opencv")
def _ocv_warp_affine(batch, kw):
    return _warp_peer(batch, _forward(kw, batch.n), _affine_size(kw, batch), kw, "cv2.warpAffine")


@peer("rotate", "opencv")
def _ocv_rotate(batch, kw):
    ang = per_sample(kw.get("angle", 0), batch.n, dtype=np.float64)
    scale = per_sample(kw.get("scale", 1.0), batch.n, dtype=np.float64)
    ctr = kw.get("center")
    cx, cy = ((batch.w - 1) / 2, (batch.h - 1) / 2) if ctr is None else (f0(np.asarray(ctr)[..., 0]),
                                                                       f0(np.asarray(ctr)[..., 1]))
    fwd = []
    for a, sc in zip(ang, scale):  # cv2.getRotationMatrix2D's matrix
        al, be = sc * math.cos(math.radians(a)), sc * math.sin(math.radians(a))
        fwd.append(np.array([[al, be, (1 - al) * cx - be * cy], [-be, al, be * cx + (1 - al) * cy], [0, 0, 1]]))
    return _warp_peer(batch, fwd, (batch.h, batch.w), kw, "cv2.warpAffine(getRotationMatrix2D)")


@peer("gaussian_blur", "opencv")
def _ocv_gaussian_blur(batch, kw):
    sig = per_sample(kw.get("sigma", 1.0), batch.n, dtype=np.float64)
    ks = kw.get("kernel_size")
    ks = per_sample(ks, batch.n, dtype=np.int64) if ks is not None else [0] * batch.n  # 0: from sigma
    return _per_image(batch, lambda cv2, i, img: cv2.GaussianBlur(img, (int(ks[i]), int(ks[i])), float(sig[i]),
                                                                  borderType=4), "cv2.GaussianBlur",
                      note="reflect-101 borders; default size from sigma as gpuaug's")


@peer("box_blur", "opencv")
def _ocv_box_blur(batch, kw):
    k = per_sample(kw.get("kernel_size", 3), batch.n, dtype=np.int64)
    return _per_image(batch, lambda cv2, i, img: cv2.blur(img, (int(k[i]), int(k[i])), borderType=4), "cv2.blur")


@peer("median_blur", "opencv")
def _ocv_median_blur(batch, kw):
    k = per_sample(kw.get("kernel_size", 3), batch.n, dtype=np.int64)
    return _per_image(batch, lambda cv2, i, img: cv2.medianBlur(img, int(k[i])), "cv2.medianBlur")


def _cv_gray_mean(cv2, img):
    return float(cv2.mean(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY))[0]) if img.shape[2] >= 3 else float(img.mean())


def _cv_scale(cv2, img, a, b=0.0):
    """a * img + b, saturated (uint8) / clamped to [0, 1] (floats)."""
    if img.dtype == np.uint8:
        return cv2.convertScaleAbs(img, alpha=a, beta=b)  # values stay >= 0 here, so |.| is a no-op
    return np.clip(cv2.addWeighted(img, a, img, 0.0, b), 0.0, 1.0)


def _need_u8_or_f32(batch, what):
    if batch.dtype not in (np.uint8, np.float32):
        raise Unsupported(f"{what}: uint8 or float32 images only")


@peer("brightness", "opencv")
def _ocv_brightness(batch, kw):
    _need_u8_or_f32(batch, "cv2.convertScaleAbs")
    f = per_sample(kw.get("factor", 1.0), batch.n, dtype=np.float64)
    return _per_image(batch, lambda cv2, i, img: _cv_scale(cv2, img, float(f[i])), "cv2.convertScaleAbs")


@peer("contrast", "opencv")
def _ocv_contrast(batch, kw):
    _need_u8_or_f32(batch, "cv2.convertScaleAbs")
    f = per_sample(kw.get("factor", 1.0), batch.n, dtype=np.float64)

    def one(cv2, i, img):
        return _cv_scale(cv2, img, float(f[i]), (1.0 - float(f[i])) * _cv_gray_mean(cv2, img))

    return _per_image(batch, one, "cvtColor(GRAY) mean + convertScaleAbs")


@peer("color_jitter", "opencv")
def _ocv_color_jitter(batch, kw):
    _need_u8_or_f32(batch, "color_jitter from cv2 calls")
    if batch.c != 3:
        raise Unsupported("color_jitter from cv2 calls: RGB images only")
    n = batch.n
    b, c, s, h = (per_sample(kw.get(k, d), n, dtype=np.float64) for k, d in
                  (("brightness", 1.0), ("contrast", 1.0), ("saturation", 1.0), ("hue", 0.0)))

    def one(cv2, i, img):
        x = _cv_scale(cv2, img, float(b[i]))
        x = _cv_scale(cv2, x, float(c[i]), (1.0 - float(c[i])) * _cv_gray_mean(cv2, x))
        gray = cv2.cvtColor(cv2.cvtColor(x, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
        x = cv2.addWeighted(x, float(s[i]), gray, 1.0 - float(s[i]), 0.0)
        if h[i] != 0.0:
            hsv = cv2.cvtColor(x, cv2.COLOR_RGB2HSV)
            if x.dtype == np.uint8:  # H in [0, 180): shift through a table
                lut = ((np.arange(256) + int(round(float(h[i]) * 180))) % 180).astype(np.uint8)
                hsv[..., 0] = cv2.LUT(hsv[..., 0], lut)
            else:  # H in [0, 360)
                hsv[..., 0] = (hsv[..., 0] + float(h[i]) * 360) % 360
            x = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
        return x

    return _per_image(batch, one, "convertScaleAbs x2 + cvtColor(GRAY) + addWeighted + cvtColor(HSV) x2",
                      note="brightness, contrast, saturation, hue from cv2 calls (OpenCV has no color jitter)")


@peer("normalize", "opencv")
def _ocv_normalize(batch, kw):
    mean, std = _mean_std(kw, batch.c)
    dt = kw.get("dtype", "float32")
    if dt != "float32":
        raise Unsupported("cv2 arithmetic: float32 output only")
    m = tuple(mean) + (0.0,) * (4 - batch.c)
    r = tuple(1.0 / v for v in std) + (0.0,) * (4 - batch.c)
    return _per_image(batch, lambda cv2, i, img: cv2.multiply(cv2.subtract(img, m, dtype=cv2.CV_32F), r),
                      "cv2.subtract(CV_32F) + cv2.multiply", note="sample 0's mean and std for every image")
