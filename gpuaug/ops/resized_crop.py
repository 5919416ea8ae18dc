"""resized_crop: cut a per-sample box and resize it to one output size, in one pass."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled, plain
from gpuaug._params import _fmt, count_nonzero, host_size, per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import dtype_name
from gpuaug.ops.resize import INTERPOLATIONS, interpolation_mode, resample_params

KERNELS = Kernels(cu=("resized_crop.cu", "gpuaug_resized_crop"),
                  numba=("resized_crop", "resized_crop_value"), kind="value")


def resized_crop(x, boxes, size, interpolation="bilinear", *, out=None, layout="NHWC", stream=None,
                 backend=None):
    """Crop each image to its box and resize the box to ``size``, in one pass
    (the kernel behind RandomResizedCrop).

    ``boxes[n] = (top, left, height, width)`` in source pixels, fractional values allowed
    (the box's corner ``(top, left)`` is the top-left *corner* of the region, so the box
    ``(0, 0, H, W)`` is the whole image). The box is resampled exactly as
    :func:`gpuaug.resize` resamples a whole image (OpenCV pixel centres), with
    ``s = box / size`` per axis; output pixel ``(y, x)`` reads:

    - ``"nearest"``: source pixel ``floor(top + y * s_y), floor(left + x * s_x)`` (exact);
    - ``"bilinear"``: the point ``top + (y + 0.5) * s_y - 0.5, left + (x + 0.5) * s_x - 0.5``
      blended from its four neighbours;
    - ``"area"``: the average over ``[top + y * s_y, top + (y + 1) * s_y) x [left + x * s_x,
      left + (x + 1) * s_x)``.

    Reads outside the *image* are clamped to its edge (a box may stick out of the image, or
    lie wholly outside it). Reads outside the *box* but inside the image see the image:
    bilinear taps of the outermost output pixels may reach half a pixel beyond the box and
    read the real neighbours there (as a resize with a region of interest does, e.g.
    DALI's), where ``cv2.resize`` of the cut-out crop would replicate the crop's edge. So
    for an integer box inside the image the result equals ``resize(x[top:top+h,
    left:left+w], size)`` exactly for nearest and area, and for bilinear everywhere except
    possibly those outermost rows and columns; the whole-image box gives ``resize``.
    On the GPU the box is used as float32 (so are host boxes on every backend).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images of any
            sizes; uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        boxes: (4,) for every sample or (N, 4), rows (top, left, height, width); finite,
            height and width > 0 (checked for host values); host or CUDA array.
        size: output (height, width), or one int for a square output. Host ints > 0.
        interpolation: "nearest", "bilinear" (default) or "area" (one for the batch).
        out: optional array (or list, for a varshape batch) of the output shape.
        layout: "NHWC" (default) or "NCHW".
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        (N, height, width, C) (or NCHW / one image, like ``x``), the input's dtype; a list
        of (height, width, C) images for a varshape batch. uint8 rounds to nearest and
        saturates.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(16, dtype=np.uint8).reshape(1, 4, 4, 1)
        >>> gpuaug.resized_crop(x, (1, 1, 2, 2), (2, 2), "nearest")[0, :, :, 0]
        array([[ 5,  6],
               [ 9, 10]], dtype=uint8)
        >>> gpuaug.resized_crop(x, [[0, 0, 4, 4]], (1, 1), "area")[0, :, :, 0]
        array([[8]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    size = host_size(size, "size")
    mode = interpolation_mode(interpolation)
    raw = plain(boxes, b.n, (4,))
    if raw is not None:  # a NumPy array: checked and made into rows in one compiled loop
        params = np.empty((b.n, 12))
        if _host_rows(raw, float(size[0]), float(size[1]), float(mode), params):
            return run(b, KERNELS, params, shapes=b.uniform(size), out=out, backend=be, stream=stream,
                       template=(dtype_name(b.dtype), b.channels, mode))
    bx = per_sample(boxes, b.n, "boxes", shape=(4,), device=b.device)
    if isinstance(bx, np.ndarray):
        # Every backend uses the float32 box the GPU sees, so they agree bit for bit.
        if np.maximum.reduce(bx, axis=None) < 3.4e38 and np.minimum.reduce(bx, axis=None) > -3.4e38:
            bx = bx.astype(np.float32).astype(np.float64)  # nothing can overflow: no errstate
        else:
            with np.errstate(over="ignore"):
                bx = bx.astype(np.float32).astype(np.float64)
        if count_nonzero(np.isfinite(bx)) != bx.size:
            raise ValueError(f"boxes: got {_fmt(boxes)}; expected finite numbers within float32 range")
        if np.minimum.reduce(bx[:, 2:], axis=None) <= 0:
            raise ValueError(f"boxes: got {_fmt(boxes)}; expected rows (top, left, height, width) "
                             "with height > 0 and width > 0")
    params = resample_params(bx[:, 0], bx[:, 1], bx[:, 2], bx[:, 3], size, mode, b.n)
    return run(b, KERNELS, params, shapes=b.uniform(size), out=out, backend=be, stream=stream,
               template=(dtype_name(b.dtype), b.channels, mode))


@compiled
def _host_rows(boxes, oh, ow, mode, rows):
    """resample_params' rows of (N, 4) host boxes rounded to float32 as every backend sees them
    (``[top, left, h / oh, w / ow, h, w, oh, ow, mode, 0, 0, 0]``); False when a box is not
    finite, beyond float32's range or empty (the general path then says which)."""
    for i in range(boxes.shape[0]):
        for j in range(4):
            v = np.float64(boxes[i, j])
            if not np.isfinite(v):
                return False
            v = np.float64(np.float32(v))
            if not np.isfinite(v) or (j >= 2 and not v > 0.0):
                return False
            rows[i, j if j < 2 else j + 2] = v
        rows[i, 2] = rows[i, 4] / oh
        rows[i, 3] = rows[i, 5] / ow
        rows[i, 6] = oh
        rows[i, 7] = ow
        rows[i, 8] = mode
        rows[i, 9] = 0.0
        rows[i, 10] = 0.0
        rows[i, 11] = 0.0
    return True


def random_boxes(rng, n, h, w, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """RandomResizedCrop-style integer boxes (N, 4) inside an h x w image (for examples)."""
    area = h * w * rng.uniform(scale[0], scale[1], n)
    logr = rng.uniform(np.log(ratio[0]), np.log(ratio[1]), n)
    bw = np.clip(np.round(np.sqrt(area * np.exp(logr))), 1, w)
    bh = np.clip(np.round(np.sqrt(area / np.exp(logr))), 1, h)
    top = np.floor(rng.random(n) * (h - bh + 1))
    left = np.floor(rng.random(n) * (w - bw + 1))
    return np.stack([top, left, bh, bw], axis=1)


def _example(rng, n, h, w):
    return {"boxes": random_boxes(rng, n, h, w), "size": (max(1, h // 2), max(1, w // 2))}


SPECS = (
    OpSpec("resized_crop", resized_crop, params=(
        Param("boxes", None, shape=(4,), kind="float",
              range_doc="finite, height and width > 0 (may leave the image: reads are clamped to its edge)",
              doc="per-sample (top, left, height, width)"),
        Param("size", None, per_sample=False, kind="size", low=1, expect="positive sizes",
              doc="output (height, width); an int: square"),
        Param("interpolation", "bilinear", per_sample=False, kind="choice",
              choices=tuple(INTERPOLATIONS), doc="OpenCV INTER_NEAREST / INTER_LINEAR / INTER_AREA"),
    ), example=_example, kernels=KERNELS, changes_shape=True, doc=resized_crop.__doc__,
        demo={"boxes": [60.0, 70.0, 120.0, 120.0], "size": (256, 256)}),
)

__all__ = ["resized_crop"]
