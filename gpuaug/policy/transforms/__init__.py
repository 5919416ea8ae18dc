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

The transforms live by kind in private modules (``_base``: Transform and the step codes;
``_geometry``, ``_colour``, ``_write``, ``_op``); their matrix maths is :mod:`gpuaug.geometry`'s.
Import them from here (``gpuaug.policy.transforms``), which re-exports every name.
"""
from __future__ import annotations

from gpuaug.geometry import EYE9, cos_sin, eye, affine_matrices, box_matrices, homographies  # noqa: F401
from gpuaug.policy.transforms._base import (GRAY_WEIGHTS, OP_AFFINE, OP_GAMMA, OP_GRAY,  # noqa: F401
                                            OP_INVERT, OP_JITTER, OP_POSTERIZE, OP_SOLARIZE, STEP_PARAMS,
                                            Transform, maxv)
from gpuaug.policy.transforms._colour import (ColorJitter, RandomChannelPermutation, RandomGamma,  # noqa: F401
                                              RandomGrayscale, RandomInvert, RandomPosterize, RandomSolarize,
                                              _Colour)
from gpuaug.policy.transforms._geometry import (CenterCrop, RandomAffine, RandomCrop,  # noqa: F401
                                                RandomHorizontalFlip, RandomPerspective, RandomResizedCrop,
                                                RandomRotation, RandomVerticalFlip, Resize, _fill, _Flip,
                                                Geometric)
from gpuaug.policy.transforms._op import (GaussianBlur, GaussianNoise, RandomEqualize,  # noqa: F401
                                          RandomErasing, _Op)
from gpuaug.policy.transforms._write import Normalize, ToDtype, ToLayout, _Write  # noqa: F401

__all__ = ["Transform", "RandomHorizontalFlip", "RandomVerticalFlip", "RandomRotation", "RandomAffine",
           "RandomResizedCrop", "RandomPerspective", "Resize", "CenterCrop", "RandomCrop", "ColorJitter",
           "RandomGrayscale", "RandomChannelPermutation", "RandomGamma", "RandomSolarize", "RandomPosterize",
           "RandomInvert", "GaussianBlur", "GaussianNoise", "RandomErasing", "RandomEqualize", "Normalize",
           "ToDtype", "ToLayout"]

# The classes keep this module as their home: their pickles, reprs and doctests (doctest.testmod
# of this module) are what they were before the split.
for _c in (Transform, Geometric, _Flip, _Colour, _Write, _Op) + tuple(globals()[_n] for _n in __all__):
    _c.__module__ = __name__
del _c
