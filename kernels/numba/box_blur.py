"""Numba twin of box_blur: the separable reflect-101 filter of :mod:`._filters` with weights
1/k ([k, 1/k x k, padding] in params)."""
from ._filters import separable_kernel as kernel  # noqa: F401
