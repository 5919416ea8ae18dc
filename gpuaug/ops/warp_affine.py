"""warp_affine: per-sample affine warps (OpenCV's warpAffine), nearest or bilinear."""
from __future__ import annotations

import numpy as np

from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels
from gpuaug.ops import _warp

KERNELS = Kernels(cu=("warp_affine.cu", "gpuaug_warp_affine"), numba=("warp_affine", "warp_affine_value"),
                  kind="value",
                  variants=_warp.dense_variants("gpuaug_warp_affine"))


def warp_affine(x, matrix, size=None, interpolation="bilinear", border="constant", fill=0,
                inverse_map=False, *, out=None, layout="NHWC", stream=None, backend=None):
    """Warp each image by an affine matrix, as OpenCV's ``cv2.warpAffine``.

    ``matrix`` maps source pixel coordinates to destination ones,
    ``(x_d, y_d) = M @ (x_s, y_s, 1)``; each output pixel is sampled from the source at
    ``M^-1 (x_d, y_d)``::

        out[n, y, x] = sample(x[n], A @ (x, y, 1)),   A = inverse(M[n])  (or M[n] itself
                                                       when inverse_map, like WARP_INVERSE_MAP)

    Conventions (OpenCV's): ``x`` right, ``y`` down, pixel centres at integer coordinates
    (``(0, 0)`` is the centre of the top-left pixel, no half-pixel shift).
    ``interpolation="nearest"`` takes the pixel whose centre is nearest, ties rounding
    up (``floor(u + 0.5)``); ``"bilinear"`` blends the 4 surrounding pixels with weights
    from ``u - floor(u)``. Each of those taps that falls outside the image follows
    ``border``: ``"constant"`` reads ``fill`` (so edges blend into it, as in OpenCV),
    ``"replicate"`` the nearest edge pixel (BORDER_REPLICATE), ``"reflect"`` mirrors
    without repeating the edge pixel (OpenCV's BORDER_REFLECT_101, ``numpy.pad``'s
    "reflect"). Source coordinates are clamped to +-2**24 first (so a far-away point is
    "outside", never an integer overflow). Maths in float32 on the GPU, float64 on the
    CPU; uint8 results round half up and saturate.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        matrix: (2, 3) for every sample, or (N, 2, 3) one per sample; host or device
            array. Host matrices must be finite and invertible (ValueError otherwise);
            matrices on the GPU are checked for shape only and inverted there without a
            synchronisation (a singular one gives undefined pixels). See
            :mod:`gpuaug.geometry` to build them.
        size: (height, width) of the output; default: each input's own size.
        interpolation: "nearest" or "bilinear".
        border: "constant", "replicate" or "reflect".
        fill: value of outside pixels for border="constant": a number, N numbers, or an
            (N, C) array; converted to the dtype as a store would.
        inverse_map: True when ``matrix`` already maps destination to source pixels.
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW".
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array like ``x`` with the output size (CuPy for CUDA input, NumPy for NumPy
        input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(12, dtype=np.uint8).reshape(1, 3, 4, 1)
        >>> shift = [[1, 0, 1], [0, 1, 0]]  # one pixel to the right
        >>> gpuaug.warp_affine(x, shift, interpolation="nearest", fill=99)[0, :, :, 0]
        array([[99,  0,  1,  2],
               [99,  4,  5,  6],
               [99,  8,  9, 10]], dtype=uint8)
    """
    return _warp.warp(KERNELS, x,
                      lambda b, inverse_map, modes: _warp.matrix_inverse(matrix, b, (2, 3), inverse_map, modes),
                      {"inverse_map": inverse_map}, size, interpolation, border, fill, out, layout, stream,
                      backend, rows=True)


def _example(rng, n, h, w):
    from gpuaug import geometry as G

    ctr = np.stack([(w - 1) / 2 + rng.uniform(-2, 2, n), (h - 1) / 2 + rng.uniform(-2, 2, n)], axis=1)
    m = G.compose(G.rotation(rng.uniform(-30, 30, n), ctr), G.scale(rng.uniform(0.8, 1.2, n), center=ctr),
                  G.translation(rng.uniform(-3, 3, n), rng.uniform(-3, 3, n)))
    return {"matrix": G.to_affine(m)}


SPECS = (
    OpSpec("warp_affine", warp_affine, params=(
        Param("matrix", None, shape=(2, 3),
              range_doc="finite and invertible (abs(det) above 1e-12 x the product of its row norms)",
              doc="source -> destination affine matrix"),
        Param("size", None, per_sample=False, kind="size", low=1, expect="positive sizes",
              doc="output (height, width)"),
        *_warp.sampling_params(),
        Param("inverse_map", False, per_sample=False, kind="bool",
              doc="matrix maps destination to source"),
    ), changes_shape=True, example=_example, kernels=KERNELS, doc=warp_affine.__doc__,
        demo={"matrix": [[1.0, 0.3, -30.0], [0.1, 1.0, 0.0]]}, peers={"dali": "warp_affine"}),
)

__all__ = ["warp_affine"]
