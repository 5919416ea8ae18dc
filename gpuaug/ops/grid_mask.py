"""grid_mask: GridMask occlusion (Chen et al., 2020): a rotated grid of dropped squares."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled, plain
from gpuaug._params import column_stack, count_nonzero, per_sample, spec_range
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import cupy_module
from gpuaug.ops._launch import rows_fast

KERNELS = Kernels(cu=("grid_mask.cu", "gpuaug_grid_mask"), numba=("grid_mask", "grid_mask_map"))


def grid_mask(x, tile, ratio, angle=0.0, shift=(0.0, 0.0), *, out=None, layout="NHWC", stream=None,
              backend=None):
    """Zero out a grid of squares: side ``ratio * tile``, period ``tile``, rotated, shifted.

    For pixel ``(y, x)`` (integer indices, origin at the top-left pixel), with
    ``a = angle`` in degrees and ``shift = (shift_y, shift_x)``::

        u = x cos(a) - y sin(a) - shift_x
        v = x sin(a) + y cos(a) - shift_y
        out[y, x, :] = 0  if (u mod tile) < ratio * tile and (v mod tile) < ratio * tile
        out[y, x, :] = x[y, x, :]  otherwise

    So at ``angle = 0`` and no shift the dropped squares are
    ``[i*tile, i*tile + ratio*tile) x [j*tile, j*tile + ratio*tile)``. This is DALI's
    ``fn.grid_mask`` (tile, ratio, angle, shift_x, shift_y) with the angle in degrees.
    The decision is computed in float32 with the same operations on every backend
    (``cos``/``sin`` of the angle and ``ratio * tile`` are rounded to float32 on the host).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        tile: grid period in pixels (> 0); number or N numbers.
        ratio: side of a dropped square as a fraction of ``tile``, in [0, 1]; number or N numbers.
        angle: rotation of the grid in degrees; number or N numbers.
        shift: ``(shift_y, shift_x)`` in pixels, or an (N, 2) array.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (or a list, for a varshape batch).

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.ones((1, 5, 6, 1), np.uint8)
        >>> gpuaug.grid_mask(x, tile=4, ratio=0.5)[0, :, :, 0]
        array([[0, 0, 1, 1, 0, 0],
               [0, 0, 1, 1, 0, 0],
               [1, 1, 1, 1, 1, 1],
               [1, 1, 1, 1, 1, 1],
               [0, 0, 1, 1, 0, 0]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    t, r, a, s = plain(tile, b.n), plain(ratio, b.n), plain(angle, b.n), plain(shift, b.n, (2,))
    if t is None or r is None or a is None or s is None:  # else NumPy arrays, checked in the loop below
        t, r, a, s = _checked(b, tile, ratio, angle, shift)
    if type(t) is np.ndarray and type(r) is np.ndarray and type(a) is np.ndarray and type(s) is np.ndarray:
        # host values: the rows [cos, sin, shift_y, shift_x, tile, ratio * tile], each column as
        # the general path rounds it to float32, in two compiled loops around NumPy's cos and sin
        rows, rad = np.empty((b.n, 6)), np.empty(b.n)
        tr, rr = spec_range(SPECS[0], "tile"), spec_range(SPECS[0], "ratio")
        if _host_rows(t, r, a, s, tr[0], tr[1], rr[0], rr[1], rows, rad):
            np.cos(rad, out=rows[:, 0])
            np.sin(rad, out=rows[:, 1])
            _round_f32(rows)
            return run(b, KERNELS, rows, shapes=b.shapes, out=out, backend=be, stream=stream,
                       fast=rows_fast(*KERNELS.cu))
        t, r, a, s = _checked(b, tile, ratio, angle, shift)  # refused in the loop: say what is wrong
    if isinstance(t, np.ndarray):  # the kernels divide by tile in float32: it must hold it
        with np.errstate(over="ignore"):
            t32_ = t.astype(np.float32)
        ok = np.isfinite(t32_)
        ok &= t32_ != 0
        if count_nonzero(ok) != ok.size:
            i = int(np.argmin(ok))
            raise ValueError(f"tile: sample {i} has tile={float(t[i])!r}, which is {float(t32_[i])} in float32 (the "
                             "kernels' precision); expected values float32 holds, from 1.4e-45 to 3.4e+38")
    xp = np if all(isinstance(v, np.ndarray) for v in (t, r, a, s)) else cupy_module()
    t, r, a, s = (xp.asarray(v, dtype=xp.float64) for v in (t, r, a, s))
    rad = a * (np.pi / 180.0)
    f32 = (lambda v: v.astype(xp.float32).astype(xp.float64))  # the values every backend sees
    t32 = f32(t)
    params = column_stack([f32(xp.cos(rad)), f32(xp.sin(rad)), f32(s), t32, f32(r * t32)], b.n)
    return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream,
               fast=rows_fast(*KERNELS.cu))


def _checked(b, tile, ratio, angle, shift):
    """The four parameters through per_sample (its checks and messages)."""
    return (per_sample(tile, b.n, "tile", **SPECS[0].limits("tile"), device=b.device),
            per_sample(ratio, b.n, "ratio", **SPECS[0].limits("ratio"), device=b.device),
            per_sample(angle, b.n, "angle", device=b.device),
            per_sample(shift, b.n, "shift", shape=(2,), device=b.device))


@compiled
def _host_rows(t, r, a, s, tlo, thi, rlo, rhi, rows, rad):
    """Columns 2-5 of the rows of host values (shift_y, shift_x, float32 tile, ratio * that
    tile, in float64) and the angles in radians (``a * (pi / 180)``), as the general path
    computes them; False when a value fails per_sample's checks (tile within ``[tlo, thi]``,
    ratio within ``[rlo, rhi]``: closed_range's bounds; angle and shift finite) or a tile is 0
    or infinite in float32 (the kernels divide by it): the general path then says which."""
    for i in range(t.shape[0]):
        tv, rv, av = np.float64(t[i]), np.float64(r[i]), np.float64(a[i])
        sy, sx = np.float64(s[i, 0]), np.float64(s[i, 1])
        if not ((tv >= tlo) & (tv <= thi) & (rv >= rlo) & (rv <= rhi) & np.isfinite(av) & np.isfinite(sy)
                & np.isfinite(sx)):
            return False
        t32 = np.float64(np.float32(tv))
        if t32 == 0.0 or not np.isfinite(t32):
            return False
        rows[i, 2] = sy
        rows[i, 3] = sx
        rows[i, 4] = t32
        rows[i, 5] = rv * t32
        rad[i] = av * (np.pi / 180.0)
    return True


@compiled
def _round_f32(rows):
    """``rows`` rounded to float32 in place (``rows.astype(float32).astype(float64)``)."""
    for i in range(rows.shape[0]):
        for j in range(rows.shape[1]):
            rows[i, j] = np.float64(np.float32(rows[i, j]))


def _example(rng, n, h, w):
    return {"tile": rng.uniform(4, 12, n), "ratio": rng.uniform(0.2, 0.7, n),
            "angle": rng.uniform(-45, 45, n), "shift": rng.uniform(0, 8, (n, 2))}


SPECS = (
    OpSpec("grid_mask", grid_mask, params=(
        Param("tile", None, low=0.0, low_open=True,
              range_doc="> 0 and, as float32 (the kernels' precision), neither 0 nor inf (1.4e-45 to 3.4e+38)",
              doc="grid period in pixels, > 0 (required)"),
        Param("ratio", None, low=0.0, high=1.0, doc="dropped square side / tile, in [0, 1] (required)"),
        Param("angle", 0.0, doc="grid rotation in degrees"),
        Param("shift", (0.0, 0.0), shape=(2,), doc="grid offset (shift_y, shift_x) in pixels"),
    ), example=_example, kernels=KERNELS, geometric=False, doc=grid_mask.__doc__,
        demo={"tile": 48, "ratio": 0.4, "angle": 20.0}),
)

__all__ = ["grid_mask"]
