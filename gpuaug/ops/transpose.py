"""transpose: swap the height and width of every image."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._registry import OpSpec
from gpuaug._run import Kernels, choose_backend, contiguous_rows, run

#: Bytes per pixel of a plane row that the tile kernel is instantiated for (NHWC: channels x
#: element size; NCHW: element size).
TILE_PB = (1, 2, 3, 4, 6, 8, 12, 16)


def tile_size(pb):
    """Tile side in pixels: 64 for pixels of up to 4 bytes (several loads in flight per
    thread, <= 17 KB of shared memory), 32 for wider pixels."""
    return 64 if pb <= 4 else 32


KERNELS = Kernels(cu=("transpose.cu", "gpuaug_transpose"), numba=("transpose", "transpose_map"),
                  variants=tuple(f"gpuaug_transpose_tiles<{pb}, {tile_size(pb)}>" for pb in TILE_PB))


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
    hw = getattr(b.shapes, "hw", None)
    shapes = b.uniform(hw[::-1]) if hw is not None else [(w, h) for h, w in b.shapes]
    return run(b, KERNELS, params, shapes=shapes, out=out, backend=be, stream=stream,
               fast=tiles_fast())


# -- the CUDA C fast path (gpuaug_transpose_tiles in kernels/transpose.cu), shared with rot90 --

def tiles_plan(planes, pps, h, w, pb, src_ptr, dst_ptr):
    """Launch plan of ``gpuaug_transpose_tiles`` for a dense batch of ``planes`` ``h x w``
    planes of ``pb``-byte pixels (``pps`` per sample), or None where it does not apply.

    ``tile_size(pb)``-pixel square tiles, 256 threads; ``words`` (32-bit global accesses) when source rows
    (``w * pb``) and output rows (``h * pb``) are multiples of 4 bytes and both bases are
    4-byte aligned. Returns ``(name, grid, block, int_args)``.
    """
    if pb not in TILE_PB:
        return None
    ts = tile_size(pb)
    if (w + ts - 1) // ts > 65535 or planes * h * w * pb >= 2 ** 62:
        return None
    words = int((w * pb) % 4 == 0 and (h * pb) % 4 == 0 and src_ptr % 4 == 0 and dst_ptr % 4 == 0)
    grid = ((h + ts - 1) // ts, (w + ts - 1) // ts, min(planes, 65535))
    return f"gpuaug_transpose_tiles<{pb}, {ts}>", grid, (256,), (planes, pps, h, w, words)


def tiles_fast(kcol=-1):
    """A ``run(fast=...)`` hook: dense batches in one layout take ``gpuaug_transpose_tiles``.

    ``kcol``: the params column holding rot90's k (every k odd); -1 for transpose.
    """
    def fast(src, dst):
        geo = contiguous_rows(src, dst)
        if geo is None:
            return None
        planes, pps, h, w, pb = geo
        plan = tiles_plan(planes, pps, h, w, pb, src.arrays[0].data.ptr, dst.arrays[0].data.ptr)
        if plan is None:
            return None
        from gpuaug.kernels._cuda import get_function

        name, grid, block, args = plan
        fn = get_function("transpose.cu", name)

        def launch(par):
            fn(grid, block, (src.arrays[0], dst.arrays[0], par, np.int32(par.shape[1]),
                             np.int32(kcol)) + tuple(np.int32(a) for a in args))
        return launch
    fast.key = ("tiles", kcol)  # a kernel constant: run()'s plans key on it
    return fast


SPECS = (
    OpSpec("transpose", transpose, params=(), changes_shape=True,
           example=lambda rng, n, h, w: {}, demo={}, kernels=KERNELS, doc=transpose.__doc__),
)

__all__ = ["transpose"]
