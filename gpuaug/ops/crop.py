"""crop and center_crop: cut a window out of each image (per-sample offsets)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import INTS, compiled, plain
from gpuaug._params import column_stack, count_nonzero, host_size, per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, contiguous_rows, run
from gpuaug._util import is_cuda_array
from gpuaug.kernels._cuda import CTYPES as _CT  # dtype name -> the fast kernels' CUDA C element type

KERNELS = Kernels(cu=("crop.cu", "gpuaug_crop"), numba=("crop", "crop_map"),
                  variants=tuple(f"gpuaug_window_rows<{t}, {v}>" for t in _CT.values()
                                 for v in (4, 8, 16)))


def host_ints(value, n, name, *, low=None):
    """Per-sample ints that decide output shapes: host values only, shape () or (n,)."""
    if is_cuda_array(value):
        raise TypeError(f"{name}: got a CUDA array; {name} decides the output shape, which must "
                        "be known on the host: pass an int or a sequence/NumPy array of ints")
    return per_sample(value, n, name, integer=True, low=low)


def output_shapes(b, hs, ws, names):
    """Per-sample output sizes from (N,) heights and widths: one :class:`gpuaug._batch.Same`
    when they are all equal (what run()'s launch plans key on; no per-sample list), else a
    list of (h, w), refused for a uniform (4-D) batch."""
    if b.n and not count_nonzero(hs != hs[0]) and not count_nonzero(ws != ws[0]):
        return b.uniform((int(hs[0]), int(ws[0])))
    shapes = list(zip(hs.tolist(), ws.tolist()))
    if not b.varshape and len(set(shapes)) > 1:
        raise ValueError(f"{names}: give per-sample output sizes {sorted(set(shapes))[:4]} that "
                         "differ; a uniform batch has one output size (every sample's must be "
                         "equal); pass a list of images for outputs of different sizes")
    return shapes


def crop(x, top, left, height, width, *, out=None, layout="NHWC", stream=None, backend=None):
    """Cut the window ``[top, top + height) x [left, left + width)`` out of each image.

    ``out[n, y, x] = x[n, top[n] + y, left[n] + x]`` for ``0 <= y < height[n]``,
    ``0 <= x < width[n]``. The window must lie inside the image (else ValueError), as for
    ``img[top:top + height, left:left + width]``. Offsets given as CUDA arrays are not
    checked on the host (that would synchronise); there, pixels outside the image come
    out as 0 and nothing outside the image is read.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        top, left: int >= 0, or a sequence/array of N ints (host or device), one per sample.
        height, width: int >= 1, or N host ints; they decide the output shape, so in a
            uniform batch every sample's must be equal (a list of images may differ).
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW"; the output has the same layout.
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        (N, height, width, C) / (N, C, height, width) like ``x`` (CuPy for CUDA input,
        NumPy for NumPy input), or a list of (height[n], width[n], C) images.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(12, dtype=np.uint8).reshape(1, 3, 4, 1)
        >>> gpuaug.crop(x, top=1, left=[2], height=2, width=2)[0, :, :, 0]
        array([[ 6,  7],
               [10, 11]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    if type(height) is int and type(width) is int and 1 <= height < 2 ** 31 and 1 <= width < 2 ** 31:
        hs, ws = height, width  # one window size (the usual call): no per-sample columns
        shapes = b.uniform((height, width))
    else:
        hs = host_ints(height, b.n, "height", low=1)
        ws = host_ints(width, b.n, "width", low=1)
        shapes = output_shapes(b, hs, ws, "height, width")
    hw = getattr(b.shapes, "hw", None)  # a uniform batch: one bound per axis
    if type(hs) is int and hw is not None:  # [top, left] checked and written in one compiled loop
        t, l_ = plain(top, b.n), plain(left, b.n)
        if t is not None and l_ is not None and t.dtype.char in INTS and l_.dtype.char in INTS:
            params = np.empty((b.n, 2))
            if _host_rows(t, l_, hw[0] - hs, hw[1] - ws, params):
                return run(b, KERNELS, params, shapes=shapes, out=out, backend=be, stream=stream, fast=rows_fast())
    t = per_sample(top, b.n, "top", integer=True, **SPECS[0].limits("top"), device=b.device)
    l_ = per_sample(left, b.n, "left", integer=True, **SPECS[0].limits("left"), device=b.device)
    for name, off, size, dim, axis in (("top", t, hs, "height", 0), ("left", l_, ws, "width", 1)):
        if not isinstance(off, np.ndarray):
            continue
        lim = hw[axis] if hw is not None else b.sizes()[axis]
        over = off > lim - size  # not off + size: it overflows int64
        if count_nonzero(over):
            i = int(np.nonzero(over)[0][0])
            si = size if type(size) is int else size[i]
            li = lim if hw is not None else lim[i]
            raise ValueError(f"{name}, {dim}: sample {i} has {name}={int(off[i])} and {dim}="
                             f"{si}, which ends at {int(off[i]) + si}, outside its "
                             f"{b.shapes[i][0]}x{b.shapes[i][1]} image; expected "
                             f"0 <= {name} <= {li} - {dim}")
    if type(t) is np.ndarray and type(l_) is np.ndarray:  # [top, left] written in place
        params = np.empty((b.n, 2))
        params[:, 0] = t
        params[:, 1] = l_
    else:
        params = column_stack([t, l_], b.n)
    return run(b, KERNELS, params, shapes=shapes, out=out, backend=be, stream=stream,
               fast=rows_fast())


@compiled
def _host_rows(t, l_, top_max, left_max, rows):
    """Rows ``[top, left]`` of integer offsets (any integer dtype, compared in their own type);
    False when one is negative or ends past its image (``top > top_max``, ``left > left_max``:
    the general path then says which)."""
    ok = True
    for i in range(t.shape[0]):
        ok &= (t[i] >= 0) & (l_[i] >= 0) & (t[i] <= top_max) & (l_[i] <= left_max)
        rows[i, 0] = t[i]
        rows[i, 1] = l_[i]
    return ok


def center_offset(size, crop_size):
    """torchvision's center_crop offset along one axis (may be negative: zero padding).

    A crop larger than the image pads ``(crop - size) // 2`` zeros before it (the rest
    after); otherwise the offset is ``int(round((size - crop) / 2))`` with Python's round
    (half to even), which is what torchvision computes.
    """
    if crop_size > size:
        return -((crop_size - size) // 2)
    return int(round((size - crop_size) / 2.0))


def center_crop(x, size, *, out=None, layout="NHWC", stream=None, backend=None):
    """Cut a ``size`` window out of the centre of each image, as torchvision's center_crop.

    For an ``H x W`` image and ``size = (h, w)``: ``out[y, x] = x[top + y, left + x]``
    with ``top = int(round((H - h) / 2))`` (Python's round, half to even) when
    ``h <= H``; when ``h > H`` the image is zero-padded by ``(h - H) // 2`` rows above
    and the rest below (``top = -((h - H) // 2)``, pixels outside the image are 0).
    The same for ``left`` with ``W`` and ``w``.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        size: int (square) or (height, width), host ints >= 1; one size for the batch.
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW"; the output has the same layout.
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        (N, h, w, C) / (N, C, h, w) like ``x`` (CuPy for CUDA input, NumPy for NumPy
        input), or a list of (h, w, C) images for a list input.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(16, dtype=np.uint8).reshape(1, 4, 4, 1)
        >>> gpuaug.center_crop(x, 2)[0, :, :, 0]
        array([[ 5,  6],
               [ 9, 10]], dtype=uint8)
        >>> gpuaug.center_crop(x[:, :2, :2], (2, 4))[0, :, :, 0]
        array([[0, 0, 1, 0],
               [0, 4, 5, 0]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    h, w = host_size(size, "size")
    hw = getattr(b.shapes, "hw", None)
    if hw is not None:  # a uniform batch: one offset for every sample
        params = np.tile(np.array([center_offset(hw[0], h), center_offset(hw[1], w)], np.float64), (b.n, 1))
    else:
        params = np.array([(center_offset(sh, h), center_offset(sw, w)) for sh, sw in b.shapes],
                          np.float64)
    return run(b, KERNELS, params, shapes=b.uniform((h, w)), out=out, backend=be, stream=stream,
               fast=rows_fast())


# -- the CUDA C fast path (gpuaug_window_rows in kernels/crop.cu), shared with pad ----------

def rows_plan(planes, pps, h, w, pb, oh, ow, dtype, src_ptr, dst_ptr):
    """Launch plan of ``gpuaug_window_rows`` for a dense batch, or None where it does not apply.

    ``planes`` rows of ``h x w`` pixels of ``pb`` bytes (``pps`` planes per sample, see
    ``contiguous_rows``) into ``oh x ow`` planes. The vector width is the largest of 16, 8
    and 4 bytes that divides the output row and the output base address; outputs of rows
    that are not a multiple of 4 bytes, or of 2^31 chunks or more (the kernel's 32-bit
    index math), go to the generic kernel. Returns ``(name, grid, block, int_args)``.
    """
    orow = ow * pb
    v = next((v for v in (16, 8, 4) if orow % v == 0 and dst_ptr % v == 0), None)
    if v is None:
        return None
    chunks = planes * oh * (orow // v)
    if chunks >= 2 ** 31 or planes * h * w * pb >= 2 ** 62:
        return None
    block = 256
    return (f"gpuaug_window_rows<{_CT[dtype]}, {v}>", ((chunks + block - 1) // block,), (block,),
            (planes, pps, h, w, oh, ow, pb))


def rows_fast(sign=1, fill_col=-1, mode=0):
    """A ``run(fast=...)`` hook: dense batches in one layout take ``gpuaug_window_rows``.

    params rows start ``[top, left]``: the window's origin in the source (``sign`` 1,
    crop) or the padding before the image (``sign`` -1, pad). ``fill_col``: the column of
    the fill value (-1: 0); ``mode``: border code of common.cuh (0 constant, 1 edge,
    3 reflect).
    """
    def fast(src, dst):
        geo = contiguous_rows(src, dst)
        if geo is None:
            return None
        planes, pps, h, w, pb = geo
        oh, ow = dst.shapes[0]
        plan = rows_plan(planes, pps, h, w, pb, oh, ow, src.dtype.name, src.arrays[0].data.ptr,
                         dst.arrays[0].data.ptr)
        if plan is None:
            return None
        from gpuaug.kernels._cuda import get_function

        name, grid, block, args = plan
        fn = get_function("crop.cu", name)

        def launch(par):
            fn(grid, block, (src.arrays[0], dst.arrays[0], par, np.int32(par.shape[1]),
                             np.int32(sign), np.int32(fill_col), np.int32(mode)) + tuple(np.int32(a) for a in args))
        return launch
    fast.key = ("window_rows", sign, fill_col, mode)  # kernel constants: run()'s plans key on them
    return fast


def _typical_size(n):
    """7/8 of a side, rounded down to a multiple of 16 where that leaves one (as training
    crops are: 224 -> 192)."""
    s = max(1, n * 7 // 8)
    return s // 16 * 16 or s


def _crop_example(rng, n, h, w):
    ch, cw = _typical_size(h), _typical_size(w)
    return {"top": rng.integers(0, h - ch + 1, n), "left": rng.integers(0, w - cw + 1, n),
            "height": ch, "width": cw}


def _center_crop_example(rng, n, h, w):
    return {"size": (_typical_size(h), _typical_size(w))}


SPECS = (
    OpSpec("crop", crop, params=(
        Param("top", 0, kind="int", low=0, doc="first row of the window"),
        Param("left", 0, kind="int", low=0, doc="first column of the window"),
        Param("height", None, kind="size", low=1, doc="window height (host ints; equal in a uniform batch)"),
        Param("width", None, kind="size", low=1, doc="window width (host ints; equal in a uniform batch)"),
    ), changes_shape=True, example=_crop_example, kernels=KERNELS, doc=crop.__doc__,
        range_notes="one output size per uniform batch; the window inside every image",
        demo={"top": 40, "left": 60, "height": 160, "width": 140}),
    OpSpec("center_crop", center_crop, params=(
        Param("size", None, per_sample=False, shape=(2,), kind="size", low=1, expect="positive sizes",
              range_doc="int or (h, w) > 0 (larger than the image pads with zeros, as torchvision)",
              doc="(height, width) or int; zero padding where larger than the image"),
    ), changes_shape=True, example=_center_crop_example, kernels=KERNELS, doc=center_crop.__doc__,
        demo={"size": (160, 160)}),
)

__all__ = ["crop", "center_crop"]
