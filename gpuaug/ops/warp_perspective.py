"""warp_perspective: per-sample perspective warps (OpenCV's warpPerspective)."""
from __future__ import annotations

import numpy as np

from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels
from gpuaug.ops import _warp

KERNELS = Kernels(cu=("warp_perspective.cu", "gpuaug_warp_perspective"),
                  numba=("warp_perspective", "warp_perspective_value"), kind="value",
                  variants=_warp.dense_variants("gpuaug_warp_perspective"))


def warp_perspective(x, matrix, size=None, interpolation="bilinear", border="constant", fill=0,
                     inverse_map=False, *, out=None, layout="NHWC", stream=None, backend=None):
    """Warp each image by a 3x3 homography, as OpenCV's ``cv2.warpPerspective``.

    ``matrix`` maps source pixel coordinates to destination ones,
    ``(x_d w, y_d w, w) = M @ (x_s, y_s, 1)``; each output pixel is sampled from the
    source at the point ``A = M^-1`` sends it to::

        (X, Y, W) = A @ (x, y, 1),   out[n, y, x] = sample(x[n], X / W, Y / W)

    (``A = M`` itself when ``inverse_map``, like WARP_INVERSE_MAP). Where ``W == 0`` (the
    output pixel sees a point at infinity) the source point counts as far outside the
    image: ``fill`` for border="constant".

    Conventions are :func:`gpuaug.warp_affine`'s (OpenCV's): ``x`` right, ``y`` down,
    pixel centres at integers; nearest rounds half up (``floor(u + 0.5)``); bilinear
    blends the 4 surrounding pixels, each outside tap following ``border``
    ("constant": ``fill``; "replicate"; "reflect" = OpenCV's BORDER_REFLECT_101). Maths
    in float32 on the GPU, float64 on the CPU; uint8 results round half up and saturate.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        matrix: (3, 3) for every sample, or (N, 3, 3); host or device array. Host
            matrices must be finite and invertible (ValueError otherwise); matrices on
            the GPU are checked for shape only and inverted there, without a
            synchronisation.
        size: (height, width) of the output; default: each input's own size.
        interpolation: "nearest" or "bilinear".
        border: "constant", "replicate" or "reflect".
        fill: value of outside pixels for border="constant": a number, N numbers, or an
            (N, C) array; converted to the dtype as a store would.
        inverse_map: True when ``matrix`` already maps destination to source pixels.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` with the output size, or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(12, dtype=np.float32).reshape(1, 3, 4, 1)
        >>> m = np.diag([2.0, 2.0, 2.0])  # a homography is defined up to scale: identity
        >>> bool((gpuaug.warp_perspective(x, m) == x).all())
        True
    """
    return _warp.warp(KERNELS, x,
                      lambda b, inverse_map, modes: _warp.matrix_inverse(matrix, b, (3, 3), inverse_map, modes),
                      {"inverse_map": inverse_map}, size, interpolation, border, fill, out, layout, stream,
                      backend, rows=True)


def _example(rng, n, h, w):
    """Mild random perspective: each corner moved by up to 10% of the size."""
    m = np.empty((n, 3, 3))
    src = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]], np.float64)
    for i in range(n):
        dst = src + rng.uniform(-0.1, 0.1, (4, 2)) * [w, h]
        m[i] = homography(src, dst)
    return {"matrix": m}


def homography(src, dst):
    """The 3x3 matrix mapping 4 points ``src`` (4, 2) onto ``dst`` (4, 2) (x, y pixels),
    as OpenCV's getPerspectiveTransform.

    Example::

        >>> import numpy as np
        >>> from gpuaug.ops.warp_perspective import homography
        >>> sq = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], float)
        >>> np.allclose(homography(sq, sq * 2), np.diag([2.0, 2.0, 1.0]))
        True
    """
    src, dst = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    a = np.zeros((8, 8))
    rhs = np.zeros(8)
    for k in range(4):
        (x, y), (u, v) = src[k], dst[k]
        a[2 * k] = [x, y, 1, 0, 0, 0, -u * x, -u * y]
        a[2 * k + 1] = [0, 0, 0, x, y, 1, -v * x, -v * y]
        rhs[2 * k], rhs[2 * k + 1] = u, v
    return np.append(np.linalg.solve(a, rhs), 1.0).reshape(3, 3)


SPECS = (
    OpSpec("warp_perspective", warp_perspective, params=(
        Param("matrix", None, shape=(3, 3),
              range_doc="finite and invertible (abs(det) above 1e-12 x the product of its row norms)",
              doc="source -> destination homography"),
        Param("size", None, per_sample=False, kind="size", low=1, expect="positive sizes",
              doc="output (height, width)"),
        *_warp.sampling_params(),
        Param("inverse_map", False, per_sample=False, kind="bool",
              doc="matrix maps destination to source"),
    ), changes_shape=True, example=_example, kernels=KERNELS, doc=warp_perspective.__doc__,
        demo={"matrix": [[1.0, 0.2, 0.0], [0.05, 1.0, 0.0], [0.0008, 0.0006, 1.0]]}),
)

__all__ = ["warp_perspective"]
