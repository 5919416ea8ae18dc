"""What warp_affine, warp_perspective and rotate share: their body (:func:`warp`), argument
checks, matrix inversion (on the host, or on the device without synchronising), fill
values, and the dense-batch launch (run()'s ``fast`` hook).

Every warp hands its kernels the *inverse* map (destination pixel -> source point), one
row of parameters per sample::

    [interp, border, a00 .. a12 (affine: 6) or a00 .. a22 (perspective: 9), fill_0 .. fill_{C-1}]

(the CUDA C kernels take interp / border as template arguments too, so their inner loops
carry no branches on them).
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import CHARS, compiled, plain
from gpuaug._params import column_stack, count_nonzero, host_size, per_sample, value_shape
from gpuaug._run import choose_backend, run
from gpuaug._stream import check_stream, on_device
from gpuaug._util import check_choice, check_flag, cupy_module, dtype_name, kept_array
from gpuaug.geometry import cos_sin

INTERPOLATIONS = {"nearest": 0, "bilinear": 1}
#: border name -> common.cuh's Border number ("reflect" is OpenCV's BORDER_REFLECT_101).
BORDERS = {"constant": 0, "replicate": 1, "reflect": 3}


def sampling_params():
    """The registry Params every warp shares: interpolation, border, fill (in that order)."""
    from gpuaug._registry import Param

    return (
        Param("interpolation", "bilinear", per_sample=False, kind="choice",
              choices=tuple(INTERPOLATIONS), doc="nearest or bilinear"),
        Param("border", "constant", per_sample=False, kind="choice", choices=tuple(BORDERS),
              doc="border rule for taps outside the source"),
        Param("fill", 0, doc="value outside the source (border='constant')"),
    )

#: |det| below this fraction of the product of the row norms (Hadamard's bound) counts as
#: singular: the inverse would be meaningless at float32 precision.
SINGULAR_RATIO = 1e-12


def xp_of(*arrays):
    """NumPy, or CuPy when any of ``arrays`` lives on the GPU."""
    for a in arrays:
        if not isinstance(a, np.ndarray) and a is not None and hasattr(a, "__cuda_array_interface__"):
            return cupy_module()
    return np


def device_scope(b, stream):
    """For device batches: the input's GPU and the op's stream, so that parameter maths on
    device arrays (inversion, fill conversion) is queued on the stream the kernel runs on
    (no cross-stream race, no synchronisation); nothing to enter when both are current
    already (:func:`gpuaug._stream.on_device`)."""
    check_stream(stream)
    if not b.device:
        return contextlib.nullcontext()
    return on_device(b.device_id(), stream)


def check_modes(interpolation, border):
    if type(interpolation) is str and type(border) is str:  # the usual call: two dict lookups
        i, bd = INTERPOLATIONS.get(interpolation), BORDERS.get(border)
        if i is not None and bd is not None:
            return i, bd
    check_choice("interpolation", interpolation, tuple(INTERPOLATIONS))
    check_choice("border", border, tuple(BORDERS))
    return INTERPOLATIONS[interpolation], BORDERS[border]


def fill_scalar(f, dtype):
    """The fill value ``f`` as an image of ``dtype`` stores it (uint8: rounded half up,
    saturated; floats: converted), as a Python number (the DALI native operator's fills too)."""
    if dtype == np.uint8:
        return min(max(math.floor(f + 0.5), 0), 255)
    return float(np.asarray(f).astype(dtype))


def fill_columns(fill, b):
    """Per-sample (and optionally per-channel) fill values as an (N, C) float64 array,
    converted to the batch's dtype as a store would (uint8: rounded half up, saturated),
    so that blending at the border mixes in exactly the value an outside pixel holds."""
    n, c = b.n, b.channels
    if isinstance(fill, (int, float)) and not isinstance(fill, bool) and math.isfinite(fill):
        return np.full((n, c), fill_scalar(fill, b.dtype), np.float64)  # the common case, quickly
    if len(value_shape(fill, "fill", f"a number, {n} numbers (one per sample) or an (N, {c}) array")) == 2:
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
    inv = xp.empty((m.shape[0], 6))
    with _quiet(xp, det):
        r = 1.0 / det
        if xp is np:  # the same products written into place (no temporaries to copy in)
            np.multiply(e, r, out=inv[:, 0])
            np.multiply(np.negative(b_), r, out=inv[:, 1])
            np.multiply(np.negative(d), r, out=inv[:, 3])
            np.multiply(a, r, out=inv[:, 4])
            for row in (0, 3):  # -(inv0 c + inv1 f): x + y is y + x exactly
                t = np.multiply(inv[:, row], c)
                t += np.multiply(inv[:, row + 1], f)
                np.negative(t, out=inv[:, row + 2])
        else:
            inv[:, 0], inv[:, 1], inv[:, 3], inv[:, 4] = e * r, -b_ * r, -d * r, a * r
            inv[:, 2] = -(inv[:, 0] * c + inv[:, 1] * f)
            inv[:, 5] = -(inv[:, 3] * c + inv[:, 4] * f)
    return inv, det


def _quiet(xp, det):
    """Silence NumPy's divide-by-zero warnings only where a zero determinant makes them
    (check_invertible reports it); errstate costs microseconds per call."""
    if xp is np and count_nonzero(det) != det.size:
        return np.errstate(divide="ignore", invalid="ignore", over="ignore")
    return contextlib.nullcontext()


def invert_perspective(m, xp):
    """(N, 3, 3) -> (N, 9) inverse (adjugate / determinant) and the determinants."""
    a, b_, c = m[:, 0, 0], m[:, 0, 1], m[:, 0, 2]
    d, e, f = m[:, 1, 0], m[:, 1, 1], m[:, 1, 2]
    g, h, i = m[:, 2, 0], m[:, 2, 1], m[:, 2, 2]
    inv = xp.empty((m.shape[0], 9))
    inv[:, 0], inv[:, 3], inv[:, 6] = e * i - f * h, f * g - d * i, d * h - e * g  # cofactors of row 0
    det = a * inv[:, 0] + b_ * inv[:, 3] + c * inv[:, 6]
    inv[:, 1], inv[:, 4], inv[:, 7] = c * h - b_ * i, a * i - c * g, b_ * g - a * h
    inv[:, 2], inv[:, 5], inv[:, 8] = b_ * f - c * e, c * d - a * f, a * e - b_ * d
    with _quiet(xp, det):
        inv *= (1.0 / det)[:, None]
    return inv, det


def check_invertible(m, inv, det, name, rows):
    """Host matrices only: refuse singular (or numerically singular) ones, naming ``name``."""
    if rows == 2:
        norms = np.hypot(m[:, 0, 0], m[:, 0, 1]) * np.hypot(m[:, 1, 0], m[:, 1, 1])
    else:
        norms = np.sqrt(np.einsum("nij,nij->ni", m, m)).prod(axis=1)
    good = np.abs(det) > SINGULAR_RATIO * norms  # NaN compares False: finite inputs only here
    if count_nonzero(good) == good.size and count_nonzero(np.isfinite(inv)) == inv.size:
        return
    bad = ~good | ~np.isfinite(inv).all(axis=1)
    i = int(np.argmax(bad))
    why = (f"determinant {det[i]:.3g}, but its inverse is not finite" if good[i] else "determinant 0"
           if det[i] == 0 else
           f"determinant {det[i]:.3g}, within {SINGULAR_RATIO:g} x {norms[i]:.3g}, the product of its row norms")
    raise ValueError(f"{name}: sample {i} is singular or numerically so ({why}): "
                     f"{np.asarray(m[i]).tolist()}; expected an invertible matrix (or "
                     "inverse_map=True with a destination-to-source matrix)")


def matrix_inverse(matrix, b, shape, inverse_map, modes=None):
    """The per-sample destination->source map, flattened: (N, 6) affine or (N, 9).

    ``modes``: the call's ``(interpolation, border, fill)`` codes and fill (:func:`warp` with
    ``rows=True``): a host NumPy matrix then becomes the whole parameter rows in one compiled
    loop (:class:`Rows`, :func:`_matrix_rows`) where it can."""
    n = b.n
    if modes is not None:
        got = _matrix_rows(matrix, b, shape, inverse_map, modes)
        if got is not None:
            return got
    m = per_sample(matrix, n, "matrix", shape=shape, device=b.device)
    xp = xp_of(m)
    one = xp is np and n > 1 and m.strides[0] == 0  # one matrix for the batch: invert it once
    if one:
        m = m[:1]
    if inverse_map:
        inv = m.reshape(m.shape[0], -1)
    else:
        inv, det = (invert_affine if shape == (2, 3) else invert_perspective)(m, xp)
        if xp is np:
            check_invertible(m, inv, det, "matrix", shape[0])
    return inv  # (1, k) when one matrix serves the batch: params_matrix broadcasts it


def _matrix_rows(matrix, b, shape, inverse_map, modes):
    """:func:`matrix_inverse` and :func:`params_matrix` in one compiled loop
    (:func:`_matrix_rows_in`) for a NumPy ``matrix`` of shape ``shape`` or ``(N,) + shape`` (a
    dtype of :data:`gpuaug._compiled.CHARS`) and a scalar fill: :class:`Rows`, or None for
    anything else and for any matrix the loop does not pass (non-finite, singular or near the
    singularity threshold: the general path then checks it, with its message)."""
    n = b.n
    m = matrix
    if type(m) is not np.ndarray or m.dtype.char not in CHARS or not n or m.shape[-2:] != shape:
        return None
    if m.ndim == 2:
        m = m[None]
    elif m.ndim != 3 or m.shape[0] != n:
        return None
    tmpl = _template(b, modes[0], modes[1], shape[0] * 3, modes[2])
    if tmpl is None:
        return None
    rows = tmpl.copy()
    if not _matrix_rows_in(m, rows, inverse_map, shape[0] == 3, SINGULAR_RATIO * (1 + 1e-9)):
        return None
    return Rows(rows)


@compiled
def _matrix_rows_in(m, rows, inverse_map, perspective, ratio):
    """Columns 2.. of ``rows`` (n, P) from ``m`` (1 or n matrices, 2x3 or 3x3 when
    ``perspective``): the matrices as they are when ``inverse_map``, else their inverses by
    :func:`invert_affine` / :func:`invert_perspective`'s arithmetic, term by term (the same
    values bit for bit). False when an entry or an inverse is not finite, or a determinant is
    not above ``ratio`` x the product of the row norms (``ratio`` a hair above
    SINGULAR_RATIO: a matrix this close to the threshold is left to check_invertible)."""
    n = rows.shape[0]
    k = 9 if perspective else 6
    inv = np.empty(9)
    for s in range(m.shape[0]):
        a, b_, c = np.float64(m[s, 0, 0]), np.float64(m[s, 0, 1]), np.float64(m[s, 0, 2])
        d, e, f = np.float64(m[s, 1, 0]), np.float64(m[s, 1, 1]), np.float64(m[s, 1, 2])
        g = h = i = 0.0
        if perspective:
            g, h, i = np.float64(m[s, 2, 0]), np.float64(m[s, 2, 1]), np.float64(m[s, 2, 2])
        if not (np.isfinite(a) and np.isfinite(b_) and np.isfinite(c) and np.isfinite(d) and np.isfinite(e)
                and np.isfinite(f) and np.isfinite(g) and np.isfinite(h) and np.isfinite(i)):
            return False
        if inverse_map:
            inv[0], inv[1], inv[2], inv[3], inv[4], inv[5] = a, b_, c, d, e, f
            inv[6], inv[7], inv[8] = g, h, i
        elif perspective:
            inv[0], inv[3], inv[6] = e * i - f * h, f * g - d * i, d * h - e * g
            det = a * inv[0] + b_ * inv[3] + c * inv[6]
            norms = (np.sqrt(a * a + b_ * b_ + c * c) * np.sqrt(d * d + e * e + f * f)
                     * np.sqrt(g * g + h * h + i * i))
            if not abs(det) > ratio * norms:
                return False
            inv[1], inv[4], inv[7] = c * h - b_ * i, a * i - c * g, b_ * g - a * h
            inv[2], inv[5], inv[8] = b_ * f - c * e, c * d - a * f, a * e - b_ * d
            r = 1.0 / det
            for j in range(9):
                inv[j] *= r
        else:
            det = a * e - b_ * d
            if not abs(det) > ratio * (np.hypot(a, b_) * np.hypot(d, e)):
                return False
            r = 1.0 / det
            inv[0], inv[1], inv[3], inv[4] = e * r, -b_ * r, -d * r, a * r
            inv[2] = -(inv[0] * c + inv[1] * f)
            inv[5] = -(inv[3] * c + inv[4] * f)
        for j in range(k):
            if not np.isfinite(inv[j]):
                return False
        for t in range(s, s + 1) if m.shape[0] == n else range(n):
            for j in range(k):
                rows[t, 2 + j] = inv[j]
    return True


class Rows:
    """An inverse callable's answer that is already the op's whole (N, P) parameter matrix
    (float32 on the device, float64 on the host): :func:`warp` uses it as it is, without
    :func:`params_matrix`."""

    __slots__ = ("matrix",)

    def __init__(self, matrix):
        self.matrix = matrix


def rotation_inverse(b, angle, center, scale, modes=None):
    """(N, 6) inverse of OpenCV's getRotationMatrix2D(center, angle, scale) per sample:
    src = R(angle)^T (dst - center) / scale + center.

    ``modes``: the call's ``(interpolation, border, fill)`` codes and fill, when the caller
    takes whole parameter rows: with one finite number as the fill the rows come back as
    :class:`Rows`, made by the matrices' own launch (parameters on the GPU) or written into a
    copy of :func:`params_matrix`'s template rows (on the host: no matrix copied twice)."""
    n = b.n
    if modes is not None and center is None and not b.varshape:
        got = _rotation_rows(b, angle, scale, modes)
        if got is not None:
            return got
    a = per_sample(angle, n, "angle", device=b.device)
    k = _plain_reciprocal(scale)  # one ordinary scale for the batch: no column, no zero check
    s = per_sample(scale, n, "scale", device=b.device) if k is None else None
    ctr = None if center is None else per_sample(center, n, "center", shape=(2,), device=b.device)
    if isinstance(s, np.ndarray) and not count_nonzero(s) == s.size:
        raise ValueError(f"scale: got {np.asarray(scale).tolist() if np.size(scale) <= 8 else 'an array with zeros'}; "
                         "expected non-zero numbers (0 collapses the image to a point)")
    if s is None and not (type(a) is np.ndarray and (ctr is None or type(ctr) is np.ndarray)):
        s = per_sample(scale, n, "scale", device=b.device)  # the device path takes a column
    if s is not None and xp_of(a, s, ctr) is not np:
        return _rotation_inverse_device(b, a, s, ctr, modes)
    if k is None:  # one scale for the batch (a broadcast scalar): its reciprocal once
        k = float(1.0 / s[0]) if s.ndim == 1 and n and s.strides[0] == 0 else 1.0 / s
    tmpl = None if modes is None else _template(b, modes[0], modes[1], 6, modes[2])
    if tmpl is None:
        return _rotation_inverse_host(b, a, k, ctr)
    rows = tmpl.copy()
    _rotation_inverse_host(b, a, k, ctr, rows[:, 2:8])
    return Rows(rows)


def _host_column(value, n):
    """A NumPy array of N values (:func:`gpuaug._compiled.plain`) or a Python number as an array
    of one, for the compiled rotation rows; None for anything else."""
    t = type(value)
    if t is float or t is int and -2 ** 63 <= value < 2 ** 63:
        return np.array([value])
    v = plain(value, n)
    return v if v is not None and v.dtype.char != "?" else None


def _rotation_rows(b, angle, scale, modes):
    """:func:`rotation_inverse`'s :class:`Rows` for host angles and scales (N values or one),
    the default centre of a uniform batch and a scalar fill, with two compiled loops around
    NumPy's cosines and sines (:func:`_rotation_prep`, :func:`_rotation_rows_in`); None for
    anything else, and for values the loop does not pass or angles that are multiples of 90
    degrees (the general path then checks them, with its messages, and rounds those exactly)."""
    n = b.n
    a, s = _host_column(angle, n), _host_column(scale, n)
    if a is None or s is None or not n:
        return None
    tmpl = _template(b, modes[0], modes[1], 6, modes[2])
    if tmpl is None:
        return None
    r, k = np.empty(n), np.empty(n)
    if not _rotation_prep(a, s, r, k):
        return None
    h, w = b.nhwc.shape[1:3]
    rows = tmpl.copy()
    _rotation_rows_in(np.cos(r), np.sin(r), k, np.array([(w - 1) / 2]), np.array([(h - 1) / 2]), rows[:, 2:8])
    return Rows(rows)


@compiled
def _rotation_prep(a, s, r, k):
    """``r = np.deg2rad(angle)`` (``angle * (pi / 180)``) and ``k = 1 / scale`` per sample, from N
    values or one of each (``a``, ``s``); False at an angle that is not finite or a multiple of
    90 degrees (``q == np.rint(q)`` for ``q = angle / 90``), or a scale that is 0 or not finite."""
    for i in range(r.shape[0]):
        av = np.float64(a[min(i, a.shape[0] - 1)])
        sv = np.float64(s[min(i, s.shape[0] - 1)])
        q = av / 90.0
        if not (np.isfinite(av) and np.isfinite(sv) and sv != 0) or q == np.rint(q):
            return False
        r[i] = av * (np.pi / 180.0)
        k[i] = 1.0 / sv
    return True


def _plain_reciprocal(scale):
    """1 / ``scale`` for a finite non-zero Python float or int (the usual scale argument), as
    the per-sample path computes it; None for anything else (per_sample checks it)."""
    t = type(scale)
    if t is float or t is int:
        try:
            f = float(scale)
        except OverflowError:
            return None
        if f != 0 and math.isfinite(f):
            return 1.0 / f
    return None


def _cos_sin_host(a):
    """:func:`gpuaug.geometry.cos_sin` of host angles (float64), with one count instead of its
    rounding wrapper and reduction where no angle is a multiple of 90 degrees (the usual
    case; else cos_sin itself runs). The same NumPy calls on the same contiguous arrays,
    so the same values bit for bit."""
    if _quarter_turns(a):
        return cos_sin(a, np)
    r = np.deg2rad(a)
    return np.cos(r), np.sin(r)


@compiled
def _quarter_turns(a):
    """Whether an angle of ``a`` (degrees) is a multiple of 90: ``q == np.rint(q)`` for ``q = a /
    90`` (np.round with no decimals is np.rint), in one loop (exact operations only)."""
    for i in range(a.shape[0]):
        q = a[i] / 90.0
        if q == np.rint(q):
            return True
    return False


def _rotation_inverse_host(b, a, k, ctr, inv=None):
    """rotation_inverse's maths on the host: ``a`` (n,) float64 angles, ``k`` 1/scale (a float or
    (n,) float64 values), ``ctr`` None or (n, 2) centres; written into ``inv`` (an (n, 6)
    float64 view) when given, else into a new array: NumPy's cosines and sines, then
    :func:`_rotation_rows_in`."""
    n = a.shape[0]
    if ctr is not None:
        cx, cy = ctr[:, 0], ctr[:, 1]
    elif b.varshape:
        hw = np.stack(b.sizes(), axis=1).astype(np.float64)
        cx, cy = (hw[:, 1] - 1) / 2, (hw[:, 0] - 1) / 2
    else:
        h, w = b.nhwc.shape[1:3]
        cx, cy = (w - 1) / 2, (h - 1) / 2
    c, sn = _cos_sin_host(a)
    return _rotation_rows_in(c, sn, np.array([k]) if type(k) is float else k,
                             np.array([cx]) if type(cx) is float else cx, np.array([cy]) if type(cy) is float else cy,
                             np.empty((n, 6)) if inv is None else inv)


@compiled
def _rotation_rows_in(c, sn, k, cx, cy, inv):
    """The inverse of OpenCV's getRotationMatrix2D per sample into ``inv`` (n, 6): ``c``, ``sn``
    the (n,) cosines and sines, ``k`` (1/scale), ``cx``, ``cy`` (n,) float64 columns or one value
    (shape (1,)). Term by term::

        a00 = cos * k, a01 = -sin * k
        [a00, a01, (cx - a00 cx) - a01 cy, -a01, a00, (cy + a01 cx) - a00 cy]
    """
    for i in range(inv.shape[0]):
        ki = k[min(i, k.shape[0] - 1)]
        x, y = cx[min(i, cx.shape[0] - 1)], cy[min(i, cy.shape[0] - 1)]
        a00 = c[i] * ki
        a01 = -sn[i] * ki
        inv[i, 0] = a00
        inv[i, 1] = a01
        inv[i, 2] = (x - a00 * x) - a01 * y
        inv[i, 3] = -a01
        inv[i, 4] = a00
        inv[i, 5] = (y + a01 * x) - a00 * y
    return inv


def _rotation_inverse_device(b, a, s, ctr, modes=None):
    """:func:`rotation_inverse` for parameters on the GPU: one launch of
    ``gpuaug_rotation_inverse`` (kernels/rotation_inverse.cu, compiled with --fmad=false so
    that device and host angles give the same matrices bit for bit) instead of about ten CuPy
    launches (cos, sin, round, where, ...). Device columns are read in place (any stride);
    host values that are one value for the batch go in as kernel scalars, other host columns
    in one pinned upload. With ``modes`` (interpolation, border, fill) and a finite number as
    the fill, ``gpuaug_rotation_rows`` writes the whole float32 parameter rows instead
    (:class:`Rows`): the values params_matrix and the gather kernel would make from the
    matrices, without their launch."""
    from gpuaug.kernels._cuda import get_function, upload

    cp = cupy_module()
    n = b.n

    def arg(v):  # (device column or None, its stride in elements, the batch's value)
        if not isinstance(v, np.ndarray):
            v = v.astype(cp.float64, copy=False)
            return v, np.int64(v.strides[0] // 8), np.float64(0)
        if v.size and (v == v.flat[0]).all():
            return None, np.int64(0), np.float64(v.flat[0])
        return upload(np.ascontiguousarray(v, np.float64))[0], np.int64(1), np.float64(0)

    if ctr is not None:
        cx, cy = arg(ctr[:, 0]), arg(ctr[:, 1])
    elif b.varshape:
        hs, ws = b.sizes()
        cx, cy = arg((ws - 1) / 2), arg((hs - 1) / 2)
    else:
        h, w = b.nhwc.shape[1:3]
        cx, cy = (None, np.int64(0), np.float64((w - 1) / 2)), (None, np.int64(0), np.float64((h - 1) / 2))
    fill = None if modes is None else modes[2]
    t = type(fill)
    if t is int and -2 ** 63 <= fill < 2 ** 63 or (t is float or t is np.float64) and math.isfinite(fill):
        c = b.channels
        rows = cp.empty((n, 8 + c), cp.float32)
        if n:
            fn = get_function("rotation_inverse.cu", "gpuaug_rotation_rows", ("--fmad=false",))
            fn(((n + 127) // 128,), (128,), arg(a) + arg(s) + cx + cy + (
                rows, np.int32(n), np.float64(modes[0]), np.float64(modes[1]),
                np.float64(fill_scalar(fill, b.dtype)), np.int32(c)))
        return Rows(rows)
    inv = cp.empty((n, 6), cp.float64)
    if n:
        fn = get_function("rotation_inverse.cu", "gpuaug_rotation_inverse", ("--fmad=false",))
        fn(((n + 127) // 128,), (128,), arg(a) + arg(s) + cx + cy + (inv, np.int32(n)))
    return inv


def output_shapes(b, size):
    if size is None:
        return b.shapes
    return b.uniform(host_size(size, "size"))


def params_matrix(b, interp, border, inv, fill):
    """The (N, P) parameter rows described in the module docstring."""
    n = b.n
    if type(inv) is np.ndarray and inv.ndim == 2:
        tmpl = _template(b, interp, border, inv.shape[1], fill)
        if tmpl is not None:  # the usual scalar fill: one copy of the rows, then the maps
            out = tmpl.copy()
            out[:, 2:2 + inv.shape[1]] = inv
            return out
    f = fill_columns(fill, b)
    if isinstance(inv, np.ndarray) and isinstance(f, np.ndarray):
        k = inv.shape[1]
        out = np.empty((n, 2 + k + f.shape[1]))
        out[:, 0], out[:, 1] = interp, border
        out[:, 2:2 + k] = inv
        out[:, 2 + k:] = f
        return out
    modes = np.empty((n, 2))
    modes[:, 0], modes[:, 1] = interp, border
    if inv.shape[0] != n:
        inv = np.broadcast_to(inv, (n, inv.shape[1]))
    return column_stack([modes, inv, f], n)


def _template(b, interp, border, k, fill):
    """params_matrix's rows for a scalar ``fill`` (a finite int or float) with the map
    columns left 0: made once per (N, modes, k, channels, dtype, fill bits) and kept
    read-only; None for other fills."""
    t = type(fill)
    if t is int and -2 ** 63 <= fill < 2 ** 63:
        fk = fill
    elif (t is float or t is np.float64) and math.isfinite(fill):
        fk = fill.hex()  # by its bits: -0.0 and 0.0 are different fills for a float image
    else:
        return None
    def make():
        f = fill_columns(fill, b)
        rows = np.zeros((b.n, 2 + k + f.shape[1]))
        rows[:, 0], rows[:, 1] = interp, border
        rows[:, 2 + k:] = f
        return rows
    return kept_array(_TEMPLATES, (b.n, interp, border, k, b.channels, b.dtype.char, t, fk), make)


_TEMPLATES: dict = {}


#: Output rows each thread of a dense kernel computes (the ROWS of its .cu file).
DENSE_ROWS = 4


def dense_variants(base):
    """The dense kernels' generic names, for the compile checks (Kernels.variants)."""
    from gpuaug.kernels._cuda import CTYPES

    return tuple(f"{base}_dense<{t}, {c}>" for t in CTYPES.values() for c in (1, 3, 4))


def dense_fast(kernels, template):
    """run()'s ``fast`` hook: dense NHWC batches (source and output C-contiguous) take
    ``<name>_dense``, which reads no descriptor tables and uses 32-bit offsets within a
    sample (Batch refuses images over 2**31 - 1 elements); anything else returns None (the
    table-driven kernel)."""

    def fast(src, dst):
        if src.varshape or dst.varshape or src.layout != "NHWC" or dst.layout != "NHWC":
            return None
        a, b = src.arrays[0], dst.arrays[0]
        if not (a.flags.c_contiguous and b.flags.c_contiguous):
            return None
        n, h, w, c = src.nhwc.shape
        hh, ww = dst.nhwc.shape[1:3]
        from gpuaug.kernels._cuda import get_function, kernel_name

        fn = get_function(kernels.cu[0], kernel_name(kernels.cu[1] + "_dense", *template))
        grid = ((ww + 31) // 32, (hh + 8 * DENSE_ROWS - 1) // (8 * DENSE_ROWS), min(n, 65535))

        def launch(par):
            fn(grid, (256,), (a, b, par, np.int32(par.shape[1]), np.int32(n), np.int32(h), np.int32(w),
                              np.int32(hh), np.int32(ww)))
        return launch

    return fast


def warp(kernels, x, inverse, flags, size, interpolation, border, fill, out, layout, stream, backend,
         rows=False):
    """The body of every warp op: checks, the parameter rows, the launch.

    ``inverse(b, **flags)`` returns the per-sample destination->source maps, (N, 6) or
    (N, 9) (or one row for the whole batch); it runs on the input's device and ``stream``
    (:func:`device_scope`). ``flags``: the op's boolean options by name (e.g.
    ``{"inverse_map": False}``), checked in order after the modes. ``size``: the output
    (height, width), None for each input's own size. ``rows``: ``inverse`` also takes
    ``modes=(interpolation code, border code, fill)`` and may answer :class:`Rows`, the whole
    parameter matrix. The other arguments are the op's own.
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    interp, bord = check_modes(interpolation, border)
    if flags:
        flags = {k: check_flag(k, v) for k, v in flags.items()}
    shapes = output_shapes(b, size)
    with device_scope(b, stream):
        inv = inverse(b, modes=(interp, bord, fill), **flags) if rows else inverse(b, **flags)
        params = inv.matrix if type(inv) is Rows else params_matrix(b, interp, bord, inv, fill)
    template = (dtype_name(b.dtype), b.channels, interp, bord)
    return run(b, kernels, params, shapes=shapes, out=out, backend=be, stream=stream,
               template=template, fast=dense_fast(kernels, template))
