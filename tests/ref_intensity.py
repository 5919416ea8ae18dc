"""Independent NumPy references for the intensity ops: float64 maths on one HWC sample.

Written from the documented formulas (torchvision / PIL / DALI semantics), not from the
library's code. ``m`` is the top of the value range: 255 for uint8, 1 for floats.
"""
from __future__ import annotations

import numpy as np


def top(dtype):
    return 255.0 if np.dtype(dtype) == np.uint8 else 1.0


def gamma(img, g, gain, m):
    return m * np.clip(gain * (np.maximum(img, 0) / m) ** g, 0, 1)


def invert(img, m):
    return m - img


def solarize(img, threshold, m):
    return np.where(img >= threshold, m - img, img)


def posterize(img, bits, is_u8):
    bits = int(bits)
    if is_u8:
        mask = (0xFF << (8 - bits)) & 0xFF
        return (img.astype(np.uint8) & np.uint8(mask)).astype(np.float64)
    levels = 2.0 ** bits
    return np.clip(np.floor(img * levels), 0, levels - 1) / levels


def equalize_bins(img, is_u8):
    """torchvision's float -> uint8 conversion: x * 255.999 in float32, truncated."""
    if is_u8:
        return img.astype(np.int64)
    prod = img.astype(np.float32) * np.float32(255.999)
    return np.clip(np.floor(prod.astype(np.float64)), 0, 255).astype(np.int64)


def equalize_table(hist):
    """PIL's ImageOps.equalize table for one 256-bin histogram."""
    nonzero = np.flatnonzero(hist)
    step = (hist.sum() - hist[nonzero[-1]]) // 255
    if step == 0:
        return np.arange(256)
    lut = np.empty(256, np.int64)
    n = step // 2
    for i in range(256):
        lut[i] = min(n // step, 255)
        n += hist[i]
    return lut


def equalize(img, is_u8):
    bins = equalize_bins(img, is_u8)
    out = np.empty(img.shape, np.float64)
    for c in range(img.shape[2]):
        hist = np.bincount(bins[..., c].ravel(), minlength=256)
        out[..., c] = equalize_table(hist)[bins[..., c]]
    return out if is_u8 else out / 255.0


def normalize(img, mean, std):
    return (img - np.asarray(mean, np.float64)) / np.asarray(std, np.float64)


def dali_anchor(pos, size, crop):
    """DALI: std::roundf(float(pos) * float(size - crop)), half away from zero."""
    v = float(np.float32(pos) * np.float32(size - crop))
    return int(np.floor(v + 0.5)) if v >= 0 else int(np.ceil(v - 0.5))


def crop_mirror_normalize(img, crop, pos, mirror, mean, std, pad):
    h, w = img.shape[:2]
    ch, cw = crop if crop is not None else (h, w)
    top_, left = dali_anchor(pos[0], h, ch), dali_anchor(pos[1], w, cw)
    win = img[top_:top_ + ch, left:left + cw]
    if mirror:
        win = win[:, ::-1]
    out = normalize(win, mean, std)
    if pad and img.shape[2] == 3:
        out = np.concatenate([out, np.zeros(out.shape[:2] + (1,))], axis=2)
    return out
