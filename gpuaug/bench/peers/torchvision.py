"""torchvision peers: ``transforms.v2.functional`` on CUDA (or CPU) NCHW tensors."""
from __future__ import annotations

import math

import numpy as np

from ._common import (ONE_PER_BATCH, Unsupported, _boxes, _cmn_window, _erase_boxes, _forward, _import,
                      _interp, _mean_std, _pad_sides, _sigma_k, _tvf, cycle, f0, hw, i0, peer, s0)


@peer("flip", "torchvision")
def _tv_flip(batch, kw):
    F = _tvf()
    h, v = bool(s0(kw.get("horizontal", True))), bool(s0(kw.get("vertical", False)))
    f, name = (F.vertical_flip, "F.vertical_flip") if (v and not h) else (F.horizontal_flip, "F.horizontal_flip")
    return cycle(batch.torch(), f, variant=name, note=f"whole batch flipped ({ONE_PER_BATCH})")


@peer("crop", "torchvision")
def _tv_crop(batch, kw):
    F = _tvf()
    t, le = i0(kw.get("top", 0)), i0(kw.get("left", 0))
    h, w = int(kw["height"]), int(kw["width"])
    return cycle(batch.torch(), lambda x: F.crop(x, t, le, h, w).contiguous(), variant="F.crop().contiguous()",
                 note="one window for the batch (sample 0's); a crop is a view, .contiguous() copies it")


@peer("center_crop", "torchvision")
def _tv_center_crop(batch, kw):
    F = _tvf()
    h, w = hw(kw.get("size"), batch.h, batch.w)
    return cycle(batch.torch(), lambda x: F.center_crop(x, [h, w]).contiguous(),
                 variant="F.center_crop().contiguous()")


@peer("pad", "torchvision")
def _tv_pad(batch, kw):
    F = _tvf()
    t, b, le, r = (int(v) for v in _pad_sides(kw, batch.n)[0])
    mode = kw.get("mode", "constant")
    fill = float(f0(kw.get("value", 0)))
    return cycle(batch.torch(), lambda x: F.pad(x, [le, t, r, b], fill=fill, padding_mode=mode),
                 variant=f"F.pad({mode})", note=ONE_PER_BATCH)


@peer("resize", "torchvision")
def _tv_resize(batch, kw):
    F = _tvf()
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    aa = interp == "area"
    return cycle(batch.torch(), lambda x: F.resize(x, [h, w], interpolation=_interp(interp), antialias=aa),
                 variant=f"F.resize({'bilinear, antialias' if aa else interp})")


@peer("resized_crop", "torchvision")
def _tv_resized_crop(batch, kw):
    F = _tvf()
    t, le, bh, bw = (int(round(v)) for v in _boxes(kw, batch.n)[0])
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    return cycle(batch.torch(), lambda x: F.resized_crop(x, t, le, bh, bw, [h, w], interpolation=_interp(interp),
                                                        antialias=interp == "area"),
                 variant="F.resized_crop", note="one box for the batch (sample 0's)")


@peer("warp_affine", "torchvision")
def _tv_warp_affine(batch, kw):
    F = _tvf()
    m = _forward(kw, batch.n)[0]
    a = m[:2, :2]
    scale = float(math.sqrt(abs(np.linalg.det(a)))) or 1.0
    angle = float(math.degrees(math.atan2(a[1, 0], a[0, 0])))
    interp = kw.get("interpolation", "bilinear")
    note = "one matrix for the batch (sample 0's, as rotation + scale); output keeps the input size"
    return cycle(batch.torch(), lambda x: F.affine(x, angle=angle, translate=[0.0, 0.0], scale=scale,
                                                   shear=[0.0, 0.0], interpolation=_interp(interp)),
                 variant="F.affine", note=note)


@peer("warp_perspective", "torchvision")
def _tv_warp_perspective(batch, kw):
    F = _tvf()
    inv = np.linalg.inv(_forward(kw, batch.n, dims=3)[0])
    inv = inv / inv[2, 2]
    coeffs = [float(v) for v in inv.reshape(-1)[:8]]
    interp = kw.get("interpolation", "bilinear")
    return cycle(batch.torch(), lambda x: F.perspective(x, None, None, interpolation=_interp(interp),
                                                        coefficients=coeffs),
                 variant="F.perspective", note="one matrix for the batch (sample 0's)")


@peer("rotate", "torchvision")
def _tv_rotate(batch, kw):
    F = _tvf()
    a = f0(kw.get("angle", 0))
    interp = kw.get("interpolation", "bilinear")
    return cycle(batch.torch(), lambda x: F.rotate(x, a, interpolation=_interp(interp)), variant="F.rotate",
                 note=ONE_PER_BATCH)


def _tv_simple(name, fname, param, default=1.0, transform=None):
    @peer(name, "torchvision")
    def make(batch, kw):
        F = _tvf()
        f = getattr(F, fname)
        v = f0(kw.get(param, default))
        v = transform(v, batch) if transform else v
        return cycle(batch.torch(), lambda x: f(x, v), variant=f"F.{fname}", note=ONE_PER_BATCH)

    return make


_tv_simple("brightness", "adjust_brightness", "factor")

_tv_simple("contrast", "adjust_contrast", "factor")

_tv_simple("saturation", "adjust_saturation", "factor")

_tv_simple("hue", "adjust_hue", "shift", default=0.0)

_tv_simple("sharpen", "adjust_sharpness", "factor")

_tv_simple("solarize", "solarize", "threshold", default=128.0)


@peer("color_jitter", "torchvision")
def _tv_color_jitter(batch, kw):
    F = _tvf()
    b, c = f0(kw.get("brightness", 1.0)), f0(kw.get("contrast", 1.0))
    s, h = f0(kw.get("saturation", 1.0)), f0(kw.get("hue", 0.0))

    def run(x):
        return F.adjust_hue(F.adjust_saturation(F.adjust_contrast(F.adjust_brightness(x, b), c), s), h)

    return cycle(batch.torch(), run, variant="4 x F.adjust_*", note=f"ColorJitter's four calls; {ONE_PER_BATCH}")


@peer("gamma", "torchvision")
def _tv_gamma(batch, kw):
    F = _tvf()
    g, gain = f0(kw.get("gamma", 1.0)), f0(kw.get("gain", 1.0))
    return cycle(batch.torch(), lambda x: F.adjust_gamma(x, g, gain), variant="F.adjust_gamma", note=ONE_PER_BATCH)


@peer("grayscale", "torchvision")
def _tv_grayscale(batch, kw):
    F = _tvf()
    k = int(kw.get("num_output_channels", 1))
    return cycle(batch.torch(), lambda x: F.rgb_to_grayscale(x, num_output_channels=k), variant="F.rgb_to_grayscale")


@peer("invert", "torchvision")
def _tv_invert(batch, kw):
    F = _tvf()
    return cycle(batch.torch(), F.invert, variant="F.invert")


@peer("posterize", "torchvision")
def _tv_posterize(batch, kw):
    F = _tvf()
    if batch.dtype != np.uint8:
        raise Unsupported("torchvision posterizes uint8 only")
    bits = i0(kw.get("bits", 4))
    return cycle(batch.torch(), lambda x: F.posterize(x, bits), variant="F.posterize", note=ONE_PER_BATCH)


@peer("channel_shuffle", "torchvision")
def _tv_channel_shuffle(batch, kw):
    F = _tvf()
    perm = [int(v) for v in s0(kw["permutation"], 1)]
    return cycle(batch.torch(), lambda x: F.permute_channels(x, perm), variant="F.permute_channels",
                 note=ONE_PER_BATCH)


@peer("equalize", "torchvision")
def _tv_equalize(batch, kw):
    F = _tvf()
    return cycle(batch.torch(), F.equalize, variant="F.equalize")


@peer("autocontrast", "torchvision")
def _tv_autocontrast(batch, kw):
    F = _tvf()
    return cycle(batch.torch(), F.autocontrast, variant="F.autocontrast")


@peer("normalize", "torchvision")
def _tv_normalize(batch, kw):
    F = _tvf()
    torch = _import("torch", "torch")
    mean, std = _mean_std(kw, batch.c)
    return cycle(batch.torch(), lambda x: F.normalize(F.to_dtype(x, torch.float32, scale=False), mean, std),
                 variant="F.normalize(F.to_dtype(x))", note="cast then normalise (two kernels); NCHW out")


@peer("crop_mirror_normalize", "torchvision")
def _tv_cmn(batch, kw):
    F = _tvf()
    torch = _import("torch", "torch")
    h, w, py, px = _cmn_window(kw, batch)
    t, le = int(round(py[0] * (batch.h - h))), int(round(px[0] * (batch.w - w)))
    mirror = bool(s0(kw.get("mirror", False)))
    mean, std = _mean_std(kw, batch.c)

    def run(x):
        y = F.crop(x, t, le, h, w)
        if mirror:
            y = F.horizontal_flip(y)
        return F.normalize(F.to_dtype(y, torch.float32, scale=False), mean, std)

    return cycle(batch.torch(), run, variant="F.crop, F.horizontal_flip, F.normalize", note=ONE_PER_BATCH)


@peer("gaussian_blur", "torchvision")
def _tv_gaussian_blur(batch, kw):
    F = _tvf()
    s, k = _sigma_k(kw)
    return cycle(batch.torch(), lambda x: F.gaussian_blur(x, [k, k], [s, s]), variant=f"F.gaussian_blur({k}x{k})",
                 note=ONE_PER_BATCH)


@peer("gaussian_noise", "torchvision")
def _tv_gaussian_noise(batch, kw):
    F = _tvf()
    torch = _import("torch", "torch")
    m, s = f0(kw.get("mean", 0.0)) / batch.maxval, f0(kw.get("std", 0.1)) / batch.maxval
    dt = torch.uint8 if batch.dtype == np.uint8 else None

    def run(x):
        y = F.gaussian_noise(F.to_dtype(x, torch.float32, scale=True), mean=m, sigma=s, clip=True)
        return F.to_dtype(y, dt, scale=True) if dt is not None else y

    return cycle(batch.torch(), run, variant="F.gaussian_noise between to_dtype casts",
                 note=f"torchvision's noise needs float: cast, noise, cast back; {ONE_PER_BATCH}")


@peer("erase", "torchvision")
def _tv_erase(batch, kw):
    F = _tvf()
    torch = _import("torch", "torch")
    t, le, bh, bw = (int(v) for v in _erase_boxes(kw, batch.n)[0, 0])
    xs = batch.torch()
    v = torch.tensor(f0(kw.get("value", 0)), device=xs[0].device).to(xs[0].dtype)
    return cycle(xs, lambda x: F.erase(x, t, le, bh, bw, v, inplace=False),
                 variant="F.erase", note="one box for the batch (sample 0's first); copies the batch")
