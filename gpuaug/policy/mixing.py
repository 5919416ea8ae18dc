"""Batch mixing: MixUp, CutMix and Mosaic with per-sample partners and lambdas, soft labels out.

torchvision's v2 MixUp/CutMix draw one lambda per batch and pair each sample with its
neighbour (``roll(1)``); here every sample gets its own lambda, and the partners follow a
random cyclic order of the batch: ``order`` is a random permutation and the partner of
``order[t]`` is ``order[t + 1]`` (the last one's is ``order[0]``), so every sample is mixed
with another one (a uniformly random N-cycle; torchvision's ``roll(1)`` is a fixed one).
On the GPU one launch (``gpuaug_mix`` in kernels/mixing.cu) mixes the images and the soft
labels, the outputs taken in that cyclic order: a MixUp block does a chunk of ``seg`` (4)
consecutive outputs, keeping each partner's pixels in registers for the next output (whose
own they are), and the partner read at a block's end is read again soon after, from L2; MixUp
then moves about a copy's DRAM bytes instead of 1.5 times them.

- MixUp:  ``lam ~ Beta(alpha, alpha)``; ``x'[i] = lam[i] x[i] + (1 - lam[i]) x[p[i]]``
  (float32; uint8 rounds half up and saturates); ``y'[i] = lam[i] y[i] + (1 - lam[i]) y[p[i]]``.
- CutMix: ``lam ~ Beta(alpha, alpha)``; a box centred at a uniform point with sides
  ``sqrt(1 - lam)`` times the image's (torchvision's ``_get_params``: half-sides
  ``int(0.5 sqrt(1 - lam) W)``, clipped to the image), pasted from ``x[p[i]]``; the label
  weight is the kept area, ``lam' = 1 - box area / (H W)``.

(Beta(1, 1) is drawn as ``Generator.random``: the same distribution, a tenth of the host time.)

- Mosaic (detection): four samples of the batch in one canvas split at a random centre,
  with their boxes translated, clipped to their quadrant and concatenated (:class:`Mosaic`).

Labels: int class ids (N,) with ``num_classes``, or one-hot / soft labels (N, K); returned
as float32 (N, K), NumPy or CuPy like the labels.

    >>> import numpy as np, gpuaug
    >>> x = np.zeros((4, 8, 8, 3), np.uint8); x[1] = 255
    >>> y, soft = gpuaug.MixUp(alpha=0.4, num_classes=3, seed=0)(x, np.array([0, 1, 2, 0]))
    >>> soft.shape, bool(np.allclose(soft.sum(1), 1))
    ((4, 3), True)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuaug import random as R
from gpuaug._stream import on_stream
from gpuaug._util import cupy_module
from gpuaug.kernels import _cuda as _kc  # imports no CuPy; compiles nothing until a launch

__all__ = ["MixUp", "CutMix", "MixParams", "Mosaic", "MosaicParams"]


@dataclass
class MixParams:
    """One call's draws: ``partner`` (N,) int (a permutation), ``lam`` (N,) float64 label
    weights of the sample itself, ``boxes`` (N, 4) int (y0, x0, y1, x1) for CutMix, else None.

    ``order`` (N,) int, optional: the order in which the GPU kernel takes the outputs (a
    permutation; the draws give the cyclic order the partners follow, see the module
    docstring). It only schedules the work, the results do not depend on it; None takes
    0..N-1."""

    partner: np.ndarray
    lam: np.ndarray
    boxes: np.ndarray | None = None
    order: np.ndarray | None = None


def _check_alpha(alpha):
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise TypeError(f"alpha: got {alpha!r}; expected a number > 0") from None
    if not np.isfinite(a) or a <= 0:
        raise ValueError(f"alpha: got {alpha!r}; expected a finite number > 0")
    return a


_CUPY = [(None, None)]  # (cupy.ndarray, cupy) once seen: CuPy arrays skip cupy.asarray


def _as_array(a):
    """(array, module): NumPy and CuPy arrays as they are, other CUDA arrays (PyTorch, Numba,
    ...) as zero-copy CuPy views, anything else through numpy.asarray."""
    t = type(a)
    if t is np.ndarray:
        return a, np
    seen = _CUPY[0]
    if t is seen[0]:
        return a, seen[1]
    if hasattr(a, "__cuda_array_interface__"):
        import cupy

        _CUPY[0] = (cupy.ndarray, cupy)
        return (a if t is cupy.ndarray else cupy.asarray(a)), cupy
    return np.asarray(a), np


def _check_labels(lab, xp, n, num_classes):
    """'ids' for int class ids (N,) (with num_classes; their range checked on the host only),
    'soft' for (N, K) labels; else ValueError naming ``labels``."""
    want = (f"expected ({n},) int class ids in [0, num_classes) with num_classes given, "
            f"or ({n}, K) one-hot / soft labels")
    if lab.ndim == 1 and lab.shape[0] == n and lab.dtype.kind in "iu":
        if num_classes is None:
            raise ValueError(f"labels: got int class ids of shape {lab.shape} and num_classes=None; {want}")
        # The range is checked for host labels only: on device labels it would wait for the
        # device each call (out-of-range device ids give all-zero rows).
        if n and xp is np and (int(lab.min()) < 0 or int(lab.max()) >= num_classes):
            raise ValueError(f"labels: got class ids in [{int(lab.min())}, {int(lab.max())}]; "
                             f"expected ids in [0, {num_classes}) (num_classes={num_classes})")
        return "ids"
    if lab.ndim == 2 and lab.shape[0] == n and lab.dtype.kind in "fiub":
        return "soft"
    raise ValueError(f"labels: got {lab.dtype} array of shape {lab.shape}; {want}")


def _soft_labels(lab, xp, kind, num_classes):
    """(N, K) float32 labels from int ids (N,) + num_classes or from (N, K) labels."""
    if kind == "ids":
        return (lab[:, None] == xp.arange(num_classes)[None, :]).astype(xp.float32)
    return lab.astype(xp.float32)


#: dtype -> name (``dtype.name`` is computed in Python, a few microseconds a call).
_NAMES = {np.dtype(t): t for t in ("uint8", "float16", "float32", "int32", "int64")}


def _name(dt):
    return _NAMES.get(dt) or np.dtype(dt).name


def _shape(x, layout):
    if layout not in ("NHWC", "NCHW"):
        raise ValueError(f"layout: got {layout!r}; expected 'NHWC' or 'NCHW'")
    if getattr(x, "ndim", 0) != 4 or _name(x.dtype) not in ("uint8", "float16", "float32"):
        raise ValueError(f"x: got {getattr(x, 'dtype', type(x).__name__)} array of shape {getattr(x, 'shape', None)}; "
                         f"expected a 4-D {layout} batch of uint8, float16 or float32")
    n = x.shape[0]
    h, w, c = (x.shape[1], x.shape[2], x.shape[3]) if layout == "NHWC" else (x.shape[2], x.shape[3], x.shape[1])
    return n, h, w, c


def _cycle(rng, n):
    """(order, partner): a random permutation and the partners along it (see the module
    docstring), with two small array ops."""
    order = rng.permutation(n)
    partner = np.empty_like(order)
    partner[order[:-1]] = order[1:]
    if n:
        partner[order[-1]] = order[0]
    return order, partner


def _beta(rng, alpha, n):
    """n draws of Beta(alpha, alpha); Beta(1, 1) is the uniform distribution on [0, 1]."""
    return rng.random(n) if alpha == 1.0 else rng.beta(alpha, alpha, n)


def _checked(params, n, h, w, cut):
    """(partner int64, lam float32, boxes int64 or None, order or None) of replayed ``params``,
    checked (errors name the field and the accepted values)."""
    partner = np.asarray(params.partner, np.int64)
    if partner.shape != (n,) or (n and (partner.min() < 0 or partner.max() >= n)):
        raise ValueError(f"params.partner: got shape {partner.shape}; expected ({n},) ints in [0, {n})")
    lam = np.asarray(params.lam, np.float32)
    if lam.shape != (n,):
        raise ValueError(f"params.lam: got shape {lam.shape}; expected ({n},) label weights")
    boxes = None
    if cut:
        boxes = np.asarray(params.boxes if params.boxes is not None else np.zeros((n, 4)), np.int64)
        ok = boxes.shape == (n, 4)
        if ok and n:
            y0, x0, y1, x1 = boxes.T
            ok = bool(((0 <= y0) & (y0 <= y1) & (y1 <= h) & (0 <= x0) & (x0 <= x1) & (x1 <= w)).all())
        if not ok:
            raise ValueError(f"params.boxes: got {boxes.shape} array; expected ({n}, 4) ints (y0, x0, y1, x1) with "
                             f"0 <= y0 <= y1 <= {h} and 0 <= x0 <= x1 <= {w}")
    order = params.order
    if order is not None:
        order = np.asarray(order, np.int64)
        if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
            raise ValueError(f"params.order: got shape {order.shape}; expected None or a permutation of 0..{n - 1}")
    return partner, lam, boxes, order


def _records(partner, lam, boxes, order):
    """The (N, 8) int32 records gpuaug_mix reads (kernels/mixing.cu): partner, lam (float32
    bits), y0, x0, y1, x1, order, 0."""
    n = len(partner)
    rec = np.zeros((n, 8), np.int32)
    rec[:, 0] = partner
    rec[:, 1] = np.asarray(lam, np.float32).view(np.int32)
    if boxes is not None:
        rec[:, 2:6] = boxes
    rec[:, 6] = np.arange(n) if order is None else order
    return rec


#: dtype name -> element type of gpuaug_mix (MixUp takes uint8 and float32).
_CTYPE = {"uint8": "unsigned char", "float16": "unsigned short", "float32": "float"}
_LABEL_KIND = {"int32": 1, "int64": 2, "float32": 3}
#: label-mixing blocks at most (rows strided over them): the labels are small next to the
#: images and run beside them.
_LABEL_BLOCKS = 64
_CHUNK = 4 * 256  # units per image block: MX_UNROLL * MX_THREADS in kernels/mixing.cu


class _Mix:
    kind = ""
    #: outputs per image block, taken along the launch order (kernels/mixing.cu, "Grid")
    seg = 1

    def __init__(self, alpha=1.0, num_classes=None, *, seed=None):
        self.alpha = _check_alpha(alpha)
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer))
                                        or num_classes < 1):
            raise ValueError(f"num_classes: got {num_classes!r}; expected None or an int >= 1")
        self.num_classes = None if num_classes is None else int(num_classes)
        self._rng = R.generator(seed)
        self.last_params = None
        self._plans = {}
        self._rings = {}

    def __getstate__(self):  # picklable (DataLoader workers): the launch plans hold kernels, the rings CUDA memory
        state = dict(self.__dict__)
        state["_plans"] = {}
        state["_rings"] = {}
        return state

    def __setstate__(self, state):
        state.setdefault("_plans", {})
        state.setdefault("_rings", {})
        self.__dict__.update(state)

    def draw(self, n, size, seed=None):
        """Draw :class:`MixParams` for ``n`` images of ``size = (H, W)``."""
        rng = self._rng if seed is None else R.generator(seed)
        return self._draw(rng, int(n), int(size[0]), int(size[1]))

    def __call__(self, x, labels=None, seed=None, *, boxes=None, params=None, layout="NHWC", stream=None):
        """Mix the batch ``x`` ((N, H, W, C) / (N, C, H, W), uint8 / float16 / float32, NumPy or
        CuPy) and its ``labels``; returns ``(images, soft_labels)``. ``params`` replays a call
        (e.g. ``last_params``); the draws are kept in ``last_params``.

        CuPy images with CuPy labels: one launch for both (images and soft labels), after one
        staged upload of the draws; int32 / int64 ids and float32 soft labels are read as they
        are (other dtypes are converted first).

        Detection: with ``boxes`` (a :class:`gpuaug.targets.Boxes`, its ``labels`` the box
        classes) returns ``(images, soft_labels, boxes, box_weights)``; ``labels`` may then be
        None (``soft_labels`` is None). MixUp concatenates each sample's boxes with its
        partner's, weighted ``lam`` and ``1 - lam``; CutMix keeps the sample's own boxes that
        the pasted patch leaves visible (``boxes.min_visibility``, as the targets module) and
        adds the partner's boxes clipped to the patch, all weighted 1. Out: padded
        ``(N, 2 M, 4)`` with ``counts`` (kept rows first, own before partner's) and weights
        ``(N, 2 M)`` float32 (0 in the padding); ragged in, ragged out (lists).
        """
        x, xp = _as_array(x)
        n, h, w, c = _shape(x, layout)
        if labels is None and boxes is None:
            raise ValueError("labels: got None; expected class ids or soft labels (or boxes= for detection)")
        lab = lxp = lkind = None
        if labels is not None:
            lab, lxp = _as_array(labels)
            lkind = _check_labels(lab, lxp, n, self.num_classes)
        cut = self.kind == "cutmix"
        if params is None:
            params = self.draw(n, (h, w), seed)
            partner, order, bx = params.partner, params.order, params.boxes
            lam = params.lam.astype(np.float32)
        elif seed is not None:
            raise ValueError("seed: got a seed and params; pass one of them (params replays a call)")
        else:
            partner, lam, bx, order = _checked(params, n, h, w, cut)
        soft = None
        if xp is np:
            y = self._numpy(x, partner, lam, bx, layout)
        else:
            rec = _records(partner, lam, bx, order)
            dev = (lab, lkind) if lxp is not None and lxp is not np else None
            y, soft = self._cuda(x, rec, h, w, c, layout, stream, dev)
        if lab is not None and soft is None:  # host labels (or CUDA labels with NumPy images)
            soft = _soft_labels(lab, lxp, lkind, self.num_classes)
            if lxp is np:
                lam2 = lam[:, None]
                soft = lam2 * soft + (np.float32(1) - lam2) * soft[partner]
            else:
                with on_stream(stream):
                    lam_d, pidx = _kc.upload(lam[:, None], partner.astype(np.int32))
                    soft = lam_d * soft + (1 - lam_d) * soft[pidx]
        out_boxes = None
        if boxes is not None:
            out_boxes = self._boxes(boxes, n, h, w, partner, params, stream)
        self.last_params = params
        return (y, soft) if out_boxes is None else (y, soft) + out_boxes

    def _boxes(self, boxes, n, h, w, partner, params, stream):
        """(boxes, weights) of the mixed batch (see :meth:`__call__`)."""
        from gpuaug._stream import on_stream
        from gpuaug.targets._types import as_boxes, check_boxes_values

        boxes = as_boxes(boxes)
        if boxes.n != n:
            raise ValueError(f"boxes: holds {boxes.n} samples; the images are {n}; expected one entry per image")
        if boxes.check:
            check_boxes_values(boxes)
        xp = _xp_of(boxes)
        with on_stream(stream) if xp is not np else _NoCtx():
            data, counts, labels = _padded(boxes, xp)
            m = data.shape[1]
            valid = xp.arange(m)[None, :] < xp.asarray(counts)[:, None]
            pidx = xp.asarray(partner)
            lam = xp.asarray(np.asarray(params.lam, np.float32))
            if self.kind == "mixup":
                own_w = xp.broadcast_to(lam[:, None], (n, m))
                parts = [(data, valid, labels, own_w),
                         (data[pidx], valid[pidx], None if labels is None else labels[pidx], 1 - own_w)]
            else:
                parts = self._cut_parts(boxes, data, valid, labels, pidx, params, n, h, w, stream, xp)
            res, cnt, lab, wts = _merge_rows(parts, n, xp)
            result = boxes.like(res, counts=cnt)
            result.labels = lab
            if not boxes.padded:
                c = np.asarray(cnt.get() if xp is not np else cnt)
                result.data = [res[i, :c[i]] for i in range(n)]
                result.labels = None if lab is None else [lab[i, :c[i]] for i in range(n)]
                result.counts = None
                wts = [wts[i, :c[i]] for i in range(n)]
        return result, wts

    @staticmethod
    def _cut_parts(boxes, data, valid, labels, pidx, params, n, h, w, stream, xp):
        """CutMix: the sample's own boxes left visible around the patch, and the partner's
        clipped to the patch (through :func:`gpuaug.targets.map_boxes`)."""
        from gpuaug.targets import Boxes, map_boxes

        m = data.shape[1]
        cut = np.asarray(params.boxes, np.int64).reshape(n, 4)  # (y0, x0, y1, x1)
        scale = np.array([w, h, w, h], np.float64) if boxes.normalized else np.ones(4)
        x1, y1, x2, y2 = _corners(data, boxes.format, xp, xp.asarray(scale.astype(np.float32)))
        cy0, cx0, cy1, cx1 = (xp.asarray(cut[:, k:k + 1].astype(np.float32)) for k in range(4))
        iw = xp.clip(xp.minimum(x2, cx1) - xp.maximum(x1, cx0), 0, None)
        ih = xp.clip(xp.minimum(y2, cy1) - xp.maximum(y1, cy0), 0, None)
        area = (x2 - x1) * (y2 - y1)
        vis = area - iw * ih
        mv = boxes.min_visibility
        own_keep = valid if mv is None else valid & (vis > 0) & (vis >= mv * area)
        mats = np.tile(np.eye(3), (n, 1, 1))
        mats[:, 0, 2], mats[:, 1, 2] = -cut[:, 1], -cut[:, 0]  # the partner's boxes in the patch's coordinates
        in_sizes = np.tile([[h, w]], (n, 1))
        patch = np.stack([cut[:, 2] - cut[:, 0], cut[:, 3] - cut[:, 1]], 1)
        pdata = data[pidx]
        if boxes.normalized:
            pdata = pdata * xp.asarray(scale.astype(pdata.dtype))
        quad = Boxes(pdata, format=boxes.format, counts=valid.sum(1).astype(xp.int32)[pidx],
                     min_visibility=mv, check=False, labels=None if labels is None else labels[pidx])
        mapped = map_boxes(quad, mats, in_sizes, patch, stream=stream)
        shift = np.zeros((n, 4))
        shift[:, 0], shift[:, 1] = cut[:, 1], cut[:, 0]
        if boxes.format == "xyxy":
            shift[:, 2], shift[:, 3] = cut[:, 1], cut[:, 0]
        pres = mapped.data + xp.asarray(shift.astype(mapped.data.dtype))[:, None, :]
        if boxes.normalized:
            pres = pres / xp.asarray(scale.astype(pres.dtype))
        pvalid = xp.arange(m)[None, :] < xp.asarray(mapped.counts)[:, None]
        ones = xp.ones((n, m), xp.float32)
        return [(data, own_keep, labels, ones), (pres.astype(data.dtype), pvalid, mapped.labels, ones)]

    def _cuda(self, x, rec, h, w, c, layout, stream, labels):
        """Images (and, with CUDA ``labels`` = (array, 'ids' | 'soft'), soft labels) in one
        launch of ``gpuaug_mix`` after one staged upload of ``rec`` (the records of
        kernels/mixing.cu). Returns (images, soft labels or None)."""
        cp = cupy_module()
        n = x.shape[0]
        name = _name(x.dtype)
        if self.kind == "mixup" and name == "float16":
            raise ValueError("x: float16 MixUp runs on NumPy input only for now; got a CUDA float16 batch "
                             "(use uint8 or float32)")
        if h * w * c >= 2 ** 31 - 2 * _CHUNK * 16:
            raise ValueError(f"x: got samples of {h} x {w} x {c} elements; expected fewer than 2**31 per sample")
        dev = x.device.id
        ctx = cp.cuda.Device(dev) if dev != cp.cuda.runtime.getDevice() else _NoCtx()
        with ctx, on_stream(stream):
            if not x.flags.c_contiguous:
                x = cp.ascontiguousarray(x)
            out = cp.empty_like(x)
            lab = soft = None
            lkind, k = 0, 0
            if labels is not None:
                lab, what = labels
                if lab.device.id != dev:
                    raise ValueError(f"labels: on device {lab.device.id}; the images are on device {dev}")
                lname = _name(lab.dtype)
                if what == "ids":
                    if lname not in ("int32", "int64") or not lab.flags.c_contiguous:
                        lab = cp.ascontiguousarray(lab, dtype=cp.int32 if lname == "int32" else cp.int64)
                    k = self.num_classes
                else:
                    if lname != "float32" or not lab.flags.c_contiguous:
                        lab = cp.ascontiguousarray(lab, dtype=cp.float32)
                    k = lab.shape[1]
                lkind = _LABEL_KIND[_name(lab.dtype)]
                soft = cp.empty((n, k), cp.float32)
            if n == 0:
                return out, soft
            fn, grid, geo = self._plan(dev, name, n, h, w, c, layout, x.data.ptr % 16 == 0, lkind)
            ring = self._ring(dev, rec.nbytes)
            cur = cp.cuda.get_current_stream() if ring is not None else None
            got = ring.send(rec, cur) if ring is not None else None
            if got is None:
                (p,) = _kc.upload(rec)
            else:
                slot, p = got
            try:
                fn(grid, (256,), (x, out, p) + geo + (lab, soft, np.int32(k), np.int32(lkind)))
            finally:
                if got is not None:
                    ring.sent(slot, cur)
            return out, soft

    #: records of up to this many bytes go ahead on a side stream (kernels/_cuda.SideRing):
    #: 512 samples of 32 bytes
    RING_BYTES = 16 << 10

    def _ring(self, dev, nbytes):
        """This mixer's :class:`~gpuaug.kernels._cuda.SideRing` on device ``dev``, or None
        (records larger than ``RING_BYTES``: the staged upload)."""
        if nbytes > self.RING_BYTES:
            return None
        ring = self._rings.get(dev)
        if ring is None:
            ring = self._rings[dev] = _kc.side_ring(self.RING_BYTES)
        return ring

    def _plan(self, dev, name, n, h, w, c, layout, aligned, lkind):
        """(kernel, grid, scalar arguments) of one batch geometry, memoised on the instance."""
        seg = max(1, int(self.seg))
        key = (dev, name, n, h, w, c, layout, aligned, bool(lkind), seg)
        got = self._plans.get(key)
        if got is not None:
            return got
        item = np.dtype(name).itemsize
        ve = 16 // item
        row = w * (c if layout == "NHWC" else 1)  # elements per image row
        e = h * w * c
        if self.kind == "mixup":
            vec = aligned and (e * item) % 16 == 0 and name in ("uint8", "float32")
        else:
            vec = aligned and (row * item) % 16 == 0
        units = e // ve if vec else e
        bps = max(1, -(-units // _CHUNK))
        lb = min(n, _LABEL_BLOCKS) if lkind else 0
        blocks = lb + -(-n // seg) * bps
        if blocks >= 2 ** 31:
            raise ValueError(f"x: got {n} samples of {h} x {w} x {c}; expected fewer than {(2 ** 31 - lb) // bps} "
                             "samples of that size per call (split the batch)")
        fn = _kc.get_function("mixing.cu", f"gpuaug_mix<{_CTYPE[name]}, {int(self.kind == 'cutmix')}, {int(vec)}>")
        geo = (np.int32(n), np.int32(h), np.int32(w), np.int32(c), np.int32(layout == "NCHW"), np.int32(bps),
               np.int32(seg), np.int32(lb))
        got = (fn, (blocks,), geo)
        if len(self._plans) > 64:
            self._plans.clear()
        self._plans[key] = got
        return got


class MixUp(_Mix):
    """MixUp (Zhang et al. 2018) with a lambda and a partner per sample.

    Args:
        alpha: the Beta(alpha, alpha) parameter, > 0.
        num_classes: the number of classes when labels are int class ids.
        seed: seeds the generator.

    Call: ``mix(x, labels, seed=None, *, params=None, layout="NHWC", stream=None)`` ->
    ``(images, soft_labels)``. On the GPU: one staged upload of the draws and one launch
    (images and soft labels).

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.stack([np.zeros((2, 2, 3), np.uint8), np.full((2, 2, 3), 100, np.uint8)])
        >>> m = gpuaug.MixUp(1.0, num_classes=2, seed=0)
        >>> y, s = m(x, np.array([0, 1]))
        >>> p = m.last_params; lam = np.float32(p.lam[0])
        >>> int(y[0, 0, 0, 0]) == int(np.floor(lam * 0 + (1 - lam) * x[p.partner[0], 0, 0, 0] + 0.5))
        True
    """

    kind = "mixup"
    seg = 1  # H100, 256x224x224x3: kernel 1.14x a copy at seg 1, 1.23x at 2, 1.38x at 4 (uint8); 1.05x vs 1.18x float32

    def _draw(self, rng, n, h, w):
        order, partner = _cycle(rng, n)
        return MixParams(partner, _beta(rng, self.alpha, n), order=order)

    @staticmethod
    def _numpy(x, partner, lam, boxes, layout):
        """The NumPy twin of gpuaug_mix<T, 0, *> (``lam`` float32: the same roundings)."""
        lam = lam[:, None, None, None]
        v = lam * x.astype(np.float32) + (np.float32(1) - lam) * x[partner].astype(np.float32)
        if x.dtype == np.uint8:
            return np.clip(np.floor(v + np.float32(0.5)), 0, 255).astype(np.uint8)
        return v.astype(x.dtype)


class CutMix(_Mix):
    """CutMix (Yun et al. 2019) with a lambda, a box and a partner per sample.

    Args:
        alpha: the Beta(alpha, alpha) parameter, > 0.
        num_classes: the number of classes when labels are int class ids.
        seed: seeds the generator.

    The label weight ``last_params.lam`` is the kept area fraction, as torchvision's. On the
    GPU: one staged upload of the draws and one launch (images and soft labels); each pixel
    is read from one source.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.stack([np.zeros((8, 8, 1), np.uint8), np.ones((8, 8, 1), np.uint8)])
        >>> y, s = gpuaug.CutMix(1.0, num_classes=2, seed=3)(x, np.array([0, 1]))
        >>> bool(np.allclose(s[:, 1], np.asarray(y, float).mean(axis=(1, 2, 3))))
        True
    """

    kind = "cutmix"

    def _draw(self, rng, n, h, w):
        order, partner = _cycle(rng, n)
        lam = _beta(rng, self.alpha, n)
        size = np.array([[h], [w]])
        # (ry, rx): torch.randint(H), randint(W) (rx drawn first); half-sides (rh, rw)
        centre = (rng.random((2, n))[::-1] * size).astype(np.int64)
        half = (0.5 * np.sqrt(1.0 - lam) * size).astype(np.int64)
        box = np.empty((4, n), np.int64)  # rows y0, x0, y1, x1: few small array ops (host time)
        np.maximum(np.subtract(centre, half, out=box[:2]), 0, out=box[:2])
        np.minimum(np.add(centre, half, out=box[2:]), size, out=box[2:])
        side = box[2:] - box[:2]
        lam_adj = 1.0 - side[0] * side[1] / float(h * w)
        return MixParams(partner, lam_adj, box.T, order)

    @staticmethod
    def _numpy(x, partner, lam, boxes, layout):
        """The NumPy twin of gpuaug_mix<T, 1, *>."""
        y = x.copy()
        for i, (y0, x0, y1, x1) in enumerate(boxes):
            if layout == "NHWC":
                y[i, y0:y1, x0:x1] = x[partner[i], y0:y1, x0:x1]
            else:
                y[i, :, y0:y1, x0:x1] = x[partner[i], :, y0:y1, x0:x1]
        return y

# -- Mosaic (detection) ----------------------------------------------------------------------

@dataclass
class MosaicParams:
    """One Mosaic call's draws: ``sources`` (N, 4) int, the samples shown in the top-left,
    top-right, bottom-left and bottom-right quadrants of each output; ``centers`` (N, 2) int,
    the split point (cy, cx) on the output canvas."""

    sources: np.ndarray
    centers: np.ndarray


def _fill_bits(fill, dtype):
    """The fill value's bits in the element type (what gpuaug_mosaic takes), checked."""
    name = np.dtype(dtype).name
    if name == "uint8":
        if not 0 <= fill <= 255:
            raise ValueError(f"fill: got {fill!r}; expected a number in [0, 255] for uint8 images")
        return int(np.uint8(np.floor(fill + 0.5)))
    if name == "float16":
        return int(np.array(fill, np.float16).view(np.uint16))
    return int(np.array(fill, np.float32).view(np.uint32))


def _tile_offsets(centers, h, w):
    """(N, 4, 2) (oy, ox) of the four quadrants' source images on the canvas."""
    cy, cx = centers[:, 0:1], centers[:, 1:2]
    oy = np.concatenate([cy - h, cy - h, cy, cy], axis=1)
    ox = np.concatenate([cx - w, cx, cx - w, cx], axis=1)
    return np.stack([oy, ox], axis=2)


def _tile_regions(centers, oh, ow):
    """(N, 4, 4) (y0, x0, y1, x1) of the four quadrants on the canvas."""
    cy, cx = centers[:, 0], centers[:, 1]
    z, fh, fw = np.zeros_like(cy), np.full_like(cy, oh), np.full_like(cx, ow)
    return np.stack([np.stack([z, z, cy, cx], 1), np.stack([z, cx, cy, fw], 1),
                     np.stack([cy, z, fh, cx], 1), np.stack([cy, cx, fh, fw], 1)], axis=1)


class Mosaic:
    """Mosaic for detection (YOLOv4 / ultralytics): four images of the batch in one, with their
    boxes.

    Each output sample ``i`` is a canvas of ``size`` (default: the input's H x W) split at a
    centre ``(cy, cx)`` drawn uniformly in ``center`` (fractions of the canvas) into four
    quadrants; the top-left quadrant shows sample ``i`` itself, the others three samples drawn
    uniformly from the batch. Each source keeps its scale and is placed so that its corner
    touches the centre (top-left: its bottom-right corner, and so on: ultralytics'
    ``load_mosaic`` placement); canvas pixels no source covers get ``fill``. With
    ``size=(2H, 2W)`` and ``center=(0.25, 0.75)`` this is ultralytics' 2s x 2s mosaic (follow it
    with a random affine / crop, e.g. :func:`gpuaug.targets.warp_affine`).

    Boxes (:class:`gpuaug.targets.Boxes`, any format, pixel or normalised, padded or ragged,
    NumPy or CuPy) move with their images and are clipped to their quadrant; a box is dropped
    as the targets module drops boxes (``boxes.min_visibility``: less than that fraction of
    its area left, or no area; None: only clipped). Labels (``boxes.labels``) follow.

    One launch for the images (``gpuaug_mosaic`` in kernels/mixing.cu, a block per output row:
    two shifted row copies; NumPy twin for NumPy input); the boxes go through :func:`gpuaug.targets.map_boxes` (one launch on the GPU) and a
    few small array ops.

    Args:
        size: (OH, OW) of the output canvas, or None for the input's size.
        center: (low, high), the range of the centre as fractions of the canvas, 0 <= low <= high <= 1.
        fill: the value of uncovered pixels (uint8: in [0, 255]).
        seed: seeds the generator.

    Call: ``mosaic(x, boxes=None, seed=None, *, params=None, layout="NHWC", stream=None)`` ->
    ``(images, boxes)`` (``boxes`` None when none were given). Padded boxes come back padded,
    ``(N, 4 M, 4)`` with ``counts``; ragged ones as a list (on the GPU that reads the counts
    back: one synchronisation).

    Example::

        >>> import numpy as np, gpuaug
        >>> from gpuaug.targets import Boxes
        >>> x = np.zeros((4, 16, 16, 3), np.uint8)
        >>> b = Boxes(np.tile(np.array([[[2.0, 2.0, 14.0, 14.0]]]), (4, 1, 1)), labels=np.arange(4)[:, None])
        >>> y, yb = gpuaug.Mosaic(size=(32, 32), seed=0)(x, b)
        >>> y.shape, yb.data.shape, int(yb.counts[0]) <= 4
        ((4, 32, 32, 3), (4, 4, 4), True)
    """

    def __init__(self, size=None, center=(0.25, 0.75), fill=114, *, seed=None):
        if size is not None:
            try:
                oh, ow = (int(v) for v in size)
                ok = oh >= 1 and ow >= 1 and all(float(v) == int(v) for v in size)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"size: got {size!r}; expected None or (OH, OW), two ints >= 1")
            size = (oh, ow)
        self.size = size
        try:
            lo, hi = (float(v) for v in center)
        except (TypeError, ValueError):
            lo = hi = float("nan")
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"center: got {center!r}; expected (low, high) with 0 <= low <= high <= 1")
        self.center = (lo, hi)
        try:
            self.fill = float(fill)
        except (TypeError, ValueError):
            raise TypeError(f"fill: got {fill!r}; expected a number") from None
        if not np.isfinite(self.fill):
            raise ValueError(f"fill: got {fill!r}; expected a finite number")
        self._rng = R.generator(seed)
        self.last_params = None

    def out_size(self, in_size):
        """(OH, OW) for images of ``in_size = (H, W)``."""
        return self.size if self.size is not None else (int(in_size[0]), int(in_size[1]))

    def draw(self, n, size, seed=None):
        """Draw :class:`MosaicParams` for ``n`` images of ``size = (H, W)``."""
        rng = self._rng if seed is None else R.generator(seed)
        n = int(n)
        oh, ow = self.out_size(size)
        lo, hi = self.center
        sources = np.concatenate([np.arange(n)[:, None], rng.integers(0, max(n, 1), (n, 3))], axis=1)
        cy = np.floor(rng.uniform(lo * oh, hi * oh, n)).astype(np.int64)
        cx = np.floor(rng.uniform(lo * ow, hi * ow, n)).astype(np.int64)
        return MosaicParams(sources, np.stack([np.clip(cy, 0, oh), np.clip(cx, 0, ow)], 1))

    def __call__(self, x, boxes=None, seed=None, *, params=None, layout="NHWC", stream=None):
        """Mosaic the batch ``x`` ((N, H, W, C) / (N, C, H, W), uint8 / float16 / float32, NumPy
        or CuPy) and its ``boxes``; returns ``(images, boxes)``. ``params`` replays a call."""
        x, _ = _as_array(x)
        n, h, w, c = _shape(x, layout)
        oh, ow = self.out_size((h, w))
        bits = _fill_bits(self.fill, x.dtype)
        if params is None:
            params = self.draw(n, (h, w), seed)
        elif seed is not None:
            raise ValueError("seed: got a seed and params; pass one of them (params replays a call)")
        src = np.asarray(params.sources, np.int64)
        cen = np.asarray(params.centers, np.int64)
        if src.shape != (n, 4) or (n and (src.min() < 0 or src.max() >= n)):
            raise ValueError(f"params.sources: got shape {src.shape}; expected ({n}, 4) ints in [0, {n})")
        if cen.shape != (n, 2) or (n and (cen[:, 0].min() < 0 or cen[:, 0].max() > oh or cen[:, 1].min() < 0
                                          or cen[:, 1].max() > ow)):
            raise ValueError(f"params.centers: got shape {cen.shape}; expected ({n}, 2) ints (cy, cx) in "
                             f"[0, {oh}] x [0, {ow}]")
        out_boxes = None
        if boxes is not None:
            from gpuaug._stream import on_stream

            with on_stream(stream) if not isinstance(x, np.ndarray) else _NoCtx():
                out_boxes = self._boxes(boxes, n, h, w, oh, ow, src, cen, stream, x)
        if isinstance(x, np.ndarray):
            y = self._numpy(x, src, cen, h, w, oh, ow, layout, bits)
        else:
            y = self._cuda(x, src, cen, h, w, c, oh, ow, layout, bits, stream)
        self.last_params = params
        return y, out_boxes

    def _numpy(self, x, src, cen, h, w, oh, ow, layout, bits):
        n = x.shape[0]
        shape = (n, oh, ow, x.shape[3]) if layout == "NHWC" else (n, x.shape[1], oh, ow)
        fill = np.array(bits, {1: np.uint8, 2: np.uint16, 4: np.uint32}[x.itemsize]).view(x.dtype)
        y = np.full(shape, fill, x.dtype)
        xs = x if layout == "NHWC" else x.transpose(0, 2, 3, 1)
        ys = y if layout == "NHWC" else y.transpose(0, 2, 3, 1)
        offs, regs = _tile_offsets(cen, h, w), _tile_regions(cen, oh, ow)
        for i in range(n):
            for q in range(4):
                oy, ox = offs[i, q]
                ry0, rx0, ry1, rx1 = regs[i, q]
                y0, y1 = max(ry0, oy), min(ry1, oy + h)
                x0, x1 = max(rx0, ox), min(rx1, ox + w)
                if y0 < y1 and x0 < x1:
                    ys[i, y0:y1, x0:x1] = xs[src[i, q], y0 - oy:y1 - oy, x0 - ox:x1 - ox]
        return y

    def _cuda(self, x, src, cen, h, w, c, oh, ow, layout, bits, stream):
        from gpuaug._stream import on_stream
        from gpuaug._util import cupy_module
        from gpuaug.kernels._cuda import get_function, upload

        cp = cupy_module()
        n = x.shape[0]
        if n > 65535:  # blockIdx.y walks the samples
            raise ValueError(f"x: got a batch of {n} images; expected at most 65535 per call (split the batch)")
        with cp.cuda.Device(x.device.id), on_stream(stream):
            x = cp.ascontiguousarray(x)
            shape = (n, oh, ow, c) if layout == "NHWC" else (n, c, oh, ow)
            out = cp.empty(shape, x.dtype)
            if n == 0:
                return out
            rows = np.zeros((n, 6), np.int32)
            rows[:, :4], rows[:, 4:] = src, cen
            (p,) = upload(rows)
            t = {"uint8": "unsigned char", "float16": "unsigned short", "float32": "float"}[np.dtype(x.dtype).name]
            get_function("mixing.cu", f"gpuaug_mosaic<{t}>")(
                (oh * (c if layout == "NCHW" else 1), n), (256,), (x, out, np.int32(h), np.int32(w), np.int32(c), np.int32(oh), np.int32(ow),
                                             np.int32(layout == "NCHW"), p, np.int32(n), np.uint32(bits)))
            return out

    @staticmethod
    def _boxes(boxes, n, h, w, oh, ow, src, cen, stream, x):
        """The boxes of the four sources of every output, translated and clipped to their
        quadrant, concatenated per output (kept rows first)."""
        from gpuaug.targets import Boxes, map_boxes
        from gpuaug.targets._types import as_boxes

        boxes = as_boxes(boxes)
        if boxes.n != n:
            raise ValueError(f"boxes: holds {boxes.n} samples; the images are {n}; expected one entry per image")
        ragged = not boxes.padded
        xp = _xp_of(boxes)
        data, counts, labels = _padded(boxes, xp)
        m = data.shape[1]
        scale = xp.asarray(np.array([w, h, w, h], data.dtype))
        if boxes.normalized:
            data = data * scale
        flat = src.reshape(-1)  # (4N,): sample i's quadrant q is row 4 i + q
        sel = xp.asarray(flat)
        offs = _tile_offsets(cen, h, w).reshape(-1, 2)
        regs = _tile_regions(cen, oh, ow).reshape(-1, 4)
        mats = np.tile(np.eye(3), (4 * n, 1, 1))
        mats[:, 0, 2] = offs[:, 1] - regs[:, 1]  # source -> the quadrant's own coordinates
        mats[:, 1, 2] = offs[:, 0] - regs[:, 0]
        quad = Boxes(data[sel], format=boxes.format, counts=counts[sel], min_visibility=boxes.min_visibility,
                     check=boxes.check, labels=None if labels is None else labels[sel])
        qh, qw = regs[:, 2] - regs[:, 0], regs[:, 3] - regs[:, 1]
        mapped = map_boxes(quad, mats, np.tile([[h, w]], (4 * n, 1)), np.stack([qh, qw], 1), stream=stream)
        shift = np.zeros((4 * n, 4), np.float64)
        shift[:, 0], shift[:, 1] = regs[:, 1], regs[:, 0]
        if boxes.format == "xyxy":
            shift[:, 2], shift[:, 3] = regs[:, 1], regs[:, 0]
        res = mapped.data + xp.asarray(shift.astype(mapped.data.dtype))[:, None, :]
        if boxes.normalized:
            res = res / xp.asarray(np.array([ow, oh, ow, oh], res.dtype))
        # concatenate the four quadrants of each output: row j of quadrant q goes to
        # sum(counts of q' < q) + j, rows past a quadrant's count to a discarded column
        cnt = xp.asarray(mapped.counts).reshape(n, 4).astype(xp.int64)
        start = xp.cumsum(cnt, axis=1) - cnt
        j = xp.arange(m)[None, None, :]
        dest = xp.where(j < cnt[:, :, None], start[:, :, None] + j, 4 * m).reshape(n, 4 * m)
        rows = xp.repeat(xp.arange(n)[:, None], 4 * m, axis=1)
        out = xp.zeros((n, 4 * m + 1, 4), res.dtype)
        out[rows, dest] = res.reshape(n, 4 * m, 4)
        out_counts = cnt.sum(axis=1).astype(xp.int32)
        out_labels = None
        if mapped.labels is not None:
            lab = xp.asarray(mapped.labels)
            ol = xp.full((n, 4 * m + 1), -1, lab.dtype)
            ol[rows, dest] = lab.reshape(n, 4 * m)
            out_labels = ol[:, :4 * m]
        result = Boxes.__new__(Boxes)
        result.data, result.format, result.normalized = out[:, :4 * m], boxes.format, boxes.normalized
        result.counts, result.min_visibility, result.index = out_counts, boxes.min_visibility, None
        result.check, result.labels = boxes.check, out_labels
        if ragged:
            c = np.asarray(out_counts.get() if xp is not np else out_counts)
            result.data = [result.data[i, :c[i]] for i in range(n)]
            result.labels = None if out_labels is None else [out_labels[i, :c[i]] for i in range(n)]
            result.counts = None
        return result


def _xp_of(boxes):
    if not boxes.device:
        return np
    from gpuaug._util import cupy_module

    return cupy_module()


def _padded(boxes, xp):
    """(data (N, M, 4), counts (N,) int, labels (N, M) or None) of padded or ragged boxes."""
    n = boxes.n
    if boxes.padded:
        d = boxes.data
        counts = boxes.counts if boxes.counts is not None else xp.full(n, d.shape[1], xp.int32)
        return d, xp.asarray(counts), boxes.labels
    sizes = [a.shape[0] for a in boxes.data]
    m = max(sizes + [0])
    dt = boxes.data[0].dtype if n else np.float32
    d = xp.zeros((n, m, 4), dt)
    lab = None
    if boxes.labels is not None:
        lab = xp.full((n, m), -1, boxes.labels[0].dtype if n else np.int64)
    for i, a in enumerate(boxes.data):
        d[i, :sizes[i]] = a
        if lab is not None:
            lab[i, :sizes[i]] = boxes.labels[i]
    return d, xp.asarray(np.array(sizes, np.int32)), lab


class _NoCtx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _corners(data, fmt, xp, scale):
    """(x1, y1, x2, y2), each (N, M), in pixels, of boxes ``data`` (N, M, 4) in ``fmt``
    (``scale``: (4,) multiplies normalised coordinates into pixels, else ones)."""
    d = data * scale
    a, b, c, e = d[..., 0], d[..., 1], d[..., 2], d[..., 3]
    if fmt == "xywh":
        return a, b, a + c, b + e
    if fmt == "cxcywh":
        return a - 0.5 * c, b - 0.5 * e, a + 0.5 * c, b + 0.5 * e
    return a, b, c, e


def _merge_rows(parts, n, xp):
    """Concatenate per-sample rows of several parts, kept rows first in part order.

    ``parts``: (data (N, M_k, 4), keep (N, M_k) bool, labels (N, M_k) or None, weights (N, M_k)).
    Returns (data (N, M, 4), counts (N,) int32, labels (N, M) (-1 in the padding) or None,
    weights (N, M) float32 (0 in the padding)) with M = sum M_k. Scatter through a discarded
    column, so nothing waits for the device."""
    data = xp.concatenate([p[0] for p in parts], axis=1)
    keep = xp.concatenate([p[1] for p in parts], axis=1)
    wts = xp.concatenate([xp.asarray(p[3], xp.float32) for p in parts], axis=1)
    m = data.shape[1]
    dest = xp.where(keep, xp.cumsum(keep, axis=1) - 1, m)
    rows = xp.repeat(xp.arange(n)[:, None], m, axis=1)
    out = xp.zeros((n, m + 1, 4), data.dtype)
    out[rows, dest] = data
    ow = xp.zeros((n, m + 1), xp.float32)
    ow[rows, dest] = wts
    lab = None
    if all(p[2] is not None for p in parts):
        labels = xp.concatenate([p[2] for p in parts], axis=1)
        ol = xp.full((n, m + 1), -1, labels.dtype)
        ol[rows, dest] = labels
        lab = ol[:, :m]
    return out[:, :m], keep.sum(axis=1).astype(xp.int32), lab, ow[:, :m]
