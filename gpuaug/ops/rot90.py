"""rot90: rotate images by quarter turns counter-clockwise, per sample (as numpy.rot90)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import INTS, compiled, plain
from gpuaug._params import _fmt, column_stack, count_nonzero, per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import is_cuda_array

KERNELS = Kernels(cu=("rot90.cu", "gpuaug_rot90"), numba=("rot90", "rot90_map"))


def rot90(x, k=1, *, out=None, layout="NHWC", stream=None, backend=None):
    """Rotate each image by ``k[n]`` quarter turns counter-clockwise, as ``numpy.rot90``.

    For an ``H x W`` image, with ``q = k[n] % 4``:
    ``q = 1``: ``out[y, x] = x[x, W-1-y]`` (output ``W x H``);
    ``q = 2``: ``out[y, x] = x[H-1-y, W-1-x]`` (``H x W``);
    ``q = 3``: ``out[y, x] = x[H-1-x, y]`` (``W x H``); ``q = 0``: a copy.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        k: int in -3..3 (negative turns clockwise), or a sequence/array of N such ints.
            An odd ``k`` swaps H and W, so in a uniform batch of non-square images every
            ``k`` must have the same parity (a list of images may mix them). ``k`` may be
            a CUDA array only when every image is square (the output shape must be known
            on the host without reading the GPU); it is then not range-checked.
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW"; the output has the same layout.
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        An array like ``x`` with H and W swapped where ``k`` is odd (CuPy for CUDA input,
        NumPy for NumPy input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(6, dtype=np.uint8).reshape(1, 2, 3, 1)
        >>> gpuaug.rot90(x)[0, :, :, 0]
        array([[2, 5],
               [1, 4],
               [0, 3]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    if is_cuda_array(k) and b.device:
        if any(h != w for h, w in b.shapes):
            raise TypeError("k: got a CUDA array, but the images are not square, so k decides the "
                            "output shape, which must be known on the host; pass k as host ints "
                            "(a number, sequence or NumPy array)")
        kk = per_sample(k, b.n, "k", integer=True, device=True)
        shapes, params = b.shapes, None
    else:
        kp = plain(k, b.n)
        params = np.empty((b.n, 1)) if kp is not None and kp.dtype.char in INTS else None
        odd = -1 if params is None else _host_rows(kp, params)  # checked, mod 4, counted: one loop
        if odd >= 0:
            kk = params[:, 0]
        else:
            params = None
            kk = per_sample(k, b.n, "k", integer=True)
            if count_nonzero((kk < -3) | (kk > 3)):
                raise ValueError(f"k: got {_fmt(k)}; expected integers in -3..3 (quarter turns "
                                 "counter-clockwise, negative for clockwise)")
            kk = kk % 4
            odd = count_nonzero(kk & 1)
        if b.varshape:
            shapes = [(w, h) if q % 2 else (h, w) for (h, w), q in zip(b.shapes, kk.tolist())]
        else:
            h, w = b.shapes[0]
            if 0 < odd < b.n and h != w:
                raise ValueError(f"k: got {_fmt(k)}; the images are {h}x{w} (not square) and odd k "
                                 "swaps height and width, so a uniform batch needs every k of one "
                                 "parity (all odd or all even); pass a list of images to mix them")
            shapes = b.uniform((w, h) if odd else (h, w))  # one size: run()'s plans take the call
    if params is None:
        params = column_stack([kk], b.n)
    fast = None
    if be == "cuda" and isinstance(kk, np.ndarray):
        if not odd:
            # k = 2 is a flip of both axes, k = 0 a copy: flip's kernels (and fast paths).
            from gpuaug.ops.flip import flip
            two = kk == 2
            return flip(x, two, two, out=out, layout=layout, stream=stream, backend="cuda")
        if odd == b.n:
            from gpuaug.ops.transpose import tiles_fast
            fast = tiles_fast(kcol=0)
    return run(b, KERNELS, params, shapes=shapes, out=out, backend=be, stream=stream, fast=fast)


@compiled
def _host_rows(k, rows):
    """``rows[:, 0] = k % 4`` for (N,) integers ``k`` and the count of odd ones, or -1 at a value
    outside -3..3 (compared in ``k``'s own type: no wrap-around; the general path refuses it)."""
    odd = 0
    for i in range(k.shape[0]):
        if k[i] < -3 or k[i] > 3:
            return -1
        q = np.int64(k[i]) % 4
        rows[i, 0] = q
        odd += q & 1
    return odd


def _example(rng, n, h, w):
    # Odd k only (quarter turns either way): one output size for non-square images, and
    # the turning kernel rather than flip's (even k is a flip).
    return {"k": rng.choice(np.array([1, 3, -1]), n)}


SPECS = (
    OpSpec("rot90", rot90, params=(
        Param("k", 1, kind="int", low=-3, high=3, expect="integers in -3..3", range_doc="integers in -3..3",
              doc="quarter turns counter-clockwise (-3..3)"),
    ), changes_shape=True, example=_example, demo={"k": 1}, kernels=KERNELS, doc=rot90.__doc__),
)

__all__ = ["rot90"]
