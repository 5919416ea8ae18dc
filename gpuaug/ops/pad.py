"""pad: add borders to each image (constant, edge or reflect, as numpy.pad)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import CHARS, INTS, compiled, plain
from gpuaug._params import column_stack, per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import check_choice, cupy_module, is_cuda_array
from gpuaug.ops._launch import as_stored
from gpuaug.ops.crop import output_shapes, rows_fast

KERNELS = Kernels(cu=("pad.cu", "gpuaug_pad"), numba=("pad", "pad_map"))

#: numpy.pad mode -> border code of kernels/common.cuh (border_index).
MODES = {"constant": 0, "edge": 1, "reflect": 3}


def pad(x, padding, mode="constant", value=0, *, out=None, layout="NHWC", stream=None,
        backend=None):
    """Pad each image by ``padding = (top, bottom, left, right)`` pixels, as ``numpy.pad``.

    Output ``(H + top + bottom) x (W + left + right)``; ``out[y, x] = x[r(y - top, H),
    r(x - left, W)]`` where ``r(i, n) = i`` inside the image and outside it:
    ``"constant"``: the pixel is ``value``; ``"edge"``: ``r = clamp(i, 0, n - 1)``;
    ``"reflect"``: mirror about the edge pixel without repeating it
    (``dcb|abcd|cba``, numpy.pad's "reflect", OpenCV's BORDER_REFLECT_101), repeated
    periodically (period ``2(n - 1)``) when the padding exceeds the image, which is what
    numpy.pad does. ``value`` is stored like any output: rounded half up and saturated
    for uint8, rounded to nearest for float16.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        padding: host ints >= 0: one int (all four sides), ``(top, bottom, left, right)``,
            or an (N, 4) array, one row per sample. They decide the output shape, so in a
            uniform batch every sample's output size must agree (a list of images may
            differ). A (4,) sequence always means one padding for every sample.
        mode: "constant" (default), "edge" or "reflect".
        value: fill for "constant": a number, or a sequence/array of N (host or device).
        out: optional array (or list, for a varshape batch) to write into.
        layout: "NHWC" (default) or "NCHW"; the output has the same layout.
        stream: CUDA stream for the GPU backends (None: CuPy's current stream).
        backend: "cuda" (default for CUDA arrays), "numba" or "cpu" (default for NumPy).

    Returns:
        (N, H', W', C) / (N, C, H', W') like ``x`` (CuPy for CUDA input, NumPy for NumPy
        input), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(1, 4, dtype=np.uint8).reshape(1, 1, 3, 1)
        >>> gpuaug.pad(x, (0, 0, 2, 3), mode="reflect")[0, :, :, 0]
        array([[3, 2, 1, 2, 3, 2, 1, 2]], dtype=uint8)
        >>> gpuaug.pad(x, (1, 0, 1, 0), value=9)[0, :, :, 0]
        array([[9, 9, 9, 9],
               [9, 1, 2, 3]], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    check_choice("mode", mode, tuple(MODES))
    if is_cuda_array(padding):
        raise TypeError("padding: got a CUDA array; padding decides the output shape, which must "
                        "be known on the host: pass host ints (top, bottom, left, right)")
    hw = getattr(b.shapes, "hw", None)
    pp = plain(padding, b.n, (4,))
    if pp is not None and hw is not None and pp.dtype.char in INTS and b.dtype.char != "e":
        v = plain(value, b.n)
        if v is None and (type(value) is int or type(value) is float):
            v = np.array([value])
        if v is not None and v.dtype.char in CHARS:
            params = np.empty((b.n, 4))  # [top, left, mode, value], checked and written in one loop
            size = _host_rows(pp, v, MODES[mode], b.dtype == np.uint8, params)
            if size[0] >= 0:
                return run(b, KERNELS, params, shapes=b.uniform((hw[0] + size[0], hw[1] + size[1])), out=out,
                           backend=be, stream=stream, fill=params[:, 3], fast=rows_fast(sign=-1, fill_col=3,
                                                                                        mode=MODES[mode]))
    if isinstance(padding, (int, float, np.integer, np.floating)):  # all four sides
        p = per_sample(padding, b.n, "padding", integer=True, **SPECS[0].limits("padding"))
        p = np.repeat(p[:, None], 4, axis=1)
    else:
        p = per_sample(padding, b.n, "padding", shape=(4,), integer=True, **SPECS[0].limits("padding"))
    hs, ws = (hw[0], hw[1]) if hw is not None else b.sizes()  # one size: scalars, not columns
    shapes = output_shapes(b, hs + p[:, 0] + p[:, 1], ws + p[:, 2] + p[:, 3], "padding")
    v = as_stored(per_sample(value, b.n, "value", device=b.device), b.dtype)  # exact on every backend
    if type(v) is np.ndarray:  # [top, left, mode, value] written in place
        params = np.empty((b.n, 4))
        params[:, :2] = p[:, 0:3:2]
        params[:, 2] = MODES[mode]
        params[:, 3] = v
    else:
        params = column_stack([p[:, 0], p[:, 2], np.full(b.n, float(MODES[mode])), v], b.n)
    fill = v if isinstance(v, np.ndarray) or be != "numba" else cupy_module().asnumpy(v)
    return run(b, KERNELS, params, shapes=shapes, out=out, backend=be, stream=stream, fill=fill,
               fast=rows_fast(sign=-1, fill_col=3, mode=MODES[mode]))


@compiled
def _host_rows(p, v, mode, u8, rows):
    """The rows ``[top, left, mode, value]`` of (N, 4) integer paddings ``p`` and the fill values
    ``v`` (N of them, or one) stored as :func:`as_stored` stores them in uint8 (``u8``) or
    float32; the output's (extra height, extra width), the same for every sample, or (-1, -1)
    when a padding is negative or over 2**30, two samples' sums differ, or a value is not
    finite (the general path then says what is wrong)."""
    n = p.shape[0]
    th = tw = -1
    for i in range(n):
        t, bo, le, r = np.int64(p[i, 0]), np.int64(p[i, 1]), np.int64(p[i, 2]), np.int64(p[i, 3])
        if min(min(t, bo), min(le, r)) < 0 or max(max(t, bo), max(le, r)) > 2 ** 30:
            return -1, -1
        if i == 0:
            th, tw = t + bo, le + r
        elif t + bo != th or le + r != tw:
            return -1, -1
        x = np.float64(v[min(i, v.shape[0] - 1)])
        if not np.isfinite(x):
            return -1, -1
        rows[i, 0] = t
        rows[i, 1] = le
        rows[i, 2] = mode
        rows[i, 3] = min(max(np.floor(x + 0.5), 0.0), 255.0) if u8 else np.float64(np.float32(x))
    return th, tw


def _example(rng, n, h, w):
    t, le = rng.integers(0, 17, n), rng.integers(0, 17, n)
    # Per-sample sides that add up to one output size (16 more pixels each way).
    return {"padding": np.stack([t, 16 - t, le, 16 - le], axis=1), "mode": "constant",
            "value": rng.integers(0, 256, n)}


SPECS = (
    OpSpec("pad", pad, params=(
        Param("padding", 0, shape=(4,), kind="int", low=0,
              range_doc=">= 0 (one, or (top, bottom, left, right) per sample)",
              doc="(top, bottom, left, right), host ints >= 0; output sizes must agree in a batch"),
        Param("mode", "constant", per_sample=False, kind="choice", choices=tuple(MODES),
              doc="border rule, as numpy.pad"),
        Param("value", 0.0, doc="fill value for mode 'constant'"),
    ), changes_shape=True, example=_example, kernels=KERNELS, doc=pad.__doc__,
        demo={"padding": (32, 32, 32, 32), "mode": "reflect"}),
)

__all__ = ["pad"]
