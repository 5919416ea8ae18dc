"""posterize: keep the top bits of every value, per sample (torchvision's posterize)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._params import column_stack, per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug.ops._intensity import u8_vec_fast

KERNELS = Kernels(cu=("posterize.cu", "gpuaug_posterize"), numba=("posterize", "posterize_value"),
                  kind="value", variants=("gpuaug_posterize_u8",))
_fast = u8_vec_fast("posterize.cu", "gpuaug_posterize_u8")


def posterize(x, bits, *, out=None, layout="NHWC", stream=None, backend=None):
    """Reduce every value to ``bits`` bits.

    - uint8: ``out = x & (0xFF << (8 - bits))`` (torchvision's posterize).
    - float16 / float32 (values 0..1): ``out = min(floor(x * 2**bits), 2**bits - 1) / 2**bits``,
      at least 0 -- torchvision v2's float rule: the same levels as uint8, divided by 256.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        bits: integer in 1..8; a number or N numbers (one per sample).
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (same shape, dtype and layout), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> gpuaug.posterize(np.array([[[[7], [200], [255]]]], np.uint8), 2)[0, 0, :, 0]
        array([  0, 192, 192], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    k = per_sample(bits, b.n, "bits", integer=True, **SPECS[0].limits("bits"), device=b.device)
    if type(k) is np.ndarray:  # [bits, is_float] written in place
        params = np.empty((b.n, 2))
        params[:, 0] = k
        params[:, 1] = float(b.dtype != np.uint8)
    else:
        params = column_stack([k, np.full(b.n, float(b.dtype != np.uint8))], b.n)
    return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream, fast=_fast)


def _example(rng, n, h, w):
    return {"bits": rng.integers(1, 9, n)}


SPECS = (
    OpSpec("posterize", posterize, params=(
        Param("bits", kind="int", low=1, high=8, doc="bits kept, 1..8"),
    ), geometric=False, example=_example, kernels=KERNELS, doc=posterize.__doc__,
        demo={"bits": 3}),
)

__all__ = ["posterize"]
