"""brightness: scale the colour values of each image, per sample (torchvision's adjust_brightness)."""
from __future__ import annotations

from gpuaug._batch import as_batch
from gpuaug._params import RowLimits
from gpuaug._registry import OpSpec, Param
from gpuaug._run import choose_backend
from gpuaug.ops._colour import apply_one, colour_kernels

CHANNELS = (1, 3, 4)
KERNELS = colour_kernels("brightness", CHANNELS)


def brightness(x, factor, *, out=None, layout="NHWC", stream=None, backend=None):
    """Multiply the colour values by ``factor`` and clamp: ``out = clamp(factor * x, 0, max)``.

    As ``torchvision.transforms.v2.functional.adjust_brightness``: ``max`` is 255 for uint8 and
    1 for float16/float32 (images are taken to hold [0, 255] and [0, 1]); factor 0 gives black,
    1 the original. The 4th channel of an RGBA image (alpha) is copied unchanged. uint8 results
    round to nearest (torchvision truncates, so it can be 1 lower).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images; uint8,
            float16 or float32; 1, 3 or 4 (RGBA) channels; NumPy or any CUDA array.
        factor: number >= 0, or a sequence/array of N of them (one per sample).
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW".
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array like ``x`` (CuPy for CUDA input, NumPy for NumPy input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[[[10, 100, 200]]]], np.uint8)
        >>> gpuaug.brightness(x, 1.5)[0, 0, 0]
        array([ 15, 150, 255], dtype=uint8)
    """
    b = as_batch(x, layout, channels=CHANNELS)
    be = choose_backend(b, backend)
    return apply_one(b, KERNELS, factor, "factor", _LIMITS, _ROWS, out=out, backend=be, stream=stream)


def _example(rng, n, h, w):
    return {"factor": rng.uniform(0.5, 1.5, n)}


SPECS = (
    OpSpec("brightness", brightness, params=(
        Param("factor", None, low=0, doc="multiplier >= 0 (1: unchanged)"),
    ), channels=CHANNELS, geometric=False, example=_example, kernels=KERNELS, doc=brightness.__doc__,
        peers={"dali": "brightness_contrast"},
        demo={"factor": 1.5}),
)
#: factor's range as per_sample keywords (from its Param, dtype-independent), looked up once
_LIMITS = SPECS[0].limits("factor")
_ROWS = RowLimits(_LIMITS)

__all__ = ["brightness"]
