"""Random transforms for :class:`gpuaug.Compose`, with torchvision's (and, where torchvision has
none, Albumentations') names, arguments and sampling.

Every transform draws its parameters per sample (``p`` is a per-sample probability) through
:mod:`gpuaug.random`, and is one of four kinds, which decide how Compose fuses it:

- ``geometry``: a per-sample 3x3 matrix (source -> destination pixel coordinates, pixel
  centres at integers as in OpenCV) and an output size: flips, crops, resizes, rotations,
  affine and perspective warps. Consecutive ones compose into one matrix and one resampling.
- ``colour``: steps of a per-sample colour program (fused.cuh): ColorJitter, RandomGrayscale,
  RandomChannelPermutation, RandomGamma, RandomSolarize, RandomPosterize, RandomInvert.
- ``write``: Normalize, ToDtype, ToLayout: a per-channel scale and bias and the output's dtype
  and layout, applied as the fused stage stores.
- ``op``: GaussianBlur, GaussianNoise, RandomErasing, RandomEqualize: run as the existing op,
  between fused stages.

Differences from torchvision, all deliberate:

- parameters are drawn per sample, not once per batch (torchvision's v2 transforms give a
  batch tensor one set); ColorJitter applies brightness, contrast, saturation, hue in that
  fixed order (torchvision permutes the order at random per call);
- geometry resamples bilinearly by default (torchvision's RandomRotation and RandomAffine
  default to nearest; pass ``interpolation="nearest"``), resizes are not antialiased
  (``antialias`` is accepted and ignored: bilinear from the 4 nearest pixels, as OpenCV's
  INTER_LINEAR and DALI), and rotation / affine / perspective centres use pixel-centre
  coordinates (the centre of an h x w image is ((w - 1) / 2, (h - 1) / 2), torchvision's too);
- values keep torchvision's ranges: uint8 images hold 0..255 (thresholds in those units), float
  images 0..1; Normalize takes torchvision's [0, 1]-unit mean and std and divides uint8 input
  by 255 first (as ToTensor + Normalize, or Albumentations' ``max_pixel_value``).

Example::

    >>> import numpy as np, gpuaug
    >>> t = gpuaug.RandomAffine(degrees=10, translate=(0.1, 0.1))
    >>> t.kind, sorted(t.sample(np.random.default_rng(0), 2, np.array([[32, 32]] * 2)))
    ('geometry', ['angle', 'scale', 'shear_x', 'shear_y', 'tx', 'ty'])
"""
from __future__ import annotations

import numpy as np

from gpuaug import random as R
from gpuaug._util import dtype_max as maxv
from gpuaug.geometry import _cos_sin
from gpuaug.policy import _args as A

# colour program step codes (kernels/fused.cuh)
OP_JITTER, OP_GRAY, OP_AFFINE, OP_GAMMA, OP_SOLARIZE, OP_POSTERIZE, OP_INVERT = 1, 2, 3, 4, 5, 6, 7
STEP_PARAMS = {OP_JITTER: 4, OP_GRAY: 1, OP_AFFINE: 12, OP_GAMMA: 2, OP_SOLARIZE: 1, OP_POSTERIZE: 1,
               OP_INVERT: 1}
GRAY_WEIGHTS = (0.2989, 0.587, 0.114)

__all__ = ["Transform", "RandomHorizontalFlip", "RandomVerticalFlip", "RandomRotation", "RandomAffine",
           "RandomResizedCrop", "RandomPerspective", "Resize", "CenterCrop", "RandomCrop", "ColorJitter",
           "RandomGrayscale", "RandomChannelPermutation", "RandomGamma", "RandomSolarize", "RandomPosterize",
           "RandomInvert", "GaussianBlur", "GaussianNoise", "RandomErasing", "RandomEqualize", "Normalize",
           "ToDtype", "ToLayout"]


class Transform:
    """Base class. ``kind``: "geometry", "colour", "write" or "op" (see the module docstring).

    ``sample(rng, n, sizes)`` draws the per-sample parameters of ``n`` images of sizes
    ``sizes`` ((n, 2) int (height, width)) and returns a dict of (n, ...) NumPy arrays;
    ``out_sizes(sizes)`` is the images' sizes after the transform.
    """

    kind = ""

    def sample(self, rng, n, sizes) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

    def out_sizes(self, sizes):
        return sizes

    def _args(self) -> dict:
        return {}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._args().items())
        return f"{type(self).__name__}({args})"


# ------------------------------------------------------------------------------ geometry
_EYE9 = np.eye(3).reshape(9)


def _eye(n):
    m = np.empty((n, 9))
    m[:] = _EYE9  # (np.tile: ~3 us more per call for the same values)
    return m.reshape(n, 3, 3)


def affine_matrices(sizes, angle, tx, ty, scale, shear_x, shear_y, center=None):
    """torchvision's affine map (``_get_inverse_affine_matrix(..., inverted=False)``) as
    (n, 3, 3) source -> destination matrices in pixel-centre coordinates: rotation by ``angle``
    degrees *clockwise* on screen (torchvision's F.affine convention), scale, shears (degrees)
    about the centre, then translation by (tx, ty) pixels. ``center``: (cx, cy) in pixel-centre
    coordinates, default the image centre."""
    n = len(angle)
    h, w = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
    cx, cy = ((w - 1) / 2, (h - 1) / 2) if center is None else (np.full(n, center[0]), np.full(n, center[1]))
    angle = np.asarray(angle, np.float64)
    cr, sr = _cos_sin(angle)
    if np.asarray(shear_x).any() or np.asarray(shear_y).any():  # methods: np.any's wrapper costs ~1 us
        sx, sy = np.deg2rad(shear_x), np.deg2rad(shear_y)
        cos_sy, tan_sx = np.cos(sy), np.tan(sx)
        crs, srs = _cos_sin(angle - shear_y)
        a = crs / cos_sy
        c = srs / cos_sy
        b = -(a * tan_sx + sr)
        d = cr - c * tan_sx
    else:
        a, b, c, d = cr, -sr, sr, cr
    m = np.zeros((n, 9))
    m[:, 0], m[:, 1], m[:, 3], m[:, 4] = a * scale, b * scale, c * scale, d * scale
    m[:, 2] = cx + tx - m[:, 0] * cx - m[:, 1] * cy
    m[:, 5] = cy + ty - m[:, 3] * cx - m[:, 4] * cy
    m[:, 8] = 1.0
    return m.reshape(n, 3, 3)


def box_matrices(boxes, out_hw):
    """(n, 3, 3) maps of a resize of box (top, left, height, width) to ``out_hw``, with
    gpuaug.resized_crop's pixel centres: output pixel x reads ``left + (x + 0.5) * bw / W - 0.5``."""
    top, left, bh, bw = (boxes[:, k].astype(np.float64) for k in range(4))
    fy, fx = out_hw[0] / bh, out_hw[1] / bw
    m = np.zeros((len(boxes), 3, 3))
    m[:, 0, 0], m[:, 1, 1], m[:, 2, 2] = fx, fy, 1.0
    m[:, 0, 2] = (0.5 - left) * fx - 0.5
    m[:, 1, 2] = (0.5 - top) * fy - 0.5
    return m


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


class _Geometric(Transform):
    kind = "geometry"
    perspective = False       # needs a projective division
    interpolation = None      # "bilinear" / "nearest"; None: exact maps (flips, integer crops)
    fill = None               # per-channel fill tuple when the transform can read outside the image

    def needs_fill(self):
        return self.fill is not None

    def matrices(self, params, sizes):  # pragma: no cover - abstract
        """(n, 3, 3) source -> destination maps for images of ``sizes``."""
        raise NotImplementedError


class _Flip(_Geometric):
    axis = 1

    def __init__(self, p=0.5):
        self.p = A.prob("p", p)

    def _args(self):
        return {"p": self.p}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n)}

    def matrices(self, params, sizes):
        on = params["apply"]
        m = _eye(len(on))
        k = self.axis  # 1: x (horizontal), 0: y
        row = 0 if k == 1 else 1
        m[:, row, row] = 1.0 - 2.0 * on
        m[:, row, 2] = on * (sizes[:, k] - 1.0)
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


class RandomAffine(_Geometric):
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
        return R.affine(rng, n, sizes, self.degrees, self.translate, self.scale, self.shear)

    def matrices(self, params, sizes):
        ctr = None if self.center is None else (self.center[0] - 0.5, self.center[1] - 0.5)
        return affine_matrices(sizes, params["angle"], params["tx"], params["ty"], params["scale"],
                               params["shear_x"], params["shear_y"], ctr)


class RandomRotation(_Geometric):
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


class RandomResizedCrop(_Geometric):
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
        return {"boxes": R.resized_crop_boxes(rng, sizes, self.scale, self.ratio)}

    def out_sizes(self, sizes):
        return np.broadcast_to(np.asarray(self.size, np.int64), (len(sizes), 2))

    def matrices(self, params, sizes):
        return box_matrices(params["boxes"], self.size)


class Resize(_Geometric):
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
        return np.broadcast_to(np.asarray(self.size, np.int64), (len(sizes), 2))

    def matrices(self, params, sizes):
        boxes = np.concatenate([np.zeros((len(sizes), 2)), sizes], axis=1)
        return box_matrices(boxes, self.size)


class CenterCrop(_Geometric):
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
        return np.broadcast_to(np.asarray(self.size, np.int64), (len(sizes), 2))

    def matrices(self, params, sizes):
        top = np.rint((sizes[:, 0] - self.size[0]) / 2.0)
        left = np.rint((sizes[:, 1] - self.size[1]) / 2.0)
        m = _eye(len(sizes))
        m[:, 0, 2], m[:, 1, 2] = -left, -top
        return m


class RandomCrop(_Geometric):
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
        return np.broadcast_to(np.asarray(self.size, np.int64), (len(sizes), 2))

    def matrices(self, params, sizes):
        m = _eye(len(sizes))
        m[:, 0, 2], m[:, 1, 2] = -params["corner"][:, 1], -params["corner"][:, 0]
        return m


class RandomPerspective(_Geometric):
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
        m = _eye(n)
        if on.any():
            m[on] = homographies(start[on], params["corners"][on])
        return m


# ------------------------------------------------------------------------------ colour
class _Colour(Transform):
    kind = "colour"
    contrast = False  # needs the per-image mean (one JITTER with contrast per fused stage)

    def steps(self, params, channels):  # pragma: no cover - abstract
        """[(step code, (n, k) float64 parameters), ...] of the colour program."""
        raise NotImplementedError


class ColorJitter(_Colour):
    """torchvision's ColorJitter, per sample: brightness, contrast, saturation factors and a hue
    shift drawn uniformly from their ranges, applied in that fixed order with gpuaug.color_jitter's
    maths (contrast blends with the image's mean gray; see Compose for which image). ``p``
    (Albumentations' argument, default 1): the probability a sample is jittered at all.

    Ranges as torchvision: a number v gives (max(0, 1 - v), 1 + v) for the factors and (-v, v)
    for hue (v <= 0.5); or pass (min, max). 0 or None leaves the quantity alone.

    Example::

        >>> import gpuaug
        >>> gpuaug.ColorJitter(0.4, 0.4, 0.4, 0.1).brightness
        (0.6, 1.4)
    """

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0, p=1.0):
        def factor(name, v):
            r = A.sym_range(name, v, center=1.0, low=0.0)
            return None if r is None or r == (1.0, 1.0) else r

        self.brightness = factor("brightness", brightness)
        self.contrast_range = factor("contrast", contrast)
        self.saturation = factor("saturation", saturation)
        h = A.sym_range("hue", hue, low=-0.5, high=0.5)
        self.hue = None if h is None or h == (0.0, 0.0) else h
        self.p = A.prob("p", p)
        self.contrast = self.contrast_range is not None

    def _args(self):
        return {"brightness": self.brightness, "contrast": self.contrast_range, "saturation": self.saturation,
                "hue": self.hue, "p": self.p}

    def sample(self, rng, n, sizes):
        # one block: n uniforms for p, then for each range that is given, in this order
        ranges = (("brightness", self.brightness, 1.0), ("contrast", self.contrast_range, 1.0),
                  ("saturation", self.saturation, 1.0), ("hue", self.hue, 0.0))
        u = rng.random((1 + sum(r is not None for _, r, _ in ranges), n))
        on = u[0] < self.p
        out, k = {"apply": on}, 1
        for key, r, neutral in ranges:
            if r is None:
                out[key] = np.full(n, neutral)
                continue
            v = r[0] + (r[1] - r[0]) * u[k]
            k += 1
            out[key] = v if self.p == 1.0 else np.where(on, v, neutral)
        return out

    def steps(self, params, channels):
        return [(OP_JITTER, np.stack([params["brightness"], params["contrast"], params["saturation"],
                                      params["hue"]], axis=1))]


class RandomGrayscale(_Colour):
    """torchvision's RandomGrayscale: with probability ``p`` per sample, every colour channel
    becomes ``0.2989 r + 0.587 g + 0.114 b`` (gpuaug.grayscale's maths; alpha kept; one-channel
    images unchanged).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomGrayscale()
        RandomGrayscale(p=0.1)
    """

    def __init__(self, p=0.1):
        self.p = A.prob("p", p)

    def _args(self):
        return {"p": self.p}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n)}

    def steps(self, params, channels):
        return [(OP_GRAY, params["apply"].astype(np.float64)[:, None])]


class RandomChannelPermutation(_Colour):
    """torchvision's RandomChannelPermutation for RGB: a uniformly random order of the three
    colour channels per sample (a 3x4 colour matrix; alpha stays in place).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomChannelPermutation()
        RandomChannelPermutation()
    """

    def sample(self, rng, n, sizes):
        return {"permutation": R.permutations(rng, n, 3)}

    def steps(self, params, channels):
        perm = params["permutation"]
        n = len(perm)
        m = np.zeros((n, 3, 4))
        m[np.arange(n)[:, None], np.arange(3)[None, :], perm] = 1.0
        return [(OP_AFFINE, m.reshape(n, 12))]


class RandomGamma(_Colour):
    """Albumentations' RandomGamma: with probability ``p``, ``x = M (x / M) ** gamma`` with
    ``gamma = U(gamma_limit) / 100`` (gpuaug.gamma's maths, every channel).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomGamma((80, 120)).gamma_limit
        (80.0, 120.0)
    """

    def __init__(self, gamma_limit=(80, 120), p=0.5):
        self.gamma_limit = A.sym_range("gamma_limit", gamma_limit, center=100.0, low=0.0, allow_none=False)
        self.p = A.prob("p", p)

    def _args(self):
        return {"gamma_limit": self.gamma_limit, "p": self.p}

    def sample(self, rng, n, sizes):
        on = R.bernoulli(rng, self.p, n)
        g = R.uniform(rng, self.gamma_limit[0], self.gamma_limit[1], n) / 100.0
        return {"apply": on, "gamma": np.where(on, g, 1.0)}

    def steps(self, params, channels):
        return [(OP_GAMMA, np.stack([params["gamma"], np.ones(len(params["gamma"]))], axis=1))]


class RandomSolarize(_Colour):
    """torchvision's RandomSolarize: with probability ``p``, values ``>= threshold`` become
    ``M - x`` (threshold in the image's units: 0..255 for uint8, 0..1 for floats).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomSolarize(128).threshold
        128.0
    """

    def __init__(self, threshold, p=0.5):
        self.threshold = A.number("threshold", threshold, low=0.0)
        self.p = A.prob("p", p)

    def _args(self):
        return {"threshold": self.threshold, "p": self.p}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n)}

    def steps(self, params, channels):
        from gpuaug.ops._launch import float32_at_least

        # the smallest float32 >= threshold: the CPU twin (float64 parameters) and the GPU
        # (float32) then decide alike for every float32 value, as gpuaug.solarize does
        t = float32_at_least(np.asarray(self.threshold, np.float64))
        return [(OP_SOLARIZE, np.where(params["apply"], t, np.inf)[:, None])]


class RandomPosterize(_Colour):
    """torchvision's RandomPosterize: with probability ``p``, keep ``bits`` bits (1..8) of
    every value (gpuaug.posterize's rule for uint8 and floats).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomPosterize(4).bits
        4
    """

    def __init__(self, bits, p=0.5):
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 8:
            raise ValueError(f"bits: got {bits!r}; expected an int in 1..8")
        self.bits = int(bits)
        self.p = A.prob("p", p)

    def _args(self):
        return {"bits": self.bits, "p": self.p}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n)}

    def steps(self, params, channels):
        return [(OP_POSTERIZE, np.where(params["apply"], float(self.bits), 0.0)[:, None])]


class RandomInvert(_Colour):
    """torchvision's RandomInvert: with probability ``p``, ``x = M - x`` (every channel).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomInvert(0.3)
        RandomInvert(p=0.3)
    """

    def __init__(self, p=0.5):
        self.p = A.prob("p", p)

    def _args(self):
        return {"p": self.p}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n)}

    def steps(self, params, channels):
        return [(OP_INVERT, params["apply"].astype(np.float64)[:, None])]


# ------------------------------------------------------------------------------ write
class _Write(Transform):
    kind = "write"

    def sample(self, rng, n, sizes):
        return {}

    def apply(self, state):  # pragma: no cover - abstract
        """Update the write state (a dict: dtype, layout, scale (C,), bias (C,))."""
        raise NotImplementedError


class Normalize(_Write):
    """``out = (x / max_pixel_value - mean) / std`` per channel, stored as ``dtype`` in ``layout``.

    As torchvision's ToTensor (or ToDtype(float32, scale=True)) followed by Normalize: mean and
    std are in [0, 1] units and uint8 input is divided by 255 first (``max_pixel_value``:
    None = 255 for uint8, 1 for floats; Albumentations' argument). By default it ends the policy
    with float32 NCHW. Unlike gpuaug.normalize, whose mean/std are in the input's own units.

    Example::

        >>> import gpuaug
        >>> gpuaug.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)).layout
        'NCHW'
    """

    def __init__(self, mean, std, dtype="float32", layout="NCHW", max_pixel_value=None):
        self.mean = A.per_channel("mean", mean)
        self.std = A.per_channel("std", std)
        if any(s == 0 for s in self.std):
            raise ValueError(f"std: got {self.std}; expected non-zero values")
        self.dtype = A.dtype("dtype", dtype, ("float16", "float32"))
        self.layout = A.layout("layout", layout)
        self.max_pixel_value = None if max_pixel_value is None else A.number(
            "max_pixel_value", max_pixel_value, low=0.0, low_open=True)

    def _args(self):
        return {"mean": self.mean, "std": self.std, "dtype": self.dtype, "layout": self.layout}

    def apply(self, st):
        c = len(st["scale"])
        mean = A.channels_of("mean", self.mean, c)
        std = A.channels_of("std", self.std, c)
        mp = self.max_pixel_value or maxv(st["dtype"])
        st["scale"] = st["scale"] / (mp * std)
        st["bias"] = (st["bias"] / mp - mean) / std
        st["dtype"], st["layout"] = self.dtype, self.layout
        return st


class ToDtype(_Write):
    """torchvision's ToDtype: convert to ``dtype``; with ``scale`` the value range follows
    (uint8 0..255 <-> floats 0..1). Before any geometry or colour transform of a stage, a
    uint8 -> float conversion makes the transforms after it work on [0, 1] floats, as in
    torchvision (no extra pass: the kernel scales as it loads).

    Example::

        >>> import gpuaug
        >>> gpuaug.ToDtype("float32", scale=True)
        ToDtype(dtype='float32', scale=True)
    """

    def __init__(self, dtype, scale=False):
        self.dtype = A.dtype("dtype", dtype)
        self.scale = A.flag("scale", scale)

    def _args(self):
        return {"dtype": self.dtype, "scale": self.scale}

    def factor(self, from_dtype):
        return maxv(self.dtype) / maxv(from_dtype) if self.scale else 1.0

    def apply(self, st):
        f = self.factor(st["dtype"])
        st["scale"], st["bias"] = st["scale"] * f, st["bias"] * f
        st["dtype"] = self.dtype
        return st


class ToLayout(_Write):
    """Write the output in ``layout`` ("NCHW" or "NHWC"); no pass of its own.

    Example::

        >>> import gpuaug
        >>> gpuaug.ToLayout("NCHW")
        ToLayout(layout='NCHW')
    """

    def __init__(self, layout):
        self.layout = A.layout("layout", layout)

    def _args(self):
        return {"layout": self.layout}

    def apply(self, st):
        st["layout"] = self.layout
        return st


# ------------------------------------------------------------------------------ ops
class _Op(Transform):
    kind = "op"
    op = ""

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):  # pragma: no cover - abstract
        raise NotImplementedError


class GaussianBlur(_Op):
    """torchvision's GaussianBlur: ``sigma ~ U(sigma)`` per sample, one odd ``kernel_size``
    (square), with probability ``p`` (default 1; unblurred samples get a 1-tap kernel); runs
    gpuaug.gaussian_blur (reflect-101 borders).

    Example::

        >>> import gpuaug
        >>> gpuaug.GaussianBlur(5, sigma=(0.1, 2.0)).kernel_size
        5
    """

    op = "gaussian_blur"

    def __init__(self, kernel_size, sigma=(0.1, 2.0), p=1.0):
        ks = kernel_size
        if not isinstance(ks, (int, np.integer)) or isinstance(ks, bool):
            t = A.numbers_seq("kernel_size", ks, (1, 2))
            if len(set(t)) != 1:
                raise ValueError(f"kernel_size: got {kernel_size!r}; gpuaug's blur is square: give one odd size")
            ks = t[0]
        if not float(ks).is_integer() or ks < 1 or int(ks) % 2 == 0:
            raise ValueError(f"kernel_size: got {kernel_size!r}; expected an odd int >= 1")
        self.kernel_size = int(ks)
        self.sigma = A.sym_range("sigma", sigma, allow_none=False) if not A.is_number(sigma) else \
            (A.number("sigma", sigma, low=0.0, low_open=True),) * 2
        if self.sigma[0] <= 0:
            raise ValueError(f"sigma: got {sigma!r}; expected sigmas > 0")
        self.p = A.prob("p", p)

    def _args(self):
        return {"kernel_size": self.kernel_size, "sigma": self.sigma, "p": self.p}

    def sample(self, rng, n, sizes):
        on = R.bernoulli(rng, self.p, n)
        return {"apply": on, "sigma": R.uniform(rng, self.sigma[0], self.sigma[1], n)}

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):
        import gpuaug

        ks = np.where(params["apply"], self.kernel_size, 1)
        return gpuaug.gaussian_blur(x, params["sigma"], ks, out=out, layout=layout, backend=backend, stream=stream)


class GaussianNoise(_Op):
    """torchvision's GaussianNoise: ``x + mean + sigma z`` with ``z ~ N(0, 1)`` per element (mean
    and sigma in [0, 1] units: scaled by 255 for uint8), with probability ``p`` per sample
    (default 1); runs gpuaug.gaussian_noise with a seed drawn per call. uint8 saturates; float
    results are clipped to [0, 1] when ``clip`` (torchvision's default).

    Example::

        >>> import gpuaug
        >>> gpuaug.GaussianNoise(sigma=0.05).sigma
        0.05
    """

    op = "gaussian_noise"

    def __init__(self, mean=0.0, sigma=0.1, clip=True, p=1.0):
        big = float(np.finfo(np.float64).max) / 255  # scaled by 255 for uint8: must stay finite
        self.mean = A.number("mean", mean, low=-big, high=big)
        self.sigma = A.number("sigma", sigma, low=0.0, high=big)
        self.clip = A.flag("clip", clip)
        self.p = A.prob("p", p)

    def _args(self):
        return {"mean": self.mean, "sigma": self.sigma, "clip": self.clip, "p": self.p}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n), "seed": np.full(n, R.seed64(rng), np.int64)}

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):
        import gpuaug

        m = maxv(dtype)
        on = params["apply"]
        y = gpuaug.gaussian_noise(x, np.where(on, self.mean * m, 0.0), np.where(on, self.sigma * m, 0.0),
                                  int(params["seed"][0]), out=out, layout=layout, backend=backend, stream=stream)
        if self.clip and np.dtype(dtype) != np.uint8:
            for a in (y if isinstance(y, list) else [y]):
                a.clip(0.0, 1.0, out=a)
        return y


class RandomErasing(_Op):
    """torchvision's RandomErasing: with probability ``p`` per sample, a box of area
    ``~ U(scale)`` of the image's and aspect ratio ``~ exp(U(log ratio))`` (10 tries) is set to
    ``value`` (a number or one per channel, in the image's units at that point of the policy);
    runs gpuaug.erase.

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomErasing(p=0.25).scale
        (0.02, 0.33)
    """

    op = "erase"

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0):
        self.p = A.prob("p", p)
        self.scale = A.numbers_seq("scale", scale, (2,))
        if not 0 <= self.scale[0] <= self.scale[1] <= 1:
            raise ValueError(f"scale: got {scale!r}; expected (min, max) with 0 <= min <= max <= 1")
        self.ratio = A.numbers_seq("ratio", ratio, (2,))
        if not 0 < self.ratio[0] <= self.ratio[1]:
            raise ValueError(f"ratio: got {ratio!r}; expected (min, max) with 0 < min <= max")
        if isinstance(value, str):
            raise ValueError(f"value: got {value!r}; expected a number or one number per channel "
                             "('random' is not supported)")
        self.value = A.per_channel("value", value)

    def _args(self):
        return {"p": self.p, "scale": self.scale, "ratio": self.ratio, "value": self.value}

    def sample(self, rng, n, sizes):
        on = R.bernoulli(rng, self.p, n)
        boxes = R.erasing_boxes(rng, sizes, self.scale, self.ratio)
        boxes[~on, 2:] = 0
        return {"apply": on, "boxes": boxes}

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):
        import gpuaug

        value = self.value[0] if len(self.value) == 1 else np.asarray(self.value)[None]
        return gpuaug.erase(x, params["boxes"][:, None, :], value, out=out, layout=layout, backend=backend,
                            stream=stream)


class RandomEqualize(_Op):
    """torchvision's RandomEqualize: with probability ``p`` per sample, histogram-equalise each
    channel (gpuaug.equalize, on the chosen samples only).

    Example::

        >>> import gpuaug
        >>> gpuaug.RandomEqualize(0.5)
        RandomEqualize(p=0.5)
    """

    op = "equalize"

    def __init__(self, p=0.5):
        self.p = A.prob("p", p)

    def _args(self):
        return {"p": self.p}

    def sample(self, rng, n, sizes):
        return {"apply": R.bernoulli(rng, self.p, n)}

    def run(self, x, params, *, dtype, layout, backend, stream, out=None):
        import gpuaug

        on = params["apply"]
        idx = np.flatnonzero(on)
        if len(idx) == len(on):
            return gpuaug.equalize(x, out=out, layout=layout, backend=backend, stream=stream)
        if isinstance(x, list):
            y = [a.copy() for a in x] if out is None else out
            if out is not None:
                for o, a in zip(out, x):
                    o[...] = a
            if len(idx):
                for i, e in zip(idx, gpuaug.equalize([x[i] for i in idx], backend=backend, stream=stream)):
                    y[i][...] = e
            return y
        y = x.copy() if out is None else out
        if out is not None:
            y[...] = x
        if len(idx):
            sel = idx if isinstance(x, np.ndarray) else __import__("cupy").asarray(idx)
            y[sel] = gpuaug.equalize(x[sel], layout=layout, backend=backend, stream=stream)
        return y
