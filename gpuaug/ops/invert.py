"""invert: negative image (torchvision's invert)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._registry import OpSpec
from gpuaug._run import Kernels, choose_backend, run
from gpuaug.ops._intensity import top, u8_vec_fast

KERNELS = Kernels(cu=("invert.cu", "gpuaug_invert"), numba=("invert", "invert_value"), kind="value",
                  variants=("gpuaug_invert_u8",))
_fast = u8_vec_fast("invert.cu", "gpuaug_invert_u8")


def invert(x, *, out=None, layout="NHWC", stream=None, backend=None):
    """Invert every value: ``out = M - x`` with ``M`` = 255 for uint8, 1 for floats.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (same shape, dtype and layout), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> gpuaug.invert(np.array([[[[0], [100], [255]]]], np.uint8))[0, 0, :, 0]
        array([255, 155,   0], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    params = np.full((b.n, 1), top(b.dtype))
    return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream, fast=_fast)


SPECS = (
    OpSpec("invert", invert, params=(), geometric=False, example=None, kernels=KERNELS, doc=invert.__doc__,
           demo={}),
)

__all__ = ["invert"]
