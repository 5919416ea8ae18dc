"""Boxes and keypoints through per-sample 3x3 matrices: the NumPy twin and the CUDA launch.

Every function here takes ``matrices``: ``(N, 3, 3)`` float64 host arrays mapping source
pixel coordinates to destination ones with pixel centres at integers (the convention of
:mod:`gpuaug.geometry` and of every gpuaug warp), the input image sizes and the output
sizes (``(N, 2)`` (h, w)). The container's own convention (continuous box coordinates,
normalisation) is folded into one matrix per sample here, so the kernels only map points.
"""
from __future__ import annotations

import numpy as np

from gpuaug._util import cupy_module
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


def _box_setup(boxes, matrices, in_sizes, out_sizes, check, keep=None):
    """(boxes, mats (N, 9), lims (N, 2), fmt code, min_vis, drop, keep) after the checks."""
    from gpuaug.targets._types import as_boxes

    boxes = as_boxes(boxes)
    n = boxes.n
    mats3 = np.asarray(matrices, np.float64)
    if mats3.ndim == 2:
        mats3 = np.broadcast_to(mats3, (n, 3, 3))
    _check_n("boxes", n, mats3.shape[0])
    in_sizes = np.broadcast_to(np.asarray(in_sizes, np.float64), (n, 2))
    out_sizes = np.broadcast_to(np.asarray(out_sizes, np.float64), (n, 2))
    if check and boxes.check:
        check_boxes_values(boxes)
    mats = target_matrices(mats3, in_sizes, out_sizes, True, boxes.normalized)
    lims = np.ones((n, 2)) if boxes.normalized else out_sizes[:, ::-1].copy()
    return (boxes, mats, lims, FORMATS[boxes.format], boxes.min_visibility or 0.0, boxes.min_visibility is not None,
            _check_keep(keep, boxes))


class _DeviceBoxes:
    """The device side of one map_boxes call: inputs flattened (padded: as is; ragged: one
    concatenation), outputs allocated, the host rows to upload and the kernel arguments."""

    def __init__(self, boxes, mats, lims, fmt, mv, drop, keep=None):
        cp = cupy_module()
        n = boxes.n
        self.boxes, self.n = boxes, n
        if boxes.padded:
            data = cp.ascontiguousarray(boxes.data)
            m = data.shape[1]
            counts = boxes.counts if boxes.counts is not None else np.full(n, m, np.int32)
            self.starts = np.arange(n, dtype=np.int64) * m
            spans = np.full(n, m, np.int32)
        else:
            sizes = np.array([a.shape[0] for a in boxes.data], np.int64)
            self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            dt = np.result_type(*[a.dtype for a in boxes.data])
            data = (cp.concatenate([cp.asarray(a, dt) for a in boxes.data]) if sizes.sum()
                    else cp.zeros((0, 4), dt))
            counts = spans = sizes.astype(np.int32)
        self.data = data
        self.out = cp.empty_like(data)
        self.index = cp.empty(data.shape[:-1], cp.int32)
        if keep is None:
            self.keep = self.index  # not read (has_keep 0)
        elif boxes.padded:
            self.keep = cp.ascontiguousarray(cp.asarray(keep).astype(cp.uint8))
        else:
            self.keep = (cp.concatenate([cp.asarray(k).astype(cp.uint8) for k in keep]) if data.shape[0]
                         else cp.zeros(0, cp.uint8))
        self.count_out = cp.empty(n, cp.int32)
        self.host = [np.ascontiguousarray(mats), np.ascontiguousarray(lims, np.float64), self.starts, spans]
        self.dev_counts = None
        if isinstance(counts, np.ndarray):
            self.host.append(counts.astype(np.int32))
        else:
            self.dev_counts = cp.ascontiguousarray(counts, dtype=cp.int32)
        self.scalars = (np.int32(n), np.int32(fmt), np.float64(mv), np.int32(drop), np.int32(keep is not None))
        self.ctype = "float" if data.dtype == np.float32 else "double"
        self.blocks = (n * 32 + _BLOCK - 1) // _BLOCK

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
    """(keypoints, mats (N, 9), lims (N, 4)) after the checks."""
    from gpuaug.targets._types import as_keypoints

    kp = as_keypoints(keypoints)
    n = kp.n
    mats3 = np.asarray(matrices, np.float64)
    if mats3.ndim == 2:
        mats3 = np.broadcast_to(mats3, (n, 3, 3))
    _check_n("keypoints", n, mats3.shape[0])
    in_sizes = np.broadcast_to(np.asarray(in_sizes, np.float64), (n, 2))
    out_sizes = np.broadcast_to(np.asarray(out_sizes, np.float64), (n, 2))
    if check and kp.check:
        check_keypoints_values(kp)
    cont = kp.coords == "continuous"
    mats = target_matrices(mats3, in_sizes, out_sizes, cont, kp.normalized)
    # inside the output image: [0, W) continuous, [-0.5, W - 0.5) at pixel centres; normalised
    # coordinates divide both ends by W
    lo = 0.0 if cont else -0.5
    ow, oh = out_sizes[:, 1], out_sizes[:, 0]
    lims = np.stack([np.full(n, lo), ow + lo, np.full(n, lo), oh + lo], axis=1)
    if kp.normalized:
        lims /= np.stack([ow, ow, oh, oh], axis=1)
    return kp, mats, lims


class _DevicePoints:
    def __init__(self, kp, mats, lims):
        cp = cupy_module()
        self.kp = kp
        n, k = kp.data.shape[:2]
        self.data = cp.ascontiguousarray(kp.data)
        self.vis = cp.ascontiguousarray(kp.visibility).view(cp.uint8)
        self.out = cp.empty_like(self.data)
        self.vout = cp.empty((n, k), cp.bool_)
        self.host = [np.ascontiguousarray(mats), np.ascontiguousarray(lims)]
        self.n, self.k = n, k
        self.ctype = "float" if self.data.dtype == np.float32 else "double"
        self.blocks = (n * k + _BLOCK - 1) // _BLOCK

    def args(self, dev):
        cp = cupy_module()
        return (self.data, self.out, self.vis, self.vout.view(cp.uint8), dev[0], dev[1], np.int32(self.n),
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
        rb = _follow(bs[0], _map_boxes_host(*bs))
        bs = None
    if ps is not None and not ps[0].device:
        rk = ps[0].like(*_points_numpy(ps[0].data, ps[0].visibility, ps[1], ps[2]))
        ps = None
    if bs is None and ps is None:
        return rb, rk
    from gpuaug._stream import on_stream

    with on_stream(stream):
        db = _DeviceBoxes(*bs) if bs is not None else None
        dp = _DevicePoints(*ps) if ps is not None else None
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
        self.H, self.W = (int(v) for v in out_hw)
        self.src = d.view(cp.uint8) if d.dtype == np.bool_ else d
        self.out = cp.empty(d.shape[:-2] + (self.H, self.W), d.dtype)
        self.dst = self.out.view(cp.uint8) if d.dtype == np.bool_ else self.out
        inv = np.asarray(inv, np.float64).reshape(-1, 9)
        self.persp = not (np.all(inv[:, 6:8] == 0) and np.all(inv[:, 8] == 1))  # as warp_masks decides
        self.host = [np.ascontiguousarray(inv, np.float32)]
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


def map_stage(boxes, keypoints, masks, matrices, inv, in_sizes, out_sizes, constant, *, stream=None, keep=None):
    """A policy stage's targets: boxes and keypoints mapped by ``matrices`` ((N, 3, 3) source
    -> destination), masks warped (nearest) by ``inv`` ((N, 9) float64 destination -> source,
    the fused kernel's own inverse) to ``out_sizes`` (one size for the batch) with the masks'
    fill (``constant``) or the nearest edge. On the GPU, with dense masks, all three go in ONE
    upload and ONE launch (gpuaug_target_all); otherwise :func:`map_targets` and the warp ops.
    Returns ``(boxes, keypoints, masks)``; the targets must be checked already."""
    from gpuaug._stream import on_stream

    out_sizes = np.asarray(out_sizes, np.int64)
    if not _fused_masks_ok(masks, boxes, keypoints) or not bool((out_sizes == out_sizes[0]).all()):
        return None
    bs = _box_setup(boxes, matrices, in_sizes, out_sizes, False, keep) if boxes is not None else None
    ps = _point_setup(keypoints, matrices, in_sizes, out_sizes, False) if keypoints is not None else None
    rb = rk = None
    with on_stream(stream):
        db = _DeviceBoxes(*bs) if bs is not None else None
        dp = _DevicePoints(*ps) if ps is not None else None
        dm = _DeviceMasks(masks, inv, out_sizes[0], constant)
        _launch(db, dp, dm)
        if db is not None:
            rb = _follow(bs[0], db.result())
        if dp is not None:
            rk = dp.result()
        return rb, rk, dm.result()


def _launch(db, dp, dm=None):
    """Upload the rows and launch: gpuaug_target_both when there are boxes and keypoints;
    gpuaug_target_all with masks."""
    from gpuaug.kernels._cuda import get_function, upload

    if dm is not None:
        parts = [t for t in (db, dp, dm) if t is not None]
        dev = upload(*[a for t in parts for a in t.host])
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
        dev = upload(*(db.host + dp.host))
        nb = len(db.host)
        fn = get_function("targets.cu", f"gpuaug_target_both<{db.ctype}, {dp.ctype}>")
        blocks = db.blocks + dp.blocks
        if blocks:
            fn((blocks,), (_BLOCK,), db.args(dev[:nb]) + dp.args(dev[nb:]) + (np.int32(db.blocks),))
    else:
        one = db if db is not None else dp
        dev = upload(*one.host)
        name = "gpuaug_target_boxes" if db is not None else "gpuaug_target_points"
        if one.blocks:
            get_function("targets.cu", f"{name}<{one.ctype}>")((one.blocks,), (_BLOCK,), one.args(dev))
