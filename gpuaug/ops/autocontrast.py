"""autocontrast: stretch each image channel to the full value range (torchvision's autocontrast)."""
from __future__ import annotations

import functools

import numpy as np

from gpuaug._batch import as_batch, max_size, table_item
from gpuaug._registry import OpSpec
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import cupy_module, dtype_max
from gpuaug.kernels._cuda import CTYPES
from gpuaug.ops._colour import _multiprocessors
from gpuaug.ops._intensity import VEC_THREADS, _dense_u8_vectors, u8_vec_fast

KERNELS = Kernels(cu=("autocontrast.cu", "gpuaug_autocontrast"), numba=("autocontrast", "autocontrast_value"),
                  kind="value",
                  variants=tuple(f"gpuaug_autocontrast_{k}<{t}, {c}>" for k in ("parts", "rows")
                                 for t in CTYPES.values() for c in (1, 3, 4))
                  + tuple(f"gpuaug_autocontrast_{k}<{c}>" for k in ("parts_u8", "u8") for c in (1, 3, 4)))


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
    fast = None
    if be == "cuda":
        rows, fast = _rows_cuda(b, stream)
    else:
        rows = _rows_numba(b, "cpu" if be == "cpu" else "cuda", stream)
    return run(b, KERNELS, rows, shapes=b.shapes, out=out, backend=be, stream=stream, fast=fast)


def _rows_cuda(b, stream):
    """Step 1 on the GPU, on the caller's stream: ``(params, fast)`` for run(). Dense uint8 NHWC
    batches: the (N, nparts * 2C) float32 parts of ``gpuaug_autocontrast_parts_u8`` and the
    hook that maps with ``gpuaug_autocontrast_u8`` (two launches in all); anything else: the
    (N, 2C + 1) rows of steps 1a and 1b, and no hook."""
    from gpuaug._stream import on_device
    from gpuaug.kernels._cuda import get_function, kernel_name, stage

    cp = cupy_module()
    n, c = b.n, b.channels
    # vectors per work unit of the uint8 kernels: 3 for RGB (16 pixels; a dense RGB sample of
    # whole vectors has 16 * nvec = 3 * pixels bytes, so nvec is a multiple of 3), else 1
    unit = 3 if c == 3 else 1
    nvec = _dense_u8_vectors(b, nhwc_only=True) if n else None
    with on_device(b.device_id(), stream):
        if nvec is not None:
            # about 4 blocks per multiprocessor in all, at least one unit per thread
            nparts = max(1, min(64, -(-nvec // (unit * VEC_THREADS)), -(-4 * _multiprocessors(cp) // n)))
            parts = cp.empty((n, nparts * 2 * c), cp.float32)
            fn = get_function("autocontrast.cu", f"gpuaug_autocontrast_parts_u8<{c}>")
            fn((nparts, min(n, 65535)), (VEC_THREADS,), (b.arrays[0], np.int32(nvec), parts, np.int32(n)))
            return parts, _u8_fast(c, nparts)
        rows = cp.empty((n, 2 * c + 1), cp.float32)
        if n:
            (tab,) = stage(table_item(b))
            h, w = max_size(b.shapes)
            # slices of at least 16 pixels per thread, about 4 blocks per multiprocessor in all
            nparts = max(1, min(64, -(-h * w // (256 * 16)), -(-4 * _multiprocessors(cp) // n)))
            parts = cp.empty((n, nparts, 2 * c), cp.float32)
            fn = get_function("autocontrast.cu", kernel_name("gpuaug_autocontrast_parts", b.dtype.name, c))
            fn((nparts, min(n, 65535)), (256,), (tab, parts, np.int32(nparts), np.int32(n)))
            _rows_kernel(b.dtype.name, c, n, parts, nparts, rows)
    return rows, None


def _rows_kernel(dtype, c, n, parts, nparts, rows):
    """Step 1b: (N, 2C + 1) ``rows`` from the (N, nparts, 2C) ``parts``."""
    from gpuaug.kernels._cuda import get_function, kernel_name

    fn = get_function("autocontrast.cu", kernel_name("gpuaug_autocontrast_rows", dtype, c))
    fn((-(-n // 128),), (128,), (parts, np.int32(nparts), rows, np.int32(2 * c + 1), np.int32(n)))


@functools.lru_cache(maxsize=64)
def _u8_fast(c, nparts):
    """run()'s hook for the parts of ``gpuaug_autocontrast_parts_u8``: ``gpuaug_autocontrast_u8``
    where the output is dense too, else (an ``out=`` it cannot write) step 1b's rows and the
    generic map. It never declines: run()'s generic kernel would read the parts as rows."""
    vec = u8_vec_fast("autocontrast.cu", f"gpuaug_autocontrast_u8<{c}>", nhwc_only=True)

    def fast(src, dst):
        got = vec(src, dst)
        if got is not None:
            return got

        def launch(parts):
            from gpuaug.kernels._cuda import get_function, grid_2d, kernel_name, stage

            cp, n = cupy_module(), src.n
            rows = cp.empty((n, 2 * c + 1), cp.float32)
            _rows_kernel("uint8", c, n, parts, nparts, rows)
            src_t, dst_t = stage(table_item(src), table_item(dst))
            fn = get_function("autocontrast.cu", kernel_name("gpuaug_autocontrast", "uint8", c))
            grid, block = grid_2d(*max_size(dst.shapes), n)
            fn(grid, block, (src_t, dst_t, rows, np.int32(2 * c + 1), np.int32(n)))
        return launch
    return fast


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
