"""Independent float64 NumPy references for warp_affine, warp_perspective and rotate.

Written from the documented conventions (OpenCV's): matrices map source pixels to
destination pixels; each output pixel (x, y) samples the source at inverse(M) (x, y, 1)
(the matrix itself with inverse_map); pixel centres at integers; nearest = floor(u + 0.5);
bilinear = (1-wx)(1-wy) p00 + wx (1-wy) p01 + (1-wx) wy p10 + wx wy p11 with every tap
outside the image following the border rule; coordinates clamped to +-2**24 (NaN and
points at infinity -> outside). Fill values are first converted to the image dtype.
Nothing here calls the library.
"""
from __future__ import annotations

import math

import numpy as np

LIMIT = 2.0 ** 24


def fill_in_dtype(fill, dtype):
    f = np.asarray(fill, np.float64)
    if np.dtype(dtype) == np.uint8:
        return np.clip(np.floor(f + 0.5), 0, 255)
    return f.astype(dtype).astype(np.float64)


def _border(i, n, border):
    """Index arrays -> valid indices, and a mask of taps that read the fill value."""
    inside = (i >= 0) & (i < n)
    if border == "constant":
        return np.clip(i, 0, n - 1), ~inside
    if border == "replicate":
        return np.clip(i, 0, n - 1), np.zeros_like(inside)
    assert border == "reflect"  # BORDER_REFLECT_101: ...cb|abcd|cb...
    if n == 1:
        return np.zeros_like(i), np.zeros_like(inside)
    period = 2 * (n - 1)
    j = np.mod(i, period)
    return np.where(j < n, j, period - j), np.zeros_like(inside)


def _clamp(u):
    u = np.where(np.isnan(u), -LIMIT, u)
    return np.clip(u, -LIMIT, LIMIT)


def _taps(img, yi, xi, border, fill):
    """img (h, w, C) at integer arrays (yi, xi) -> (..., C), fill where the border says so."""
    h, w, c = img.shape
    yy, my = _border(yi, h, border)
    xx, mx = _border(xi, w, border)
    v = img[yy, xx]
    f = np.broadcast_to(np.asarray(fill, np.float64), (c,))
    return np.where((my | mx)[..., None], f, v)


def remap(img, u, v, interpolation, border, fill):
    """Sample img (h, w, C) float64 at source points (u = x, v = y), arrays of shape (H, W)."""
    u, v = _clamp(u), _clamp(v)
    if interpolation == "nearest":
        return _taps(img, np.floor(v + 0.5).astype(np.int64), np.floor(u + 0.5).astype(np.int64), border, fill)
    x0, y0 = np.floor(u), np.floor(v)
    wx, wy = (u - x0)[..., None], (v - y0)[..., None]
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    p00 = _taps(img, y0, x0, border, fill)
    p01 = _taps(img, y0, x0 + 1, border, fill)
    p10 = _taps(img, y0 + 1, x0, border, fill)
    p11 = _taps(img, y0 + 1, x0 + 1, border, fill)
    return ((1 - wx) * (1 - wy) * p00 + wx * (1 - wy) * p01 + (1 - wx) * wy * p10 + wx * wy * p11)


def warp_perspective(img, matrix, size=None, interpolation="bilinear", border="constant", fill=0,
                     inverse_map=False):
    """img (h, w, C) float64; matrix (3, 3) source -> destination (or the inverse)."""
    m = np.asarray(matrix, np.float64)
    a = m if inverse_map else np.linalg.inv(m)
    hh, ww = size if size is not None else img.shape[:2]
    ys, xs = np.mgrid[0:hh, 0:ww].astype(np.float64)
    X = a[0, 0] * xs + a[0, 1] * ys + a[0, 2]
    Y = a[1, 0] * xs + a[1, 1] * ys + a[1, 2]
    W = a[2, 0] * xs + a[2, 1] * ys + a[2, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(W == 0, -LIMIT, X / W)
        v = np.where(W == 0, -LIMIT, Y / W)
    return remap(img, u, v, interpolation, border, fill)


def warp_affine(img, matrix, size=None, interpolation="bilinear", border="constant", fill=0,
                inverse_map=False):
    """img (h, w, C) float64; matrix (2, 3) source -> destination (or the inverse)."""
    m = np.vstack([np.asarray(matrix, np.float64), [0.0, 0.0, 1.0]])
    return warp_perspective(img, m, size, interpolation, border, fill, inverse_map)


def rotation_matrix(center, angle, scale):
    """OpenCV's getRotationMatrix2D, written out (angle in degrees)."""
    r = math.radians(angle)
    a, b = scale * math.cos(r), scale * math.sin(r)
    if angle % 90 == 0:  # the library uses exact cos/sin there
        k = int(angle // 90) % 4
        a, b = scale * [1, 0, -1, 0][k], scale * [0, 1, 0, -1][k]
    cx, cy = center
    return np.array([[a, b, (1 - a) * cx - b * cy], [-b, a, b * cx + (1 - a) * cy]])


def rotate(img, angle, center=None, scale=1.0, interpolation="bilinear", border="constant", fill=0):
    h, w = img.shape[:2]
    if center is None:
        center = ((w - 1) / 2, (h - 1) / 2)
    return warp_affine(img, rotation_matrix(center, angle, scale), None, interpolation, border, fill)


# -- test cases ------------------------------------------------------------------------

def random_affine(rng, n, h, w):
    """(n, 2, 3) source -> destination maps that keep most of an h x w image in view:
    rotation, scale, shear about the centre, then a shift."""
    out = np.empty((n, 2, 3))
    cx, cy = (w - 1) / 2, (h - 1) / 2
    for i in range(n):
        t = math.radians(rng.uniform(-180, 180))
        s = rng.uniform(0.7, 1.4)
        sh = rng.uniform(-0.2, 0.2)
        a = s * np.array([[math.cos(t), math.sin(t)], [-math.sin(t), math.cos(t)]]) @ [[1, sh], [0, 1]]
        shift = rng.uniform(-4, 4, 2)
        out[i, :, :2] = a
        out[i, :, 2] = [cx, cy] - a @ [cx, cy] + shift
    return out


def random_homography(rng, n, h, w):
    """(n, 3, 3): random_affine with a mild perspective row (w stays within ~[0.8, 1.2])."""
    m = np.zeros((n, 3, 3))
    m[:, :2] = random_affine(rng, n, h, w)
    m[:, 2, 0] = rng.uniform(-0.1, 0.1, n) / max(w, 1)
    m[:, 2, 1] = rng.uniform(-0.1, 0.1, n) / max(h, 1)
    m[:, 2, 2] = 1.0
    return m


def dyadic_inverse_affine(rng, n):
    """(n, 2, 3) destination -> source maps whose entries are multiples of 1/16 chosen so
    that every source coordinate of an integer pixel is an odd multiple of 1/16: exact in
    float32 and never a nearest-neighbour tie (x.5), so GPU nearest matches a float64
    reference exactly."""
    m = np.empty((n, 2, 3))
    for i in range(n):
        # even numerators for the x / y terms, odd for the constant
        m[i, :, :2] = rng.integers(-10, 11, (2, 2)) * 2 / 16
        m[i, :, 2] = (rng.integers(-40, 41, 2) * 2 + 1) / 16
    return m
