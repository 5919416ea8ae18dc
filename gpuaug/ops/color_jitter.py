"""color_jitter: brightness, contrast, saturation and hue in one pass, per sample."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._params import RowLimits, count_nonzero, host_rows, per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import choose_backend
from gpuaug.ops._colour import apply, colour_kernels, maxv_column

CHANNELS = (1, 3, 4)
KERNELS = colour_kernels("color_jitter", CHANNELS, mean_bright=True)
GRAY = ("color_jitter", "jitter_gray")


def color_jitter(x, brightness=1, contrast=1, saturation=1, hue=0, *, out=None, layout="NHWC",
                 stream=None, backend=None):
    """Brightness, contrast, saturation, then hue (torchvision's adjust_* in that order), one pass.

    With ``M`` = 255 for uint8 and 1 for float16/float32 (images hold [0, M]) and
    ``gray(p) = 0.2989 r + 0.587 g + 0.114 b`` (floored for uint8, as torchvision does)::

        x1 = clamp(brightness * x, 0, M)
        x2 = clamp(contrast * x1 + (1 - contrast) * mean(gray(x1)), 0, M)   # mean over the image
        x3 = clamp(saturation * x2 + (1 - saturation) * gray(x2), 0, M)     # per pixel
        out = adjust_hue(x3, hue)                                             # see gpuaug.hue

    These are factors, not ranges: sampling them (``gpuaug.random``) lives elsewhere, and the
    order is fixed (torchvision's ColorJitter also permutes it at random). The contrast mean is
    that of the brightness-adjusted image: brightness clamps, so it is not ``brightness *
    mean(gray(x))`` once a channel saturates, and the mean's reduction applies the brightness
    to every pixel itself. Everything runs in float32 and rounds once, so uint8 results can
    differ by a level from chaining the single ops (each of which rounds). One-channel images
    get brightness and contrast only (as torchvision); the 4th channel of RGBA images (alpha)
    is copied. With all defaults the output equals the input.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images; uint8,
            float16 or float32; 1, 3 or 4 (RGBA) channels; NumPy or any CUDA array.
        brightness, contrast, saturation: numbers >= 0 (1: unchanged), or sequences/arrays of
            N of them (one per sample).
        hue: shift in turns, in [-0.5, 0.5] (0: unchanged), or a sequence/array of N of them.
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW".
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array like ``x`` (CuPy for CUDA input, NumPy for NumPy input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[[[200, 100, 0]]]], np.uint8)
        >>> gpuaug.color_jitter(x, brightness=1.2, saturation=0.5, hue=0.5)[0, 0, 0]
        array([ 71, 131, 191], dtype=uint8)
    """
    b = as_batch(x, layout, channels=CHANNELS)
    be = choose_backend(b, backend)
    n, dev = b.n, b.device
    spec = SPECS[0]
    m = host_rows((brightness, contrast, saturation, hue), n, _ROWS, maxv_column(b))
    if m is not None:  # four per-sample NumPy arrays, checked in one pass
        c, cols = m[:, 1], [m]
    else:
        c = per_sample(contrast, n, "contrast", **spec.limits("contrast"), device=dev)
        cols = [per_sample(brightness, n, "brightness", **spec.limits("brightness"), device=dev), c,
                per_sample(saturation, n, "saturation", **spec.limits("saturation"), device=dev),
                per_sample(hue, n, "hue", **spec.limits("hue"), device=dev),
                maxv_column(b)]
    # contrast 1 everywhere (known on the host): the mean is not used, skip its pass over the image
    skip = isinstance(c, np.ndarray) and not count_nonzero(c != 1)
    return apply(b, KERNELS, cols, out=out, backend=be, stream=stream, mean=(True, GRAY), skip_mean=skip)


def _example(rng, n, h, w):
    return {"brightness": rng.uniform(0.6, 1.4, n), "contrast": rng.uniform(0.6, 1.4, n),
            "saturation": rng.uniform(0.6, 1.4, n), "hue": rng.uniform(-0.1, 0.1, n)}


SPECS = (
    OpSpec("color_jitter", color_jitter, params=(
        Param("brightness", 1.0, low=0, doc="brightness factor >= 0 (1: unchanged)"),
        Param("contrast", 1.0, low=0, doc="contrast factor >= 0 (1: unchanged)"),
        Param("saturation", 1.0, low=0, doc="saturation factor >= 0 (1: unchanged)"),
        Param("hue", 0.0, low=-0.5, high=0.5, doc="hue shift in turns, in [-0.5, 0.5] (0: unchanged)"),
    ), channels=CHANNELS, geometric=False, example=_example, kernels=KERNELS, doc=color_jitter.__doc__,
        peers={"dali": "brightness_contrast"},
        demo={"brightness": 1.3, "contrast": 1.4, "saturation": 1.8, "hue": 0.1}),
)

#: the four factors' ranges, for host_rows
_ROWS = RowLimits(*(SPECS[0].limits(k) for k in ("brightness", "contrast", "saturation", "hue")))

__all__ = ["color_jitter"]
