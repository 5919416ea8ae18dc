"""Numba twin of crop / center_crop: output pixel (y, x) reads (y + top, x + left);
p = [top, left]. Source pixels outside the image give the fill value (zero): that is
center_crop's padding, and it keeps an unchecked window (offsets on the GPU) in bounds.
"""
from ._dual import dual


@dual
def crop_map(y, x, sh, sw, p):
    sy = y + int(p[0])
    sx = x + int(p[1])
    if sy < 0 or sy >= sh or sx < 0 or sx >= sw:
        return -1, -1
    return sy, sx
