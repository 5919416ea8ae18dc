"""hue: turn the hue of each image, per sample (torchvision's adjust_hue)."""
from __future__ import annotations

from gpuaug._batch import as_batch
from gpuaug._params import RowLimits
from gpuaug._registry import OpSpec, Param
from gpuaug._run import choose_backend
from gpuaug.ops._colour import apply_one, colour_kernels

CHANNELS = (1, 3, 4)
KERNELS = colour_kernels("hue", CHANNELS)


def hue(x, shift, *, out=None, layout="NHWC", stream=None, backend=None):
    """Turn every pixel's hue by ``shift`` turns: RGB -> HSV, ``h = (h + shift) mod 1``, HSV -> RGB.

    As ``torchvision.transforms.v2.functional.adjust_hue`` (HSV as torchvision and PIL define
    it: ``V = max``, ``S = (max - min) / max``, red sector when red is the maximum, then
    green, then blue), computed in closed form: each pixel keeps its maximum and minimum
    channel values and the third moves along the hue hexagon. ``shift`` is in [-0.5, 0.5]
    (+-0.5 gives the complementary hue; 0 the original, exactly). Images hold [0, 255] (uint8)
    or [0, 1] (float16/float32); the result stays within each pixel's [min, max].
    One-channel images are returned unchanged (as torchvision); the 4th channel of RGBA images
    (alpha) is copied. uint8 results round to nearest (torchvision truncates: up to 1 lower).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images; uint8,
            float16 or float32; 1, 3 or 4 (RGBA) channels; NumPy or any CUDA array.
        shift: number in [-0.5, 0.5] (fraction of a turn), or a sequence/array of N of them.
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW".
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array like ``x`` (CuPy for CUDA input, NumPy for NumPy input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[[[255, 0, 0]]]], np.uint8)  # red
        >>> gpuaug.hue(x, 1 / 3)[0, 0, 0]  # a third of a turn: green
        array([  0, 255,   0], dtype=uint8)
    """
    b = as_batch(x, layout, channels=CHANNELS)
    be = choose_backend(b, backend)
    return apply_one(b, KERNELS, shift, "shift", _LIMITS, _ROWS, out=out, backend=be, stream=stream)


def _example(rng, n, h, w):
    return {"shift": rng.uniform(-0.5, 0.5, n)}


SPECS = (
    OpSpec("hue", hue, params=(
        Param("shift", None, low=-0.5, high=0.5, doc="hue shift in turns, in [-0.5, 0.5]"),
    ), channels=CHANNELS, geometric=False, example=_example, kernels=KERNELS, doc=hue.__doc__,
        demo={"shift": 0.3}, peers={"dali": "hsv"}),
)

_LIMITS = SPECS[0].limits("shift")  # looked up once
_ROWS = RowLimits(_LIMITS)

__all__ = ["hue"]
