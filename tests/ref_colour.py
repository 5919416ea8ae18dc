"""Independent NumPy references for the colour ops: float64, one HWC sample at a time.

They follow torchvision.transforms.v2.functional's code step by step (adjust_brightness,
adjust_contrast, adjust_saturation, adjust_hue with its _rgb_to_hsv / _hsv_to_rgb,
rgb_to_grayscale, permute_channels) in exact arithmetic, with images in [0, maxv] (255 for
uint8, 1 for floats) and ``integer`` True for uint8 (torchvision floors the grayscale of
integer images before blending). They return unrounded values: the test runner applies the
library's store rule. They know nothing of the library's code.
"""
from __future__ import annotations

import numpy as np

from ref_intensity import top  # noqa: F401  (one dtype maximum for the references: 255 uint8, 1 floats)


def gray(img, integer):
    """torchvision's rgb_to_grayscale (0.2989, 0.587, 0.114) of HWC (C >= 3) -> HW; floored
    for integer images (the weighted sum is formed in exact integer arithmetic then)."""
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    if integer and np.all(img[..., :3] == np.round(img[..., :3])):
        k = 2989 * r.astype(np.int64) + 5870 * g.astype(np.int64) + 1140 * b.astype(np.int64)
        return (k // 10000).astype(np.float64)
    v = (2989 * r + 5870 * g + 1140 * b) / 10000
    return np.floor(v) if integer else v


def _colour(img):
    return min(img.shape[-1], 3)


def brightness(img, f, maxv):
    out = img.copy()
    k = _colour(img)
    out[..., :k] = np.clip(f * img[..., :k], 0, maxv)
    return out


def _blend(img, other, f, maxv):
    out = img.copy()
    k = _colour(img)
    out[..., :k] = np.clip(f * img[..., :k] + (1 - f) * other, 0, maxv)
    return out


def mean_gray(img, integer):
    if img.shape[-1] < 3:
        return img[..., 0].mean()
    return gray(img, integer).mean()


def contrast(img, f, maxv, integer):
    return _blend(img, mean_gray(img, integer), f, maxv)


def saturation(img, f, maxv, integer):
    if img.shape[-1] < 3:
        return img.copy()
    return _blend(img, gray(img, integer)[..., None], f, maxv)


def rgb_to_hsv(rgb):
    """torchvision's _rgb_to_hsv on [0, 1] values (PIL's algorithm)."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    maxc, minc = rgb.max(-1), rgb.min(-1)
    eqc = maxc == minc
    cr = maxc - minc
    s = cr / np.where(eqc, 1.0, maxc)
    div = np.where(eqc, 1.0, cr)
    rc, gc, bc = (maxc - r) / div, (maxc - g) / div, (maxc - b) / div
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = np.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return np.stack([h, s, maxc], -1)


def hsv_to_rgb(hsv):
    """torchvision's _hsv_to_rgb."""
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    i = np.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.astype(np.int64) % 6
    p = np.clip(v * (1.0 - s), 0.0, 1.0)
    q = np.clip(v * (1.0 - s * f), 0.0, 1.0)
    t = np.clip(v * (1.0 - s * (1.0 - f)), 0.0, 1.0)
    vpqt = np.stack([v, p, q, t], -1)
    select = np.array([[0, 2, 1, 1, 3, 0], [3, 0, 0, 2, 1, 1], [1, 1, 3, 0, 0, 2]])
    idx = select[:, i]  # (3, H, W)
    return np.take_along_axis(vpqt, np.moveaxis(idx, 0, -1), -1)


def hue(img, shift, maxv):
    if img.shape[-1] < 3 or shift == 0:
        return img.copy()
    hsv = rgb_to_hsv(img[..., :3] / maxv)
    hsv[..., 0] = np.remainder(hsv[..., 0] + shift, 1.0)
    out = img.copy()
    out[..., :3] = hsv_to_rgb(hsv) * maxv
    return out


def color_jitter(img, b, c, s, h, maxv, integer):
    """The four in torchvision's order, in exact arithmetic, no rounding in between."""
    x = brightness(img, b, maxv)
    x = contrast(x, c, maxv, integer)
    x = saturation(x, s, maxv, integer)
    return hue(x, h, maxv)


def color_twist(img, m, maxv):
    m = np.asarray(m, np.float64)
    out = img.copy()
    if img.shape[-1] >= 3:
        out[..., :3] = img[..., :3] @ m[:, :3].T + m[:, 3] * maxv
    return out


def grayscale(img, num_output_channels, integer):
    if img.shape[-1] < 3:
        g = img[..., 0]
    else:
        r, gg, b = img[..., 0], img[..., 1], img[..., 2]
        g = 0.2989 * r + 0.587 * gg + 0.114 * b
        if integer:  # exact, so that the store's round-half-up sees the true value
            g = (2989 * r + 5870 * gg + 1140 * b) / 10000
    return np.repeat(g[..., None], num_output_channels, -1)


def channel_shuffle(img, perm):
    return img[..., list(perm)]


def is_int(dtype):
    return np.dtype(dtype) == np.uint8
