"""contrast: blend each image with its mean grayscale, per sample (torchvision's adjust_contrast)."""
from __future__ import annotations

from gpuaug._batch import as_batch
from gpuaug._params import RowLimits
from gpuaug._registry import OpSpec, Param
from gpuaug._run import choose_backend
from gpuaug.ops._colour import apply_one, colour_kernels

CHANNELS = (1, 3, 4)
KERNELS = colour_kernels("contrast", CHANNELS, mean_bright=False)
GRAY = ("contrast", "contrast_gray")


def contrast(x, factor, *, out=None, layout="NHWC", stream=None, backend=None):
    """Blend with the image's mean gray: ``out = clamp(factor * x + (1 - factor) * mean, 0, max)``.

    As ``torchvision.transforms.v2.functional.adjust_contrast``: ``mean`` is the mean over the
    image of ``gray = 0.2989 r + 0.587 g + 0.114 b`` (for uint8, each pixel's gray floored first,
    as torchvision does), or of the channel itself for one-channel images; ``max`` is 255 for
    uint8 and 1 for float16/float32 (images hold [0, 255] and [0, 1]). Factor 0 gives a gray
    image, 1 the original. The 4th channel of RGBA images (alpha) is copied unchanged and does
    not enter the mean. uint8 results round to nearest (torchvision truncates: up to 1 lower).

    The mean is a per-sample reduction: on the GPU a first small kernel sums each image in up
    to 32 blocks (in double, in a fixed order), then the per-pixel kernel adds the partial sums.

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
        >>> x = np.array([[[[0, 0, 0]], [[200, 200, 200]]]], np.uint8)  # gray 0 and 199
        >>> gpuaug.contrast(x, 0.5)[0, :, 0]
        array([[ 50,  50,  50],
               [150, 150, 150]], dtype=uint8)
    """
    b = as_batch(x, layout, channels=CHANNELS)
    be = choose_backend(b, backend)
    return apply_one(b, KERNELS, factor, "factor", _LIMITS, _ROWS, out=out, backend=be, stream=stream,
                     mean=(False, GRAY), skip_unit=True)  # factors all 1: the mean is not used


def _example(rng, n, h, w):
    return {"factor": rng.uniform(0.5, 1.5, n)}


SPECS = (
    OpSpec("contrast", contrast, params=(
        Param("factor", None, low=0, doc="blend factor >= 0 with the mean gray (1: unchanged)"),
    ), channels=CHANNELS, geometric=False, example=_example, kernels=KERNELS, doc=contrast.__doc__,
        peers={"dali": "brightness_contrast"},
        demo={"factor": 1.8}),
)

_LIMITS = SPECS[0].limits("factor")  # looked up once
_ROWS = RowLimits(_LIMITS)

__all__ = ["contrast"]
