"""flip: mirror images horizontally and/or vertically, per sample."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._params import column_stack, per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, contiguous_rows, run

KERNELS = Kernels(cu=("flip.cu", "gpuaug_flip"), numba=("flip", "flip_map"),
                  variants=tuple(f"gpuaug_flip_{k}<{pb}>" for k in ("rows", "groups")
                                 for pb in (1, 2, 3, 4, 6, 8, 12, 16)))


def flip(x, horizontal=True, vertical=False, *, out=None, layout="NHWC", stream=None, backend=None):
    """Flip each image left-right (``horizontal``) and/or top-bottom (``vertical``).

    ``out[n, y, x] = x[n, V(y), H(x)]`` with ``H(x) = W-1-x`` where ``horizontal[n]`` is true
    (else ``x``) and ``V(y) = H-1-y`` where ``vertical[n]`` is true.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        horizontal, vertical: bool, or a sequence/array of N bools (one per sample).
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW".
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array like ``x`` (CuPy for CUDA input, NumPy for NumPy input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(6, dtype=np.uint8).reshape(1, 2, 3, 1)
        >>> gpuaug.flip(x)[0, :, :, 0]
        array([[2, 1, 0],
               [5, 4, 3]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    params = flip_params(horizontal, vertical, b.n, b.device)
    return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream, fast=_fast)


def _flag(value, n, name, device):
    """One flag for the batch as 1.0/0.0, a bool NumPy array of N flags as it is, else
    :func:`per_sample`'s column (its checks and errors)."""
    t = type(value)
    if t is bool:
        return 1.0 if value else 0.0
    if t is np.ndarray and value.dtype.char == "?" and value.shape == (n,):
        return value
    return per_sample(value, n, name, device=device, boolean=True)


def flip_params(horizontal, vertical, n, device=False):
    """The (N, 2) parameter rows ``[horizontal, vertical]`` (1.0 / 0.0): float64 NumPy for
    host flags, written straight into one matrix (bools convert to 1.0/0.0 as they are
    copied: no per-column float64 copies, no np.concatenate); with a flag array on the GPU,
    :func:`column_stack`'s float32 device matrix. ``device``: the batch is on the GPU."""
    h = _flag(horizontal, n, "horizontal", device)
    v = _flag(vertical, n, "vertical", device)
    if type(h) in _HOST and type(v) in _HOST:
        params = np.empty((n, 2))
        params[:, 0] = h
        params[:, 1] = v
        return params
    return column_stack([_column(h, n), _column(v, n)], n)


_HOST = (float, np.ndarray)


def _column(flag, n):
    """A :func:`_flag` result as the float64 column :func:`per_sample` gives for it (device
    columns as they are)."""
    if type(flag) is float:
        col = np.empty(n)
        col.fill(flag)
        return col
    if type(flag) is np.ndarray and flag.dtype.char == "?":
        return flag.astype(np.float64)
    return flag


# Rows up to this many bytes are staged whole in shared memory (a few rows per block).
_TILE_BYTES = 16384


def _fast(src, dst):
    """Dense batches: 16-pixel groups in registers (width % 16 == 0), else staged rows."""
    geo = contiguous_rows(src, dst)
    if geo is None:
        return None
    from gpuaug.kernels._cuda import get_function

    planes, pps, h, w, pb = geo
    row = w * pb
    aligned = src.arrays[0].data.ptr % 16 == 0 and dst.arrays[0].data.ptr % 16 == 0
    a, b = src.arrays[0], dst.arrays[0]
    groups = planes * h * (w // 16)
    if aligned and w % 16 == 0 and groups < 2**32:
        fn = get_function("flip.cu", f"gpuaug_flip_groups<{pb}>")
        blocks = (groups + 255) // 256

        def launch(par):
            fn((blocks,), (256,), (a, b, par, np.int32(par.shape[1]), np.int32(pps), np.uint32(h),
                                   np.uint32(w), np.uint32(groups)))
        return launch
    if row > _TILE_BYTES:
        return None
    vec = int(row % 16 == 0 and aligned)
    rows_per_block = max(1, _TILE_BYTES // 2 // row)
    fn = get_function("flip.cu", f"gpuaug_flip_rows<{pb}>")
    blocks = (planes * h + rows_per_block - 1) // rows_per_block

    def launch(par):
        fn((blocks,), (256,), (a, b, par, np.int32(par.shape[1]), np.int32(planes), np.int32(pps),
                               np.int32(h), np.int32(w), np.int32(rows_per_block), np.int32(vec)),
           shared_mem=rows_per_block * row)
    return launch


def _example(rng, n, h, w):
    return {"horizontal": rng.random(n) < 0.5, "vertical": rng.random(n) < 0.5}


SPECS = (
    OpSpec("flip", flip, params=(
        Param("horizontal", True, kind="bool", doc="flip left-right"),
        Param("vertical", False, kind="bool", doc="flip top-bottom"),
    ), example=_example,
        demo=({"horizontal": True}, {"horizontal": False, "vertical": True}),
        peers={"dali": "flip"}, kernels=KERNELS, doc=flip.__doc__),
)

__all__ = ["flip"]
