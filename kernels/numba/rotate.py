"""Numba twin of rotate: an affine warp, so the same per-pixel function as warp_affine
(``p`` holds the inverse of OpenCV's getRotationMatrix2D matrix; see warp_affine.py)."""
from .warp_affine import warp_affine_value

rotate_value = warp_affine_value
