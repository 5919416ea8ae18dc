"""What warp_affine, warp_perspective and rotate share: argument checks, matrix inversion
(on the host, or on the device without synchronising), fill values, and the launch.

Every warp hands its kernels the *inverse* map (destination pixel -> source point), one
row of parameters per sample::

    [interp, border, a00 .. a12 (affine: 6) or a00 .. a22 (perspective: 9), fill_0 .. fill_{C-1}]

(the CUDA C kernels take interp / border as template arguments too, so their inner loops
carry no branches on them).
"""
from __future__ import annotations

import numpy as np

import contextlib

from gpuaug._params import column_stack, host_size, per_sample
from gpuaug._util import check_choice, cupy_module
from gpuaug.geometry import _cos_sin

INTERPOLATIONS = {"nearest": 0, "bilinear": 1}
#: border name -> common.cuh's Border number ("reflect" is OpenCV's BORDER_REFLECT_101).
BORDERS = {"constant": 0, "replicate": 1, "reflect": 3}

#: |det| below this fraction of the product of the row norms (Hadamard's bound) counts as
#: singular: the inverse would be meaningless at float32 precision.
SINGULAR_RATIO = 1e-12


def xp_of(*arrays):
    """NumPy, or CuPy when any of ``arrays`` lives on the GPU."""
    for a in arrays:
        if not isinstance(a, np.ndarray) and a is not None and hasattr(a, "__cuda_array_interface__"):
            return cupy_module()
    return np


def same_side(xp, *arrays):
    return [xp.asarray(a, dtype=xp.float64) for a in arrays]


def device_scope(b, stream):
    """For device batches: the input's GPU and the op's stream, so that parameter maths on
    device arrays (inversion, fill conversion) is queued on the stream the kernel runs on
    (no cross-stream race, no synchronisation)."""
    if not b.device:
        return contextlib.nullcontext()
    from gpuaug._stream import on_stream

    stack = contextlib.ExitStack()
    stack.enter_context(cupy_module().cuda.Device(b.device_id()))
    stack.enter_context(on_stream(stream))
    return stack


def check_modes(interpolation, border):
    check_choice("interpolation", interpolation, tuple(INTERPOLATIONS))
    check_choice("border", border, tuple(BORDERS))
    return INTERPOLATIONS[interpolation], BORDERS[border]


def check_flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: got {value!r}; expected True or False")
    return bool(value)


def fill_columns(fill, b):
    """Per-sample (and optionally per-channel) fill values as an (N, C) float64 array,
    converted to the batch's dtype as a store would (uint8: rounded half up, saturated),
    so that blending at the border mixes in exactly the value an outside pixel holds."""
    n, c = b.n, b.channels
    if np.ndim(fill) == 2:
        f = per_sample(fill, n, "fill", shape=(c,), device=b.device)
    else:
        f = per_sample(fill, n, "fill", device=b.device)
    xp = xp_of(f)
    f = xp.broadcast_to(f.reshape(n, -1), (n, c))
    if b.dtype == np.uint8:
        return xp.clip(xp.floor(f + 0.5), 0, 255)
    return f.astype(b.dtype).astype(np.float64)


def invert_affine(m, xp):
    """(N, 2, 3) source->destination -> (N, 6) destination->source, and the determinants.
    Closed form, so it runs as plain array arithmetic on the device (no synchronisation)."""
    a, b_, c = m[:, 0, 0], m[:, 0, 1], m[:, 0, 2]
    d, e, f = m[:, 1, 0], m[:, 1, 1], m[:, 1, 2]
    det = a * e - b_ * d
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = xp.stack([e, -b_, b_ * f - c * e, -d, a, c * d - a * f], axis=1) / det[:, None]
    return inv, det


def invert_perspective(m, xp):
    """(N, 3, 3) -> (N, 9) inverse (adjugate / determinant) and the determinants."""
    a, b_, c = m[:, 0, 0], m[:, 0, 1], m[:, 0, 2]
    d, e, f = m[:, 1, 0], m[:, 1, 1], m[:, 1, 2]
    g, h, i = m[:, 2, 0], m[:, 2, 1], m[:, 2, 2]
    ca, cb, cc = e * i - f * h, f * g - d * i, d * h - e * g
    det = a * ca + b_ * cb + c * cc
    adj = xp.stack([ca, c * h - b_ * i, b_ * f - c * e,
                    cb, a * i - c * g, c * d - a * f,
                    cc, b_ * g - a * h, a * e - b_ * d], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = adj / det[:, None]
    return inv, det


def check_invertible(m, inv, det, name, rows):
    """Host matrices only: refuse singular (or numerically singular) ones, naming ``name``."""
    norms = np.prod(np.linalg.norm(m[:, :rows, :rows], axis=2), axis=1)
    bad = ~np.isfinite(inv).all(axis=1) | (np.abs(det) <= SINGULAR_RATIO * norms)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}: sample {i} is singular (determinant {det[i]:.3g}): "
                         f"{np.asarray(m[i]).tolist()}; expected an invertible matrix (or "
                         "inverse_map=True with a destination-to-source matrix)")


def matrix_inverse(matrix, b, shape, inverse_map):
    """The per-sample destination->source map, flattened: (N, 6) affine or (N, 9)."""
    m = per_sample(matrix, b.n, "matrix", shape=shape, device=b.device)
    xp = xp_of(m)
    if inverse_map:
        return m.reshape(b.n, -1)
    if shape == (2, 3):
        inv, det = invert_affine(m, xp)
        rows = 2
    else:
        inv, det = invert_perspective(m, xp)
        rows = 3
    if xp is np:
        check_invertible(m, inv, det, "matrix", rows)
    return inv


def rotation_inverse(b, angle, center, scale):
    """(N, 6) inverse of OpenCV's getRotationMatrix2D(center, angle, scale) per sample:
    src = R(angle)^T (dst - center) / scale + center."""
    n = b.n
    a = per_sample(angle, n, "angle", device=b.device)
    s = per_sample(scale, n, "scale", device=b.device)
    if center is None:
        hw = (np.asarray(b.shapes, np.float64).reshape(n, 2) if b.varshape else
              np.broadcast_to(np.asarray(b.nhwc.shape[1:3], np.float64), (n, 2)))
        ctr = np.stack([(hw[:, 1] - 1) / 2, (hw[:, 0] - 1) / 2], axis=1)
    else:
        ctr = per_sample(center, n, "center", shape=(2,), device=b.device)
    if isinstance(s, np.ndarray) and np.any(s == 0):
        raise ValueError(f"scale: got {np.asarray(scale).tolist() if np.size(scale) <= 8 else 'an array with zeros'}; "
                         "expected non-zero numbers (0 collapses the image to a point)")
    xp = xp_of(a, s, ctr)
    a, s, ctr = same_side(xp, a, s, ctr)
    c, sn = _cos_sin(a, xp)
    a00, a01, a10, a11 = c / s, -sn / s, sn / s, c / s
    cx, cy = ctr[:, 0], ctr[:, 1]
    return xp.stack([a00, a01, cx - a00 * cx - a01 * cy, a10, a11, cy - a10 * cx - a11 * cy], axis=1)


def output_shapes(b, size):
    if size is None:
        return b.shapes
    return [host_size(size, "size")] * b.n


def params_matrix(b, interp, border, inv, fill):
    """The (N, P) parameter rows described in the module docstring."""
    n = b.n
    modes = np.empty((n, 2))
    modes[:, 0], modes[:, 1] = interp, border
    return column_stack([modes, inv, fill_columns(fill, b)], n)


#: Output rows each thread of a dense kernel computes (the ROWS of its .cu file).
DENSE_ROWS = 4


def dense_variants(base):
    """The dense kernels' generic names, for the compile checks (Kernels.variants)."""
    ctypes = {"uint8": "unsigned char", "float16": "gpuaug::half", "float32": "float"}
    return tuple(f"{base}_dense<{t}, {c}>" for t in ctypes.values() for c in (1, 3, 4))


def dense_fast(kernels, template):
    """run()'s ``fast`` hook: dense NHWC batches (source and output C-contiguous, each
    sample under 2^31 elements) take ``<name>_dense``, which reads no descriptor tables
    and uses 32-bit offsets; anything else returns None (the table-driven kernel)."""

    def fast(src, dst):
        if src.varshape or dst.varshape or src.layout != "NHWC" or dst.layout != "NHWC":
            return None
        a, b = src.arrays[0], dst.arrays[0]
        if not (a.flags.c_contiguous and b.flags.c_contiguous):
            return None
        n, h, w, c = src.nhwc.shape
        hh, ww = dst.nhwc.shape[1:3]
        if h * w * c >= 2**31 or hh * ww * c >= 2**31:
            return None
        from gpuaug.kernels._cuda import get_function, kernel_name

        fn = get_function(kernels.cu[0], kernel_name(kernels.cu[1] + "_dense", *template))
        grid = ((ww + 31) // 32, (hh + 8 * DENSE_ROWS - 1) // (8 * DENSE_ROWS), min(n, 65535))

        def launch(par):
            fn(grid, (256,), (a, b, par, np.int32(par.shape[1]), np.int32(n), np.int32(h), np.int32(w),
                              np.int32(hh), np.int32(ww)))
        return launch

    return fast
