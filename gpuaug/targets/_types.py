"""The target containers (Boxes, Keypoints, Masks) and their argument checks.

Each container carries an array (NumPy or CuPy: the targets live where the images live)
and the metadata that says how to read it, as torchvision's tv_tensors do. The checks run
before anything is computed, and name the argument, the sample and the value.
"""
from __future__ import annotations

import numpy as np

from gpuaug._util import check_flag, cupy_module, is_cuda_array

#: box format name -> the kernels' code (kernels/targets.cu)
FORMATS = {"xyxy": 0, "xywh": 1, "cxcywh": 2}
#: keypoint coordinate conventions
COORDS = ("pixel", "continuous")


def _xp(a):
    return np if isinstance(a, np.ndarray) else cupy_module()


def _as_array(value, name):
    """``value`` as a NumPy or CuPy array (no copy for arrays already of a kind)."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{name}: got ndarray of dtype {value.dtype}; expected a NumPy or CUDA array of numbers")
        return value
    if is_cuda_array(value):
        cp = cupy_module()
        return value if isinstance(value, cp.ndarray) else (
            cp.asarray(value) if hasattr(value, "__cuda_array_interface__") else cp.from_dlpack(value))
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        a = None
    if a is None or a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: got {type(value).__name__}; expected a NumPy or CUDA array of numbers")
    return a


def _float(a):
    """Floating coordinates: float32/float64 kept, anything else as float32."""
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float32)


class Boxes:
    """Axis-aligned boxes of a batch of images.

    Args:
        data: a padded ``(N, M, 4)`` array (with ``counts``), or a list of N ``(M_i, 4)``
            arrays (ragged, one per image); NumPy or CUDA arrays; float32/float64 (other
            numbers are read as float32). ``M = 0`` (no boxes) is valid.
        format: ``"xyxy"`` (corners), ``"xywh"`` (top-left corner and size) or
            ``"cxcywh"`` (centre and size), as torchvision's BoundingBoxFormat.
        normalized: coordinates are fractions of the image's width and height (else pixels).
        counts: padded only: ``(N,)`` ints, the number of valid rows of each sample
            (``0 <= counts[i] <= M``); None: every row is valid.
        min_visibility: a box is dropped when its clipped area is less than this fraction
            of the area of the transformed (unclipped) box, as Albumentations'
            ``min_visibility``; boxes left with no area are dropped at any value. None:
            never drop (boxes are only clipped, as torchvision's transforms do).
        index: set by the transforms: for each output row, the row of the original input it
            came from, through every transform since (padded: ``(N, M)`` int32, -1 in the
            padding; ragged: a list of arrays).
        labels: per-box values that follow the boxes (class ids, scores ...): padded
            ``(N, M)`` or ragged, a list of ``(M_i,)``, on the boxes' side. The transforms
            gather them as they drop and compact boxes (padding rows get -1), so
            ``out.labels`` stays aligned with ``out.data``.
        check: refuse NaN / inf coordinates and inverted boxes before anything is computed
            (for boxes on the GPU that is one reduction and one synchronisation); False
            skips it (e.g. in a training loop, for boxes already checked once).

    Coordinates are continuous, in pixels: the image spans ``[0, W] x [0, H]`` and pixel
    ``(i, j)`` covers ``[j, j + 1) x [i, i + 1)`` (torchvision's convention for boxes), so
    a horizontal flip maps ``x`` to ``W - x``.

    Example::

        >>> import numpy as np
        >>> from gpuaug.targets import Boxes
        >>> b = Boxes(np.zeros((2, 3, 4), np.float32), counts=[3, 1])
        >>> b.padded, b.n
        (True, 2)
    """

    def __init__(self, data, format="xyxy", normalized=False, counts=None, min_visibility=0.0, index=None,
                 check=True, labels=None):
        if format not in FORMATS:
            raise ValueError(f"format: got {format!r}; expected one of {', '.join(map(repr, FORMATS))}")
        check_flag("normalized", normalized)
        if min_visibility is not None:
            mv = float(min_visibility) if isinstance(min_visibility, (int, float, np.number)) else None
            if mv is None or not 0.0 <= mv <= 1.0:
                raise ValueError(f"min_visibility: got {min_visibility!r}; expected None or a number in [0, 1]")
            min_visibility = mv
        if isinstance(data, (list, tuple)):
            arrs = [_float(_as_array(d, f"boxes[{i}]")) for i, d in enumerate(data)]
            for i, a in enumerate(arrs):
                if a.ndim != 2 or a.shape[-1] != 4:
                    raise ValueError(f"boxes[{i}]: got shape {tuple(a.shape)}; expected (M, 4) with a last "
                                     f"dimension of 4 ({format})")
            if len({isinstance(a, np.ndarray) for a in arrs}) > 1:
                raise TypeError("boxes: mixes NumPy and CUDA arrays; put every sample's boxes on one side")
            if counts is not None:
                raise ValueError("counts: given with a list of boxes; counts go with a padded (N, M, 4) array "
                                 "(a list already says how many boxes each sample has)")
            data = arrs
        else:
            data = _float(_as_array(data, "boxes"))
            if data.ndim != 3 or data.shape[-1] != 4:
                raise ValueError(f"boxes: got shape {tuple(data.shape)}; expected (N, M, 4) with a last dimension "
                                 f"of 4 ({format}), or a list of (M_i, 4) arrays")
            if counts is not None:
                c = counts if is_cuda_array(counts) else np.asarray(counts)
                if c.shape != (data.shape[0],) or c.dtype.kind not in "iu":
                    raise ValueError(f"counts: got shape {tuple(c.shape)} dtype {c.dtype}; expected {data.shape[0]} "
                                     "ints (one per sample)")
                if isinstance(c, np.ndarray):
                    bad = np.nonzero((c < 0) | (c > data.shape[1]))[0]
                    if bad.size:
                        i = int(bad[0])
                        raise ValueError(f"counts: sample {i} has count {int(c[i])}, outside 0..{data.shape[1]} "
                                         f"(the padded length M of boxes {tuple(data.shape)})")
                counts = c
        self.data, self.format, self.normalized = data, format, bool(normalized)
        self.counts, self.min_visibility, self.index = counts, min_visibility, index
        self.check = bool(check)
        self.labels = None if labels is None else self._check_labels(labels)

    def _check_labels(self, labels):
        if self.padded:
            lab = _as_array(labels, "labels")
            if tuple(lab.shape) != tuple(self.data.shape[:2]):
                raise ValueError(f"labels: got shape {tuple(lab.shape)}; expected {tuple(self.data.shape[:2])} "
                                 "(one per box row)")
            if _xp(lab) is not _xp(self.data):
                raise TypeError("labels: is on the other side of boxes (NumPy vs CUDA); put both on one side")
            return lab
        if not isinstance(labels, (list, tuple)) or len(labels) != len(self.data):
            raise ValueError(f"labels: expected a list of {len(self.data)} arrays (one per sample), like the boxes")
        out = []
        for i, (lab, a) in enumerate(zip(labels, self.data)):
            lab = _as_array(lab, f"labels[{i}]")
            if tuple(lab.shape) != (a.shape[0],):
                raise ValueError(f"labels[{i}]: got shape {tuple(lab.shape)}; expected ({a.shape[0]},) (one per box)")
            out.append(lab)
        return out

    @property
    def padded(self):
        return not isinstance(self.data, list)

    @property
    def n(self):
        return self.data.shape[0] if self.padded else len(self.data)

    @property
    def device(self):
        d = self.data if self.padded else (self.data[0] if self.data else np.zeros(0))
        return not isinstance(d, np.ndarray)

    def like(self, data, counts=None, index=None):
        """A Boxes with this one's format and settings around new ``data``."""
        out = Boxes.__new__(Boxes)
        out.data, out.format, out.normalized = data, self.format, self.normalized
        out.counts, out.min_visibility, out.index = counts, self.min_visibility, index
        out.check = self.check
        out.labels = None
        return out

    def __repr__(self):
        shape = tuple(self.data.shape) if self.padded else f"list of {self.n}"
        return f"Boxes({shape}, format={self.format!r}, normalized={self.normalized})"


class Keypoints:
    """Keypoints of a batch: ``(N, K, 2)`` (x, y) per image, with a visibility flag each.

    Args:
        data: ``(N, K, 2)`` NumPy or CUDA array, float32/float64 (other numbers as float32).
        visibility: ``(N, K)`` bools (or 0/1), or None (all visible). Transforms clear the
            flag of points that leave the output image; coordinates are never clipped.
        coords: ``"pixel"`` (default): pixel centres at integers, the convention of the
            images' warps (OpenCV's; torchvision's flips of KeyPoints), so a point stays on
            the pixel it marks; ``"continuous"``: the image spans ``[0, W]``, as boxes
            (torchvision's resize and affine of KeyPoints use this one).
        normalized: coordinates are fractions of the width and height (``x / W`` in the
            chosen convention; normalised annotations usually mean ``coords="continuous"``,
            where a horizontal flip maps ``x`` to ``1 - x``).
        check: refuse NaN / inf coordinates of visible points (GPU: one synchronisation).

    Example::

        >>> import numpy as np
        >>> from gpuaug.targets import Keypoints
        >>> Keypoints(np.zeros((4, 17, 2))).visibility.shape
        (4, 17)
    """

    def __init__(self, data, visibility=None, coords="pixel", normalized=False, check=True):
        if coords not in COORDS:
            raise ValueError(f"coords: got {coords!r}; expected one of {', '.join(map(repr, COORDS))}")
        data = _float(_as_array(data, "keypoints"))
        if data.ndim != 3 or data.shape[-1] != 2:
            raise ValueError(f"keypoints: got shape {tuple(data.shape)}; expected (N, K, 2) with a last "
                             "dimension of 2 (x, y)")
        xp = _xp(data)
        if visibility is None:
            visibility = xp.ones(data.shape[:2], bool)
        else:
            visibility = _as_array(visibility, "visibility")
            if tuple(visibility.shape) != tuple(data.shape[:2]):
                raise ValueError(f"visibility: got shape {tuple(visibility.shape)}; expected {tuple(data.shape[:2])} "
                                 "(one flag per keypoint)")
            if _xp(visibility) is not xp:
                raise TypeError("visibility: is on the other side of keypoints (NumPy vs CUDA); put both on one side")
            visibility = visibility != 0
        self.data, self.visibility, self.coords, self.normalized = data, visibility, coords, bool(normalized)
        self.check = bool(check)

    @property
    def n(self):
        return self.data.shape[0]

    @property
    def device(self):
        return not isinstance(self.data, np.ndarray)

    def like(self, data, visibility):
        out = Keypoints.__new__(Keypoints)
        out.data, out.visibility, out.coords, out.normalized = data, visibility, self.coords, self.normalized
        out.check = self.check
        return out

    def __repr__(self):
        return f"Keypoints({tuple(self.data.shape)}, coords={self.coords!r})"


class Masks:
    """Segmentation masks of a batch, warped with nearest-neighbour sampling.

    Args:
        data: label maps ``(N, H, W)`` (or a list of ``(H_i, W_i)``, varshape), or one-hot /
            instance masks ``(N, K, H, W)`` (torchvision's Mask layout per image); uint8,
            int32 or bool; NumPy or CUDA arrays, C-contiguous.
        onehot: None: 4-D arrays are one-hot, the rest label maps; or True/False.
        fill: the value of pixels that come from outside the image (constant borders,
            padding): default 255 for label maps (an "ignore" index), 0 for one-hot and bool.

    Example::

        >>> import numpy as np
        >>> from gpuaug.targets import Masks
        >>> Masks(np.zeros((2, 8, 8), np.uint8)).fill
        255
    """

    def __init__(self, data, onehot=None, fill=None):
        if isinstance(data, (list, tuple)):
            arrs = [_as_array(d, f"masks[{i}]") for i, d in enumerate(data)]
            for i, a in enumerate(arrs):
                if a.ndim != 2:
                    raise ValueError(f"masks[{i}]: got shape {tuple(a.shape)}; expected a (H, W) label map")
            if onehot:
                raise ValueError("onehot: got True with a list of masks; a list holds (H, W) label maps")
            onehot = False
            data = [self._check_dtype(a, f"masks[{i}]") for i, a in enumerate(arrs)]
        else:
            a = _as_array(data, "masks")
            if onehot is None:
                onehot = a.ndim == 4
            want = 4 if onehot else 3
            if a.ndim != want:
                raise ValueError(f"masks: got shape {tuple(a.shape)}; expected {'(N, K, H, W) one-hot' if onehot else '(N, H, W) label maps'}")
            data = self._check_dtype(a, "masks")
        self.data, self.onehot = data, bool(onehot)
        dt = (data[0] if isinstance(data, list) else data).dtype
        if fill is None:
            fill = 0 if onehot or dt == np.bool_ else 255
        lo, hi = (0, 1) if dt == np.bool_ else (np.iinfo(dt).min, np.iinfo(dt).max)
        if isinstance(fill, (bool, np.bool_)) and dt == np.bool_:
            fill = int(fill)
        if not isinstance(fill, (int, np.integer)) or isinstance(fill, bool) or not lo <= fill <= hi:
            raise ValueError(f"fill: got {fill!r}; expected an int in {lo}..{hi} (the masks' dtype {dt})")
        self.fill = int(fill)

    @staticmethod
    def _check_dtype(a, name):
        if a.dtype not in (np.uint8, np.int32, np.bool_):
            raise TypeError(f"{name}: got dtype {a.dtype}; expected uint8, int32 or bool")
        if not a.flags.c_contiguous:
            raise ValueError(f"{name}: is not C-contiguous (strides {tuple(a.strides)}); pass a contiguous array")
        return a

    @property
    def n(self):
        return len(self.data) if isinstance(self.data, list) else self.data.shape[0]

    @property
    def sizes(self):
        """Per-sample (h, w), (N, 2) int64."""
        if isinstance(self.data, list):
            return np.array([a.shape for a in self.data], np.int64).reshape(-1, 2)
        return np.broadcast_to(np.asarray(self.data.shape[-2:], np.int64), (self.n, 2))

    def like(self, data):
        out = Masks.__new__(Masks)
        out.data, out.onehot, out.fill = data, self.onehot, self.fill
        return out

    def __repr__(self):
        shape = f"list of {self.n}" if isinstance(self.data, list) else tuple(self.data.shape)
        return f"Masks({shape}, onehot={self.onehot})"


def as_boxes(b):
    return b if isinstance(b, Boxes) else Boxes(b)


def as_keypoints(k):
    return k if isinstance(k, Keypoints) else Keypoints(k)


def as_masks(m):
    return m if isinstance(m, Masks) else Masks(m)


# ------------------------------------------------------------------------------ checks
def check_boxes_values(boxes: Boxes):
    """NaN / inf coordinates and inverted boxes (x2 < x1, negative sizes) among the valid rows
    raise ValueError naming the sample and the row. Device boxes: one reduction and one
    synchronisation."""
    fmt = boxes.format
    bad_count = None
    if boxes.padded:
        d = boxes.data
        xp = _xp(d)
        m = d.shape[1]
        valid = None
        if boxes.counts is not None:
            c = xp.asarray(boxes.counts)
            valid = xp.arange(m)[None, :] < c[:, None]
            if xp is not np:  # device counts: checked here, in the same readback as the values
                bad_count = (c < 0) | (c > m)
        items = [(d, valid)]
    else:
        items = [(a[None], None) for a in boxes.data]
    for k, (d, valid) in enumerate(items):
        xp = _xp(d)
        if d.shape[1] == 0 and bad_count is None:
            continue
        finite = xp.isfinite(d).all(axis=-1)
        if fmt == "xyxy":
            order = (d[..., 2] >= d[..., 0]) & (d[..., 3] >= d[..., 1])
        else:
            order = (d[..., 2] >= 0) & (d[..., 3] >= 0)
        bad_nan = ~finite
        bad_order = finite & ~order
        if valid is not None:
            bad_nan &= valid
            bad_order &= valid
        flags = xp.stack([bad_nan.any(), bad_order.any()] + ([bad_count.any()] if bad_count is not None else []))
        flags = flags if xp is np else flags.get()
        if not flags.any():
            continue
        if bad_count is not None and flags[2]:
            cc = boxes.counts.get()
            i = int(np.nonzero((cc < 0) | (cc > m))[0][0])
            raise ValueError(f"counts: sample {i} has count {int(cc[i])}, outside 0..{m} (the padded length M of "
                             f"boxes {tuple(d.shape)})")
        if xp is not np:
            d, bad_nan, bad_order = d.get(), bad_nan.get(), bad_order.get()
        which = bad_nan if flags[0] else bad_order
        i, j = (int(v) for v in np.argwhere(which)[0])
        sample = k if not boxes.padded else i
        row = d[i, j].tolist()
        if flags[0]:
            raise ValueError(f"boxes: sample {sample} box {j} is {row}, with NaN or inf coordinates; expected "
                             "finite numbers")
        what = "x2 < x1 or y2 < y1" if fmt == "xyxy" else "a negative width or height"
        raise ValueError(f"boxes: sample {sample} box {j} is {row} ({fmt}), with {what}; expected "
                         + ("x1 <= x2 and y1 <= y2" if fmt == "xyxy" else "w >= 0 and h >= 0"))


def check_keypoints_values(kp: Keypoints):
    xp = _xp(kp.data)
    bad = ~xp.isfinite(kp.data).all(axis=-1) & kp.visibility
    if bool(bad.any()):
        i, j = (int(v) for v in (np.argwhere(bad if xp is np else bad.get())[0]))
        raise ValueError(f"keypoints: sample {i} point {j} is {kp.data[i, j].tolist()}, with NaN or inf "
                         "coordinates; expected finite numbers (or visibility False)")
