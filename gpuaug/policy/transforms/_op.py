"""Op transforms (GaussianBlur, GaussianNoise, RandomErasing, RandomEqualize): run as the existing
op, between fused stages."""
from __future__ import annotations

import numpy as np

from gpuaug import random as R
from gpuaug.policy import _args as A
from gpuaug.policy.transforms._base import Transform, _Coin, maxv


class _Op(Transform):
    kind = "op"
    op = ""

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):  # pragma: no cover - abstract
        raise NotImplementedError


class GaussianBlur(_Op):
    """torchvision's GaussianBlur: ``sigma ~ U(sigma)`` per sample, one odd ``kernel_size``
    (square), with probability ``p`` (default 1; unblurred samples get a 1-tap kernel); runs
    gpuaug.gaussian_blur (reflect-101 borders).

    Example::

        >>> import gpuaug
        >>> gpuaug.GaussianBlur(5, sigma=(0.1, 2.0)).kernel_size
        5
    """

    op = "gaussian_blur"

    def __init__(self, kernel_size, sigma=(0.1, 2.0), p=1.0):
        ks = kernel_size
        if not isinstance(ks, (int, np.integer)) or isinstance(ks, bool):
            t = A.numbers_seq("kernel_size", ks, (1, 2))
            if len(set(t)) != 1:
                raise ValueError(f"kernel_size: got {kernel_size!r}; gpuaug's blur is square: give one odd size")
            ks = t[0]
        if not float(ks).is_integer() or ks < 1 or int(ks) % 2 == 0:
            raise ValueError(f"kernel_size: got {kernel_size!r}; expected an odd int >= 1")
        self.kernel_size = int(ks)
        self.sigma = A.sym_range("sigma", sigma, allow_none=False) if not A.is_number(sigma) else \
            (A.number("sigma", sigma, low=0.0, low_open=True),) * 2
        if self.sigma[0] <= 0:
            raise ValueError(f"sigma: got {sigma!r}; expected sigmas > 0")
        self.p = A.prob("p", p)

    def _args(self):
        return {"kernel_size": self.kernel_size, "sigma": self.sigma, "p": self.p}

    def sample(self, rng, n, sizes):
        on = R.bernoulli(rng, self.p, n)
        return {"apply": on, "sigma": R.uniform(rng, self.sigma[0], self.sigma[1], n)}

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):
        import gpuaug

        ks = np.where(params["apply"], self.kernel_size, 1)
        return gpuaug.gaussian_blur(x, params["sigma"], ks, out=out, layout=layout, backend=backend, stream=stream)


class GaussianNoise(_Op):
    """torchvision's GaussianNoise: ``x + mean + sigma z`` with ``z ~ N(0, 1)`` per element (mean
    and sigma in [0, 1] units: scaled by 255 for uint8), with probability ``p`` per sample
    (default 1); runs gpuaug.gaussian_noise with a seed drawn per call. uint8 saturates; float
    results are clipped to [0, 1] when ``clip`` (torchvision's default).

    Example::

        >>> import gpuaug
        >>> gpuaug.GaussianNoise(sigma=0.05).sigma
        0.05
    """

    op = "gaussian_noise"

    def __init__(self, mean=0.0, sigma=0.1, clip=True, p=1.0):
        big = float(np.finfo(np.float64).max) / 255  # scaled by 255 for uint8: must stay finite
        self.mean = A.number("mean", mean, low=-big, high=big)
        self.sigma = A.number("sigma", sigma, low=0.0, high=big)
        self.clip = A.flag("clip", clip)
        self.p = A.prob("p", p)

    def _args(self):
        return {"mean": self.mean, "sigma": self.sigma, "clip": self.clip, "p": self.p}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n), "seed": np.full(n, R.seed64(rng), np.int64)}

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):
        import gpuaug

        m = maxv(dtype)
        on = params["apply"]
        y = gpuaug.gaussian_noise(x, np.where(on, self.mean * m, 0.0), np.where(on, self.sigma * m, 0.0),
                                  int(params["seed"][0]), out=out, layout=layout, backend=backend, stream=stream)
        if self.clip and np.dtype(dtype) != np.uint8:
            for a in (y if isinstance(y, list) else [y]):
                a.clip(0.0, 1.0, out=a)
        return y


class RandomErasing(_Op):
    """torchvision's RandomErasing: with probability ``p`` per sample, a box of area
    ``~ U(scale)`` of the image's and aspect ratio ``~ exp(U(log ratio))`` (10 tries) is set to
    ``value`` (a number or one per channel, in the image's units at that point of the policy);
    runs gpuaug.erase.

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomErasing(p=0.25).scale
        (0.02, 0.33)
    """

    op = "erase"

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0):
        self.p = A.prob("p", p)
        self.scale = A.numbers_seq("scale", scale, (2,))
        if not 0 <= self.scale[0] <= self.scale[1] <= 1:
            raise ValueError(f"scale: got {scale!r}; expected (min, max) with 0 <= min <= max <= 1")
        self.ratio = A.numbers_seq("ratio", ratio, (2,))
        if not 0 < self.ratio[0] <= self.ratio[1]:
            raise ValueError(f"ratio: got {ratio!r}; expected (min, max) with 0 < min <= max")
        if isinstance(value, str):
            raise ValueError(f"value: got {value!r}; expected a number or one number per channel "
                             "('random' is not supported)")
        self.value = A.per_channel("value", value)

    def _args(self):
        return {"p": self.p, "scale": self.scale, "ratio": self.ratio, "value": self.value}

    def sample(self, rng, n, sizes):
        on = R.bernoulli(rng, self.p, n)
        boxes = R.erasing_boxes(rng, sizes, self.scale, self.ratio)
        boxes[~on, 2:] = 0
        return {"apply": on, "boxes": boxes}

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):
        import gpuaug

        value = self.value[0] if len(self.value) == 1 else np.asarray(self.value)[None]
        return gpuaug.erase(x, params["boxes"][:, None, :], value, out=out, layout=layout, backend=backend,
                            stream=stream)


class RandomEqualize(_Coin, _Op):
    """torchvision's RandomEqualize: with probability ``p`` per sample, histogram-equalise each
    channel (gpuaug.equalize, on the chosen samples only).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomEqualize(0.5)
        RandomEqualize(p=0.5)
    """

    op = "equalize"

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):
        import gpuaug

        on = params["apply"]
        idx = np.flatnonzero(on)
        if len(idx) == len(on):
            return gpuaug.equalize(x, out=out, layout=layout, backend=backend, stream=stream)
        if isinstance(x, list):
            y = [a.copy() for a in x] if out is None else out
            if out is not None:
                for o, a in zip(out, x):
                    o[...] = a
            if len(idx):
                for i, e in zip(idx, gpuaug.equalize([x[i] for i in idx], backend=backend, stream=stream)):
                    y[i][...] = e
            return y
        y = x.copy() if out is None else out
        if out is not None:
            y[...] = x
        if len(idx):
            sel = idx if isinstance(x, np.ndarray) else __import__("cupy").asarray(idx)
            y[sel] = gpuaug.equalize(x[sel], layout=layout, backend=backend, stream=stream)
        return y
