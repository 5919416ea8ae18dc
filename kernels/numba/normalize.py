"""Numba twin of normalize: crop_mirror_normalize's value function with no crop and no
mirror (p = [0, 0, 0, h, w, mean[C], std[C]]; out = (x - mean) / std)."""
from .crop_mirror_normalize import cmn_value as normalize_value  # noqa: F401
