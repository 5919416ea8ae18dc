"""transpose: swap the height and width of every image."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._registry import OpSpec
from gpuaug._run import Kernels, choose_backend, run

KERNELS = Kernels(cu=("transpose.cu", "gpuaug_transpose"), numba=("transpose", "transpose_map"))


def transpose(x, *, out=None, layout="NHWC", stream=None, backend=None):
    """Swap height and width: ``out[n, y, x] = x[n, x, y]`` (an ``H x W`` image becomes ``W x H``).

    The matrix transpose of each channel plane (``numpy.transpose(img, (1, 0, 2))`` for
    HWC), i.e. a flip about the main diagonal; channels and layout are kept.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        out: optional array (or list, for a varshape batch) of shape (N, W, H, C) /
            (N, C, W, H) to write into.
        layout: "NHWC" (default) or "NCHW"; the output has the same layout.
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array like ``x`` with H and W swapped (CuPy for CUDA input, NumPy for NumPy
        input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(6, dtype=np.uint8).reshape(1, 2, 3, 1)
        >>> gpuaug.transpose(x)[0, :, :, 0]
        array([[0, 3],
               [1, 4],
               [2, 5]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    # No parameters; one dummy column keeps the (N, P) parameter matrix non-empty.
    params = np.zeros((b.n, 1))
    shapes = [(w, h) for h, w in b.shapes]
    return run(b, KERNELS, params, shapes=shapes, out=out, backend=be, stream=stream)


SPECS = (
    OpSpec("transpose", transpose, params=(), changes_shape=True,
           example=lambda rng, n, h, w: {}, kernels=KERNELS, doc=transpose.__doc__),
)

__all__ = ["transpose"]
