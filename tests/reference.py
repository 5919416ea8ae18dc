"""Independent NumPy references: float64 maths on one HWC sample at a time.

They follow the documented conventions (OpenCV pixel centres, numpy.pad / numpy.rot90
semantics) and know nothing of the library's code.
"""
from __future__ import annotations

import numpy as np


def flip(img, horizontal, vertical):
    out = img
    if horizontal:
        out = out[:, ::-1]
    if vertical:
        out = out[::-1]
    return out
