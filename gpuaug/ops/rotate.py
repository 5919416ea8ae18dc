"""rotate: per-sample rotation (and scaling) about a centre, as OpenCV's getRotationMatrix2D
followed by warpAffine."""
from __future__ import annotations

from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels
from gpuaug.ops import _warp

KERNELS = Kernels(cu=("rotate.cu", "gpuaug_rotate"), numba=("rotate", "rotate_value"), kind="value",
                  variants=_warp.dense_variants("gpuaug_rotate"))


def rotate(x, angle, center=None, scale=1.0, interpolation="bilinear", border="constant", fill=0,
           *, out=None, layout="NHWC", stream=None, backend=None):
    """Rotate each image by ``angle`` degrees counter-clockwise about ``center``, scaling by
    ``scale``; the output has the input's size.

    The map is OpenCV's ``getRotationMatrix2D(center, angle, scale)``, warped as
    ``cv2.warpAffine`` does::

        M = [[ a, b, (1 - a) cx - b cy],      a = scale cos(angle)
             [-b, a, b cx + (1 - a) cy]]      b = scale sin(angle)
        out[n, y, x] = sample(x[n], M^-1 (x, y, 1))

    ``center`` defaults to the image centre ``((w - 1) / 2, (h - 1) / 2)`` (per sample
    for a varshape batch), where pixel centres sit at integer coordinates: then rotating
    by 180 degrees equals flipping both ways, and by 90 degrees a square image equals
    ``rot90``. (OpenCV code often passes ``(w / 2, h / 2)``, half a pixel off that
    centre; pass ``center=(w / 2, h / 2)`` to reproduce it.) Multiples of 90 degrees
    use exact cos/sin, so pixels land exactly on pixels.

    Sampling, borders and rounding are :func:`gpuaug.warp_affine`'s: "nearest" rounds half
    up, "bilinear" blends 4 pixels; border "constant" (``fill``), "replicate" or
    "reflect" (BORDER_REFLECT_101).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        angle: degrees, counter-clockwise as displayed (y down); a number or N numbers.
        center: (cx, cy) in pixels, or (N, 2); None: each image's centre.
        scale: zoom factor (non-zero), a number or N numbers.
        interpolation: "nearest" or "bilinear".
        border: "constant", "replicate" or "reflect".
        fill: value of outside pixels for border="constant": a number, N numbers, or an
            (N, C) array.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (CuPy for CUDA input, NumPy for NumPy input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(9, dtype=np.uint8).reshape(1, 3, 3, 1)
        >>> gpuaug.rotate(x, 90)[0, :, :, 0]  # a quarter turn counter-clockwise
        array([[2, 5, 8],
               [1, 4, 7],
               [0, 3, 6]], dtype=uint8)
    """
    return _warp.warp(KERNELS, x, lambda b, modes=None: _warp.rotation_inverse(b, angle, center, scale, modes), {},
                      None, interpolation, border, fill, out, layout, stream, backend, rows=True)


def _example(rng, n, h, w):
    return {"angle": rng.uniform(-30, 30, n), "scale": rng.uniform(0.8, 1.2, n)}


SPECS = (
    OpSpec("rotate", rotate, params=(
        Param("angle", 0.0, doc="degrees, counter-clockwise"),
        Param("center", None, shape=(2,), doc="(cx, cy) pixels; None: the image centre"),
        Param("scale", 1.0, nonzero=True, expect="non-zero numbers", doc="zoom factor"),
        *_warp.sampling_params(),
    ), example=_example, kernels=KERNELS, doc=rotate.__doc__, demo={"angle": 30.0}, peers={"dali": "rotate"},
        range_notes="`angle`, `center`, `fill` finite"),
)

__all__ = ["rotate"]
