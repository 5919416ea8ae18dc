"""Shared pieces of the intensity ops (gamma, invert, solarize, posterize, equalize,
normalize, crop_mirror_normalize): value ranges, per-channel parameters and the CUDA C
fast-path launchers (outputs of varshape batches: :mod:`gpuaug._layout`).

Value ranges follow torchvision: uint8 images hold 0..255, float images 0..1, so an op's
"maximum" M is 255 or 1 and thresholds are given in the input's own units.
"""
from __future__ import annotations

import numpy as np

from gpuaug._params import count_nonzero, per_sample, value_shape
from gpuaug._util import dtype_max as top  # noqa: F401  (solarize, invert, gamma use it)
from gpuaug._util import is_cuda_array


def channel_param(value, n, channels, name, device):
    """A per-channel parameter (mean, std): a number (every channel), ``C`` numbers (per
    channel, every sample), an ``(N, C)`` array (per sample and channel) or an ``(N, 1)``
    array (per sample, every channel) -> ``(N, C)``."""
    # (crop_mirror_normalize._host_params writes the usual host forms straight into the
    # parameter rows; this is the general path, for everything else)
    if value is not None and not is_cuda_array(value):
        value_shape(value, name, f"a number, {channels} numbers (one per channel) or an (N, {channels}) array")
        a = np.asarray(value)
        if a.ndim == 0 and (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
            value = np.broadcast_to(a, (channels,))
        elif a.shape == (n, 1) and a.dtype != object:
            value = np.broadcast_to(a, (n, channels))
    elif value is not None and tuple(value.shape) == (n, 1):
        from gpuaug._util import cupy_module

        cp = cupy_module()
        value = cp.broadcast_to(cp.asarray(value), (n, channels))
    return per_sample(value, n, name, shape=(channels,), device=device)


def nonzero(arr, name, value):
    """Refuse zeros in a host parameter (values on the GPU are not read back)."""
    if isinstance(arr, np.ndarray) and count_nonzero(arr) != arr.size:  # np.any(arr == 0), one call
        a = np.asarray(value)
        shown = repr(a.tolist()) if a.size <= 8 else f"array of shape {a.shape}"
        raise ValueError(f"{name}: got {shown}; expected non-zero values")
    return arr


def float_dtype(dtype, name="dtype"):
    """The output dtype of normalize-like ops: float16 or float32."""
    if type(dtype) is str:  # the usual "float32": looked up
        got = _FLOATS.get(dtype)
        if got is not None:
            return got
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d not in (np.dtype(np.float16), np.dtype(np.float32)):
        raise ValueError(f"{name}: got {dtype!r}; expected 'float16' or 'float32'")
    return d


_FLOATS = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16)}


# -- CUDA C fast paths -----------------------------------------------------------------
def _dense_u8_vectors(batch, nhwc_only):
    """16-byte vectors per sample when ``batch`` is a dense uint8 batch (C-contiguous,
    16-byte aligned, each sample a whole number of vectors); else None."""
    if batch.dtype != np.uint8 or batch.varshape or (nhwc_only and batch.layout != "NHWC"):
        return None
    a = batch.arrays[0]
    if not a.flags.c_contiguous or a.data.ptr % 16:
        return None
    per_sample_bytes = a.size // batch.n
    if per_sample_bytes % 16 or per_sample_bytes // 16 >= 2 ** 31:
        return None
    return per_sample_bytes // 16


def dense_u8(src, dst, nhwc_only=False):
    """Vectors per sample when ``src`` and ``dst`` are dense uint8 batches of one layout."""
    if src.layout != dst.layout:
        return None
    nv = _dense_u8_vectors(src, nhwc_only)
    return nv if nv is not None and _dense_u8_vectors(dst, nhwc_only) == nv else None


VEC_THREADS = 256
VEC_PER_THREAD = 4  # 16-byte vectors per thread (kernels/intensity.cuh VEC_UNROLL)


def vec_grid(n, nvec):
    """Grid for u8_vec_driver kernels: x slices one sample, y walks the samples."""
    bx = max(1, -(-nvec // (VEC_THREADS * VEC_PER_THREAD)))
    return (min(bx, 65535), min(n, 65535))


def u8_vec_fast(filename, name, nhwc_only=False):
    """A run() ``fast=`` hook for an elementwise kernel ``name(src, dst, nvec, params, P, n)``
    driven by u8_vec_driver: dense uint8 batches only."""

    def fast(src, dst):
        nvec = dense_u8(src, dst, nhwc_only)
        if nvec is None:
            return None
        from gpuaug.kernels._cuda import get_function

        fn = get_function(filename, name)
        grid = vec_grid(src.n, nvec)

        def launch(par):
            fn(grid, (VEC_THREADS,), (src.arrays[0], dst.arrays[0], np.int32(nvec), par,
                                      np.int32(par.shape[1]), np.int32(src.n)))
        return launch

    return fast


def _cmn_vec_geometry(src, dst, filename, base, out_channels):
    """(kernel name, grid) of cmn_vec_fast for these batches, or None when the outputs do not
    suit it (a function of the batches' layout keys: memoised)."""
    from gpuaug._batch import descriptor_table
    from gpuaug.kernels._cuda import kernel_name

    t = descriptor_table(dst)
    isz = dst.dtype.itemsize
    unit = 4 * isz
    planar = bool(np.all(t[:, 4] == 1))
    inter = bool(np.all(t[:, 4] == out_channels) and np.all(t[:, 5] == 1))
    if not (planar or inter) or np.any(t[:, 2] % 4) or np.any(t[:, 0] % unit) or np.any((t[:, 3] * isz) % unit):
        return None
    if planar and out_channels > 1 and np.any((t[:, 5] * isz) % unit):
        return None
    from gpuaug._util import cupy_module
    from gpuaug.ops._colour import _multiprocessors

    hmax, wmax = int(t[:, 1].max()), int(t[:, 2].max())
    gx, gz = -(-wmax // (4 * 32)), min(src.n, 65535)
    # 4 rows per thread (CMN_ROWS) where that makes enough blocks; else the ROWS = 1 kernel on a
    # 4x taller grid, so that small batches fill the GPU (normalize at 32 x 224 x 224: 448 blocks)
    rows = 4 if gx * -(-hmax // 32) * gz >= 8 * _multiprocessors(cupy_module()) else 1
    name = kernel_name(base, src.dtype.name, src.channels, dst.dtype.name,
                       *((out_channels,) if "crop" in base else ()), "true" if planar else "false",
                       *(() if rows == 4 else (rows,)))
    return name, (gx, -(-hmax // (8 * rows)), gz)


def cmn_vec_fast(filename, base, out_channels):
    """A run() ``fast=`` hook for crop/mirror/normalize: four output pixels per thread with
    aligned vector stores, when every output row is a whole number of 4-value vectors
    and every output address and stride is aligned to one (loads take any strides)."""

    def fast(src, dst):
        from gpuaug._batch import layout_key, memo_plan, table_item
        from gpuaug.kernels._cuda import get_function, stage

        geo = memo_plan((layout_key(src), layout_key(dst)), ("cmn_vec", filename, base, out_channels),
                        lambda: _cmn_vec_geometry(src, dst, filename, base, out_channels))
        if geo is None:
            return None
        name, grid = geo
        fn = get_function(filename, name)
        n = src.n

        def launch(par):
            src_t, dst_t = stage(table_item(src), table_item(dst))
            fn(grid, (32, 8, 1), (src_t, dst_t, par, np.int32(par.shape[1]), np.int32(n)))
        return launch

    return fast
