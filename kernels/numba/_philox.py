"""Counter-based random numbers (Philox4x32-10) and reproducible float32 maths for the
Numba twins of the noise ops, written once for ``numba.njit``, ``numba.cuda.jit`` and
the CUDA simulator. kernels/philox.cuh is the CUDA C copy of the same maths; the two
give the same bits.

Integers: 32-bit words travel in uint64 values (products of two words fit, so nothing
wraps), and results are masked back to 32 bits. This behaves alike in Numba (typed
uint64) and in plain Python on NumPy uint64 scalars (the simulator).

Floats: every multiply-add is an explicit fused :func:`fma32`; no product feeds an
addition directly, because the CUDA compilers fuse ``a * b + c`` on their own (NVVM has
no switch to stop it) and the CPU does not. With that rule, plain float32 ``+ - *``,
``sqrt`` and int-to-float conversions are correctly rounded everywhere, so Numba CPU,
Numba CUDA, the simulator and CUDA C agree bit for bit. Box-Muller uses polynomial
log / sin / cos (Cephes coefficients, ~1 ulp) instead of libm, whose last bit differs
between CPU and GPU.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numba import types
from numba.extending import intrinsic, overload

from ._dual import dual

U64 = np.uint64
MASK32 = U64(0xFFFFFFFF)
MASK24 = U64(0xFFFFFF)
ONE = U64(1)
SH32, SH29, SH16, SH8, SH5, SH4, SH2 = U64(32), U64(29), U64(16), U64(8), U64(5), U64(4), U64(2)

# Philox4x32 constants (Salmon et al., SC'11; Random123).
PHILOX_M0 = U64(0xD2511F53)
PHILOX_M1 = U64(0xCD9E8D57)
PHILOX_W0 = U64(0x9E3779B9)
PHILOX_W1 = U64(0xBB67AE85)

F32 = np.float32
F0, F1, NEG_HALF = F32(0.0), F32(1.0), F32(-0.5)
TWO_M24 = F32(2.0 ** -24)
TWO_M32 = F32(2.0 ** -32)
I64 = np.int64
TWO32 = I64(1 << 32)
SQRT_HALF_Q32 = U64(0xB504F334)  # ceil(sqrt(1/2) 2^32)
LN2 = F32(0.69314718055994531)
PIO4 = F32(0.78539816339744831)
# Cephes logf: log(1+s) = s - s^2/2 + s^3 P(s), s in [sqrt(1/2)-1, sqrt(2)-1]
LOG_P = tuple(F32(v) for v in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                                -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                                2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1))
LP0, LP1, LP2, LP3, LP4, LP5, LP6, LP7, LP8 = LOG_P
# Cephes sinf / cosf on [0, pi/4]
SIN0, SIN1, SIN2 = F32(-1.9515295891e-4), F32(8.3321608736e-3), F32(-1.6666654611e-1)
COS0, COS1, COS2 = F32(2.443315711809948e-5), F32(-1.388731625493765e-3), F32(4.166664568298827e-2)


# -- fused multiply-add: one rounding, on every target ------------------------------------

def fma32(a, b, c):
    """float32 ``a * b + c`` rounded once (the simulator's pure-Python version)."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    best = F32(float(exact))  # may be off by double rounding: check the neighbours
    for cand in (np.nextafter(best, F32(-np.inf)), np.nextafter(best, F32(np.inf))):
        d, db = abs(Fraction(float(cand)) - exact), abs(Fraction(float(best)) - exact)
        if d < db or (d == db and int(cand.view(np.uint32)) & 1 == 0):
            best = cand
    return F32(best)


@intrinsic
def _llvm_fma(typingctx, a, b, c):
    sig = a(a, b, c)

    def codegen(context, builder, sig, args):
        return builder.fma(*args)  # llvm.fma: exact fused multiply-add (fma.rn.f32 on PTX)

    return sig, codegen


@overload(fma32)
def _fma32_jit(a, b, c):
    if all(isinstance(t, types.Float) and t.bitwidth == 32 for t in (a, b, c)):
        def impl(a, b, c):
            return _llvm_fma(a, b, c)

        return impl
    return None


# -- Philox4x32-10 --------------------------------------------------------------------------

@dual
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32 with 10 rounds: counter (c0..c3), key (k0, k1) -> 4 random words.

    All arguments and results are uint64 holding 32-bit values.
    """
    for _ in range(10):
        p0 = PHILOX_M0 * c0
        p1 = PHILOX_M1 * c2
        c0, c1, c2, c3 = ((p1 >> SH32) ^ c1 ^ k0, p1 & MASK32,
                          (p0 >> SH32) ^ c3 ^ k1, p0 & MASK32)
        k0 = (k0 + PHILOX_W0) & MASK32
        k1 = (k1 + PHILOX_W1) & MASK32
    return c0, c1, c2, c3


@dual
def clz32(v):
    """Leading zeros of a 32-bit value 0 < v < 2**32 (uint64 in, uint64 out); = __clz."""
    n = U64(0)
    if v < U64(0x10000):
        n += SH16
        v = v << SH16
    if v < U64(0x1000000):
        n += SH8
        v = v << SH8
    if v < U64(0x10000000):
        n += SH4
        v = v << SH4
    if v < U64(0x40000000):
        n += SH2
        v = v << SH2
    if v < U64(0x80000000):
        n += ONE
    return n


@dual
def box_muller(ra, rb):
    """Two standard normal float32 values from two random 32-bit words.

    Radius sqrt(-2 ln u1) with u1 = (ra + 1) / 2**32 in (0, 1] (so |z| <= 6.67); angle
    2 pi floor(rb / 32) / 2**27: the top 3 bits of rb pick the octant exactly, the next 24
    the position in it. Returns (r cos(angle), r sin(angle)), within ~3e-7 of the exact
    values (float32 polynomials).
    """
    r = F0
    if ra != MASK32:
        k = ra + ONE
        e = clz32(k)
        m = (k << e) & MASK32  # u1 = m 2^(-32-e), m in [2^31, 2^32)
        if m < SQRT_HALF_Q32:  # s = 2y - 1 or y - 1 (y = m 2^-32) from exact integers,
            d = I64(m + m) - TWO32  # so s keeps full precision when u1 is close to 1
            e = e + ONE
        else:
            d = I64(m) - TWO32
        s = F32(d) * TWO_M32  # y in [sqrt(1/2), sqrt(2)): s = y - 1
        s2 = s * s
        p = fma32(LP0, s, LP1)
        p = fma32(p, s, LP2)
        p = fma32(p, s, LP3)
        p = fma32(p, s, LP4)
        p = fma32(p, s, LP5)
        p = fma32(p, s, LP6)
        p = fma32(p, s, LP7)
        p = fma32(p, s, LP8)
        lnv = s + fma32(NEG_HALF, s2, (p * s) * s2)
        a = fma32(F32(e), LN2, -lnv)  # -ln u1
        a = a + a
        if a > F0:
            r = F32(math.sqrt(a))
    o = rb >> SH29
    t = F32((rb >> SH5) & MASK24) * TWO_M24
    if (o & ONE) != U64(0):
        t = F1 - t
    ph = t * PIO4
    z2 = ph * ph
    sp = fma32(fma32(fma32(SIN0, z2, SIN1), z2, SIN2) * z2, ph, ph)
    cp = fma32(NEG_HALF, z2, (fma32(fma32(COS0, z2, COS1), z2, COS2) * z2) * z2) + F1
    cs, sn = cp, sp
    if ((o + ONE) & SH2) != U64(0):
        cs, sn = sp, cp
    if (((o + SH2) >> SH2) & ONE) != U64(0):
        cs = -cs
    if o >= SH4:
        sn = -sn
    return r * cs, r * sn


@dual
def seed_key(p, i):
    """Philox key (k0, k1) from a 64-bit seed stored as four 16-bit values p[i..i+3]."""
    k0 = U64(int(p[i])) | (U64(int(p[i + 1])) << SH16)
    k1 = U64(int(p[i + 2])) | (U64(int(p[i + 3])) << SH16)
    return k0, k1


def seed_columns(seed):
    """Host side of :func:`seed_key`: a 64-bit seed as four float-exact 16-bit chunks."""
    return [float((seed >> s) & 0xFFFF) for s in (0, 16, 32, 48)]


def philox_host(ctr, key):
    """Plain-Python Philox4x32-10 (for tests and host code): lists of ints in, list out."""
    c0, c1, c2, c3 = (U64(v) for v in ctr)
    k0, k1 = (U64(v) for v in key)
    return [int(v) for v in philox4x32_10(c0, c1, c2, c3, k0, k1)]
