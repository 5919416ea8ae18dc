"""Batched 3x3 matrix builders for the warps: rotation, scale, shear, translation, flip.

Every builder returns homogeneous matrices that map **source** pixel coordinates to
**destination** pixel coordinates, ``(x', y', 1) = M @ (x, y, 1)``, with ``x`` to the
right, ``y`` down and pixel centres at integers (OpenCV's convention: ``(0, 0)`` is the
centre of the top-left pixel). That is what :func:`gpuaug.warp_affine` (after
:func:`to_affine`) and :func:`gpuaug.warp_perspective` take.

Arguments are scalars or per-sample arrays: a builder returns one ``(3, 3)`` float64
matrix when every argument is a single value, else ``(N, 3, 3)`` with N the common
length. Matrices compose by matrix product (``B @ A`` applies ``A`` first), or with
:func:`compose`, which takes them in the order they apply::

    >>> import numpy as np
    >>> from gpuaug import geometry as G
    >>> m = G.compose(G.rotation([10.0, -10.0], center=(50, 50)), G.translation(5, 0))
    >>> m.shape
    (2, 3, 3)
    >>> np.allclose(G.rotation(30) @ G.rotation(60), G.rotation(90))
    True

Everything here is host (NumPy) maths; no GPU is needed.
"""
from __future__ import annotations

import functools

import numpy as np

__all__ = ["rotation", "scale", "shear", "translation", "flip", "identity", "compose",
           "to_affine"]


def _arg(value, name, shape=()):
    """``value`` as float64 of shape ``shape`` or ``(N,) + shape``; finite."""
    if value is None:
        raise TypeError(f"{name}: got None; expected a number or a sequence of numbers")
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: got {value!r}; expected numbers of shape {shape} or "
                        f"(N,) + {shape}") from None
    if a.shape != tuple(shape) and (a.ndim != len(shape) + 1 or a.shape[1:] != tuple(shape)):
        raise ValueError(f"{name}: got shape {a.shape}; expected {tuple(shape)} (one value) or "
                         f"(N,) + {tuple(shape)} (one per sample)")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: got {a.tolist() if a.size <= 8 else 'an array'}; expected "
                         "finite numbers (no NaN or inf)")
    return a


def _batch(args):
    """Common N of the batched ``(name, array, per-sample ndim)`` args, or None for scalars."""
    ns = {(name, a.shape[0]) for name, a, nd in args if a.ndim > nd}
    lengths = {n for _, n in ns}
    if len(lengths) > 1:
        raise ValueError("per-sample lengths differ: " + ", ".join(f"{k} has {n}" for k, n in sorted(ns))
                         + "; expected one length N for every per-sample argument")
    return lengths.pop() if lengths else None


def _build(n, rows):
    """Assemble ``rows`` (a 2x3 nested list of scalars or (N,) arrays) into matrices."""
    shape = () if n is None else (n,)
    m = np.zeros(shape + (3, 3))
    for i in range(2):
        for j in range(3):
            m[..., i, j] = np.asarray(rows[i][j]) + 0.0  # no -0.0 entries
    m[..., 2, 2] = 1.0
    return m


def cos_sin(angle_deg, xp=np):
    """cos and sin of angles in degrees, exact at multiples of 90 (so rotating by 90
    degrees moves pixels exactly onto pixels). ``xp``: numpy, or cupy for device angles.
    The one copy: the ops, Compose's transforms and the targets use it, and
    kernels/fused_draw.cu (Compose's device draws) computes the same."""
    r = xp.deg2rad(angle_deg)
    c, s = xp.cos(r), xp.sin(r)
    q90 = angle_deg / 90.0
    q = xp.rint(q90)  # (np.round with no decimals is np.rint, without its wrapper)
    exact = q90 == q
    if xp is np and not np.count_nonzero(exact):  # (host only: asking a device array would synchronise)
        return c, s
    k = xp.mod(q, 4).astype(np.int64)
    c = xp.where(exact, xp.asarray([1.0, 0.0, -1.0, 0.0])[k], c)
    s = xp.where(exact, xp.asarray([0.0, 1.0, 0.0, -1.0])[k], s)
    return c, s


def identity(n=None):
    """The identity: ``(3, 3)``, or ``(n, 3, 3)`` when ``n`` is given.

    Example::

        >>> from gpuaug import geometry as G
        >>> G.identity(2).shape
        (2, 3, 3)
    """
    if n is None:
        return np.eye(3)
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise (ValueError if isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))
               else TypeError)(f"n: got {n!r}; expected None or an int >= 0 (the number of matrices)")
    return np.broadcast_to(np.eye(3), (int(n), 3, 3)).copy()


def rotation(angle, center=(0.0, 0.0)):
    """Rotation by ``angle`` degrees counter-clockwise (as seen on screen) about ``center``.

    The matrix of OpenCV's ``getRotationMatrix2D(center, angle, 1)``::

        [[ c, s, (1 - c) cx - s cy],
         [-s, c, s cx + (1 - c) cy],
         [ 0, 0, 1]]                  with c = cos(angle), s = sin(angle)

    Multiples of 90 degrees are exact (cos/sin are 0 or +-1).

    Args:
        angle: degrees, a number or N numbers.
        center: ``(cx, cy)`` in pixels (x right, y down), or ``(N, 2)``. The centre of an
            ``h x w`` image is ``((w - 1) / 2, (h - 1) / 2)``.

    Returns:
        float64 ``(3, 3)``, or ``(N, 3, 3)`` when any argument is per sample.

    Example::

        >>> import numpy as np
        >>> from gpuaug import geometry as G
        >>> G.rotation(90, center=(1, 1)) @ np.array([2.0, 1.0, 1.0])  # right of centre -> above it
        array([1., 0., 1.])
    """
    a = _arg(angle, "angle")
    ctr = _arg(center, "center", (2,))
    n = _batch([("angle", a, 0), ("center", ctr, 1)])
    c, s = cos_sin(a)
    cx, cy = ctr[..., 0], ctr[..., 1]
    return _build(n, [[c, s, (1 - c) * cx - s * cy], [-s, c, s * cx + (1 - c) * cy]])


def scale(sx, sy=None, center=(0.0, 0.0)):
    """Scaling by ``sx`` along x and ``sy`` (default: ``sx``) along y, about ``center``.

    ``x' = cx + sx (x - cx)``, ``y' = cy + sy (y - cy)``.

    Args:
        sx, sy: factors, numbers or N numbers (negative mirrors; zero makes the matrix
            singular, which the warps refuse).
        center: ``(cx, cy)`` or ``(N, 2)``; the point that stays put.

    Returns:
        float64 ``(3, 3)`` or ``(N, 3, 3)``.

    Example::

        >>> from gpuaug import geometry as G
        >>> G.scale(2.0, center=(10, 10))[:2]
        array([[  2.,   0., -10.],
               [  0.,   2., -10.]])
    """
    ax = _arg(sx, "sx")
    ay = ax if sy is None else _arg(sy, "sy")
    ctr = _arg(center, "center", (2,))
    n = _batch([("sx", ax, 0), ("sy", ay, 0), ("center", ctr, 1)])
    cx, cy = ctr[..., 0], ctr[..., 1]
    return _build(n, [[ax, 0.0, (1 - ax) * cx], [0.0, ay, (1 - ay) * cy]])


def shear(shx, shy=0.0, center=(0.0, 0.0)):
    """Shear: ``x' = x + shx (y - cy)``, ``y' = y + shy (x - cx)``.

    ``shx``/``shy`` are factors (for a shear angle phi in degrees, ``tan(radians(phi))``).

    Args:
        shx, shy: numbers or N numbers.
        center: ``(cx, cy)`` or ``(N, 2)``: the row/column that does not move.

    Returns:
        float64 ``(3, 3)`` or ``(N, 3, 3)``.

    Example::

        >>> from gpuaug import geometry as G
        >>> G.shear(0.5)[:2]
        array([[1. , 0.5, 0. ],
               [0. , 1. , 0. ]])
    """
    ax = _arg(shx, "shx")
    ay = _arg(shy, "shy")
    ctr = _arg(center, "center", (2,))
    n = _batch([("shx", ax, 0), ("shy", ay, 0), ("center", ctr, 1)])
    cx, cy = ctr[..., 0], ctr[..., 1]
    return _build(n, [[1.0, ax, -ax * cy], [ay, 1.0, -ay * cx]])


def translation(tx, ty=0.0):
    """Translation: ``x' = x + tx``, ``y' = y + ty`` (pixels).

    Example::

        >>> from gpuaug import geometry as G
        >>> G.translation([1, 2], 3)[:, :2, 2]
        array([[1., 3.],
               [2., 3.]])
    """
    ax = _arg(tx, "tx")
    ay = _arg(ty, "ty")
    n = _batch([("tx", ax, 0), ("ty", ay, 0)])
    return _build(n, [[1.0, 0.0, ax], [0.0, 1.0, ay]])


def flip(horizontal=True, vertical=False, size=None):
    """Mirror left-right (``x' = w - 1 - x``) and/or top-bottom (``y' = h - 1 - y``).

    Args:
        horizontal, vertical: bools, or N bools.
        size: ``(h, w)`` of the image, or ``(N, 2)`` (required: the mirror axis is the
            image's centre line).

    Returns:
        float64 ``(3, 3)`` or ``(N, 3, 3)``; warping with it equals :func:`gpuaug.flip`.

    Example::

        >>> from gpuaug import geometry as G
        >>> G.flip(True, False, size=(4, 6))[:2]
        array([[-1.,  0.,  5.],
               [ 0.,  1.,  0.]])
    """
    if size is None:
        raise TypeError("size: got None; expected the image size (height, width), or one per sample (N, 2)")
    hf = _arg(horizontal, "horizontal")
    vf = _arg(vertical, "vertical")
    sz = _arg(size, "size", (2,))
    if np.any(sz <= 0):
        raise ValueError(f"size: got {sz.tolist() if sz.size <= 8 else 'an array'}; expected positive sizes")
    n = _batch([("horizontal", hf, 0), ("vertical", vf, 0), ("size", sz, 1)])
    h, w = sz[..., 0], sz[..., 1]
    hx = hf != 0
    vy = vf != 0
    return _build(n, [[np.where(hx, -1.0, 1.0), 0.0, np.where(hx, w - 1, 0.0)],
                      [0.0, np.where(vy, -1.0, 1.0), np.where(vy, h - 1, 0.0)]])


def _as3x3(m, name):
    """``m`` ((3, 3), (2, 3), (N, 3, 3) or (N, 2, 3)) as float64 (3, 3) / (N, 3, 3)."""
    try:
        a = np.asarray(m, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: got {m!r}; expected a matrix of numbers") from None
    if a.ndim not in (2, 3) or a.shape[-2:] not in ((3, 3), (2, 3)):
        raise ValueError(f"{name}: got shape {a.shape}; expected (3, 3), (2, 3), (N, 3, 3) or (N, 2, 3)")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: has NaN or inf entries; expected finite numbers")
    if a.shape[-2:] == (2, 3):
        full = np.zeros(a.shape[:-2] + (3, 3))
        full[..., :2, :] = a
        full[..., 2, 2] = 1.0
        return full
    return a


def compose(*mats):
    """Compose transforms given **in the order they apply**: ``compose(A, B, C) = C @ B @ A``.

    Each matrix is ``(3, 3)``, ``(2, 3)`` (affine, promoted), ``(N, 3, 3)`` or
    ``(N, 2, 3)``; single and per-sample matrices broadcast against each other.

    Returns:
        float64 ``(3, 3)``, or ``(N, 3, 3)`` when any input is per sample.

    Example::

        >>> import numpy as np
        >>> from gpuaug import geometry as G
        >>> m = G.compose(G.translation(2, 0), G.scale(3))  # move, then scale
        >>> m @ np.array([1.0, 1.0, 1.0])
        array([9., 3., 1.])
    """
    if not mats:
        raise TypeError("compose: got no matrices; expected at least one")
    arrs = [_as3x3(m, f"mats[{i}]") for i, m in enumerate(mats)]
    _batch([(f"mats[{i}]", a, 2) for i, a in enumerate(arrs)])
    out = arrs[0]
    for a in arrs[1:]:
        out = np.matmul(a, out)
    return out


def to_affine(matrix):
    """``(..., 3, 3)`` affine matrices -> ``(..., 2, 3)`` (their top two rows), for
    :func:`gpuaug.warp_affine`.

    Raises ValueError when a bottom row is not ``[0, 0, 1]`` (a perspective matrix: use
    :func:`gpuaug.warp_perspective`).

    Example::

        >>> from gpuaug import geometry as G
        >>> G.to_affine(G.rotation([0, 90], center=(8, 8))).shape
        (2, 2, 3)
    """
    m = _arg(matrix, "matrix", (3, 3))
    bottom = m[..., 2, :]
    if not np.allclose(bottom, [0.0, 0.0, 1.0], rtol=0, atol=1e-12):
        raise ValueError("matrix: a bottom row is not [0, 0, 1] (the matrix is a perspective "
                         "transform); expected affine matrices, or use warp_perspective")
    return np.ascontiguousarray(m[..., :2, :])


# ------------------------------------------------------------------------------ policy maps
# (n, 3, 3) source -> destination maps of gpuaug.Compose's geometry transforms
EYE9 = np.eye(3).reshape(9)


def eye(n):
    """(n, 3, 3) identity maps for the policy's transforms (a copy of a memoised read-only
    identity: what :func:`identity` gives, without building each matrix)."""
    return _eyes(n).copy()


@functools.lru_cache(maxsize=32)
def _eyes(n):
    m = np.empty((n, 9))
    m[:] = EYE9
    m = m.reshape(n, 3, 3)
    m.flags.writeable = False
    return m


def _centre(sizes, n):
    """The image centres ((w - 1) / 2, (h - 1) / 2) of ``sizes`` ((n, 2) (h, w)): Python floats
    for a batch of one size given as a zero-strided broadcast (Compose's uniform batches), else
    (n,) arrays; the same values either way."""
    if n and sizes.strides[0] == 0:
        return (float(sizes[0, 1]) - 1) / 2, (float(sizes[0, 0]) - 1) / 2
    h, w = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
    return (w - 1) / 2, (h - 1) / 2


def affine_matrices(sizes, angle, tx, ty, scale, shear_x, shear_y, center=None):
    """torchvision's affine map (``_get_inverse_affine_matrix(..., inverted=False)``) as
    (n, 3, 3) source -> destination matrices in pixel-centre coordinates: rotation by ``angle``
    degrees *clockwise* on screen (torchvision's F.affine convention), scale, shears (degrees)
    about the centre, then translation by (tx, ty) pixels. ``center``: (cx, cy) in pixel-centre
    coordinates, default the image centre.

    Entry by entry (shears 0): ``[cr s, -sr s, cx + tx - m00 cx - m01 cy, sr s, cr s, cy + ty -
    m10 cx - m11 cy, 0, 0, 1]`` with ``cr, sr`` = :func:`cos_sin` (angle) and ``s`` the scale;
    each product is computed once, into its place (``(-sr) s`` is ``-(sr s)`` bit for bit)."""
    n = len(angle)
    cx, cy = _centre(sizes, n) if center is None else (float(center[0]), float(center[1]))
    angle = np.asarray(angle, np.float64)
    cr, sr = cos_sin(angle)
    m = np.zeros((n, 9))
    m[:, 8] = 1.0
    # (methods: np.any's wrapper costs ~1 us; RandomAffine without shear gives one zeros array for both)
    # (np.count_nonzero: .any()'s values without its Python wrapper, ~1 us less)
    if np.count_nonzero(shear_x) or (shear_y is not shear_x and np.count_nonzero(shear_y)):
        sx, sy = np.deg2rad(shear_x), np.deg2rad(shear_y)
        cos_sy, tan_sx = np.cos(sy), np.tan(sx)
        crs, srs = cos_sin(angle - shear_y)
        a = crs / cos_sy
        c = srs / cos_sy
        b = -(a * tan_sx + sr)
        d = cr - c * tan_sx
        np.multiply(a, scale, out=m[:, 0]), np.multiply(b, scale, out=m[:, 1])
        np.multiply(c, scale, out=m[:, 3]), np.multiply(d, scale, out=m[:, 4])
        for k, c0, t in ((2, cx, tx), (5, cy, ty)):  # c0 + t - m[k-2] cx - m[k-1] cy, left to right
            col = np.add(c0, t, out=m[:, k])
            col -= m[:, k - 2] * cx
            col -= m[:, k - 1] * cy
        return m.reshape(n, 3, 3)
    p = np.multiply(cr, scale, out=m[:, 0])
    q = np.multiply(sr, scale, out=m[:, 3])
    np.negative(q, out=m[:, 1])
    m[:, 4] = p
    # cx + tx - p cx - (-q) cy is ((cx + tx) - p cx) + q cy bit for bit ((-q) cy = -(q cy), and
    # x - (-y) is x + y); cy + ty - q cx - p cy likewise; a square image's centre has cx == cy,
    # so its two products serve both columns
    same = type(cx) is float and type(cy) is float and cx == cy and cx != 0.0  # (0.0 == -0.0: apart)
    pcx, qcx = p * cx, q * cx
    pcy, qcy = (pcx, qcx) if same else (p * cy, q * cy)
    col = np.add(cx, tx, out=m[:, 2])
    col -= pcx
    col += qcy
    col = np.add(cy, ty, out=m[:, 5])
    col -= qcx
    col -= pcy
    return m.reshape(n, 3, 3)


def box_matrices(boxes, out_hw):
    """(n, 3, 3) maps of a resize of box (top, left, height, width) to ``out_hw``, with
    gpuaug.resized_crop's pixel centres: output pixel x reads ``left + (x + 0.5) * bw / W - 0.5``."""
    f = np.asarray(boxes).astype(np.float64)
    top, left, bh, bw = f[:, 0], f[:, 1], f[:, 2], f[:, 3]
    m = np.zeros((len(boxes), 9))
    fx = np.divide(out_hw[1], bw, out=m[:, 0])
    fy = np.divide(out_hw[0], bh, out=m[:, 4])
    m[:, 8] = 1.0
    for k, lo, fk in ((2, left, fx), (5, top, fy)):  # (0.5 - left) fx - 0.5
        col = np.subtract(0.5, lo, out=m[:, k])
        col *= fk
        col -= 0.5
    return m.reshape(-1, 3, 3)


def homographies(src, dst):
    """(n, 3, 3) matrices mapping the 4 points src (n, 4, 2) onto dst (n, 4, 2) (x, y), as
    OpenCV's getPerspectiveTransform, solved for every sample at once."""
    n = src.shape[0]
    a = np.zeros((n, 8, 8))
    rhs = np.zeros((n, 8))
    x, y = src[..., 0], src[..., 1]
    u, v = dst[..., 0], dst[..., 1]
    a[:, 0::2, 0], a[:, 0::2, 1], a[:, 0::2, 2] = x, y, 1.0
    a[:, 0::2, 6], a[:, 0::2, 7] = -u * x, -u * y
    a[:, 1::2, 3], a[:, 1::2, 4], a[:, 1::2, 5] = x, y, 1.0
    a[:, 1::2, 6], a[:, 1::2, 7] = -v * x, -v * y
    rhs[:, 0::2], rhs[:, 1::2] = u, v
    sol = np.linalg.solve(a, rhs[..., None])[..., 0]
    return np.concatenate([sol, np.ones((n, 1))], axis=1).reshape(n, 3, 3)
