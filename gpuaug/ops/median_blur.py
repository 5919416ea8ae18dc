"""median_blur: k x k median filter (k = 3 or 5), per sample."""
from __future__ import annotations

import functools

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import INTS, compiled, plain
from gpuaug._registry import DTYPES, OpSpec, Param
from gpuaug._run import Kernels, choose_backend
from gpuaug.kernels._cuda import kernel_name
from gpuaug.ops._launch import CudaPlan, odd_sizes, packed_u8_plan, run_custom, tile_grid

KERNELS = Kernels(cu=("median_blur.cu", "gpuaug_median_blur"), numba=("median_blur", "kernel"), kind="value",
                  variants=tuple(kernel_name("gpuaug_median_blur_3", d, c) for d in DTYPES for c in (1, 3, 4))
                  + tuple(kernel_name("gpuaug_median_blur_3_packed", pb) for pb in (1, 2, 3, 4)))


@functools.lru_cache(maxsize=None)  # one object per kernel choice: it keys run()'s launch plans
def _plan(only3):
    def plan(dst, src=None):
        """``gpuaug_median_blur_3_packed<PB>`` (a 16-byte vector per thread, bytes compared four at
        a time) when every k is 3 and :func:`packed_u8_plan` allows it; else 128 x 8 tiles."""
        got = packed_u8_plan("gpuaug_median_blur_3_packed", src, dst) if only3 and src is not None else None
        if got is not None:
            return got
        grid, block = tile_grid(dst, 128, 8, (32, 8, 1))  # a thread makes 4 adjacent outputs
        return CudaPlan(KERNELS.cu[1] + ("_3" if only3 else ""), grid, block)

    return plan


def median_blur(x, kernel_size, *, out=None, layout="NHWC", stream=None, backend=None):
    """Median filter: each element becomes the median of its ``k x k`` window (per channel).

    ``k`` is 3 or 5. Borders replicate the edge pixel (``aaa|abcd|ddd``), as
    ``cv2.medianBlur`` does (OpenCV uses BORDER_REPLICATE there, not its usual
    reflect-101). Exact for every dtype (no arithmetic: the output is one of the inputs).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        kernel_size: 3 or 5; number or N numbers (host values).
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (or a list, for a varshape batch).

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.zeros((1, 3, 4, 1), np.uint8); x[0, 1, 1, 0] = 200
        >>> gpuaug.median_blur(x, 3)[0, :, :, 0]  # an isolated spike disappears
        array([[0, 0, 0, 0],
               [0, 0, 0, 0],
               [0, 0, 0, 0]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    kp = plain(kernel_size, b.n)
    params = np.empty((b.n, 1))
    got = _host_rows(kp, params) if kp is not None and kp.dtype.char in INTS else -1  # one compiled loop
    if got < 0:
        k = odd_sizes(kernel_size, b.n, allowed=(3, 5))
        params = k.astype(float).reshape(b.n, 1)
        got = int(bool(np.all(k == 3)))
    return run_custom(b, params, out=out, backend=be, stream=stream, cu_file=KERNELS.cu[0],
                      plan=_plan(bool(got)), numba_module=KERNELS.numba[0])


@compiled
def _host_rows(k, rows):
    """``rows[:, 0] = k`` for (N,) integer sizes; 1 when every size is 3, 0 when some are 5, -1 at
    a size other than 3 or 5 (odd_sizes then says which)."""
    all3 = 1
    for i in range(k.shape[0]):
        if k[i] != 3 and k[i] != 5:
            return -1
        rows[i, 0] = k[i]
        all3 &= k[i] == 3
    return all3


def _example(rng, n, h, w):
    return {"kernel_size": np.full(n, 3)}  # the benchmarked size (5 is ~10x the work)


SPECS = (
    OpSpec("median_blur", median_blur, params=(
        Param("kernel_size", None, kind="int", choices=(3, 5), doc="window size, 3 or 5 (required)"),
    ), example=_example, kernels=KERNELS, geometric=False, doc=median_blur.__doc__,
        demo={"kernel_size": 5}),
)

__all__ = ["median_blur"]
