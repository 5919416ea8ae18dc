"""Numba twin of gaussian_noise: ``out = x + mean + std * z`` with z ~ N(0, 1).

Element (n, y, x, c) of an image with C channels is element e = x*C + c of its row; it
takes lane e % 4 of the Philox4x32-10 block with counter (e // 4, y, n, 0) and key =
seed, and Box-Muller turns lanes (0, 1) and (2, 3) into normals. So one Philox call
serves four elements and nothing depends on launch geometry or layout. The float maths
follows the rules of :mod:`._philox` (bit-identical to kernels/gaussian_noise.cu).

params row: [mean, std, seed chunks 0..3, sample index n] (float32-exact values; n comes
from params so that a varshape batch, launched per sample, keeps each sample's index).
"""
import math

import numpy as np
from numba import cuda, prange

from ._dual import dual, specialize
from ._philox import box_muller, fma32, philox4x32_10, seed_key

F32 = np.float32
U64 = np.uint64
HALF, F0, F255 = F32(0.5), F32(0.0), F32(255.0)
DOMAIN = U64(0)  # counter word 3: keeps gaussian_noise and salt_and_pepper streams apart


@dual
def store32(v, rnd):
    """The float32 store rule of CUDA C's from_float: floor(v + 0.5f), saturated (uint8)."""
    if rnd:
        v = F32(math.floor(v + HALF))
        if v < F0:
            v = F0
        if v > F255:
            v = F255
    return v


@dual
def noise_block(src, dst, n, y, q, p, rnd):
    """Elements 4q .. 4q+3 of row y of array sample n (the counter takes the batch index p[6])."""
    nc = dst.shape[3]
    m = dst.shape[2] * nc
    k0, k1 = seed_key(p, 2)
    r0, r1, r2, r3 = philox4x32_10(U64(q), U64(y), U64(int(p[6])), DOMAIN, k0, k1)
    za, zb = box_muller(r0, r1)
    zc, zd = box_muller(r2, r3)
    mean = F32(p[0])
    std = F32(p[1])
    for lane in range(4):
        e = 4 * q + lane
        if e < m:
            x = e // nc
            c = e - x * nc
            z = za
            if lane == 1:
                z = zb
            elif lane == 2:
                z = zc
            elif lane == 3:
                z = zd
            dst[n, y, x, c] = store32(fma32(std, z, F32(src[n, y, x, c]) + mean), rnd)


def _noise_cpu(src, dst, params, rnd):
    n_, h, w, nc = dst.shape
    nq = (w * nc + 3) // 4
    for n in prange(n_):
        p = params[n]
        for y in range(h):
            for q in range(nq):
                noise_block(src, dst, n, y, q, p, rnd)


def _noise_cuda(src, dst, params, rnd):
    q, y, n = cuda.grid(3)
    if n < dst.shape[0] and y < dst.shape[1] and 4 * q < dst.shape[2] * dst.shape[3]:
        noise_block(src, dst, n, y, q, params[n], rnd)


def kernel(target):
    """``kernel(src, dst, params, rnd)`` on NHWC arrays; ``rnd``: round and saturate (uint8)."""
    return specialize(_noise_cpu if target == "cpu" else _noise_cuda, target, "kernel")
