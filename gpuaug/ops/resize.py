"""resize: resample every image to one output size (nearest, bilinear, area)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._params import column_stack, host_size
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import check_choice, dtype_name, kept_array

KERNELS = Kernels(cu=("resize.cu", "gpuaug_resize"), numba=("resize", "resample_value"), kind="value")

#: interpolation name -> the kernels' MODE (resize.cuh).
INTERPOLATIONS = {"nearest": 0, "bilinear": 1, "area": 2}


def resample_params(tops, lefts, heights, widths, size, mode, n):
    """The (N, 12) parameter matrix of resize.cuh for per-sample boxes (columns of N values,
    NumPy or CuPy) resampled to ``size`` = (out_h, out_w) with MODE ``mode``:
    [top, left, scale_y, scale_x, box_h, box_w, out_h, out_w, mode, 0, 0, 0]."""
    oh, ow = size
    cols = (tops, lefts, heights, widths)
    if all(type(c) is np.ndarray for c in cols):  # host columns: written into a copy of the constant rows
        def make():
            rows = np.zeros((n, 12))
            rows[:, 6:9] = oh, ow, mode
            return rows
        p = kept_array(_ROWS, (n, oh, ow, mode), make).copy()
        p[:, 0] = tops
        p[:, 1] = lefts
        np.divide(heights, oh, out=p[:, 2])
        np.divide(widths, ow, out=p[:, 3])
        p[:, 4] = heights
        p[:, 5] = widths
        return p
    const = [np.full(n, v, np.float64) for v in (oh, ow, mode, 0, 0, 0)]
    return column_stack([tops, lefts, heights / oh, widths / ow, heights, widths] + const, n)


_ROWS: dict = {}  # (N, out_h, out_w, mode) -> resample_params' constant rows, read-only


def interpolation_mode(interpolation):
    check_choice("interpolation", interpolation, tuple(INTERPOLATIONS))
    return INTERPOLATIONS[interpolation]


def resize(x, size, interpolation="bilinear", *, out=None, layout="NHWC", stream=None, backend=None):
    """Resize every image to ``size`` = (height, width).

    Pixel centres follow OpenCV's ``cv2.resize``. With ``s = in / out`` per axis (each
    sample its own, for a varshape batch), output pixel ``(y, x)`` reads:

    - ``"nearest"`` (INTER_NEAREST): source pixel ``floor(y * s_y), floor(x * s_x)``,
      computed exactly (``(y * in) // out``). OpenCV evaluates ``y * (1 / (out / in))``
      in double, which for a few sizes lands one pixel lower where the exact product is
      an integer (e.g. 224 -> 100 rows 25, 50, 75); gpuaug does not copy that rounding.
    - ``"bilinear"`` (INTER_LINEAR, the default): the point ``(y + 0.5) * s_y - 0.5``,
      ``(x + 0.5) * s_x - 0.5``, blended from its four neighbours with weights
      ``1 - frac`` and ``frac`` per axis; taps beyond the image replicate the edge pixel.
      No antialiasing: a strong downscale skips pixels (use ``"area"``).
    - ``"area"`` (INTER_AREA): the average of the source over the output pixel's footprint
      ``[y * s_y, (y + 1) * s_y) x [x * s_x, (x + 1) * s_x)``, source pixel ``i`` covering
      ``[i, i + 1)``, partially covered pixels weighted by their covered fraction. This is
      an antialiased downscale; for upscaling it is the two-tap blend OpenCV's INTER_AREA
      uses there. It equals OpenCV's result whenever both axes shrink (or keep their size)
      or both grow; where one axis grows and the other shrinks OpenCV switches both axes to
      its two-tap rule, while gpuaug keeps the exact footprint on each axis.

    Arithmetic is float32 on the GPU (float64 on the CPU twin); uint8 outputs round to
    nearest (``floor(v + 0.5)``) and saturate; float16 rounds to nearest even. Resizing
    to the input's own size (nearest or bilinear) returns an exact copy.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images of any
            sizes; uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        size: output (height, width), or one int for a square output (height = width =
            size; unlike torchvision, an int is not the shorter side). Host ints > 0.
        interpolation: "nearest", "bilinear" or "area" (one for the batch).
        out: optional array (or list, for a varshape batch) of the output shape to write into.
        layout: "NHWC" (default) or "NCHW".
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        (N, height, width, C) (or NCHW / one image, like ``x``), the input's dtype; a list
        of (height, width, C) images for a varshape batch.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[0, 10], [20, 30]], np.uint8).reshape(1, 2, 2, 1)
        >>> gpuaug.resize(x, (1, 1), "area")[0, :, :, 0]
        array([[15]], dtype=uint8)
        >>> gpuaug.resize(x, (2, 4), "nearest")[0, :, :, 0]
        array([[ 0,  0, 10, 10],
               [20, 20, 30, 30]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    size = host_size(size, "size")
    mode = interpolation_mode(interpolation)
    hs, ws = (a.astype(np.float64) for a in b.sizes())
    params = resample_params(np.zeros(b.n), np.zeros(b.n), hs, ws, size, mode, b.n)
    return run(b, KERNELS, params, shapes=b.uniform(size), out=out, backend=be, stream=stream,
               template=(dtype_name(b.dtype), b.channels, mode))


def _example(rng, n, h, w):
    return {"size": (max(1, h // 2), max(1, w // 2))}


SPECS = (
    OpSpec("resize", resize, params=(
        Param("size", None, per_sample=False, kind="size", low=1, expect="positive sizes",
              doc="output (height, width); an int: square"),
        Param("interpolation", "bilinear", per_sample=False, kind="choice",
              choices=tuple(INTERPOLATIONS), doc="OpenCV INTER_NEAREST / INTER_LINEAR / INTER_AREA"),
    ), example=_example, kernels=KERNELS, changes_shape=True, doc=resize.__doc__,
        demo={"size": (96, 160)}, peers={"dali": "resize"},
        bench_params=lambda h, w: {"size": (h // 2, w // 2)}),
)

__all__ = ["resize"]
