"""saturation: blend each pixel with its own gray, per sample (torchvision's adjust_saturation)."""
from __future__ import annotations

from gpuaug._batch import as_batch
from gpuaug._params import RowLimits
from gpuaug._registry import OpSpec, Param
from gpuaug._run import choose_backend
from gpuaug.ops._colour import apply_one, colour_kernels

CHANNELS = (1, 3, 4)
KERNELS = colour_kernels("saturation", CHANNELS)


def saturation(x, factor, *, out=None, layout="NHWC", stream=None, backend=None):
    """Blend each pixel with its gray: ``out = clamp(factor * x + (1 - factor) * gray, 0, max)``.

    As ``torchvision.transforms.v2.functional.adjust_saturation``: ``gray = 0.2989 r + 0.587 g +
    0.114 b`` of the pixel (floored for uint8, as torchvision does); ``max`` is 255 for uint8 and
    1 for float16/float32 (images hold [0, 255] and [0, 1]). Factor 0 gives the grayscale
    image, 1 the original, 2 doubles the saturation. One-channel images are returned unchanged
    (as torchvision); the 4th channel of RGBA images (alpha) is copied. uint8 results round to
    nearest (torchvision truncates: up to 1 lower).

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
        >>> x = np.array([[[[200, 100, 0]]]], np.uint8)  # gray 118
        >>> gpuaug.saturation(x, 0.5)[0, 0, 0]
        array([159, 109,  59], dtype=uint8)
    """
    b = as_batch(x, layout, channels=CHANNELS)
    be = choose_backend(b, backend)
    return apply_one(b, KERNELS, factor, "factor", _LIMITS, _ROWS, out=out, backend=be, stream=stream)


def _example(rng, n, h, w):
    return {"factor": rng.uniform(0.5, 1.5, n)}


SPECS = (
    OpSpec("saturation", saturation, params=(
        Param("factor", None, low=0, doc="blend factor >= 0 with the pixel's gray (0: grayscale, 1: unchanged)"),
    ), channels=CHANNELS, geometric=False, example=_example, kernels=KERNELS, doc=saturation.__doc__,
        peers={"dali": "hsv"},
        demo={"factor": 2.0}),
)

_LIMITS = SPECS[0].limits("factor")  # looked up once
_ROWS = RowLimits(_LIMITS)

__all__ = ["saturation"]
