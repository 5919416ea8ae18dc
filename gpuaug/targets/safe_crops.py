"""Crops that look at the boxes: SSD's ``RandomIoUCrop`` and a bbox-safe random resized crop.

Two layers, as the other random transforms:

- functions that choose each sample's crop window from its boxes:
  :func:`iou_crop_windows` (torchvision v2's RandomIoUCrop rules, bounded) and
  :func:`bbox_safe_windows` (Albumentations' RandomSizedBBoxSafeCrop rule). Host boxes run a
  vectorised NumPy twin; CUDA boxes run one launch (``gpuaug_iou_crop_select``, a warp per
  sample trying its candidates until one is taken) and read the windows back;
- transforms for :class:`gpuaug.Compose`: :class:`RandomIoUCrop` and
  :class:`RandomSizedBBoxSafeCrop`. Each crops its window and resizes it to ``size`` in the
  same fused resampling as the policy's other geometry. The window depends on the boxes as they
  are at that point of the policy, so the policy needs ``boxes=`` and these transforms are
  resolved after the draw (:meth:`gpuaug.targets._policy.PolicyTargets.resolve`); the chosen
  windows are kept in the parameters, so ``last_params`` replays them.

The random numbers: a 64-bit key per sample from :func:`gpuaug.random.seed64`'s generator
(the policy's), expanded by a counter-based hash (splitmix64's finaliser) identically on the
host and on the device, so both paths choose the same windows.

Example::

    >>> import numpy as np
    >>> from gpuaug.targets import Boxes
    >>> from gpuaug.targets.safe_crops import iou_crop_windows
    >>> b = Boxes(np.array([[[10.0, 10.0, 30.0, 40.0]]] * 2))
    >>> win, within = iou_crop_windows(b, np.array([[64, 64]] * 2), keys=[1, 2])
    >>> win.shape, within.shape
    ((2, 4), (2, 1))
"""
from __future__ import annotations

import numpy as np

from gpuaug import random as R
from gpuaug._util import cupy_module
from gpuaug.geometry import box_matrices
from gpuaug.policy import _args as A
from gpuaug.policy.transforms import Geometric
from gpuaug.targets._types import Boxes, _xp, as_boxes

__all__ = ["iou_crop_windows", "bbox_safe_windows", "xyxy_pixels", "RandomIoUCrop", "RandomSizedBBoxSafeCrop"]

_OPTIONS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_TWO_M32 = 2.0 ** -32
_BLOCK = 256


def mix64(key, c):
    """The kernels' counter-based hash (gpuaug_mix64 in kernels/targets.cu): uint64 arrays."""
    with np.errstate(over="ignore"):
        z = np.asarray(key, np.uint64) + (np.asarray(c, np.uint64) + np.uint64(1)) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


# ------------------------------------------------------------------------------ boxes as xyxy pixels
def xyxy_pixels(boxes: Boxes, sizes):
    """The valid boxes of each sample as xyxy pixel coordinates in float64, padded:
    ``(data (N, M, 4), counts (N,) int32)`` on the boxes' side (NumPy or CuPy); a ragged list
    is padded to its longest sample. ``sizes``: (N, 2) (h, w) of the images the boxes are on."""
    boxes = as_boxes(boxes)
    xp = cupy_module() if boxes.device else np
    n = boxes.n
    if boxes.padded:
        d = xp.asarray(boxes.data, xp.float64)
        m = d.shape[1]
        counts = (np.full(n, m, np.int32) if boxes.counts is None else boxes.counts)
        counts = xp.asarray(counts).astype(xp.int32)
    else:
        lens = [int(a.shape[0]) for a in boxes.data]
        m = max(lens, default=0)
        d = xp.zeros((n, m, 4), xp.float64)
        for i, a in enumerate(boxes.data):
            if lens[i]:
                d[i, :lens[i]] = a
        counts = xp.asarray(np.asarray(lens, np.int32))
    x1, y1, x2, y2 = d[..., 0], d[..., 1], d[..., 2], d[..., 3]
    if boxes.format == "xywh":
        x2, y2 = x1 + x2, y1 + y2
    elif boxes.format == "cxcywh":
        hw, hh = 0.5 * x2, 0.5 * y2
        x1, y1, x2, y2 = x1 - hw, y1 - hh, x1 + hw, y1 + hh
    out = xp.stack([x1, y1, x2, y2], axis=-1)
    if boxes.normalized:
        s = xp.asarray(np.asarray(sizes, np.float64)[:, [1, 0, 1, 0]])[:, None, :]
        out = out * s
    return xp.ascontiguousarray(out), counts


def _keys(keys, n):
    k = np.asarray(keys)
    if k.shape != (n,) or k.dtype.kind not in "iu":
        raise ValueError(f"keys: got shape {k.shape} dtype {k.dtype}; expected {n} ints (one per sample)")
    if k.dtype.kind == "i" and np.any(k < 0):
        raise ValueError("keys: got a negative key; expected ints >= 0")
    return k.astype(np.uint64)


def _sizes(sizes, n):
    s = np.asarray(sizes)
    if s.ndim == 1:
        s = np.broadcast_to(s, (n, 2))
    if s.shape != (n, 2) or s.dtype.kind not in "iu" or np.any(s <= 0):
        raise ValueError(f"sizes: got {np.asarray(sizes).tolist()[:4]}; expected {n} positive (h, w) int pairs")
    return s.astype(np.int64)


# ------------------------------------------------------------------------------ RandomIoUCrop
def check_iou_args(options, min_scale, max_scale, min_aspect_ratio, max_aspect_ratio, trials, rounds):
    """RandomIoUCrop's arguments checked (errors name the argument), as
    ``(options, min_scale, max_scale, min_aspect_ratio, max_aspect_ratio, trials, rounds)``;
    iou_crop_windows, RandomIoUCrop and its DALI operator share it."""
    if options is None:
        opts = _OPTIONS
    else:
        try:
            opts = tuple(float(o) for o in options)
        except (TypeError, ValueError):
            raise TypeError(f"sampler_options: got {options!r}; expected a sequence of numbers") from None
    if not opts or any(not (np.isfinite(o) and o >= 0.0) for o in opts):
        raise ValueError(f"sampler_options: got {options!r}; expected minimum IoUs >= 0 (a value >= 1 means "
                         "'no crop')")
    min_scale = A.number("min_scale", min_scale, low=0.0, high=1.0)
    max_scale = A.number("max_scale", max_scale, low=0.0, high=1.0)
    if not 0 < min_scale <= max_scale:
        raise ValueError(f"min_scale, max_scale: got {min_scale}, {max_scale}; expected 0 < min_scale <= max_scale "
                         "<= 1")
    min_ar = A.number("min_aspect_ratio", min_aspect_ratio, low=0.0)
    max_ar = A.number("max_aspect_ratio", max_aspect_ratio, low=0.0)
    if not 0 < min_ar <= max_ar:
        raise ValueError(f"min_aspect_ratio, max_aspect_ratio: got {min_ar}, {max_ar}; expected 0 < min <= max")
    for name, v in (("trials", trials), ("rounds", rounds)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 1 <= v <= 10000:
            raise ValueError(f"{name}: got {v!r}; expected an int in 1..10000")
    return tuple(float(o) for o in opts), min_scale, max_scale, min_ar, max_ar, int(trials), int(rounds)


def _iou_select_numpy(d, counts, sizes, keys, opts, cfg, rounds, trials):
    """The NumPy twin of gpuaug_iou_crop_select: (window (N, 4) int64, within (N, M) bool)."""
    n, m = d.shape[:2]
    min_s, max_s, min_ar, max_ar = cfg
    ds = max_s - min_s
    H, W = sizes[:, 0], sizes[:, 1]
    window = np.stack([np.zeros(n, np.int64), np.zeros(n, np.int64), H, W], axis=1)
    found = np.zeros(n, bool)
    active = np.nonzero(counts > 0)[0]
    opts = np.asarray(opts, np.float64)
    valid_row = np.arange(m)[None, :] < counts[:, None]
    cxa, cya = 0.5 * (d[..., 0] + d[..., 2]), 0.5 * (d[..., 1] + d[..., 3])
    area_b = (d[..., 2] - d[..., 0]) * (d[..., 3] - d[..., 1])
    tt = np.arange(trials, dtype=np.uint64)
    for r in range(rounds):
        if active.size == 0:
            break
        base = np.uint64(r * (2 * trials + 1))
        wo = mix64(keys[active], base) >> np.uint64(32)
        thr = opts[((wo * np.uint64(len(opts))) >> np.uint64(32)).astype(np.int64)]
        active = active[thr < 1.0]  # "no crop": the whole image
        thr = thr[thr < 1.0]
        if active.size == 0:
            break
        k = keys[active][:, None]
        a = mix64(k, base + np.uint64(1) + np.uint64(2) * tt[None, :])
        b = mix64(k, base + np.uint64(2) + np.uint64(2) * tt[None, :])
        u0 = (a >> np.uint64(32)).astype(np.float64) * _TWO_M32
        u1 = (a & np.uint64(0xFFFFFFFF)).astype(np.float64) * _TWO_M32
        u2 = (b >> np.uint64(32)).astype(np.float64) * _TWO_M32
        u3 = (b & np.uint64(0xFFFFFFFF)).astype(np.float64) * _TWO_M32
        Wa, Ha = W[active][:, None].astype(np.float64), H[active][:, None].astype(np.float64)
        nw = (Wa * (min_s + ds * u0)).astype(np.int64)
        nh = (Ha * (min_s + ds * u1)).astype(np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ar = nw / nh
            ok = (nw > 0) & (nh > 0) & (min_ar <= ar) & (ar <= max_ar)
        left = ((Wa - nw) * u2).astype(np.int64)
        top = ((Ha - nh) * u3).astype(np.int64)
        L, T = left.astype(np.float64)[..., None], top.astype(np.float64)[..., None]
        Rr, B = (left + nw).astype(np.float64)[..., None], (top + nh).astype(np.float64)[..., None]
        q = d[active][:, None]                       # (A, 1, M, 4)
        cx, cy = cxa[active][:, None], cya[active][:, None]
        inside = (L < cx) & (cx < Rr) & (T < cy) & (cy < B) & valid_row[active][:, None]
        iw = np.maximum(np.minimum(q[..., 2], Rr) - np.maximum(q[..., 0], L), 0.0)
        ih = np.maximum(np.minimum(q[..., 3], B) - np.maximum(q[..., 1], T), 0.0)
        inter = iw * ih
        area_c = (Rr - L) * (B - T)
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / ((area_b[active][:, None] + area_c) - inter)
            take = ok & np.any(inside & (iou >= thr[:, None, None]), axis=-1)   # (A, T)
        hit = take.any(axis=1)
        first = np.argmax(take, axis=1)
        idx = active[hit]
        f = first[hit]
        rows = np.nonzero(hit)[0]
        window[idx] = np.stack([top[rows, f], left[rows, f], nh[rows, f], nw[rows, f]], axis=1)
        found[idx] = True
        active = active[~hit]
    top, left, ch, cw = (window[:, j].astype(np.float64)[:, None] for j in range(4))
    within = (~found[:, None] | ((left < cxa) & (cxa < left + cw) & (top < cya) & (cya < top + ch))) & valid_row
    return window, within


def iou_crop_windows(boxes, sizes, keys, *, sampler_options=None, min_scale=0.3, max_scale=1.0,
                     min_aspect_ratio=0.5, max_aspect_ratio=2.0, trials=40, rounds=16, stream=None):
    """Each sample's SSD crop window, chosen from its boxes (torchvision v2's RandomIoUCrop).

    Per round a minimum IoU is drawn from ``sampler_options`` (a value >= 1: keep the whole
    image); then up to ``trials`` candidates: width and height scales ``~ U(min_scale,
    max_scale)`` of the image's (whole pixels), aspect ratio ``new_w / new_h`` within
    ``[min_aspect_ratio, max_aspect_ratio]``, a uniform position; a candidate is taken when
    some box's centre lies strictly inside it and one such box has IoU >= the minimum with
    it. torchvision loops until a candidate is taken; here a sample keeps its whole image
    after ``rounds`` rounds without one, and at once when it has no boxes.

    Args:
        boxes: :class:`Boxes` (any format; NumPy or CUDA; padded or ragged).
        sizes: (N, 2) (or (2,)) int (h, w) of the images the boxes are on.
        keys: (N,) ints >= 0, one random key per sample (e.g. ``rng.integers(0, 2**63, n)``):
            the same keys give the same windows on the host and the device.
        stream: CUDA stream for CUDA boxes.

    Returns:
        ``(window, within)``: ``(N, 4)`` int64 host windows ``(top, left, height, width)``
        (what :func:`gpuaug.crop` / :func:`gpuaug.resized_crop` take) and ``(N, M)`` bool on
        the boxes' side (ragged boxes: a list): rows whose centre is inside the window, the
        boxes torchvision keeps (``keep=`` of :func:`gpuaug.targets.crop` /
        :func:`gpuaug.targets.resized_crop`).

    Example::

        >>> import numpy as np
        >>> from gpuaug.targets import Boxes
        >>> from gpuaug.targets.safe_crops import iou_crop_windows
        >>> w, keep = iou_crop_windows(Boxes(np.zeros((1, 0, 4))), [[32, 32]], keys=[7])
        >>> w.tolist()  # no boxes: the whole image
        [[0, 0, 32, 32]]
    """
    boxes = as_boxes(boxes)
    n = boxes.n
    opts, min_s, max_s, min_ar, max_ar, trials, rounds = check_iou_args(
        sampler_options, min_scale, max_scale, min_aspect_ratio, max_aspect_ratio, trials, rounds)
    sizes = _sizes(sizes, n)
    keys = _keys(keys, n)
    d, counts = xyxy_pixels(boxes, sizes)
    cfg = (min_s, max_s, min_ar, max_ar)
    if not boxes.device:
        window, within = _iou_select_numpy(d, np.asarray(counts), sizes, keys, opts, cfg, rounds, trials)
    else:
        window, within = _iou_select_cuda(d, counts, sizes, keys, opts, cfg, rounds, trials, stream)
    if not boxes.padded:
        within = [within[i, :a.shape[0]] for i, a in enumerate(boxes.data)]
    return window, within


def _iou_select_cuda(d, counts, sizes, keys, opts, cfg, rounds, trials, stream):
    from gpuaug._stream import on_stream
    from gpuaug.kernels._cuda import get_function, upload

    cp = cupy_module()
    n, m = d.shape[:2]
    with on_stream(stream):
        starts, sz, ky, op, cf = upload(np.arange(n, dtype=np.int64) * m, sizes.astype(np.int32), keys,
                                        np.asarray(opts, np.float64), np.asarray(cfg, np.float64))
        counts = cp.ascontiguousarray(counts, dtype=cp.int32)
        window = cp.empty((n, 4), cp.int32)
        within = cp.zeros((n, m), cp.uint8)
        if n:
            get_function("targets.cu", "gpuaug_iou_crop_select")(
                ((n * 32 + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                (d, starts, counts, sz, ky, op, cf, window, within, np.int32(n), np.int32(len(opts)),
                 np.int32(rounds), np.int32(trials)))
        return cp.asnumpy(window).astype(np.int64), within.astype(cp.bool_)


# ------------------------------------------------------------------------------ bbox-safe crop
def bbox_safe_windows(boxes, sizes, u, *, erosion_rate=0.0):
    """Each sample's crop window holding all its boxes (Albumentations' RandomSizedBBoxSafeCrop):
    the union of the sample's boxes (clipped to the image; shrunk by ``erosion_rate`` of its
    width and height, half on each side) extended towards each image edge by a uniform
    fraction of the room left, in whole pixels (outwards). A sample with no boxes keeps its
    whole image.

    Args:
        boxes: :class:`Boxes` (NumPy or CUDA: the union is one reduction, read back).
        sizes: (N, 2) int (h, w). u: (N, 4) uniforms in [0, 1) (left, top, right, bottom).
        erosion_rate: in [0, 1).

    Returns:
        ``(N, 4)`` int64 host windows ``(top, left, height, width)``.

    Example::

        >>> import numpy as np
        >>> from gpuaug.targets.safe_crops import bbox_safe_windows
        >>> bbox_safe_windows(np.array([[[4.0, 6.0, 10.0, 12.0]]]), [[20, 20]], [[0.5, 0.5, 0.5, 0.5]]).tolist()
        [[3, 2, 13, 13]]
    """
    boxes = as_boxes(boxes)
    n = boxes.n
    sizes = _sizes(sizes, n)
    er = A.number("erosion_rate", erosion_rate, low=0.0)
    if not er < 1.0:
        raise ValueError(f"erosion_rate: got {erosion_rate!r}; expected a number in [0, 1)")
    u = np.asarray(u, np.float64)
    if u.shape != (n, 4):
        raise ValueError(f"u: got shape {u.shape}; expected ({n}, 4) uniforms")
    d, counts = xyxy_pixels(boxes, sizes)
    xp = _xp(d)
    m = d.shape[1]
    H, W = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
    if m:
        valid = xp.arange(m)[None, :] < xp.asarray(counts)[:, None]
        lo = xp.where(valid[..., None], d[..., :2], xp.inf).min(axis=1)
        hi = xp.where(valid[..., None], d[..., 2:], -xp.inf).max(axis=1)
        union = xp.concatenate([lo, hi], axis=1)
        union = union if xp is np else cupy_module().asnumpy(union)
    else:
        union = np.full((n, 4), np.nan)
    has = np.isfinite(union).all(axis=1)
    ux1, uy1, ux2, uy2 = (np.where(has, union[:, j], 0.0) for j in range(4))
    ux1, ux2 = np.clip(ux1, 0, W), np.clip(ux2, 0, W)
    uy1, uy2 = np.clip(uy1, 0, H), np.clip(uy2, 0, H)
    ex, ey = 0.5 * er * (ux2 - ux1), 0.5 * er * (uy2 - uy1)
    ux1, ux2, uy1, uy2 = ux1 + ex, ux2 - ex, uy1 + ey, uy2 - ey
    left = np.floor(ux1 * u[:, 0])
    top = np.floor(uy1 * u[:, 1])
    right = np.ceil(ux2 + (W - ux2) * u[:, 2])
    bottom = np.ceil(uy2 + (H - uy2) * u[:, 3])
    right = np.clip(np.maximum(right, left + 1), 1, W)
    bottom = np.clip(np.maximum(bottom, top + 1), 1, H)
    left, top = np.minimum(left, right - 1), np.minimum(top, bottom - 1)
    left, top = np.where(has, left, 0), np.where(has, top, 0)
    right, bottom = np.where(has, right, W), np.where(has, bottom, H)
    return np.stack([top, left, bottom - top, right - left], axis=1).astype(np.int64)


# ------------------------------------------------------------------------------ transforms
class _BoxAware(Geometric):
    """A crop whose window depends on the boxes: ``sample`` draws what does not, ``resolve``
    (called by the policy with the boxes as they are at this transform) sets ``"window"``."""

    box_aware = True
    interpolation = "bilinear"

    def out_sizes(self, sizes):
        return np.broadcast_to(np.asarray(self.size, np.int64), (len(sizes), 2))

    def matrices(self, params, sizes):
        if "window" not in params:
            raise ValueError(f"{type(self).__name__}: its crop depends on the boxes; call the policy with boxes= "
                             "(policy(x, boxes=b)), or draw the parameters with "
                             "gpuaug.targets.sample_policy(policy, x, boxes=b) and pass params=")
        return box_matrices(params["window"].astype(np.float64), self.size)


class RandomIoUCrop(_BoxAware):
    """SSD's random crop (torchvision v2's ``RandomIoUCrop``), per sample, then a resize to
    ``size``: see :func:`iou_crop_windows` for the rules. Boxes whose centre is outside the crop
    are dropped (torchvision zeroes them for a later SanitizeBoundingBoxes); the others are
    clipped and follow ``boxes.min_visibility``.

    Differences from torchvision: the crop and the resize to ``size`` are one resampling
    (Compose needs an output size that does not depend on the draw; SSD resizes right after);
    a sample keeps its whole image after ``rounds`` rounds without a candidate taken, instead of
    looping without end. The random numbers come from one key per sample drawn from the policy's
    generator; the candidates are tried on the device for CUDA boxes.

    Example::

        >>> import numpy as np, gpuaug
        >>> from gpuaug.targets import RandomIoUCrop, Boxes, sample_policy
        >>> pol = gpuaug.Compose([RandomIoUCrop(32)])
        >>> x = np.zeros((2, 48, 64, 3), np.uint8)
        >>> b = Boxes(np.array([[[8.0, 8.0, 40.0, 30.0]]] * 2))
        >>> p = sample_policy(pol, x, boxes=b, seed=0)
        >>> y, bo = pol(x, params=p, boxes=b)
        >>> y.shape
        (2, 32, 32, 3)
    """

    def __init__(self, size, min_scale=0.3, max_scale=1.0, min_aspect_ratio=0.5, max_aspect_ratio=2.0,
                 sampler_options=None, trials=40, rounds=16, interpolation="bilinear"):
        self.size = A.size("size", size)
        (self.options, self.min_scale, self.max_scale, self.min_aspect_ratio, self.max_aspect_ratio, self.trials,
         self.rounds) = check_iou_args(sampler_options, min_scale, max_scale, min_aspect_ratio, max_aspect_ratio,
                                        trials, rounds)
        self.interpolation = A.interpolation("interpolation", interpolation)

    def _args(self):
        return {"size": self.size, "min_scale": self.min_scale, "max_scale": self.max_scale,
                "min_aspect_ratio": self.min_aspect_ratio, "max_aspect_ratio": self.max_aspect_ratio,
                "sampler_options": self.options, "trials": self.trials, "rounds": self.rounds}

    def sample(self, rng, n, sizes):
        # one 63-bit draw, spread into a key per sample by the kernels' own hash
        return {"key": mix64(np.uint64(R.seed64(rng)), np.arange(n, dtype=np.uint64) + np.uint64(1 << 40))}

    def resolve(self, params, boxes, sizes, stream=None):
        """Set ``params["window"]`` ((n, 4) top, left, h, w) and ``params["within"]`` (the rows
        of ``boxes`` kept) from ``boxes``, the boxes at this point of the policy."""
        params["window"], params["within"] = iou_crop_windows(
            boxes, sizes, params["key"], sampler_options=self.options, min_scale=self.min_scale,
            max_scale=self.max_scale, min_aspect_ratio=self.min_aspect_ratio, max_aspect_ratio=self.max_aspect_ratio,
            trials=self.trials, rounds=self.rounds, stream=stream)


class RandomSizedBBoxSafeCrop(_BoxAware):
    """A random crop that keeps every box whole, resized to ``size`` (Albumentations'
    ``RandomSizedBBoxSafeCrop``): see :func:`bbox_safe_windows`. Boxes are only clipped (with
    ``erosion_rate`` > 0 a box may be cut) and follow ``boxes.min_visibility``.

    Example::

        >>> import gpuaug
        >>> from gpuaug.targets import RandomSizedBBoxSafeCrop
        >>> RandomSizedBBoxSafeCrop((32, 48)).size
        (32, 48)
    """

    def __init__(self, size, erosion_rate=0.0, interpolation="bilinear"):
        self.size = A.size("size", size)
        er = A.number("erosion_rate", erosion_rate, low=0.0)
        if not er < 1.0:
            raise ValueError(f"erosion_rate: got {erosion_rate!r}; expected a number in [0, 1)")
        self.erosion_rate = er
        self.interpolation = A.interpolation("interpolation", interpolation)

    def _args(self):
        return {"size": self.size, "erosion_rate": self.erosion_rate}

    def sample(self, rng, n, sizes):
        return {"u": R.uniform(rng, 0.0, 1.0, 4 * n).reshape(n, 4)}

    def resolve(self, params, boxes, sizes, stream=None):
        """Set ``params["window"]`` from ``boxes`` (the boxes at this point of the policy)."""
        params["window"] = bbox_safe_windows(boxes, sizes, params["u"], erosion_rate=self.erosion_rate)
