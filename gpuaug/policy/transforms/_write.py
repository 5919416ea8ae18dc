"""Write transforms (Normalize, ToDtype, ToLayout): a per-channel scale and bias and the output's
dtype and layout, applied as the fused stage stores."""
from __future__ import annotations

from gpuaug.policy import _args as A
from gpuaug.policy.transforms._base import Transform, maxv


class _Write(Transform):
    kind = "write"

    def sample(self, rng, n, sizes):
        return {}

    def apply(self, state):  # pragma: no cover - abstract
        """Update the write state (a dict: dtype, layout, scale (C,), bias (C,))."""
        raise NotImplementedError


class Normalize(_Write):
    """``out = (x / max_pixel_value - mean) / std`` per channel, stored as ``dtype`` in ``layout``.

    As torchvision's ToTensor (or ToDtype(float32, scale=True)) followed by Normalize: mean and
    std are in [0, 1] units and uint8 input is divided by 255 first (``max_pixel_value``:
    None = 255 for uint8, 1 for floats; Albumentations' argument). By default it ends the policy
    with float32 NCHW. Unlike gpuaug.normalize, whose mean/std are in the input's own units.

    Example::

        >>> import gpuaug
        >>> gpuaug.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)).layout
        'NCHW'
    """

    def __init__(self, mean, std, dtype="float32", layout="NCHW", max_pixel_value=None):
        self.mean = A.per_channel("mean", mean)
        self.std = A.per_channel("std", std)
        if any(s == 0 for s in self.std):
            raise ValueError(f"std: got {self.std}; expected non-zero values")
        self.dtype = A.dtype("dtype", dtype, ("float16", "float32"))
        self.layout = A.layout("layout", layout)
        self.max_pixel_value = None if max_pixel_value is None else A.number(
            "max_pixel_value", max_pixel_value, low=0.0, low_open=True)

    def _args(self):
        return {"mean": self.mean, "std": self.std, "dtype": self.dtype, "layout": self.layout}

    def apply(self, st):
        c = len(st["scale"])
        mean = A.channels_of("mean", self.mean, c)
        std = A.channels_of("std", self.std, c)
        mp = self.max_pixel_value or maxv(st["dtype"])
        st["scale"] = st["scale"] / (mp * std)
        st["bias"] = (st["bias"] / mp - mean) / std
        st["dtype"], st["layout"] = self.dtype, self.layout
        return st


class ToDtype(_Write):
    """torchvision's ToDtype: convert to ``dtype``; with ``scale`` the value range follows
    (uint8 0..255 <-> floats 0..1). Before any geometry or colour transform of a stage, a
    uint8 -> float conversion makes the transforms after it work on [0, 1] floats, as in
    torchvision (no extra pass: the kernel scales as it loads).

    Example::

        >>> import gpuaug
        >>> gpuaug.ToDtype("float32", scale=True)
        ToDtype(dtype='float32', scale=True)
    """

    def __init__(self, dtype, scale=False):
        self.dtype = A.dtype("dtype", dtype)
        self.scale = A.flag("scale", scale)

    def _args(self):
        return {"dtype": self.dtype, "scale": self.scale}

    def factor(self, from_dtype):
        return maxv(self.dtype) / maxv(from_dtype) if self.scale else 1.0

    def apply(self, st):
        f = self.factor(st["dtype"])
        st["scale"], st["bias"] = st["scale"] * f, st["bias"] * f
        st["dtype"] = self.dtype
        return st


class ToLayout(_Write):
    """Write the output in ``layout`` ("NCHW" or "NHWC"); no pass of its own.

    Example::

        >>> import gpuaug
        >>> gpuaug.ToLayout("NCHW")
        ToLayout(layout='NCHW')
    """

    def __init__(self, layout):
        self.layout = A.layout("layout", layout)

    def _args(self):
        return {"layout": self.layout}

    def apply(self, st):
        st["layout"] = self.layout
        return st
