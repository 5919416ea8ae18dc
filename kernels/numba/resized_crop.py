"""Numba twin of resized_crop: the same per-pixel maths as resize (whose box is the whole
image); p = [top, left, scale_y, scale_x, box_h, box_w, out_h, out_w, mode, ...]."""
from .resize import resample_value

resized_crop_value = resample_value

__all__ = ["resized_crop_value"]
