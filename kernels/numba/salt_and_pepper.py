"""Numba twin of salt_and_pepper: each pixel (all its channels) becomes salt, pepper, or
stays, decided by one random 32-bit word r.

Pixel (n, y, x) takes lane x % 4 of the Philox4x32-10 block with counter (x // 4, y, n, 1)
and key = seed: salt if r < t_salt, pepper (0) if t_salt <= r < t_noisy, else unchanged,
with t_noisy = floor(prob 2^32) and t_salt = floor(prob salt_vs_pepper 2^32). Integer
comparisons only, so every backend agrees exactly (kernels/salt_and_pepper.cu).

params row: [t_noisy lo16, hi, t_salt lo16, hi, seed chunks 0..3, salt value, sample index n]
(n from params: a varshape batch, launched per sample, keeps each sample's index).
"""
import numpy as np
from numba import cuda, prange

from ._dual import dual, specialize
from ._philox import philox4x32_10, seed_key

U64 = np.uint64
SH16 = U64(16)
DOMAIN = U64(1)


@dual
def threshold(p, i):
    return U64(int(p[i])) | (U64(int(p[i + 1])) << SH16)


@dual
def sp_block(src, dst, n, y, q, p):
    """Pixels 4q .. 4q+3 of row y of array sample n (the counter takes the batch index p[9])."""
    w = dst.shape[2]
    nc = dst.shape[3]
    t_noisy = threshold(p, 0)
    t_salt = threshold(p, 2)
    k0, k1 = seed_key(p, 4)
    r = philox4x32_10(U64(q), U64(y), U64(int(p[9])), DOMAIN, k0, k1)
    for lane in range(4):
        x = 4 * q + lane
        if x < w:
            rl = r[lane]
            if rl < t_salt:
                for c in range(nc):
                    dst[n, y, x, c] = p[8]
            elif rl < t_noisy:
                for c in range(nc):
                    dst[n, y, x, c] = 0
            else:
                for c in range(nc):
                    dst[n, y, x, c] = src[n, y, x, c]


def _sp_cpu(src, dst, params):
    n_, h, w, nc = dst.shape
    nq = (w + 3) // 4
    for n in prange(n_):
        p = params[n]
        for y in range(h):
            for q in range(nq):
                sp_block(src, dst, n, y, q, p)


def _sp_cuda(src, dst, params):
    q, y, n = cuda.grid(3)
    if n < dst.shape[0] and y < dst.shape[1] and 4 * q < dst.shape[2]:
        sp_block(src, dst, n, y, q, params[n])


def kernel(target):
    """``kernel(src, dst, params)`` on NHWC arrays."""
    return specialize(_sp_cpu if target == "cpu" else _sp_cuda, target, "kernel")
