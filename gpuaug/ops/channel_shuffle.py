"""channel_shuffle: reorder the channels of each image by a per-sample permutation."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled
from gpuaug._params import per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import choose_backend
from gpuaug.ops._colour import apply, colour_kernels

CHANNELS = (1, 3, 4)
KERNELS = colour_kernels("channel_shuffle", CHANNELS)


def channel_shuffle(x, permutation, *, out=None, layout="NHWC", stream=None, backend=None):
    """Reorder channels: ``out[..., c] = x[..., permutation[c]]`` (exact, any dtype).

    As ``torchvision.transforms.v2.functional.permute_channels`` (``image[permutation]`` on
    CHW). ``permutation`` holds each of 0..C-1 once, for C the input's channel count (any of
    1, 3, 4; RGBA's alpha moves like any channel). Permutations on the GPU are not read back
    to be checked; their indices are clamped to [0, C) in the kernel.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images; uint8,
            float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        permutation: C integers (every sample), or an (N, C) array (one permutation per sample).
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW".
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array like ``x`` (CuPy for CUDA input, NumPy for NumPy input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[[[10, 20, 30]]]], np.uint8)
        >>> gpuaug.channel_shuffle(x, [2, 1, 0])[0, 0, 0]  # RGB -> BGR
        array([30, 20, 10], dtype=uint8)
    """
    b = as_batch(x, layout, channels=CHANNELS)
    be = choose_backend(b, backend)
    c = b.channels
    perm = per_sample(permutation, b.n, "permutation", shape=(c,), integer=True, device=b.device)
    if isinstance(perm, np.ndarray) and not _permutations(perm):
        bad = int(np.argmax(~(np.sort(perm, axis=1) == np.arange(c)).all(axis=1)))
        raise ValueError(f"permutation: got {perm[bad].tolist()} (sample {bad}); expected a permutation "
                         f"of 0..{c - 1} (each channel index once)")
    return apply(b, KERNELS, [perm], out=out, backend=be, stream=stream)


@compiled
def _permutations(perm):
    """Whether every row of the (N, C) int64 ``perm`` holds each of 0..C-1 once (one pass)."""
    c = perm.shape[1]
    for i in range(perm.shape[0]):
        seen = 0
        for j in range(c):
            v = perm[i, j]
            if v < 0 or v >= c:
                return False
            seen |= 1 << v
        if seen != (1 << c) - 1:
            return False
    return True


def _example(rng, n, h, w):
    return {"permutation": np.stack([rng.permutation(3) for _ in range(n)])}


SPECS = (
    OpSpec("channel_shuffle", channel_shuffle, params=(
        Param("permutation", None, shape=("C",), kind="int", range_doc="a permutation of 0..C-1 per sample",
              doc="source channel of each output channel (a permutation of 0..C-1)"),
    ), channels=CHANNELS, geometric=False, example=_example, kernels=KERNELS, doc=channel_shuffle.__doc__,
        demo={"permutation": [2, 0, 1]}),
)

__all__ = ["channel_shuffle"]
