"""normalize: per-channel (x - mean) / std to float16/float32, optionally changing layout."""
from __future__ import annotations

from gpuaug._batch import as_batch
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend
from gpuaug._util import check_choice
from gpuaug.kernels._cuda import CTYPES
from gpuaug.ops._intensity import float_dtype
from gpuaug.ops.crop_mirror_normalize import LAYOUTS, cmn

_TYPES = tuple(CTYPES.values())
KERNELS = Kernels(
    cu=("normalize.cu", "gpuaug_normalize"), numba=("normalize", "normalize_value"), kind="value",
    variants=tuple(f"gpuaug_normalize<{t}, {c}, gpuaug::half>" for t in _TYPES for c in (1, 3, 4))
    + tuple(f"gpuaug_normalize_vec<{t}, {c}, {o}, {pl}{rows}>" for t in _TYPES for c in (1, 3, 4)
            for o in ("gpuaug::half", "float") for pl in ("true", "false") for rows in ("", ", 1")))


def normalize(x, mean, std, dtype="float32", output_layout=None, *, out=None, layout="NHWC",
              stream=None, backend=None):
    """Normalise per channel: ``out[..., c] = (x[..., c] - mean[c]) / std[c]``, as float.

    ``x`` is used in its own units, not rescaled: uint8 values stay 0..255, so give mean
    and std in those units (ImageNet for uint8: mean 123.675, 116.28, 103.53; std 58.395,
    57.12, 57.375), as DALI's crop_mirror_normalize does; float inputs in theirs (usually
    0..1, torchvision's ``normalize`` convention). :func:`gpuaug.crop_mirror_normalize`
    follows the same rule. Undo with ``normalize(y, -mean / std, 1 / std)``.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        mean, std: a number, C numbers (per channel), an (N, C) array (per sample and
            channel) or an (N, 1) array (per sample); std must not be 0.
        dtype: output dtype, "float32" (default) or "float16".
        output_layout: "NHWC", "NCHW" or None (the input's layout): the layout change
            happens in the same pass. A varshape batch gives a list of HWC or CHW images.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`); ``out``
            has the output's dtype and layout.

    Returns:
        An array of ``x``'s size in ``dtype`` and ``output_layout``, or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[[[0, 128, 255]]]], np.uint8)  # one 1 x 1 RGB image, NHWC
        >>> y = gpuaug.normalize(x, mean=(127.5, 64, 0), std=(127.5, 32, 255), output_layout="NCHW")
        >>> y.shape, y.ravel()
        ((1, 3, 1, 1), array([-1.,  2.,  1.], dtype=float32))
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    odt = float_dtype(dtype)
    out_layout = b.layout if output_layout is None else check_choice("output_layout", output_layout, LAYOUTS)
    return cmn(b, be, KERNELS, None, None, None, mean, std, odt, out_layout, b.channels, out, stream)


def _example(rng, n, h, w):
    return {"mean": rng.uniform(100, 150, (n, 1)), "std": rng.uniform(50, 70, (n, 1))}


SPECS = (
    OpSpec("normalize", normalize, params=(
        Param("mean", shape=("C",), doc="per-channel mean, input units"),
        Param("std", shape=("C",), nonzero=True, expect="non-zero values",
              doc="per-channel standard deviation, input units, non-zero"),
        Param("dtype", "float32", per_sample=False, kind="choice", choices=("float16", "float32"),
              doc="output dtype"),
        Param("output_layout", None, per_sample=False, kind="choice", choices=(None,) + LAYOUTS,
              doc="output layout (None: the input's)"),
    ), geometric=False, example=_example, kernels=KERNELS, doc=normalize.__doc__,
        demo={"mean": [123.7, 116.3, 103.5], "std": [58.4, 57.1, 57.4]}),
)

__all__ = ["normalize"]
