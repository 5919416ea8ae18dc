"""autocontrast: stretch each image channel to the full value range (torchvision's autocontrast)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch, max_size, table_item
from gpuaug._registry import OpSpec
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import cupy_module, dtype_max
from gpuaug.kernels._cuda import CTYPES
from gpuaug.ops._colour import _multiprocessors

KERNELS = Kernels(cu=("autocontrast.cu", "gpuaug_autocontrast"), numba=("autocontrast", "autocontrast_value"),
                  kind="value",
                  variants=tuple(f"gpuaug_autocontrast_{k}<{t}, {c}>" for k in ("parts", "rows")
                                 for t in CTYPES.values() for c in (1, 3, 4)))


def autocontrast(x, *, out=None, layout="NHWC", stream=None, backend=None):
    """Stretch each image's channels so that their minimum maps to 0 and their maximum to the
    top of the range, as torchvision's ``autocontrast``.

    Per sample and channel, with ``lo``/``hi`` the channel's minimum and maximum and
    ``M`` = 255 (uint8) or 1 (floats): ``out = clamp((x - lo) / ((hi - lo) * (1 / M)), 0, M)``
    in float32; a channel with ``hi == lo`` is left as it is (clamped to [0, M]). Two passes:
    a per-sample reduction, then the point-wise map. uint8 rounds half up as every gpuaug op
    (torchvision truncates, so results may differ from it by 1).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (same shape, dtype and layout), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[[[50], [100], [250]]]], np.uint8)
        >>> gpuaug.autocontrast(x)[0, 0, :, 0]
        array([  0,  64, 255], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    rows = _rows_cuda(b, stream) if be == "cuda" else _rows_numba(b, "cpu" if be == "cpu" else "cuda", stream)
    return run(b, KERNELS, rows, shapes=b.shapes, out=out, backend=be, stream=stream)


def _rows_cuda(b, stream):
    """Step 1 on the GPU: (N, 2C + 1) float32 rows on the caller's stream."""
    from gpuaug._stream import on_device
    from gpuaug.kernels._cuda import get_function, kernel_name, stage

    cp = cupy_module()
    n, c = b.n, b.channels
    with on_device(b.device_id(), stream):
        rows = cp.empty((n, 2 * c + 1), cp.float32)
        if n:
            (tab,) = stage(table_item(b))
            h, w = max_size(b.shapes)
            # slices of at least 16 pixels per thread, about 4 blocks per multiprocessor in all
            nparts = max(1, min(64, -(-h * w // (256 * 16)), -(-4 * _multiprocessors(cp) // n)))
            parts = cp.empty((n, nparts, 2 * c), cp.float32)
            fn = get_function("autocontrast.cu", kernel_name("gpuaug_autocontrast_parts", b.dtype.name, c))
            fn((nparts, min(n, 65535)), (256,), (tab, parts, np.int32(nparts), np.int32(n)))
            fn = get_function("autocontrast.cu", kernel_name("gpuaug_autocontrast_rows", b.dtype.name, c))
            fn((-(-n // 128),), (128,), (parts, np.int32(nparts), rows, np.int32(2 * c + 1), np.int32(n)))
    return rows


def _rows_numba(b, target, stream):
    """Step 1 with the Numba twins (CPU, or CUDA / the simulator)."""
    from gpuaug._run import launch_twin
    from gpuaug.kernels.numba.autocontrast import minmax_kernel, rows_from_minmax

    def work():
        xp = b.xp
        n, c = b.n, b.channels
        ft = np.float64 if target == "cpu" else np.float32
        lo = xp.full((n, c), np.inf, ft)
        hi = xp.full((n, c), -np.inf, ft)
        k = minmax_kernel(target)
        items = [(b.nhwc, lo, hi)] if not b.varshape else [(b.views[i][None], lo[i:i + 1], hi[i:i + 1])
                                                            for i in range(n)]
        for s, l_, h_ in items:
            if s.dtype == np.float16:
                s = s.astype(np.float32)
            if s.shape[0] and s.shape[1] and s.shape[2]:
                launch_twin(k, target, b, s.shape, (s, l_, h_))
        bound = dtype_max(b.dtype)
        return rows_from_minmax(xp, lo, hi, bound, ft)

    if not b.device:
        return work()
    from gpuaug._stream import on_device

    with on_device(b.device_id(), stream):
        return work()


SPECS = (
    OpSpec("autocontrast", autocontrast, params=(), geometric=False, example=None, kernels=KERNELS,
           doc=autocontrast.__doc__),
)

__all__ = ["autocontrast"]
