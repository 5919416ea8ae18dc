"""Colour transforms: steps of the fused stage's per-sample colour program (kernels/fused.cuh)."""
from __future__ import annotations

import numpy as np

from gpuaug import random as R
from gpuaug.policy import _args as A
from gpuaug.policy.transforms._base import (OP_AFFINE, OP_GAMMA, OP_GRAY, OP_INVERT, OP_JITTER, OP_POSTERIZE,
                                            OP_SOLARIZE, Transform, _Coin)


class _Colour(Transform):
    kind = "colour"
    contrast = False  # needs the per-image mean (one JITTER with contrast per fused stage)

    def steps(self, params, channels):  # pragma: no cover - abstract
        """[(step code, (n, k) float64 parameters), ...] of the colour program."""
        raise NotImplementedError


class ColorJitter(_Colour):
    """torchvision's ColorJitter, per sample: brightness, contrast, saturation factors and a hue
    shift drawn uniformly from their ranges, applied in that fixed order with gpuaug.color_jitter's
    maths (contrast blends with the image's mean gray; see Compose for which image). ``p``
    (Albumentations' argument, default 1): the probability a sample is jittered at all.

    Ranges as torchvision: a number v gives (max(0, 1 - v), 1 + v) for the factors and (-v, v)
    for hue (v <= 0.5); or pass (min, max). 0 or None leaves the quantity alone.

    Example::

        >>> import gpuaug
        >>> gpuaug.ColorJitter(0.4, 0.4, 0.4, 0.1).brightness
        (0.6, 1.4)
    """

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0, p=1.0):
        def factor(name, v):
            r = A.sym_range(name, v, center=1.0, low=0.0)
            return None if r is None or r == (1.0, 1.0) else r

        self.brightness = factor("brightness", brightness)
        self.contrast_range = factor("contrast", contrast)
        self.saturation = factor("saturation", saturation)
        h = A.sym_range("hue", hue, low=-0.5, high=0.5)
        self.hue = None if h is None or h == (0.0, 0.0) else h
        self.p = A.prob("p", p)
        self.contrast = self.contrast_range is not None

    def _args(self):
        return {"brightness": self.brightness, "contrast": self.contrast_range, "saturation": self.saturation,
                "hue": self.hue, "p": self.p}

    def sample(self, rng, n, sizes):
        # one block: n uniforms for p, then for each range that is given, in this order
        key = (self.brightness, self.contrast_range, self.saturation, self.hue)
        memo = self.__dict__.get("_block")  # (not "_ranges": pickles of older versions hold that one)
        if memo is None or memo[0] != key:
            # (k, 1) columns of the given ranges, and where each quantity's values come from
            # (its row of the block, or -1: its neutral value), kept per ranges
            ranges = (("brightness", self.brightness, 1.0), ("contrast", self.contrast_range, 1.0),
                      ("saturation", self.saturation, 1.0), ("hue", self.hue, 0.0))
            given = [(r, nt) for _, r, nt in ranges if r is not None]
            rows, k = [], 0
            for name, r, nt in ranges:
                rows.append((name, -1 if r is None else k, nt))
                k += r is not None
            memo = self._block = (key, len(given), np.array([[r[0]] for r, _ in given]),
                                   np.array([[r[1] - r[0]] for r, _ in given]), np.array([[nt] for _, nt in given]),
                                   tuple(rows))
        _, k, lo, span, neutral, rows = memo
        u = rng.random((1 + k, n))
        on = u[0] < self.p
        if k:  # every range at once: lo + span * u, element by element as one range at a time
            vals = lo + span * u[1:]
            if self.p != 1.0:
                vals = np.where(on, vals, neutral)
        out = {"apply": on}
        for name, row, nt in rows:
            out[name] = np.full(n, nt) if row < 0 else vals[row]
        return out

    def steps(self, params, channels):
        # (n, 4): the transpose of the (4, n) array of the four (np.stack's values; np.array is
        # one C call where np.stack's Python wrapper costs ~3 us)
        return [(OP_JITTER, np.array([params["brightness"], params["contrast"], params["saturation"],
                                      params["hue"]]).T)]


class RandomGrayscale(_Coin, _Colour):
    """torchvision's RandomGrayscale: with probability ``p`` per sample, every colour channel
    becomes ``0.2989 r + 0.587 g + 0.114 b`` (gpuaug.grayscale's maths; alpha kept; one-channel
    images unchanged).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomGrayscale()
        RandomGrayscale(p=0.1)
    """

    def __init__(self, p=0.1):
        super().__init__(p)

    def steps(self, params, channels):
        return [(OP_GRAY, params["apply"].astype(np.float64)[:, None])]


class RandomChannelPermutation(_Colour):
    """torchvision's RandomChannelPermutation for RGB: a uniformly random order of the three
    colour channels per sample (a 3x4 colour matrix; alpha stays in place).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomChannelPermutation()
        RandomChannelPermutation()
    """

    def sample(self, rng, n, sizes):
        return {"permutation": R.permutations(rng, n, 3)}

    def steps(self, params, channels):
        perm = params["permutation"]
        n = len(perm)
        m = np.zeros((n, 3, 4))
        m[np.arange(n)[:, None], np.arange(3)[None, :], perm] = 1.0
        return [(OP_AFFINE, m.reshape(n, 12))]


class RandomGamma(_Colour):
    """Albumentations' RandomGamma: with probability ``p``, ``x = M (x / M) ** gamma`` with
    ``gamma = U(gamma_limit) / 100`` (gpuaug.gamma's maths, every channel).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomGamma((80, 120)).gamma_limit
        (80.0, 120.0)
    """

    def __init__(self, gamma_limit=(80, 120), p=0.5):
        self.gamma_limit = A.sym_range("gamma_limit", gamma_limit, center=100.0, low=0.0, allow_none=False)
        self.p = A.prob("p", p)

    def _args(self):
        return {"gamma_limit": self.gamma_limit, "p": self.p}

    def sample(self, rng, n, sizes):
        on = R.bernoulli(rng, self.p, n)
        g = R.uniform(rng, self.gamma_limit[0], self.gamma_limit[1], n) / 100.0
        return {"apply": on, "gamma": np.where(on, g, 1.0)}

    def steps(self, params, channels):
        return [(OP_GAMMA, np.stack([params["gamma"], np.ones(len(params["gamma"]))], axis=1))]


class RandomSolarize(_Coin, _Colour):
    """torchvision's RandomSolarize: with probability ``p``, values ``>= threshold`` become
    ``M - x`` (threshold in the image's units: 0..255 for uint8, 0..1 for floats).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomSolarize(128).threshold
        128.0
    """

    def __init__(self, threshold, p=0.5):
        self.threshold = A.number("threshold", threshold, low=0.0)
        self.p = A.prob("p", p)

    def _args(self):
        return {"threshold": self.threshold, "p": self.p}

    def steps(self, params, channels):
        from gpuaug.ops._launch import float32_at_least

        # the smallest float32 >= threshold: the CPU twin (float64 parameters) and the GPU
        # (float32) then decide alike for every float32 value, as gpuaug.solarize does
        t = float32_at_least(np.asarray(self.threshold, np.float64))
        return [(OP_SOLARIZE, np.where(params["apply"], t, np.inf)[:, None])]


class RandomPosterize(_Coin, _Colour):
    """torchvision's RandomPosterize: with probability ``p``, keep ``bits`` bits (1..8) of
    every value (gpuaug.posterize's rule for uint8 and floats).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomPosterize(4).bits
        4
    """

    def __init__(self, bits, p=0.5):
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 8:
            raise ValueError(f"bits: got {bits!r}; expected an int in 1..8")
        self.bits = int(bits)
        self.p = A.prob("p", p)

    def _args(self):
        return {"bits": self.bits, "p": self.p}

    def steps(self, params, channels):
        return [(OP_POSTERIZE, np.where(params["apply"], float(self.bits), 0.0)[:, None])]


class RandomInvert(_Coin, _Colour):
    """torchvision's RandomInvert: with probability ``p``, ``x = M - x`` (every channel).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomInvert(0.3)
        RandomInvert(p=0.3)
    """

    def steps(self, params, channels):
        return [(OP_INVERT, params["apply"].astype(np.float64)[:, None])]
