"""The transforms' base class, the colour program's step codes and the dtype maximum (see
:mod:`gpuaug.policy.transforms`)."""
from __future__ import annotations

from gpuaug import random as R
from gpuaug._util import dtype_max as maxv  # noqa: F401  (the write and op transforms use it)
from gpuaug.policy import _args as A

# colour program step codes (kernels/fused.cuh)
OP_JITTER, OP_GRAY, OP_AFFINE, OP_GAMMA, OP_SOLARIZE, OP_POSTERIZE, OP_INVERT = 1, 2, 3, 4, 5, 6, 7
STEP_PARAMS = {OP_JITTER: 4, OP_GRAY: 1, OP_AFFINE: 12, OP_GAMMA: 2, OP_SOLARIZE: 1, OP_POSTERIZE: 1,
               OP_INVERT: 1}
GRAY_WEIGHTS = (0.2989, 0.587, 0.114)


class Transform:
    """Base class. ``kind``: "geometry", "colour", "write" or "op" (see the module docstring).

    ``sample(rng, n, sizes)`` draws the per-sample parameters of ``n`` images of sizes
    ``sizes`` ((n, 2) int (height, width)) and returns a dict of (n, ...) NumPy arrays;
    ``out_sizes(sizes)`` is the images' sizes after the transform.
    """

    kind = ""

    def sample(self, rng, n, sizes) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def out_sizes(self, sizes):
        return sizes

    def _args(self) -> dict:
        return {}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._args().items())
        return f"{type(self).__name__}({args})"


class _Coin:
    """A step each sample takes with probability ``p``: ``params["apply"]``, one Bernoulli
    draw per sample (mixed in before the kind's base class)."""

    def __init__(self, p=0.5):
        self.p = A.prob("p", p)

    def _args(self):
        return {"p": self.p}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n)}
