"""Numba twin of channel_shuffle: out[..., c] = x[..., perm[c]]. p = [perm (C)], clamped to [0, C)."""
from ._dual import dual


@dual
def channel_shuffle_value(src, n, y, x, c, p):
    k = int(p[c] + 0.5)
    k = min(max(k, 0), src.shape[3] - 1)
    return float(src[n, y, x, k])
