"""sharpen: torchvision's adjust_sharpness, per-sample factor."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled, plain
from gpuaug._params import column_stack, per_sample, spec_range
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend
from gpuaug._util import dtype_max
from gpuaug.kernels._cuda import kernel_name
from gpuaug.ops._launch import CudaPlan, packed_u8_plan, run_custom, store_range, tile_grid

KERNELS = Kernels(cu=("sharpen.cu", "gpuaug_sharpen"), numba=("sharpen", "kernel"), kind="value",
                  variants=tuple(kernel_name("gpuaug_sharpen_packed", pb) for pb in (1, 2, 3, 4)))


def _plan(dst, src=None):
    """``gpuaug_sharpen_packed<PB>`` (a 16-byte vector per thread, integer window sums) where
    :func:`packed_u8_plan` allows it; else 32 x 32 output tiles, 4 rows per thread."""
    got = packed_u8_plan("gpuaug_sharpen_packed", src, dst) if src is not None else None
    if got is not None:
        return got
    grid, block = tile_grid(dst, 32, 32, (32, 8, 1))
    return CudaPlan(KERNELS.cu[1], grid, block)


def sharpen(x, factor, *, out=None, layout="NHWC", stream=None, backend=None):
    """Sharpen or soften: ``torchvision.transforms.v2.functional.adjust_sharpness``.

    With ``b`` the image smoothed by the 3x3 kernel ``[[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13``
    (rounded to an integer for uint8, as torchvision does)::

        out = x + (1 - factor) * (b - x)        on inner pixels
        out = x                                 on the one-pixel border
        out = clamp(out, 0, 255 or 1.0)         (uint8 / floats)

    ``factor`` 0 gives the smoothed image, 1 the original, 2 doubles the detail. Images
    of height or width <= 2 are returned unchanged (not clamped), as in torchvision.
    Floats are clamped to [0, 1], torchvision's float range. uint8 rounds to nearest
    where torchvision truncates, so uint8 results may be 1 higher than torchvision's.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        factor: sharpness factor >= 0; number or N numbers.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (or a list, for a varshape batch).

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.zeros((1, 3, 3, 1), np.uint8); x[0, 1, 1, 0] = 130
        >>> gpuaug.sharpen(x, [0.0])[0, :, :, 0]  # inner pixel: 5 * 130 / 13
        array([[ 0,  0,  0],
               [ 0, 50,  0],
               [ 0,  0,  0]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    u8 = b.dtype == np.uint8
    f = plain(factor, b.n)
    params = None
    if f is not None:  # N host factors: checked and written in one compiled loop
        params = np.empty((b.n, 3))
        r = spec_range(SPECS[0], "factor")
        if not _host_rows(f, r[0], r[1], float(dtype_max(b.dtype)), float(u8), params):
            params = None
    if params is None:
        f = per_sample(factor, b.n, "factor", **SPECS[0].limits("factor"), device=b.device)
        params = column_stack([f, np.full(b.n, dtype_max(b.dtype)), np.full(b.n, float(u8))], b.n)
    return run_custom(b, params, out=out, backend=be, stream=stream, cu_file=KERNELS.cu[0], plan=_plan,
                      numba_module=KERNELS.numba[0], numba_extra=store_range(b.dtype))


@compiled
def _host_rows(f, lo, hi, top, u8, rows):
    """Rows ``[factor, dtype maximum, is uint8]`` (column_stack's matrix); whether every factor is
    within ``[lo, hi]`` (per_sample's check, with closed_range's bounds)."""
    ok = True
    for i in range(f.shape[0]):
        v = np.float64(f[i])
        ok &= (v >= lo) & (v <= hi)
        rows[i, 0] = v
        rows[i, 1] = top
        rows[i, 2] = u8
    return ok


def _example(rng, n, h, w):
    return {"factor": rng.uniform(0, 3, n)}


SPECS = (
    OpSpec("sharpen", sharpen, params=(
        Param("factor", None, low=0.0, doc="sharpness factor >= 0: 0 smooth, 1 identity, > 1 sharper (required)"),
    ), example=_example, kernels=KERNELS, geometric=False, doc=sharpen.__doc__,
        demo={"factor": 4.0}),
)

__all__ = ["sharpen"]
