"""Numba twin of erase: output pixel (y, x) is copied unless it lies in one of the K boxes.

p = [fill_0..fill_3, K, (top, left, height, width) x K]; a box covers
top <= y < top + height and left <= x < left + width.
"""
from ._dual import dual


@dual
def erase_map(y, x, sh, sw, p):
    k = int(p[4])
    for i in range(k):
        j = 5 + 4 * i
        if y >= p[j] and y < p[j] + p[j + 2] and x >= p[j + 1] and x < p[j + 1] + p[j + 3]:
            return -1, -1
    return y, x
