"""Numba twin of gaussian_blur: the separable reflect-101 filter of :mod:`._filters`, with
the per-sample Gaussian weights the host put in params ([k, w_0 .. w_{k-1}, padding])."""
from ._filters import separable_kernel as kernel  # noqa: F401
