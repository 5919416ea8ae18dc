"""Boxes and keypoints through per-sample 3x3 matrices: the NumPy twin and the CUDA launch.

Every function here takes ``matrices``: ``(N, 3, 3)`` float64 host arrays mapping source
pixel coordinates to destination ones with pixel centres at integers (the convention of
:mod:`gpuaug.geometry` and of every gpuaug warp), the input image sizes and the output
sizes (``(N, 2)`` (h, w)). The container's own convention (continuous box coordinates,
normalisation) is folded into one matrix per sample here, so the kernels only map points.
"""
from __future__ import annotations

import math

import numpy as np

from gpuaug._util import cupy_module, kept_array
from gpuaug.targets._types import FORMATS, Boxes, Keypoints, check_boxes_values, check_keypoints_values

#: pixel-centre -> continuous (edge) coordinates: x_c = x_p + 0.5
_TO_C = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
_FROM_C = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5], [0.0, 0.0, 1.0]])


def _scale(sizes):
    """(N, 3, 3) diag(w, h, 1)."""
    s = np.zeros((len(sizes), 3, 3))
    s[:, 0, 0], s[:, 1, 1], s[:, 2, 2] = sizes[:, 1], sizes[:, 0], 1.0
    return s


def _inv_scale(sizes):
    s = np.zeros((len(sizes), 3, 3))
    s[:, 0, 0], s[:, 1, 1], s[:, 2, 2] = 1.0 / sizes[:, 1], 1.0 / sizes[:, 0], 1.0
    return s


def target_matrices(matrices, in_sizes, out_sizes, continuous, normalized):
    """The (N, 3, 3) maps in the targets' coordinates: continuous coordinates shift by half a
    pixel around the pixel-centre map; normalised ones scale by the sizes on both sides."""
    m = np.asarray(matrices, np.float64)
    if continuous:
        m = _TO_C @ m @ _FROM_C
    if normalized:
        m = _inv_scale(np.asarray(out_sizes, np.float64)) @ m @ _scale(np.asarray(in_sizes, np.float64))
    return np.ascontiguousarray(m.reshape(-1, 9))


def _check_n(name, n, want):
    if n != want:
        raise ValueError(f"{name}: holds {n} samples; the images are {want}; expected one entry per image")


#: Host arrays that depend only on the batch's shape (n, output size, the targets' conventions):
#: made once, read-only, shared by every call with that shape (see :func:`_memo`).
_MEMO: dict = {}
_MEMO_LIMIT = 256


def _memo(key, make):
    """``make()`` kept under ``key`` (read-only: callers and kernels only read it); at most
    ``_MEMO_LIMIT`` entries (a stream of new shapes starts over)."""
    return kept_array(_MEMO, key, make, _MEMO_LIMIT)


def _uniform_hw(sizes, n):
    """(h, w) as ints when every one of the ``n`` sizes (an (n, 2) or (2,) array) is the same,
    else None. A broadcast (zero-strided) array, as the policies' sizes are, answers at once."""
    s = np.asarray(sizes)
    if s.ndim == 1:
        return int(s[0]), int(s[1])
    if n and (s.strides[0] == 0 or bool((s == s[0]).all())):
        return int(s[0, 0]), int(s[0, 1])
    return None


def _sizes_f64(sizes, n):
    s = np.asarray(sizes, np.float64)
    return s if s.shape == (n, 2) else np.broadcast_to(s, (n, 2))


def _contiguous(cp, a, dtype=None):
    """``a`` itself when it is C-contiguous (of ``dtype``), else a contiguous copy."""
    if a.flags.c_contiguous and (dtype is None or a.dtype == dtype):
        return a
    return cp.ascontiguousarray(a, dtype=dtype) if dtype is not None else cp.ascontiguousarray(a)


def _maps(matrices, n):
    m = np.asarray(matrices, np.float64)
    return np.broadcast_to(m, (n, 3, 3)) if m.ndim == 2 else m


# ------------------------------------------------------------------------------ boxes
def _boxes_numpy(flat, sid, mats, lims, fmt, min_vis, drop, keep_in=None):
    """flat (T, 4) boxes of samples sid (T,) -> (T, 4) mapped, clipped boxes and keep (T,);
    ``keep_in`` (T,) bools drop rows whatever their map."""
    b = flat.astype(np.float64)
    x1, y1, x2, y2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    if fmt == 1:
        x2, y2 = x1 + x2, y1 + y2
    elif fmt == 2:
        hw, hh = 0.5 * x2, 0.5 * y2
        x1, y1, x2, y2 = x1 - hw, y1 - hh, x1 + hw, y1 + hh
    m = mats[sid]
    xs = np.stack([x1, x2, x2, x1], axis=1)
    ys = np.stack([y1, y1, y2, y2], axis=1)
    X = m[:, 0:1] * xs + m[:, 1:2] * ys + m[:, 2:3]
    Y = m[:, 3:4] * xs + m[:, 4:5] * ys + m[:, 5:6]
    Z = m[:, 6:7] * xs + m[:, 7:8] * ys + m[:, 8:9]
    ok = np.all(Z > 0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        px, py = X / Z, Y / Z
    with np.errstate(invalid="ignore"):
        lx, hx, ly, hy = px.min(1), px.max(1), py.min(1), py.max(1)
        area = (hx - lx) * (hy - ly)
        W, H = lims[sid, 0], lims[sid, 1]
        cx1, cx2 = np.clip(lx, 0, W), np.clip(hx, 0, W)
        cy1, cy2 = np.clip(ly, 0, H), np.clip(hy, 0, H)
        clipped = (cx2 - cx1) * (cy2 - cy1)
    with np.errstate(invalid="ignore"):
        keep = ok & (clipped > 0) & (clipped >= min_vis * area) if drop else ok.copy()
    if keep_in is not None:
        keep &= keep_in
    if fmt == 0:
        out = np.stack([cx1, cy1, cx2, cy2], axis=1)
    elif fmt == 1:
        out = np.stack([cx1, cy1, cx2 - cx1, cy2 - cy1], axis=1)
    else:
        out = np.stack([0.5 * (cx1 + cx2), 0.5 * (cy1 + cy2), cx2 - cx1, cy2 - cy1], axis=1)
    return out, keep


def _compact(out, keep, n, m, dtype):
    """(n*m, 4) results and keep flags of a padded batch -> packed (n, m, 4), index, counts."""
    keep2 = keep.reshape(n, m)
    pos = np.cumsum(keep2, axis=1) - 1
    res = np.zeros((n, m, 4), dtype)
    index = np.full((n, m), -1, np.int32)
    ii, jj = np.nonzero(keep2)
    res[ii, pos[ii, jj]] = out.reshape(n, m, 4)[ii, jj]
    index[ii, pos[ii, jj]] = jj
    return res, index, keep2.sum(axis=1).astype(np.int32)


_BLOCK = 256


def _check_keep(keep, boxes):
    """``keep``: per input row, bools (padded: (N, M); ragged: a list of (M_i,)), on the boxes' side."""
    if keep is None:
        return None
    if boxes.padded:
        if isinstance(keep, list) or tuple(keep.shape) != tuple(boxes.data.shape[:2]):
            raise ValueError(f"keep: got {_shape(keep)}; expected {tuple(boxes.data.shape[:2])} bools (one per row)")
        return keep
    if not isinstance(keep, list) or [tuple(k.shape) for k in keep] != [(a.shape[0],) for a in boxes.data]:
        raise ValueError("keep: expected a list of (M_i,) bools, one per sample's boxes")
    return keep


def _shape(a):
    return f"a list of {len(a)}" if isinstance(a, list) else f"shape {tuple(a.shape)}"


def _box_lims(out_sizes, normalized):
    """(N, 2) float64 (W, H) the mapped boxes are clipped to (1, 1 when normalised)."""
    return np.ones((len(out_sizes), 2)) if normalized else out_sizes[:, ::-1].copy()


def _box_setup(boxes, matrices, in_sizes, out_sizes, check, keep=None):
    """(boxes, mats (N, 9), lims (N, 2), fmt code, min_vis, drop, keep, hw) after the checks;
    ``hw``: the one output (h, w) of every sample, or None (sizes that differ). With one
    output size the limits come from a memo (and, on the GPU, the device's constant cache)."""
    from gpuaug.targets._types import as_boxes

    boxes = as_boxes(boxes)
    n = boxes.n
    mats3 = _maps(matrices, n)
    _check_n("boxes", n, mats3.shape[0])
    given = out_sizes
    in_sizes, out_sizes = _sizes_f64(in_sizes, n), _sizes_f64(out_sizes, n)
    if check and boxes.check:
        check_boxes_values(boxes)
    mats = target_matrices(mats3, in_sizes, out_sizes, True, boxes.normalized)
    hw = _uniform_hw(given, n)
    if hw is None:
        lims = _box_lims(out_sizes, boxes.normalized)
    else:
        lims = _memo(("box_lims", n, hw, boxes.normalized), lambda: _box_lims(out_sizes, boxes.normalized))
    return (boxes, mats, lims, FORMATS[boxes.format], boxes.min_visibility or 0.0, boxes.min_visibility is not None,
            _check_keep(keep, boxes), hw)


class _Outputs:
    """The outputs of one launch carved from ONE device allocation (one call into CuPy's pool
    instead of one per array): :meth:`take` books an array and returns its slot, :meth:`make`
    allocates them all; ``outs[slot]`` is the array. Each starts on a 256-byte boundary."""

    def __init__(self):
        self.parts, self.arrays = [], None

    def take(self, shape, dtype):
        self.parts.append((tuple(shape), np.dtype(dtype)))
        return len(self.parts) - 1

    def make(self):
        if not self.parts:
            self.arrays = []
            return self
        cp = cupy_module()
        offs, total = [], 0
        for shape, dt in self.parts:
            offs.append(total)
            total += -(-math.prod(shape) * dt.itemsize // 256) * 256
        buf = cp.empty(max(total, 256), cp.uint8)
        self.arrays = [cp.ndarray(shape, dt, memptr=buf.data + o) for (shape, dt), o in zip(self.parts, offs)]
        return self

    def __getitem__(self, slot):
        return self.arrays[slot]


def _bound(target, outs):
    """``target`` (a _DeviceBoxes / _DevicePoints) with its outputs: from
    ``outs`` (an :class:`_Outputs` that other targets share, made later by the caller) or, when
    None, one allocation of its own now."""
    if outs is None:
        target.bind(target.outs.make())
    return target


class _DeviceBoxes:
    """The device side of one map_boxes call: inputs flattened (padded: as is; ragged: one
    concatenation), outputs booked (``outs``: an :class:`_Outputs` shared with the stage's other
    targets, allocated by the caller, who then calls :meth:`bind`; None: allocated here), the
    host rows to upload and the kernel arguments."""

    def __init__(self, boxes, mats, lims, fmt, mv, drop, keep=None, hw=None, outs=None):
        cp = cupy_module()
        n = boxes.n
        self.boxes, self.n = boxes, n
        rows_key = None
        if boxes.padded:
            data = _contiguous(cp, boxes.data)
            m = data.shape[1]
            rows_key = ("gpuaug.targets.rows", n, m)
            self.starts = _memo(rows_key + ("starts",), lambda: np.arange(n, dtype=np.int64) * m)
            spans = _memo(("full", n, m), lambda: np.full(n, m, np.int32))
            counts = boxes.counts if boxes.counts is not None else spans
        else:
            sizes = np.array([a.shape[0] for a in boxes.data], np.int64)
            self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            dt = np.result_type(*[a.dtype for a in boxes.data])
            data = (cp.concatenate([cp.asarray(a, dt) for a in boxes.data]) if sizes.sum()
                    else cp.zeros((0, 4), dt))
            counts = spans = sizes.astype(np.int32)
        self.data = data
        self.outs = _Outputs() if outs is None else outs
        self.slots = (self.outs.take(data.shape, data.dtype), self.outs.take(data.shape[:-1], np.int32),
                      self.outs.take((n,), np.int32))
        if keep is None:
            self.keep = None  # the index (not read: has_keep 0)
        elif boxes.padded:
            self.keep = _contiguous(cp, cp.asarray(keep).astype(cp.uint8))
        else:
            self.keep = (cp.concatenate([cp.asarray(k).astype(cp.uint8) for k in keep]) if data.shape[0]
                         else cp.zeros(0, cp.uint8))
        # (key, host row): keyed rows are functions of the key, uploaded once (the device's
        # constant cache); the per-call ones travel together in one staged copy
        lims_key = None if hw is None else ("gpuaug.targets.box_lims", n, hw, boxes.normalized)
        self.host = [(None, np.ascontiguousarray(mats)), (lims_key, np.ascontiguousarray(lims, np.float64)),
                     (rows_key and rows_key + ("starts",), self.starts), (rows_key and rows_key + ("spans",), spans)]
        self.dev_counts = None
        if isinstance(counts, np.ndarray):
            fixed = boxes.counts is None and rows_key is not None  # every row valid: a function of (n, m)
            self.host.append((rows_key + ("spans",) if fixed else None, counts.astype(np.int32, copy=False)))
        else:
            self.dev_counts = _contiguous(cp, counts, cp.int32)
        self.scalars = (np.int32(n), np.int32(fmt), np.float64(mv), np.int32(drop), np.int32(keep is not None))
        self.ctype = "float" if data.dtype == np.float32 else "double"
        self.blocks = (n * 32 + _BLOCK - 1) // _BLOCK
        _bound(self, outs)

    def bind(self, outs):
        """Take the outputs from ``outs`` (made)."""
        self.out, self.index, self.count_out = (outs[k] for k in self.slots)
        if self.keep is None:
            self.keep = self.index

    def args(self, dev):
        """Kernel arguments, with ``dev`` the uploaded ``host`` rows."""
        cnt = self.dev_counts if self.dev_counts is not None else dev[4]
        return (self.data, self.out, self.index, self.count_out, dev[2], cnt, dev[3], dev[0], dev[1],
                self.keep) + self.scalars

    def result(self):
        b = self.boxes
        if b.padded:
            return b.like(self.out, counts=self.count_out, index=self.index)
        kept = cupy_module().asnumpy(self.count_out)  # the list's lengths: read back
        return b.like([self.out[s:s + k] for s, k in zip(self.starts, kept)],
                      index=[self.index[s:s + k] for s, k in zip(self.starts, kept)])


def map_boxes(boxes, matrices, in_sizes, out_sizes, *, check=True, stream=None):
    """Map each sample's boxes by its matrix: the bounding box of the 4 mapped corners,
    clipped to the output image, dropped by ``boxes.min_visibility``.

    Args:
        boxes: a :class:`Boxes` (or a padded (N, M, 4) xyxy pixel array).
        matrices: (N, 3, 3) (or (3, 3)) host float64, source -> destination pixel-centre
            coordinates (what :mod:`gpuaug.geometry` builds and the warps take).
        in_sizes, out_sizes: (N, 2) (h, w) of the images before and after.
        check: refuse NaN / inverted boxes (for device boxes: one synchronisation; also
            skipped when ``boxes.check`` is False).
        stream: CUDA stream for device boxes (None: CuPy's current stream).

    Returns:
        A :class:`Boxes` like the input: padded in, padded out (kept boxes first, in input
        order, ``counts`` updated, ``index`` the input row of each); ragged in, ragged out
        (a list again; on the GPU that reads the counts back, one synchronisation).

    Example::

        >>> import numpy as np
        >>> from gpuaug import geometry as G
        >>> from gpuaug.targets import Boxes, map_boxes
        >>> b = Boxes(np.array([[[1.0, 2.0, 4.0, 6.0]]]))
        >>> map_boxes(b, G.flip(True, size=(8, 10))[None], [[8, 10]], [[8, 10]]).data[0, 0]
        array([6., 2., 9., 6.])
    """
    return map_targets(boxes, None, matrices, in_sizes, out_sizes, check=check, stream=stream)[0]


def _map_boxes_host(boxes, mats, lims, fmt, mv, drop, keep_in=None):
    n = boxes.n
    if boxes.padded:
        d = boxes.data
        m = d.shape[1]
        sid = np.repeat(np.arange(n), m)
        kin = None if keep_in is None else np.asarray(keep_in, bool).reshape(-1)
        out, keep = _boxes_numpy(d.reshape(-1, 4), sid, mats, lims, fmt, mv, drop, kin)
        if boxes.counts is not None:
            keep &= (np.arange(m)[None, :] < np.asarray(boxes.counts)[:, None]).reshape(-1)
        res, index, cnt = _compact(out, keep, n, m, d.dtype)
        return boxes.like(res, counts=cnt, index=index)
    res, idx = [], []
    for i, a in enumerate(boxes.data):
        kin = None if keep_in is None else np.asarray(keep_in[i], bool)
        out, keep = _boxes_numpy(a.reshape(-1, 4), np.full(a.shape[0], i), mats, lims, fmt, mv, drop, kin)
        res.append(out[keep].astype(a.dtype))
        idx.append(np.nonzero(keep)[0].astype(np.int32))
    return boxes.like(res, index=idx)


# ------------------------------------------------------------------------------ keypoints
def _points_numpy(pts, vis, mats, lims):
    n, k = pts.shape[:2]
    p = pts.astype(np.float64)
    m = mats.reshape(n, 1, 9)
    x, y = p[..., 0], p[..., 1]
    X = m[..., 0] * x + m[..., 1] * y + m[..., 2]
    Y = m[..., 3] * x + m[..., 4] * y + m[..., 5]
    Z = m[..., 6] * x + m[..., 7] * y + m[..., 8]
    ok = Z > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ox, oy = np.where(ok, X / Z, np.nan), np.where(ok, Y / Z, np.nan)
    l_ = lims[:, None, :]
    with np.errstate(invalid="ignore"):
        inside = (ox >= l_[..., 0]) & (ox < l_[..., 1]) & (oy >= l_[..., 2]) & (oy < l_[..., 3])
    return np.stack([ox, oy], axis=-1).astype(pts.dtype), vis & ok & inside


def _point_setup(keypoints, matrices, in_sizes, out_sizes, check):
    """(keypoints, mats (N, 9), lims (N, 4), hw) after the checks; ``hw`` and the limits as
    :func:`_box_setup`."""
    from gpuaug.targets._types import as_keypoints

    kp = as_keypoints(keypoints)
    n = kp.n
    mats3 = _maps(matrices, n)
    _check_n("keypoints", n, mats3.shape[0])
    given = out_sizes
    in_sizes, out_sizes = _sizes_f64(in_sizes, n), _sizes_f64(out_sizes, n)
    if check and kp.check:
        check_keypoints_values(kp)
    cont = kp.coords == "continuous"
    mats = target_matrices(mats3, in_sizes, out_sizes, cont, kp.normalized)
    hw = _uniform_hw(given, n)
    if hw is None:
        lims = _point_lims(out_sizes, cont, kp.normalized)
    else:
        lims = _memo(("point_lims", n, hw, cont, kp.normalized), lambda: _point_lims(out_sizes, cont, kp.normalized))
    return kp, mats, lims, hw


def _point_lims(out_sizes, cont, normalized):
    """(N, 4) float64 (x lo, x hi, y lo, y hi): inside the output image, [0, W) continuous,
    [-0.5, W - 0.5) at pixel centres; normalised coordinates divide both ends by W."""
    n = len(out_sizes)
    lo = 0.0 if cont else -0.5
    ow, oh = out_sizes[:, 1], out_sizes[:, 0]
    lims = np.stack([np.full(n, lo), ow + lo, np.full(n, lo), oh + lo], axis=1)
    if normalized:
        lims /= np.stack([ow, ow, oh, oh], axis=1)
    return lims


class _DevicePoints:
    def __init__(self, kp, mats, lims, hw=None, outs=None):
        cp = cupy_module()
        self.kp = kp
        n, k = kp.data.shape[:2]
        self.data = _contiguous(cp, kp.data)
        # bool flags go to the kernel as they are: it reads their bytes (a launch passes only the address)
        self.vis = _contiguous(cp, kp.visibility)
        self.outs = _Outputs() if outs is None else outs
        self.slots = (self.outs.take(self.data.shape, self.data.dtype), self.outs.take((n, k), np.bool_))
        lims_key = None if hw is None else ("gpuaug.targets.point_lims", n, hw, kp.coords, kp.normalized)
        self.host = [(None, np.ascontiguousarray(mats)), (lims_key, np.ascontiguousarray(lims))]
        self.n, self.k = n, k
        self.ctype = "float" if self.data.dtype == np.float32 else "double"
        self.blocks = (n * k + _BLOCK - 1) // _BLOCK
        _bound(self, outs)

    def bind(self, outs):
        self.out, self.vout = (outs[k] for k in self.slots)

    def args(self, dev):
        return (self.data, self.out, self.vis, self.vout, dev[0], dev[1], np.int32(self.n),
                np.int32(self.k))

    def result(self):
        return self.kp.like(self.out, self.vout)


def map_keypoints(keypoints, matrices, in_sizes, out_sizes, *, check=True, stream=None):
    """Map each sample's keypoints by its matrix; points that leave the output image (or
    are sent to infinity by a perspective) lose their visibility; coordinates are not clipped.

    Args:
        keypoints: a :class:`Keypoints` (or an (N, K, 2) pixel-coordinate array).
        matrices, in_sizes, out_sizes, stream: as :func:`map_boxes`.
        check: refuse NaN coordinates of visible points (device: one synchronisation).

    Returns:
        A :class:`Keypoints` on the input's side (NumPy or CuPy).

    Example::

        >>> import numpy as np
        >>> from gpuaug import geometry as G
        >>> from gpuaug.targets import map_keypoints
        >>> k = map_keypoints(np.array([[[0.0, 0.0], [9.0, 3.0]]]), G.flip(True, size=(4, 10)), [[4, 10]], [[4, 10]])
        >>> k.data[0].tolist(), k.visibility[0].tolist()
        ([[9.0, 0.0], [0.0, 3.0]], [True, True])
    """
    return map_targets(None, keypoints, matrices, in_sizes, out_sizes, check=check, stream=stream)[1]


def map_targets(boxes, keypoints, matrices, in_sizes, out_sizes, *, check=True, stream=None, keep=None):
    """:func:`map_boxes` and :func:`map_keypoints` together (either may be None); on the GPU,
    boxes and keypoints of the batch go in ONE upload and ONE launch (gpuaug_target_both).
    ``keep``: per input box row, bools on the boxes' side (padded: (N, M); ragged: a list):
    False drops the row whatever its map (e.g. RandomIoUCrop's boxes centred outside the crop).
    Returns ``(boxes, keypoints)``.

    Example::

        >>> import numpy as np
        >>> from gpuaug import geometry as G
        >>> from gpuaug.targets import map_targets
        >>> b, k = map_targets(np.array([[[0.0, 0.0, 2.0, 2.0]]]), np.array([[[1.0, 1.0]]]),
        ...                    G.translation(1, 1), [[4, 4]], [[4, 4]])
        >>> b.data[0, 0].tolist(), k.data[0, 0].tolist()
        ([1.0, 1.0, 3.0, 3.0], [2.0, 2.0])
    """
    bs = _box_setup(boxes, matrices, in_sizes, out_sizes, check, keep) if boxes is not None else None
    ps = _point_setup(keypoints, matrices, in_sizes, out_sizes, check) if keypoints is not None else None
    rb = rk = None
    if bs is not None and not bs[0].device:
        rb = _follow(bs[0], _map_boxes_host(*bs[:7]))
        bs = None
    if ps is not None and not ps[0].device:
        rk = ps[0].like(*_points_numpy(ps[0].data, ps[0].visibility, ps[1], ps[2]))
        ps = None
    if bs is None and ps is None:
        return rb, rk
    from gpuaug._stream import on_stream

    with on_stream(stream):
        outs = _Outputs()  # every output of the launch: one allocation
        db = _DeviceBoxes(*bs, outs=outs) if bs is not None else None
        dp = _DevicePoints(*ps, outs=outs) if ps is not None else None
        _bind(outs, db, dp)
        _launch(db, dp)
        if db is not None:
            rb = _follow(bs[0], db.result())
        if dp is not None:
            rk = dp.result()
    return rb, rk


def _gather_rows(a, idx):
    """a[i, idx[i, r]] per sample (padded, -1 where idx < 0), or a[i][idx[i]] (ragged lists)."""
    if isinstance(idx, list):
        return [ai[ii] for ai, ii in zip(a, idx)]
    xp = np if isinstance(idx, np.ndarray) else cupy_module()
    a = xp.asarray(a)
    g = xp.take_along_axis(a, xp.maximum(idx, 0).astype(xp.int64), axis=1)
    return xp.where(idx >= 0, g, xp.asarray(-1, a.dtype))


def _follow(inp: Boxes, out: Boxes):
    """The output's index through the input's own (an index into the original boxes) and the
    labels gathered along."""
    rel = out.index
    if inp.labels is not None:
        out.labels = _gather_rows(inp.labels, rel)
    if inp.index is not None:
        out.index = _gather_rows(inp.index, rel)
    return out


#: Pixels a thread of the mask warp writes: kernels/targets.cu's GPUAUG_MASK_PX.
MASK_PX = 16


def mask_blocks(planes, h, w, px=MASK_PX):
    """Blocks (of 256 threads) of gpuaug_target_masks / the mask part of gpuaug_target_all:
    one thread per run of ``px`` pixels of an output row (kernels/targets.cu's gpuaug_mask_items)."""
    return -(-(planes * h * (-(-w // px))) // _BLOCK)


_AFFINE_ROW = np.array([0.0, 0.0, 1.0])


class _DeviceMasks:
    """The device side of a stage's masks in :func:`map_stage`: dense planes (N, H, W) or
    (N, K, H, W) of uint8 / bool / int32, their per-sample destination -> source maps (float32,
    what the warps read), the output and the kernel arguments."""

    def __init__(self, masks, inv, out_hw, constant):
        cp = cupy_module()
        d = masks.data
        self.masks = masks
        self.k = d.shape[1] if masks.onehot else 1
        self.n = d.shape[0]
        self.h, self.w = d.shape[-2:]
        self.H, self.W = int(out_hw[0]), int(out_hw[1])
        self.src = d.view(np.uint8) if d.dtype == np.bool_ else d
        self.out = cp.empty(d.shape[:-2] + (self.H, self.W), d.dtype)  # an allocation of its own (see map_stage)
        self.dst = self.out.view(np.uint8) if d.dtype == np.bool_ else self.out
        inv = np.asarray(inv, np.float64).reshape(-1, 9)
        self.persp = not (inv[:, 6:] == _AFFINE_ROW).all()  # as warp_masks decides: a last row of 0, 0, 1
        self.host = [(None, np.ascontiguousarray(inv, np.float32))]
        self.ctype = "int" if d.dtype == np.int32 else "unsigned char"
        self.constant = bool(constant)
        self.blocks = mask_blocks(self.n * self.k, self.H, self.W)

    def args(self, dev):
        return (self.src, self.dst, dev[0], np.int32(self.n * self.k), np.int32(self.k), np.int32(self.h),
                np.int32(self.w), np.int32(self.H), np.int32(self.W), np.int32(self.masks.fill),
                np.int32(self.constant))

    def result(self):
        return self.masks.like(self.out)


def _fused_masks_ok(masks, boxes, keypoints):
    """One launch for the stage: dense device masks (a ragged list of label maps goes through
    the warp ops), and device boxes / keypoints where given."""
    if masks is None or isinstance(masks.data, list) or isinstance(masks.data, np.ndarray):
        return False
    return all(t is None or t.device for t in (boxes, keypoints))


def map_stage(boxes, keypoints, masks, matrices, inv, in_sizes, out_sizes, constant, *, stream=None, keep=None,
              out_stream=None):
    """A policy stage's targets: boxes and keypoints mapped by ``matrices`` ((N, 3, 3) source
    -> destination), masks warped (nearest) by ``inv`` ((N, 9) float64 destination -> source,
    the fused kernel's own inverse) to ``out_sizes`` (one size for the batch) with the masks'
    fill (``constant``) or the nearest edge. On the GPU, with dense masks, all three go in ONE
    upload and ONE launch (gpuaug_target_all); otherwise :func:`map_targets` and the warp ops.
    Returns ``(boxes, keypoints, masks)``; the targets must be checked already. ``out_stream``:
    the stream whose pool the returned arrays come from (default: the launch's stream; a
    :class:`gpuaug._stream.Fork`'s main stream when this runs on its side stream)."""
    from gpuaug._stream import _NOTHING, on_stream

    out_sizes = np.asarray(out_sizes, np.int64)
    hw = _uniform_hw(out_sizes, len(out_sizes)) if _fused_masks_ok(masks, boxes, keypoints) else None
    if hw is None:
        return None
    bs = _box_setup(boxes, matrices, in_sizes, out_sizes, False, keep) if boxes is not None else None
    ps = _point_setup(keypoints, matrices, in_sizes, out_sizes, False) if keypoints is not None else None
    rb = rk = None
    with on_stream(stream):
        outs = _Outputs()  # every output of the launch: one allocation
        db = _DeviceBoxes(*bs, outs=outs) if bs is not None else None
        dp = _DevicePoints(*ps, outs=outs) if ps is not None else None
        with on_stream(out_stream) if out_stream is not None else _NOTHING:
            # the masks' output alone: boxes kept past the step should not hold the masks' memory
            dm = _DeviceMasks(masks, inv, hw, constant)
            _bind(outs, db, dp)
        _launch(db, dp, dm)
        if db is not None:
            rb = _follow(bs[0], db.result())
        if dp is not None:
            rk = dp.result()
        return rb, rk, dm.result()


def _bind(outs, *targets):
    """Allocate ``outs`` (booked by ``targets``) and hand each target its arrays."""
    outs.make()
    for t in targets:
        if t is not None:
            t.bind(outs)


def _launch(db, dp, dm=None):
    """Upload the rows and launch: gpuaug_target_both when there are boxes and keypoints;
    gpuaug_target_all with masks."""
    from gpuaug.kernels._cuda import get_function, stage

    if dm is not None:
        parts = [t for t in (db, dp, dm) if t is not None]
        dev = stage(*[a for t in parts for a in t.host])
        rows, k = {}, 0
        for t in parts:
            rows[id(t)] = dev[k:k + len(t.host)]
            k += len(t.host)
        dummy = dm.dst
        z = np.int32(0)
        bargs = db.args(rows[id(db)]) if db is not None else (dummy,) * 10 + (z, z, np.float64(0), z, z)
        pargs = dp.args(rows[id(dp)]) if dp is not None else (dummy,) * 6 + (z, z)
        tb = db.ctype if db is not None else "float"
        tp = dp.ctype if dp is not None else "float"
        bb = db.blocks if db is not None else 0
        pb = dp.blocks if dp is not None else 0
        fn = get_function("targets.cu", f"gpuaug_target_all<{tb}, {tp}, {dm.ctype}, {'true' if dm.persp else 'false'}>")
        blocks = bb + pb + dm.blocks
        if blocks:
            fn((blocks,), (_BLOCK,), bargs + pargs + dm.args(rows[id(dm)]) + (np.int32(bb), np.int32(pb)))
        return

    if db is not None and dp is not None:
        dev = stage(*(db.host + dp.host))
        nb = len(db.host)
        fn = get_function("targets.cu", f"gpuaug_target_both<{db.ctype}, {dp.ctype}>")
        blocks = db.blocks + dp.blocks
        if blocks:
            fn((blocks,), (_BLOCK,), db.args(dev[:nb]) + dp.args(dev[nb:]) + (np.int32(db.blocks),))
    else:
        one = db if db is not None else dp
        dev = stage(*one.host)
        name = "gpuaug_target_boxes" if db is not None else "gpuaug_target_points"
        if one.blocks:
            get_function("targets.cu", f"{name}<{one.ctype}>")((one.blocks,), (_BLOCK,), one.args(dev))
