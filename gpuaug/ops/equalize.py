"""equalize: histogram equalisation per image and channel (torchvision's equalize)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch, max_size, table_item
from gpuaug._registry import OpSpec
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import cupy_module
from gpuaug.kernels._cuda import CTYPES
from gpuaug.ops._colour import _multiprocessors
from gpuaug.ops._intensity import VEC_THREADS, _dense_u8_vectors, u8_vec_fast, vec_grid

KERNELS = Kernels(cu=("equalize.cu", "gpuaug_equalize"), numba=("equalize", "equalize_value"),
                  kind="value",
                  variants=tuple(f"gpuaug_equalize_u8<{c}>" for c in (1, 3, 4))
                  + tuple(f"gpuaug_equalize_hist_u8<{c}>" for c in (1, 3, 4))
                  + tuple(f"gpuaug_equalize_hist<{t}, {c}>" for t in CTYPES.values()
                          for c in (1, 3, 4))
                  + ("gpuaug_equalize_lut", "gpuaug_equalize_lut_parts"))


def equalize(x, *, out=None, layout="NHWC", stream=None, backend=None):
    """Equalise the histogram of each image, channel by channel, as torchvision's ``equalize``.

    Two passes over the pixels: a 256-bin histogram per sample and channel, then a table
    lookup. The table is PIL's: with ``cum`` the cumulative histogram and
    ``step = (H*W - count of the highest non-empty bin) // 255``,
    ``lut[0] = 0, lut[k] = min((cum[k-1] + step // 2) // step, 255)``; an image channel
    with ``step == 0`` (a single level, or nearly) is left as it is.

    - uint8: ``out = lut[x]``.
    - float16 / float32 (values 0..1): binned as torchvision converts to uint8,
      ``b = floor(x * 255.999)`` in float32 (clamped to 0..255), and ``out = lut[b] / 255``
      (so floats come back on the 256-level grid, as torchvision returns them).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (same shape, dtype and layout), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.repeat(np.array([10, 20, 30], np.uint8), 200).reshape(1, 1, 600, 1)
        >>> np.unique(gpuaug.equalize(x))
        array([  0, 200, 255], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    tables = _tables_cuda(b, stream) if be == "cuda" else _tables_numba(b, "cpu" if be == "cpu" else "cuda", stream)
    return run(b, KERNELS, tables, shapes=b.shapes, out=out, backend=be, stream=stream,
               fast=u8_vec_fast("equalize.cu", f"gpuaug_equalize_u8<{b.channels}>", nhwc_only=True))


def _tables_cuda(b, stream):
    """Passes 1 and 2 on the GPU: (N, C*256 + 1) float32 tables on the caller's stream."""
    from gpuaug._stream import on_device
    from gpuaug.kernels._cuda import get_function, grid_2d, kernel_name, stage

    cp = cupy_module()
    n, c = b.n, b.channels
    with on_device(b.device_id(), stream):
        tables = cp.empty((n, c * 256 + 1), cp.float32)
        nvec = _dense_u8_vectors(b, nhwc_only=True)
        if nvec is not None:  # partial histograms, every byte written: an op plan replays the call
            grid = vec_grid(n, nvec)
            parts = min(grid[0], max(1, -(-4 * _multiprocessors(cp) // max(n, 1))))
            hist = cp.empty((n, parts, c, 256), cp.uint32)
            fn = get_function("equalize.cu", f"gpuaug_equalize_hist_u8<{c}>")
            fn((parts, grid[1]), (VEC_THREADS,), (b.arrays[0], np.int32(nvec), hist, np.int32(n)))
        else:
            parts = 1
            hist = cp.zeros((n, c, 256), cp.uint32)
            (tab,) = stage(table_item(b))
            fn = get_function("equalize.cu", kernel_name("gpuaug_equalize_hist", b.dtype.name, c))
            hmax, wmax = max_size(b.shapes)
            grid, block = grid_2d(hmax, wmax, n)
            fn(grid, block, (tab, hist, np.int32(n)))
        get_function("equalize.cu", "gpuaug_equalize_lut_parts")(
            (n * c,), (256,), (hist, np.int32(parts), tables, np.int32(c * 256 + 1), np.int32(c),
                              np.int32(b.dtype != np.uint8)))
    return tables


#: Samples per histogram pass of the Numba twins (bounds their scratch memory).
_HIST_CHUNK = 4096


def _tables_numba(b, target, stream):
    """Passes 1 and 2 with the Numba twins (CPU, or CUDA / the simulator)."""
    from gpuaug._run import launch_twin
    from gpuaug.kernels.numba.equalize import hist_kernel, lut_kernel

    def work():
        xp = b.xp
        n, c = b.n, b.channels
        is_float = float(b.dtype != np.uint8)
        tables = xp.empty((n, c * 256 + 1), np.float64 if target == "cpu" else np.float32)
        hk, lk = hist_kernel(target), lut_kernel(target)
        # Histograms in chunks of samples: (N, C, 256) int64 at once was 600 MB for 100,000
        # images (a 2 GB peak with the tables and the float16 copy), whatever their size.
        for i in range(0, n, _HIST_CHUNK):
            j = min(n, i + _HIST_CHUNK)
            hist = xp.zeros((j - i, c, 256), np.int64)
            items = ([(b.nhwc[i:j], hist)] if not b.varshape else
                     [(b.views[k][None], hist[k - i:k - i + 1]) for k in range(i, j)])
            for s, h in items:
                if s.dtype == np.float16:
                    s = s.astype(np.float32)
                launch_twin(hk, target, b, s.shape, (s, h, is_float))
            launch_twin(lk, target, b, (j - i, c, 1), (hist, tables[i:j], is_float))
        return tables

    if not b.device:
        return work()
    from gpuaug._stream import on_device

    with on_device(b.device_id(), stream):
        return work()


SPECS = (
    OpSpec("equalize", equalize, params=(), geometric=False, example=None, kernels=KERNELS,
           doc=equalize.__doc__, demo={}),
)

__all__ = ["equalize"]
