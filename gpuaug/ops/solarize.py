"""solarize: invert the values at or above a threshold, per sample (torchvision's solarize)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled, plain
from gpuaug._params import column_stack, per_sample, spec_range
from gpuaug._registry import DTYPE_MAX, OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug.ops._intensity import top, u8_vec_fast
from gpuaug.ops._launch import float32_at_least

KERNELS = Kernels(cu=("solarize.cu", "gpuaug_solarize"), numba=("solarize", "solarize_value"),
                  kind="value", variants=("gpuaug_solarize_u8",))
_fast = u8_vec_fast("solarize.cu", "gpuaug_solarize_u8")


def solarize(x, threshold, *, out=None, layout="NHWC", stream=None, backend=None):
    """Solarize: ``out = M - x`` where ``x >= threshold``, else ``x``.

    ``M`` and ``threshold`` are in the input's units: uint8 0..255 (M = 255), floats 0..1
    (M = 1), as torchvision's ``solarize``. The comparison is exact on every backend: the
    threshold is taken as the smallest float32 number >= it, which decides every uint8,
    float16 and float32 value as ``threshold`` itself does.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        threshold: in [0, M]; a number or N numbers (one per sample).
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (same shape, dtype and layout), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> gpuaug.solarize(np.array([[[[10], [128], [200]]]], np.uint8), 128)[0, 0, :, 0]
        array([ 10, 127,  55], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    m = top(b.dtype)
    t = plain(threshold, b.n)
    if t is not None:  # a NumPy array: checked and packed in one compiled loop
        params = np.empty((b.n, 2))
        r = spec_range(SPECS[0], "threshold", b.dtype)
        if _host_rows(t, r[0], r[1], float(m), params):
            return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream, fast=_fast)
    t = per_sample(threshold, b.n, "threshold", **SPECS[0].limits("threshold", b.dtype), device=b.device)
    # float32 on the GPU, float64 on the CPU: one float32 number that compares alike everywhere
    if type(t) is np.ndarray:  # [threshold, max] in one compiled loop
        params = np.empty((b.n, 2))
        _host_rows(t, -np.inf, np.inf, float(m), params)
    else:
        params = column_stack([float32_at_least(t), np.full(b.n, m)], b.n)
    return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream, fast=_fast)


@compiled
def _host_rows(t, lo, hi, m, rows):
    """Rows ``[float32_at_least(t), m]`` (:func:`gpuaug.ops._launch.float32_at_least`, value for
    value: the float32 rounding of ``t``, moved up one float32 step where it fell below);
    whether every threshold is within ``[lo, hi]`` (per_sample's check, closed_range's bounds)."""
    ok = True
    for i in range(t.shape[0]):
        v = np.float64(t[i])
        ok &= (v >= lo) & (v <= hi)
        f = np.float32(v)
        if np.float64(f) < v:
            f = np.nextafter(f, np.float32(np.inf))
        rows[i, 0] = f
        rows[i, 1] = m
    return ok


def _example(rng, n, h, w):
    return {"threshold": rng.uniform(64, 192, n)}


SPECS = (
    OpSpec("solarize", solarize, params=(
        Param("threshold", low=0, high=DTYPE_MAX,
              doc="values >= threshold are inverted (input units: 0..255 uint8, 0..1 floats)"),
    ), geometric=False, example=_example, kernels=KERNELS, doc=solarize.__doc__,
        demo={"threshold": 128}),
)

__all__ = ["solarize"]
