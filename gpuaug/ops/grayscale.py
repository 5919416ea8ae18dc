"""grayscale: RGB to gray with torchvision's weights, to 1 or 3 channels."""
from __future__ import annotations

from gpuaug._batch import as_batch
from gpuaug._registry import OpSpec, Param
from gpuaug._run import choose_backend
from gpuaug._util import check_choice
from gpuaug.ops._colour import apply, colour_kernels, maxv_column

CHANNELS = (1, 3, 4)
KERNELS = colour_kernels("grayscale", CHANNELS, out_channels=(1, 3))


def grayscale(x, num_output_channels=1, *, out=None, layout="NHWC", stream=None, backend=None):
    """Convert to gray: ``gray = 0.2989 r + 0.587 g + 0.114 b``, in ``num_output_channels`` channels.

    As ``torchvision.transforms.v2.functional.rgb_to_grayscale`` (ITU-R 601-2 luma with
    torchvision's weights; the same gray the colour ops blend with). The output has 1 channel,
    or 3 equal ones (``num_output_channels=3``), in the input's dtype and layout. RGBA input:
    alpha is dropped; one-channel input is copied (to 1 or 3 channels). uint8 results round to
    nearest (torchvision truncates: up to 1 lower).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images; uint8,
            float16 or float32; 1, 3 or 4 (RGBA) channels; NumPy or any CUDA array.
        num_output_channels: 1 or 3 (for the whole batch).
        out: optional array (or list, for a varshape batch) with ``num_output_channels``
            channels to write into.
        layout: "NHWC" (default) or "NCHW", for the input and the output.
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array of shape (N, H, W, num_output_channels) (or NCHW, or one image, or a list),
        CuPy for CUDA input, NumPy for NumPy input.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[[[200, 100, 0]]]], np.uint8)
        >>> gpuaug.grayscale(x)[0, 0, 0]
        array([118], dtype=uint8)
    """
    b = as_batch(x, layout, channels=CHANNELS)
    be = choose_backend(b, backend)
    if getattr(num_output_channels, "ndim", 0):
        check_choice("num_output_channels", num_output_channels, (1, 3))  # an array: TypeError naming it
    if isinstance(num_output_channels, bool) or num_output_channels not in (1, 3):
        raise ValueError(f"num_output_channels: got {num_output_channels!r}; expected 1 or 3")
    return apply(b, KERNELS, [maxv_column(b)], out=out, backend=be, stream=stream,
                 channels=int(num_output_channels))


SPECS = (
    OpSpec("grayscale", grayscale, params=(
        Param("num_output_channels", 1, per_sample=False, kind="choice", choices=(1, 3), expect="1 or 3",
              doc="channels of the output (equal gray values)"),
    ), channels=CHANNELS, geometric=False, example=None, kernels=KERNELS, doc=grayscale.__doc__,
        demo={"num_output_channels": 3}),
)

__all__ = ["grayscale"]
