"""erase: fill rectangles (cutout / random erasing), several per sample."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled, plain
from gpuaug._params import column_stack, per_sample, value_shape
from gpuaug._registry import DTYPES, OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import cupy_module, is_cuda_array
from gpuaug.kernels._cuda import kernel_name  # NumPy only: no CUDA import
from gpuaug.ops._intensity import VEC_THREADS, vec_grid
from gpuaug.ops._launch import as_stored, rows_fast, vector_rows

CHANNELS = (1, 3, 4)
KERNELS = Kernels(cu=("erase.cu", "gpuaug_erase"), numba=("erase", "erase_map"),
                  variants=tuple(kernel_name("gpuaug_erase_packed", d, c) for d in DTYPES for c in CHANNELS))
_ROWS = rows_fast(*KERNELS.cu)


def _fast(src, dst):
    """run()'s fast hook: ``gpuaug_erase_packed`` (each sample moved as consecutive 16-byte
    vectors) for dense NHWC batches 16-byte aligned whose rows are whole vectors (224 RGB uint8
    pixels: 42) and fewer than 2**20 (its row arithmetic); else the replace_rows kernel (any
    batch)."""
    geo = vector_rows(src, dst) if src.layout == "NHWC" else None
    if geo is not None and geo[3] < 2 ** 20:
        from gpuaug.kernels._cuda import get_function

        planes, _, vpr, h, _ = geo
        a, o = src.arrays[0], dst.arrays[0]
        fn = get_function(KERNELS.cu[0], kernel_name("gpuaug_erase_packed", src.dtype.name, src.channels))
        grid = vec_grid(planes, vpr * h)

        def launch(par):
            fn(grid, (VEC_THREADS,), (a, o, par, np.int32(par.shape[1]), np.int32(planes), np.int32(vpr),
                                      np.int32(h)))
        return launch
    return _ROWS(src, dst)


def _boxes(boxes, n, device):
    if boxes is None:
        raise TypeError("boxes: got None; expected (K, 4) or (N, K, 4) boxes (top, left, height, width)")
    shape = value_shape(boxes, "boxes", f"(K, 4) boxes (top, left, height, width) for every sample or "
                        f"(N, K, 4) = ({n}, K, 4), one set per sample")
    if len(shape) not in (2, 3) or shape[-1] != 4:
        raise ValueError(f"boxes: got shape {shape}; expected (K, 4) boxes (top, left, height, width) "
                         f"for every sample or (N, K, 4) = ({n}, K, 4), one set per sample")
    k = shape[-2]
    b = per_sample(boxes, n, "boxes", shape=(k, 4), integer=True, device=device)
    if isinstance(b, np.ndarray) and b.size:  # one reduction each (np.any's Python layers cost more)
        if np.minimum.reduce(b[..., 2:], axis=None) < 0:
            raise ValueError(f"boxes: got a negative height or width ({b[..., 2:].min()}); expected sizes >= 0")
        if np.maximum.reduce(b, axis=None) >= 2 ** 24 or np.minimum.reduce(b, axis=None) <= -2 ** 24:
            raise ValueError("boxes: got coordinates beyond 2**24; expected pixel coordinates")
    return b.reshape(n, 4 * k), k


def _values(value, n, c, device, broadcast=True):
    """Fill values -> (N, C): a number, N numbers (per sample), C numbers (per channel,
    when N != C), or an (N, C) / (1, C) array. ``broadcast=False``: one value per sample
    stays (N, 1)."""
    shape = value_shape(value, "value", "a number, N numbers (one per sample), C numbers (one per "
                        "channel) or an (N, C) array")
    if len(shape) == 2 and shape[0] == 1 and shape[1] == c and n != 1:  # (1, C): per channel
        v = per_sample(value[0] if is_cuda_array(value) else np.asarray(value)[0], n, "value", shape=(c,),
                       device=device)
    elif (len(shape) == 1 and shape[0] == c and c != n) or len(shape) == 2:  # per channel, or (N, C)
        v = per_sample(value, n, "value", shape=(c,), device=device)
    else:
        v = per_sample(value, n, "value", device=device).reshape(n, 1)
        if broadcast:
            xp = np if isinstance(v, np.ndarray) else cupy_module()
            v = xp.broadcast_to(v, (n, c))
    return v


@compiled
def _host_rows(bx, vals, c, u8, rows):
    """The rows ``[fill x 4, K, boxes...]`` of host values in one loop: ``bx`` the (N, K, 4)
    integer boxes, ``vals`` (N, C) or (N, 1) fills stored as :func:`as_stored` stores them in
    uint8 (``u8``) or float32; False at a box :func:`_boxes` refuses or a fill that is not
    finite (the general path then says what is wrong)."""
    n, k, m = bx.shape[0], bx.shape[1], vals.shape[1]
    for i in range(n):
        for j in range(4):
            v = 0.0
            if j < c:
                v = np.float64(vals[i, j if m > 1 else 0])
                if not np.isfinite(v):
                    return False
                if u8:  # np.add(v, 0.5), floor, maximum(0), minimum(255)
                    v = min(max(np.floor(v + 0.5), 0.0), 255.0)
                else:
                    v = np.float64(np.float32(v))
            rows[i, j] = v
        rows[i, 4] = k
        for b in range(k):
            for q in range(4):
                e = np.int64(bx[i, b, q])
                if q >= 2 and e < 0 or e >= 16777216 or e <= -16777216:
                    return False
                rows[i, 5 + 4 * b + q] = e
    return True


def erase(x, boxes, value=0, *, out=None, layout="NHWC", stream=None, backend=None):
    """Fill rectangles with a value: ``out = value`` inside any box, ``x`` elsewhere.

    A box ``(top, left, height, width)`` (integers, pixels) covers rows
    ``top <= y < top + height`` and columns ``left <= x < left + width``; it may stick
    out of the image (only the inside part is filled) and may be empty (height or
    width 0). Boxes of one sample may overlap.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        boxes: (K, 4) boxes used for every sample, or (N, K, 4): K boxes per sample
            (use empty boxes to give samples fewer).
        value: fill value: a number; N numbers (one per sample); C numbers (one per
            channel, when N != C; when N == C a length-N sequence is per sample, so
            pass (1, C) for per-channel); or an (N, C) array. uint8 values round and
            saturate.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (or a list, for a varshape batch).

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.full((2, 4, 5, 1), 9, np.uint8)
        >>> gpuaug.erase(x, [[1, 1, 2, 3]], value=[0, 7])[:, :, :, 0]
        array([[[9, 9, 9, 9, 9],
                [9, 0, 0, 0, 9],
                [9, 0, 0, 0, 9],
                [9, 9, 9, 9, 9]],
        <BLANKLINE>
               [[9, 9, 9, 9, 9],
                [9, 7, 7, 7, 9],
                [9, 7, 7, 7, 9],
                [9, 9, 9, 9, 9]]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    if type(boxes) is np.ndarray and boxes.ndim == 3 and boxes.shape[0] == b.n and boxes.shape[2] == 4 and (
            b.dtype == np.uint8 or b.dtype == np.float32):  # host boxes and values: rows in one loop
        kind = boxes.dtype.kind  # integers int64 holds: as they are (the loop converts them)
        bx = boxes if kind == "i" or kind == "u" and boxes.itemsize <= 4 else per_sample(
            boxes, b.n, "boxes", shape=boxes.shape[1:], integer=True)
        v = plain(value, b.n)  # one value per sample, as it is (the loop checks it is finite)
        vals = v.reshape(b.n, 1) if v is not None else _values(value, b.n, b.channels, b.device, broadcast=False)
        if type(vals) is np.ndarray:
            k = boxes.shape[1]
            params = np.empty((b.n, 5 + 4 * k))
            if _host_rows(bx, vals, b.channels, b.dtype == np.uint8, params):
                return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream,
                           fill=params[:, :b.channels], fast=_fast)
    bx, k = _boxes(boxes, b.n, b.device)
    vals = as_stored(_values(value, b.n, b.channels, b.device), b.dtype)  # exact on every backend
    xp = np if isinstance(vals, np.ndarray) else cupy_module()
    if xp is np and type(bx) is np.ndarray:  # [fill x 4, K, boxes...] written in place
        params = np.zeros((b.n, 5 + 4 * k))
        params[:, :b.channels] = vals
        params[:, 4] = k
        params[:, 5:] = bx
    else:
        fill4 = xp.zeros((b.n, 4))
        fill4[:, :b.channels] = vals
        params = column_stack([fill4, np.full(b.n, float(k)), bx], b.n)
    fill = vals if xp is np or be == "cuda" else cupy_module().asnumpy(vals)  # Numba twins: host fills
    return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream, fill=fill,
               fast=_fast)


def _example(rng, n, h, w):
    k = 2
    hh = rng.integers(0, h // 2 + 1, (n, k))
    ww = rng.integers(0, w // 2 + 1, (n, k))
    top = rng.integers(-2, h, (n, k))
    left = rng.integers(-2, w, (n, k))
    return {"boxes": np.stack([top, left, hh, ww], -1), "value": rng.integers(0, 256, n).astype(float)}


SPECS = (
    OpSpec("erase", erase, params=(
        Param("boxes", None, shape=(None, 4), kind="int",
              range_doc="(K, 4) or (N, K, 4) ints, height and width >= 0, coordinates below 2**24 "
                        "(boxes may leave the image: clipped)",
              doc="(K, 4) or (N, K, 4) boxes (top, left, height, width), required"),
        Param("value", 0, doc="fill value: per sample, per channel or (N, C)"),
    ), example=_example, kernels=KERNELS, geometric=False, doc=erase.__doc__,
        demo={"boxes": [[40, 40, 60, 80]], "value": 0}),
)

__all__ = ["erase"]
