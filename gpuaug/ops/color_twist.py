"""color_twist: a per-sample 3x4 affine colour matrix."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._params import per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import choose_backend
from gpuaug.ops._colour import apply, colour_kernels, maxv_column

CHANNELS = (3, 4)
KERNELS = colour_kernels("color_twist", CHANNELS)


def color_twist(x, matrix, *, out=None, layout="NHWC", stream=None, backend=None):
    """Apply an affine colour matrix per sample: ``rgb' = M[:, :3] @ rgb + M[:, 3]``.

    The matrix acts on values normalised to [0, 1] (uint8 images hold [0, 255], float16/
    float32 images [0, 1]), so one matrix means the same on every dtype: the offset column is
    in units of the full range (for uint8, ``M[:, 3] * 255`` is added). Brightness, contrast
    (given the mean), saturation and hue-by-YIQ-rotation are all such matrices, and products
    of them compose. uint8 results round to nearest and saturate to [0, 255]; float results
    are not clamped. The 4th channel of RGBA images (alpha) is copied unchanged.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images; uint8,
            float16 or float32; 3 (RGB) or 4 (RGBA) channels; NumPy or any CUDA array.
        matrix: array of shape (3, 4) (every sample) or (N, 3, 4) (one per sample), finite.
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW".
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array like ``x`` (CuPy for CUDA input, NumPy for NumPy input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[[[10, 100, 200]]]], np.uint8)
        >>> swap_rb_and_lift = [[0, 0, 1, 0.1], [0, 1, 0, 0], [1, 0, 0, 0]]
        >>> gpuaug.color_twist(x, swap_rb_and_lift)[0, 0, 0]
        array([226, 100,  10], dtype=uint8)
    """
    b = as_batch(x, layout, channels=CHANNELS)
    be = choose_backend(b, backend)
    m = per_sample(matrix, b.n, "matrix", shape=(3, 4), device=b.device)
    if type(m) is np.ndarray:  # host values: the whole (N, 13) matrix, which apply() takes as it is
        rows = np.empty((b.n, 13))
        rows[:, :12] = m.reshape(b.n, 12)
        rows[:, 12] = maxv_column(b)
        return apply(b, KERNELS, [rows], out=out, backend=be, stream=stream)
    return apply(b, KERNELS, [m, maxv_column(b)], out=out, backend=be, stream=stream)


def _example(rng, n, h, w):
    return {"matrix": np.eye(3, 4)[None] + rng.uniform(-0.1, 0.1, (n, 3, 4))}


SPECS = (
    OpSpec("color_twist", color_twist, params=(
        Param("matrix", None, shape=(3, 4), doc="affine colour matrix on [0, 1] values"),
    ), channels=CHANNELS, geometric=False, example=_example, kernels=KERNELS, doc=color_twist.__doc__,
        demo={"matrix": [[0.393, 0.769, 0.189, 0.0], [0.349, 0.686, 0.168, 0.0], [0.272, 0.534, 0.131, 0.0]]}),
)

__all__ = ["color_twist"]
