"""Numba twin of resized_crop: the same per-pixel maths as resize (whose box is the whole
image); p = [top, left, box_h, box_w, scale_y, scale_x, mode, out_h, out_w]."""
from .resize import resample_value

resized_crop_value = resample_value

__all__ = ["resized_crop_value"]
