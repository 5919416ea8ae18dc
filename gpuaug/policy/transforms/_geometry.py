"""Geometry transforms (flips, crops, resizes, rotations, affine and perspective warps): a per-
sample 3x3 matrix and an output size each; the matrix maths is :mod:`gpuaug.geometry`'s."""
from __future__ import annotations

import functools

import numpy as np

from gpuaug import random as R
from gpuaug.geometry import eye, affine_matrices, box_matrices, homographies
from gpuaug.policy import _args as A
from gpuaug.policy.transforms._base import Transform, _Coin


@functools.lru_cache(maxsize=64)
def _fixed_sizes(n, h, w):
    return np.broadcast_to(np.asarray((h, w), np.int64), (n, 2))


def fixed_sizes(n, size):
    """(n, 2) int64 sizes all ``size`` (h, w): a read-only zero-strided broadcast, memoised per
    (n, h, w) (np.broadcast_to costs ~3 us a call; the draws that follow read it as one size)."""
    return _fixed_sizes(n, size[0], size[1])


class Geometric(Transform):
    """A geometric step: per-sample source -> destination matrices (:meth:`matrices`) that the
    fused pass folds into one map per sample, and that boxes, keypoints and masks follow. The
    base of the policy's geometric transforms and of gpuaug.targets' box-aware crops."""

    kind = "geometry"
    perspective = False       # needs a projective division
    interpolation = None      # "bilinear" / "nearest"; None: exact maps (flips, integer crops)
    fill = None               # per-channel fill tuple when the transform can read outside the image

    def needs_fill(self):
        return self.fill is not None

    def matrices(self, params, sizes):  # pragma: no cover - abstract
        """(n, 3, 3) source -> destination maps for images of ``sizes``."""
        raise NotImplementedError


class _Flip(_Coin, Geometric):
    axis = 1

    def matrices(self, params, sizes):
        on = params["apply"]
        n = len(on)
        m = eye(n)
        k = self.axis  # 1: x (horizontal), 0: y
        row = 0 if k == 1 else 1
        e = m.reshape(n, 9)
        # 1 - 2 on: -1.0 where on, 1.0 elsewhere (the identity's 1.0 stays; a masked store is
        # np.where's values without its scalar arrays, ~0.6 us less)
        if on.dtype == bool:
            col = e[:, 4 * row]
            col[on] = -1.0
        else:
            e[:, 4 * row] = 1.0 - 2.0 * on
        # on (size - 1): a Python float for a batch of one size (Compose's zero-strided sizes)
        last = float(sizes[0, k]) - 1.0 if n and sizes.strides[0] == 0 else sizes[:, k] - 1.0
        np.multiply(on, last, out=e[:, 3 * row + 2])
        return m


class RandomHorizontalFlip(_Flip):
    """Mirror left-right with probability ``p`` per sample (``x' = w - 1 - x``), exactly.

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomHorizontalFlip(p=0.5)
        RandomHorizontalFlip(p=0.5)
    """

    axis = 1


class RandomVerticalFlip(_Flip):
    """Mirror top-bottom with probability ``p`` per sample (``y' = h - 1 - y``), exactly.

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomVerticalFlip(0.2).p
        0.2
    """

    axis = 0


def _fill(v):
    return A.per_channel("fill", v)


class RandomAffine(Geometric):
    """torchvision's RandomAffine, per sample: rotation by ``angle ~ U(degrees)`` (clockwise,
    torchvision's F.affine convention), translation by ``round(U(-fx w, fx w))``,
    ``round(U(-fy h, fy h))`` pixels, scale ``~ U(scale)``, shear ``~ U(shear)`` degrees, about
    the image centre (or ``center``, in torchvision's corner-origin pixel units).

    Args:
        degrees: number d (range (-d, d)) or (min, max).
        translate: None or (fx, fy), fractions of the width and height in [0, 1].
        scale: None or (min, max), > 0.
        shear: None, a number s (x shear in (-s, s)), (min, max) for x, or (xmin, xmax, ymin, ymax).
        interpolation: "bilinear" (default here; torchvision: nearest) or "nearest".
        fill: value outside the image (a number or one per channel), in the image's units.
        center: None (image centre) or (x, y) in torchvision's units (x = 0 is the left edge).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1), shear=5).shear
        (-5.0, 5.0)
    """

    def __init__(self, degrees, translate=None, scale=None, shear=None, interpolation="bilinear", fill=0,
                 center=None):
        self.degrees = A.sym_range("degrees", degrees, allow_none=False, low=-A.ANGLE_LIMIT, high=A.ANGLE_LIMIT)
        if translate is not None:
            translate = A.numbers_seq("translate", translate, (2,))
            if not all(0.0 <= t <= 1.0 for t in translate):
                raise ValueError(f"translate: got {translate}; expected fractions in [0, 1]")
        self.translate = translate
        if scale is not None:
            scale = A.numbers_seq("scale", scale, (2,))
            if not 0 < scale[0] <= scale[1]:
                raise ValueError(f"scale: got {scale}; expected (min, max) with 0 < min <= max")
        self.scale = scale
        if shear is not None:
            if A.is_number(shear):
                shear = A.sym_range("shear", shear, low=-A.ANGLE_LIMIT, high=A.ANGLE_LIMIT)
            else:
                shear = A.numbers_seq("shear", shear, (2, 4))
                if shear[0] > shear[1] or (len(shear) == 4 and shear[2] > shear[3]):
                    raise ValueError(f"shear: got {shear}; expected ranges (min, max) with min <= max")
                if max(map(abs, shear)) > A.ANGLE_LIMIT:
                    raise ValueError(f"shear: got {shear}; expected degrees within [-{A.ANGLE_LIMIT:g}, "
                                     f"{A.ANGLE_LIMIT:g}]")
        self.shear = shear
        self.interpolation = A.interpolation("interpolation", interpolation)
        self.fill = _fill(fill)
        self.center = None if center is None else A.numbers_seq("center", center, (2,))

    def _args(self):
        return {"degrees": self.degrees, "translate": self.translate, "scale": self.scale, "shear": self.shear,
                "interpolation": self.interpolation, "fill": self.fill}

    def sample(self, rng, n, sizes):
        if type(sizes) is np.ndarray and sizes.shape == (n, 2) and sizes.dtype == np.int64:
            # Compose's (checked) sizes and this transform's ranges, checked when it was made
            return R.affine_draws(rng, n, sizes, self.degrees, self.translate, self.scale, self.shear)
        return R.affine(rng, n, sizes, self.degrees, self.translate, self.scale, self.shear)

    def matrices(self, params, sizes):
        ctr = None if self.center is None else (self.center[0] - 0.5, self.center[1] - 0.5)
        return affine_matrices(sizes, params["angle"], params["tx"], params["ty"], params["scale"],
                               params["shear_x"], params["shear_y"], ctr)


class RandomRotation(Geometric):
    """torchvision's RandomRotation, per sample: ``angle ~ U(degrees)`` degrees
    counter-clockwise about the image centre (or ``center``, torchvision's units); the output
    keeps the input's size (``expand=True`` is not supported).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomRotation(30).degrees
        (-30.0, 30.0)
    """

    def __init__(self, degrees, interpolation="bilinear", expand=False, center=None, fill=0):
        self.degrees = A.sym_range("degrees", degrees, allow_none=False, low=-A.ANGLE_LIMIT, high=A.ANGLE_LIMIT)
        if A.flag("expand", expand):
            raise ValueError("expand: got True; gpuaug's fused rotation keeps the image size (expand=False)")
        self.interpolation = A.interpolation("interpolation", interpolation)
        self.center = None if center is None else A.numbers_seq("center", center, (2,))
        self.fill = _fill(fill)

    def _args(self):
        return {"degrees": self.degrees, "interpolation": self.interpolation, "fill": self.fill}

    def sample(self, rng, n, sizes):
        return {"angle": R.uniform(rng, self.degrees[0], self.degrees[1], n)}

    def matrices(self, params, sizes):
        n = len(params["angle"])
        z, o = np.zeros(n), np.ones(n)
        ctr = None if self.center is None else (self.center[0] - 0.5, self.center[1] - 0.5)
        return affine_matrices(sizes, -params["angle"], z, z, o, z, z, ctr)


class RandomResizedCrop(Geometric):
    """torchvision's RandomResizedCrop, per sample: a box of area ``~ U(scale)`` of the image's
    and aspect ratio ``~ exp(U(log ratio))`` (10 tries, then torchvision's central fallback),
    resized to ``size`` (bilinear, gpuaug.resized_crop's pixel centres, no antialiasing).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomResizedCrop(224).size
        (224, 224)
    """

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), interpolation="bilinear", antialias=True):
        self.size = A.size("size", size)
        self.scale = A.numbers_seq("scale", scale, (2,))
        if not 0 < self.scale[0] <= self.scale[1]:
            raise ValueError(f"scale: got {scale}; expected (min, max) with 0 < min <= max")
        self.ratio = A.numbers_seq("ratio", ratio, (2,))
        if not 0 < self.ratio[0] <= self.ratio[1]:
            raise ValueError(f"ratio: got {ratio}; expected (min, max) with 0 < min <= max")
        self.interpolation = A.interpolation("interpolation", interpolation)
        A.flag("antialias", antialias)

    def _args(self):
        return {"size": self.size, "scale": self.scale, "ratio": self.ratio, "interpolation": self.interpolation}

    def sample(self, rng, n, sizes):
        if type(sizes) is np.ndarray and sizes.shape == (n, 2) and sizes.dtype == np.int64:
            # Compose's (checked) sizes and this transform's ranges, checked when it was made
            return {"boxes": R.resized_crop_draws(rng, sizes, self.scale, self.ratio)}
        return {"boxes": R.resized_crop_boxes(rng, sizes, self.scale, self.ratio)}

    def out_sizes(self, sizes):
        return fixed_sizes(len(sizes), self.size)

    def matrices(self, params, sizes):
        return box_matrices(params["boxes"], self.size)


class Resize(Geometric):
    """Resize every image to ``size`` (h, w) (bilinear, gpuaug.resize's pixel centres).

    Example::

        >>> import gpuaug
        >>> gpuaug.Resize((128, 96)).size
        (128, 96)
    """

    def __init__(self, size, interpolation="bilinear", antialias=True):
        self.size = A.size("size", size)
        self.interpolation = A.interpolation("interpolation", interpolation)
        A.flag("antialias", antialias)

    def _args(self):
        return {"size": self.size, "interpolation": self.interpolation}

    def sample(self, rng, n, sizes):
        return {}

    def out_sizes(self, sizes):
        return fixed_sizes(len(sizes), self.size)

    def matrices(self, params, sizes):
        boxes = np.concatenate([np.zeros((len(sizes), 2)), sizes], axis=1)
        return box_matrices(boxes, self.size)


class CenterCrop(Geometric):
    """The central ``size`` window (torchvision's rounding: ``top = round((h - ch) / 2)``);
    outside the image (a crop larger than it) reads ``fill``, as torchvision pads with zeros.

    Example::

        >>> import gpuaug
        >>> gpuaug.CenterCrop(200)
        CenterCrop(size=(200, 200))
    """

    def __init__(self, size, fill=0):
        self.size = A.size("size", size)
        self.fill = _fill(fill)

    def _args(self):
        return {"size": self.size}

    def sample(self, rng, n, sizes):
        return {}

    def out_sizes(self, sizes):
        return fixed_sizes(len(sizes), self.size)

    def matrices(self, params, sizes):
        top = np.rint((sizes[:, 0] - self.size[0]) / 2.0)
        left = np.rint((sizes[:, 1] - self.size[1]) / 2.0)
        m = eye(len(sizes))
        m[:, 0, 2], m[:, 1, 2] = -left, -top
        return m


class RandomCrop(Geometric):
    """torchvision's RandomCrop: a ``size`` window at a uniform position in the image padded by
    ``padding`` (an int, (left/right, top/bottom) or (left, top, right, bottom); constant
    ``fill``), and with ``pad_if_needed`` padded further on both sides so the window fits.

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomCrop(32, padding=4).padding
        (4, 4, 4, 4)
    """

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        self.size = A.size("size", size)
        if padding is None:
            pad = (0, 0, 0, 0)
        elif isinstance(padding, (int, np.integer)) and not isinstance(padding, bool):
            pad = (int(padding),) * 4
        else:
            t = A.numbers_seq("padding", padding, (2, 4))
            if not all(float(e).is_integer() for e in t):
                raise ValueError(f"padding: got {padding!r}; expected whole pixels")
            pad = tuple(int(e) for e in (t * 2 if len(t) == 2 else t))
        if min(pad) < 0:
            raise ValueError(f"padding: got {padding!r}; expected sizes >= 0")
        self.padding = pad
        self.pad_if_needed = A.flag("pad_if_needed", pad_if_needed)
        if padding_mode != "constant":
            raise ValueError(f"padding_mode: got {padding_mode!r}; expected 'constant' (the fused crop "
                             "reads the fill value outside the image)")
        self.fill = _fill(fill)

    def _args(self):
        return {"size": self.size, "padding": self.padding, "pad_if_needed": self.pad_if_needed}

    def _pads(self, sizes):
        pl, pt, pr, pb = (np.full(len(sizes), v, np.int64) for v in self.padding)
        if self.pad_if_needed:
            ey = np.maximum(self.size[0] - (sizes[:, 0] + pt + pb), 0)
            ex = np.maximum(self.size[1] - (sizes[:, 1] + pl + pr), 0)
            pt, pb, pl, pr = pt + ey, pb + ey, pl + ex, pr + ex
        return pl, pt, pr, pb

    def sample(self, rng, n, sizes):
        pl, pt, pr, pb = self._pads(sizes)
        if np.any(sizes[:, 0] + pt + pb < self.size[0]) or np.any(sizes[:, 1] + pl + pr < self.size[1]):
            raise ValueError(f"size: got {self.size}; an image (padded) is smaller, e.g. "
                             f"{tuple(sizes[0])}; pass pad_if_needed=True or a smaller size")
        return {"corner": R.crop_offsets(rng, sizes, self.size, (pl, pt, pr, pb))}

    def out_sizes(self, sizes):
        return fixed_sizes(len(sizes), self.size)

    def matrices(self, params, sizes):
        m = eye(len(sizes))
        m[:, 0, 2], m[:, 1, 2] = -params["corner"][:, 1], -params["corner"][:, 0]
        return m


class RandomPerspective(Geometric):
    """torchvision's RandomPerspective, per sample with probability ``p``: the image corners
    move inwards by up to ``distortion_scale`` of half the size (whole pixels) and the image
    follows (a homography from the corner pixels' centres to the moved points).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomPerspective(0.3, p=1.0)
        RandomPerspective(distortion_scale=0.3, p=1.0, interpolation='bilinear', fill=(0.0,))
    """

    perspective = True

    def __init__(self, distortion_scale=0.5, p=0.5, interpolation="bilinear", fill=0):
        self.distortion_scale = A.number("distortion_scale", distortion_scale, low=0.0, high=1.0)
        self.p = A.prob("p", p)
        self.interpolation = A.interpolation("interpolation", interpolation)
        self.fill = _fill(fill)

    def _args(self):
        return {"distortion_scale": self.distortion_scale, "p": self.p, "interpolation": self.interpolation,
                "fill": self.fill}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n),
                "corners": R.perspective_corners(rng, sizes, self.distortion_scale)}

    def matrices(self, params, sizes):
        n = len(sizes)
        h, w = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
        z = np.zeros(n)
        start = np.stack([np.stack([z, z], 1), np.stack([w - 1, z], 1), np.stack([w - 1, h - 1], 1),
                          np.stack([z, h - 1], 1)], axis=1)
        on = params["apply"]
        m = eye(n)
        if on.any():
            m[on] = homographies(start[on], params["corners"][on])
        return m
