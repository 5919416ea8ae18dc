"""kornia peers (float32 [0, 1] NCHW input: kornia works in float)."""
from __future__ import annotations

import math

import numpy as np

from ._common import (FLOAT_IN, ONE_PER_BATCH, PEERS, _affine_size, _boxes, _forward, _interp, _k, _kornia,
                      _mean_std, _sigma_k, _t, cycle, hw, peer, per_sample, s0)


@peer("flip", "kornia")
def _kornia_flip(batch, kw):
    K = _kornia("geometry.transform")
    h, v = bool(s0(kw.get("horizontal", True))), bool(s0(kw.get("vertical", False)))
    f, name = (K.vflip, "vflip") if (v and not h) else (K.hflip, "hflip")
    return cycle(batch.torch(float32=True), f, variant=name, note=f"{FLOAT_IN}; {ONE_PER_BATCH}",
                 in_dtype="float32")


@peer("resize", "kornia")
def _kornia_resize(batch, kw):
    K = _kornia("geometry.transform")
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    mode = "area" if interp == "area" else _interp(interp, "kornia")
    return cycle(batch.torch(float32=True), lambda x: K.resize(x, (h, w), interpolation=mode),
                 variant=f"resize({mode})", note=FLOAT_IN, in_dtype="float32")


@peer("resized_crop", "kornia")
def _kornia_resized_crop(batch, kw):
    K = _kornia("geometry.transform")
    b = _boxes(kw, batch.n)
    t, le, bh, bw = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    corners = np.stack([np.stack([le, t], -1), np.stack([le + bw - 1, t], -1),
                        np.stack([le + bw - 1, t + bh - 1], -1), np.stack([le, t + bh - 1], -1)], 1)
    boxes = _t(batch, corners)
    h, w = hw(kw.get("size"), batch.h, batch.w)
    return cycle(batch.torch(float32=True), lambda x: K.crop_and_resize(x, boxes, (h, w)),
                 variant="crop_and_resize", note=f"{FLOAT_IN}; per-sample boxes", in_dtype="float32")


@peer("warp_affine", "kornia")
def _kornia_warp_affine(batch, kw):
    K = _kornia("geometry.transform")
    m = _t(batch, _forward(kw, batch.n)[:, :2, :])
    h, w = _affine_size(kw, batch)
    mode = _interp(kw.get("interpolation", "bilinear"), "kornia")
    return cycle(batch.torch(float32=True), lambda x: K.warp_affine(x, m, dsize=(h, w), mode=mode,
                                                                    padding_mode="zeros", align_corners=True),
                 variant="warp_affine", note=f"{FLOAT_IN}; per-sample matrices", in_dtype="float32")


@peer("warp_perspective", "kornia")
def _kornia_warp_perspective(batch, kw):
    K = _kornia("geometry.transform")
    m = _t(batch, _forward(kw, batch.n, dims=3))
    h, w = _affine_size(kw, batch)
    mode = _interp(kw.get("interpolation", "bilinear"), "kornia")
    return cycle(batch.torch(float32=True), lambda x: K.warp_perspective(x, m, dsize=(h, w), mode=mode,
                                                                         padding_mode="zeros", align_corners=True),
                 variant="warp_perspective", note=f"{FLOAT_IN}; per-sample matrices", in_dtype="float32")


@peer("rotate", "kornia")
def _kornia_rotate(batch, kw):
    K = _kornia("geometry.transform")
    ang = _t(batch, per_sample(kw.get("angle", 0), batch.n))
    mode = _interp(kw.get("interpolation", "bilinear"), "kornia")
    return cycle(batch.torch(float32=True), lambda x: K.rotate(x, ang, mode=mode, padding_mode="zeros",
                                                               align_corners=True),
                 variant="rotate", note=f"{FLOAT_IN}; per-sample angles", in_dtype="float32")


def _kornia_per_sample(name, module, fname, param, default=1.0, transform=None, dtype="float32"):
    @peer(name, "kornia")
    def make(batch, kw):
        K = _kornia(module)
        f = getattr(K, fname)
        vals = per_sample(kw.get(param, default), batch.n, dtype=np.float64)
        vals = transform(vals, batch) if transform else vals
        t = _t(batch, vals, dtype)
        return cycle(batch.torch(float32=True), lambda x: f(x, t), variant=f"{fname}",
                     note=f"{FLOAT_IN}; per-sample values", in_dtype="float32")

    return make
_kornia_per_sample("brightness", "enhance", "adjust_brightness", "factor", transform=lambda v, b: v - 1.0)
PEERS["brightness"]["kornia"].note = "kornia's brightness adds (factor - 1)"
_kornia_per_sample("contrast", "enhance", "adjust_contrast", "factor")
_kornia_per_sample("saturation", "enhance", "adjust_saturation", "factor")
_kornia_per_sample("hue", "enhance", "adjust_hue", "shift", default=0.0, transform=lambda v, b: v * 2 * math.pi)
_kornia_per_sample("sharpen", "enhance", "sharpness", "factor")
_kornia_per_sample("solarize", "enhance", "solarize", "threshold", default=128.0,
                   transform=lambda v, b: v / b.maxval)


@peer("color_jitter", "kornia")
def _kornia_color_jitter(batch, kw):
    K = _kornia("enhance")
    n = batch.n
    b = _t(batch, per_sample(kw.get("brightness", 1.0), n) - 1.0)
    c = _t(batch, per_sample(kw.get("contrast", 1.0), n))
    s = _t(batch, per_sample(kw.get("saturation", 1.0), n))
    h = _t(batch, per_sample(kw.get("hue", 0.0), n) * 2 * math.pi)

    def run(x):
        return K.adjust_hue(K.adjust_saturation(K.adjust_contrast(K.adjust_brightness(x, b), c), s), h)

    return cycle(batch.torch(float32=True), run, variant="4 x adjust_*", note=f"{FLOAT_IN}; per-sample values",
                 in_dtype="float32")


@peer("gamma", "kornia")
def _kornia_gamma(batch, kw):
    K = _kornia("enhance")
    g = _t(batch, per_sample(kw.get("gamma", 1.0), batch.n))
    gain = _t(batch, per_sample(kw.get("gain", 1.0), batch.n))
    return cycle(batch.torch(float32=True), lambda x: K.adjust_gamma(x, g, gain), variant="adjust_gamma",
                 note=f"{FLOAT_IN}; per-sample values", in_dtype="float32")


@peer("grayscale", "kornia")
def _kornia_grayscale(batch, kw):
    K = _kornia("color")
    return cycle(batch.torch(float32=True), K.rgb_to_grayscale, variant="rgb_to_grayscale", note=FLOAT_IN,
                 in_dtype="float32")


@peer("invert", "kornia")
def _kornia_invert(batch, kw):
    K = _kornia("enhance")
    return cycle(batch.torch(float32=True), K.invert, variant="invert", note=FLOAT_IN, in_dtype="float32")


@peer("posterize", "kornia")
def _kornia_posterize(batch, kw):
    K = _kornia("enhance")
    bits = _t(batch, per_sample(kw.get("bits", 4), batch.n, dtype=np.int64), "int64")
    return cycle(batch.torch(float32=True), lambda x: K.posterize(x, bits), variant="posterize",
                 note=f"{FLOAT_IN}; per-sample values", in_dtype="float32")


@peer("equalize", "kornia")
def _kornia_equalize(batch, kw):
    K = _kornia("enhance")
    return cycle(batch.torch(float32=True), K.equalize, variant="equalize", note=FLOAT_IN, in_dtype="float32")


@peer("normalize", "kornia")
def _kornia_normalize(batch, kw):
    K = _kornia("enhance")
    mean, std = _mean_std(kw, batch.c)
    m, s = _t(batch, np.asarray(mean) / 255.0), _t(batch, np.asarray(std) / 255.0)
    return cycle(batch.torch(float32=True), lambda x: K.normalize(x, m, s), variant="normalize",
                 note=f"{FLOAT_IN} (the cast is not timed)", in_dtype="float32")


@peer("gaussian_blur", "kornia")
def _kornia_gaussian_blur(batch, kw):
    K = _kornia("filters")
    s, k = _sigma_k(kw)
    sig = per_sample(kw.get("sigma", 1.0), batch.n, dtype=np.float64)
    sig = _t(batch, np.stack([sig, sig], -1))
    return cycle(batch.torch(float32=True), lambda x: K.gaussian_blur2d(x, (k, k), sig, border_type="reflect"),
                 variant=f"gaussian_blur2d({k}x{k})", note=f"{FLOAT_IN}; per-sample sigma", in_dtype="float32")


@peer("box_blur", "kornia")
def _kornia_box_blur(batch, kw):
    K = _kornia("filters")
    k = _k(kw)
    return cycle(batch.torch(float32=True), lambda x: K.box_blur(x, (k, k), border_type="reflect"),
                 variant=f"box_blur({k}x{k})", note=FLOAT_IN, in_dtype="float32")


@peer("median_blur", "kornia")
def _kornia_median_blur(batch, kw):
    K = _kornia("filters")
    k = _k(kw)
    return cycle(batch.torch(float32=True), lambda x: K.median_blur(x, (k, k)), variant=f"median_blur({k}x{k})",
                 note=FLOAT_IN, in_dtype="float32")
