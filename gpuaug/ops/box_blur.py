"""box_blur: mean filter over a k x k window, per-sample k."""
from __future__ import annotations

import functools

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import INTS, compiled, plain
from gpuaug._registry import DTYPES, OpSpec, Param
from gpuaug._run import Kernels, choose_backend
from gpuaug.kernels._cuda import kernel_name
from gpuaug.ops._launch import (MAX_KERNEL_SIZE, odd_sizes, packed_u8_plan, run_custom, separable_plan, separable_rows,
                                store_range)

_ALL = [(d, c) for d in DTYPES for c in (1, 3, 4)]
KERNELS = Kernels(
    cu=("box_blur.cu", "gpuaug_box_blur"), numba=("box_blur", "kernel"), kind="value",
    variants=tuple(kernel_name("gpuaug_box_blur_1", d, c) for d, c in _ALL)
    + tuple(kernel_name("gpuaug_box_blur_k", d, c, k) for d, c in _ALL for k in (3, 11))
    + (kernel_name("gpuaug_box_blur_k", "uint8", 3, 15),)
    + tuple(kernel_name("gpuaug_box_blur_packed", pb) for pb in (1, 2, 3, 4)))
PACKED_KMAX = 5  # gpuaug_box_blur_packed's largest k


@functools.lru_cache(maxsize=None)  # one object per largest k: it keys run()'s launch plans
def _plan(kmax):
    """``gpuaug_box_blur_packed<PB>`` (a 16-byte vector per thread, integer window sums) for every
    k <= 5 where :func:`packed_u8_plan` allows it and the images have at least 3 rows and 3
    pixels a row (its reflections); else separable.cuh's tiles."""
    tiles = separable_plan(KERNELS.cu[1], kmax)

    def plan(dst, src=None):
        got = (packed_u8_plan("gpuaug_box_blur_packed", src, dst, min_side=3)
               if src is not None and kmax <= PACKED_KMAX else None)
        return tiles(dst, src) if got is None else got

    return plan


def box_blur(x, kernel_size, *, out=None, layout="NHWC", stream=None, backend=None):
    """Box blur: the mean of the ``k x k`` window around each pixel, reflect-101 borders.

    ``out[y, x] = (1 / k^2) sum_{|i|, |j| <= k//2} x[refl(y + i), refl(x + j)]`` per channel,
    with ``refl`` reflecting about the edge pixel without repeating it
    (``...cb|abcd|cb...``), as ``cv2.blur`` / ``cv2.boxFilter`` with their default
    border (BORDER_REFLECT_101). Separable, in float32 (float64 on the CPU backend);
    uint8 rounds to nearest.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        kernel_size: odd window size from 1 to 255; number or N numbers (host values).
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (or a list, for a varshape batch).

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(5, dtype=np.float32).reshape(1, 1, 5, 1)
        >>> np.round(gpuaug.box_blur(x, 3)[0, 0, :, 0], 3)  # edges: (1 + 0 + 1) / 3, (3 + 4 + 3) / 3
        array([0.667, 1.   , 2.   , 3.   , 3.333], dtype=float32)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    kp = plain(kernel_size, b.n)
    params = _host_rows(kp, MAX_KERNEL_SIZE) if kp is not None and b.n and kp.dtype.char in INTS else None
    if params is None or not params.shape[0] == b.n:  # (a refused size gives no rows)
        k = odd_sizes(kernel_size, b.n)
        params = separable_rows(k, _ones)  # normalised: 1 / k exactly (a sum of k ones is k)
    return run_custom(b, params, out=out, backend=be, stream=stream, cu_file=KERNELS.cu[0],
                      plan=_plan(params.shape[1] - 1), numba_module=KERNELS.numba[0],
                      numba_extra=store_range(b.dtype))


@compiled
def _host_rows(k, kmax_allowed):
    """:func:`separable_rows`' box rows ``[k, 1/k x k, 0 ...]`` of (N,) integer sizes (the sum of k
    ones is k), (N, 1 + max k); no rows ((0, 1)) at a size that is not odd in 1..``kmax_allowed``
    (:func:`odd_sizes` then says which)."""
    n = k.shape[0]
    kmax = 1
    for i in range(n):
        if k[i] < 1 or k[i] > kmax_allowed or k[i] % 2 == 0:
            return np.empty((0, 1))
        kmax = max(kmax, np.int64(k[i]))
    rows = np.zeros((n, 1 + kmax))
    for i in range(n):
        kk = np.int64(k[i])
        rows[i, 0] = kk
        for j in range(kk):
            rows[i, 1 + j] = 1.0 / kk
    return rows


def _ones(k, kmax):
    """separable_rows' taps of a box filter: ones."""
    return np.ones((k.shape[0], kmax))


def _example(rng, n, h, w):
    return {"kernel_size": rng.choice([3, 5], n)}


SPECS = (
    OpSpec("box_blur", box_blur, params=(
        Param("kernel_size", None, kind="int", low=1, high=255, expect="odd sizes from 1 to 255",
              range_doc="odd, 1..255",
              doc="odd window size 1..255 (required)"),
    ), example=_example, kernels=KERNELS, geometric=False, doc=box_blur.__doc__,
        demo={"kernel_size": 9}),
)

__all__ = ["box_blur"]
