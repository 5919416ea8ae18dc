"""Independent float64 NumPy references for the filter, noise and occlusion ops.

Each takes one HWC float64 sample and returns the expected float64 HWC output (the test
runner applies the library's rounding). They follow the documented definitions and know
nothing of the library's code: Philox4x32-10 is re-implemented here, vectorised over
NumPy uint64 arrays, and Box-Muller uses NumPy's float64 log/cos/sin.
"""
from __future__ import annotations

import numpy as np

# -- filters ------------------------------------------------------------------------------


def opencv_gaussian_ksize(sigma, uint8):
    """cv::GaussianBlur's size for ksize (0, 0): cvRound(sigma * (3 or 4) * 2 + 1) | 1."""
    return int(np.rint(sigma * (3 if uint8 else 4) * 2 + 1)) | 1


def gaussian_taps(k, sigma):
    x = np.arange(k) - (k - 1) / 2.0
    g = np.exp(-(x * x) / (2.0 * sigma * sigma))
    return g / g.sum()


def separable(img, taps):
    """sum_i sum_j t_i t_j img[refl(y + i - r), refl(x + j - r)], reflect-101 borders."""
    k = len(taps)
    r = k // 2
    h, w = img.shape[:2]
    p = np.pad(img, ((r, r), (r, r), (0, 0)), mode="reflect")  # numpy "reflect" = reflect-101
    rows = sum(taps[j] * p[:, j:j + w] for j in range(k))
    return sum(taps[i] * rows[i:i + h] for i in range(k))


def gaussian_blur(img, sigma, k=None, uint8=False):
    k = opencv_gaussian_ksize(sigma, uint8) if k is None else int(k)
    return separable(img, gaussian_taps(k, sigma))


def box_blur(img, k):
    """Mean over the k x k window, reflect-101 borders (a direct 2-D sum)."""
    k = int(k)
    r = k // 2
    h, w = img.shape[:2]
    p = np.pad(img, ((r, r), (r, r), (0, 0)), mode="reflect")
    acc = np.zeros(img.shape)
    for i in range(k):
        for j in range(k):
            acc += p[i:i + h, j:j + w]
    return acc / (k * k)


def sharpen(img, factor, uint8):
    """torchvision.transforms.v2.functional.adjust_sharpness (with the library's rounding)."""
    h, w = img.shape[:2]
    if h <= 2 or w <= 2:
        return img.copy()
    kern = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float64) / 13.0
    blur = np.zeros((h - 2, w - 2, img.shape[2]))
    for i in range(3):
        for j in range(3):
            blur += kern[i, j] * img[i:i + h - 2, j:j + w - 2]
    if uint8:
        blur = np.round(blur)
    out = img.copy()
    inner = out[1:-1, 1:-1]
    out[1:-1, 1:-1] = inner + (1.0 - factor) * (blur - inner)
    return np.clip(out, 0, 255.0 if uint8 else 1.0)


def median_blur(img, k):
    """Median of the k x k window per channel, edge pixels replicated (cv2.medianBlur)."""
    k = int(k)
    r = k // 2
    h, w = img.shape[:2]
    p = np.pad(img, ((r, r), (r, r), (0, 0)), mode="edge")
    win = np.stack([p[i:i + h, j:j + w] for i in range(k) for j in range(k)])
    return np.median(win, axis=0)


# -- Philox4x32-10, vectorised -------------------------------------------------------------

_M = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """ctr: 4 uint64 arrays (32-bit values), key: 2 ints -> 4 uint64 arrays of random words.

    Random123's philox4x32: 10 rounds of (hi, lo) = M0 * c0 and M1 * c2, then
    c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0), the key bumped by the Weyl constants.
    """
    c0, c1, c2, c3 = (np.asarray(c, np.uint64) & np.uint64(_M) for c in ctr)
    k0, k1 = int(key[0]), int(key[1])
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & np.uint64(_M),
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & np.uint64(_M))
        k0 = (k0 + 0x9E3779B9) & _M
        k1 = (k1 + 0xBB67AE85) & _M
    return c0, c1, c2, c3


def seed_key(seed):
    return seed & _M, seed >> 32


def gaussian_noise_z(h, w, c, n, seed):
    """The documented normals of sample n: element e = x*C + c of row y uses lane e % 4 of
    the block with counter (e // 4, y, n, 0); lanes (0, 1) and (2, 3) are Box-Muller pairs
    with u1 = (r_a + 1) / 2^32 and angle 2 pi floor(r_b / 32) / 2^27."""
    m = w * c
    nq = -(-m // 4)
    q, y = np.meshgrid(np.arange(nq), np.arange(h))
    words = philox4x32_10((q, y, np.full_like(q, n), np.zeros_like(q)), seed_key(seed))
    z = np.empty((h, nq, 4))
    for a, b, (i, j) in ((words[0], words[1], (0, 1)), (words[2], words[3], (2, 3))):
        rad = np.sqrt(-2.0 * np.log((a.astype(np.float64) + 1.0) / 2.0 ** 32))
        ang = 2.0 * np.pi * (b >> np.uint64(5)).astype(np.float64) / 2.0 ** 27
        z[:, :, i] = rad * np.cos(ang)
        z[:, :, j] = rad * np.sin(ang)
    return z.reshape(h, nq * 4)[:, :m].reshape(h, w, c)


def gaussian_noise(img, n, mean, std, seed):
    h, w, c = img.shape
    return img + mean + std * gaussian_noise_z(h, w, c, n, seed)


def salt_and_pepper(img, n, prob, salt_vs_pepper, seed, white):
    """Pixel (y, x) draws lane x % 4 of the block with counter (x // 4, y, n, 1)."""
    h, w, _ = img.shape
    nq = -(-w // 4)
    q, y = np.meshgrid(np.arange(nq), np.arange(h))
    words = philox4x32_10((q, y, np.full_like(q, n), np.ones_like(q)), seed_key(seed))
    r = np.stack(words, -1).reshape(h, nq * 4)[:, :w]
    t_noisy = np.floor(prob * 2.0 ** 32)
    t_salt = np.floor(prob * salt_vs_pepper * 2.0 ** 32)
    rf = r.astype(np.float64)  # exact: r < 2^53
    out = img.copy()
    out[rf < t_noisy] = 0.0
    out[rf < t_salt] = white
    return out


# -- occlusion ----------------------------------------------------------------------------


def erase(img, boxes, value):
    out = img.copy()
    h, w = img.shape[:2]
    for top, left, bh, bw in np.asarray(boxes, np.int64).reshape(-1, 4):
        y0, y1 = max(top, 0), min(top + bh, h)
        x0, x1 = max(left, 0), min(left + bw, w)
        if y1 > y0 and x1 > x0:
            out[y0:y1, x0:x1] = value
    return out


def grid_mask_keep(h, w, tile, ratio, angle_deg, shift_yx):
    """(keep mask, margin): keep[y, x] is False on dropped squares; margin is the distance
    (in pixels) of the decision from a square's edge, to skip ambiguous pixels in tests."""
    a = np.deg2rad(angle_deg)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    u = x * np.cos(a) - y * np.sin(a) - shift_yx[1]
    v = x * np.sin(a) + y * np.cos(a) - shift_yx[0]
    mu, mv = np.mod(u, tile), np.mod(v, tile)
    thr = ratio * tile
    dropped = (mu < thr) & (mv < thr)
    margin = np.minimum.reduce([np.abs(mu - thr), np.abs(mv - thr), mu, mv, tile - mu, tile - mv])
    return ~dropped, margin
