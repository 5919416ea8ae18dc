"""gamma: power-law intensity transform, per sample (torchvision's adjust_gamma)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled, plain
from gpuaug._params import column_stack, per_sample, spec_range
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug.ops._intensity import top, u8_vec_fast

KERNELS = Kernels(cu=("gamma.cu", "gpuaug_gamma"), numba=("gamma", "gamma_value"), kind="value",
                  variants=("gpuaug_gamma_u8",))
_fast = u8_vec_fast("gamma.cu", "gpuaug_gamma_u8")


def gamma(x, gamma, gain=1, *, out=None, layout="NHWC", stream=None, backend=None):
    """Gamma-correct each image: ``out = M * clamp(gain * (x / M) ** gamma, 0, 1)``.

    ``M`` is the top of the value range: 255 for uint8 (values 0..255), 1 for float16 /
    float32 (values 0..1), as torchvision's ``adjust_gamma``. Negative float inputs count
    as 0. uint8 results round to nearest (torchvision truncates after scaling by 255.999,
    so it may be 1 lower); float results are clamped to [0, 1] even when ``gain == 1``
    (torchvision clamps only when gain != 1, which differs only for inputs above 1).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        gamma: exponent >= 0 (< 1 brightens, > 1 darkens); a number or N numbers.
        gain: multiplier applied after the power; a number or N numbers.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (same shape, dtype and layout), or a list.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.array([[[[0], [64], [255]]]], np.uint8)
        >>> gpuaug.gamma(x, 0.5)[0, 0, :, 0]
        array([  0, 128, 255], dtype=uint8)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    g, k = plain(gamma, b.n), plain(gain, b.n)
    if g is not None and k is not None:  # NumPy arrays: checked and packed in one compiled loop
        params = np.empty((b.n, 3))
        r = spec_range(SPECS[0], "gamma")
        if _host_rows(g, k, r[0], r[1], float(top(b.dtype)), params):
            return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream, fast=_fast)
    g = per_sample(gamma, b.n, "gamma", **SPECS[0].limits("gamma"), device=b.device)
    k = per_sample(gain, b.n, "gain", device=b.device)
    params = column_stack([g, k, np.full(b.n, top(b.dtype))], b.n)
    return run(b, KERNELS, params, shapes=b.shapes, out=out, backend=be, stream=stream, fast=_fast)


@compiled
def _host_rows(g, k, lo, hi, m, rows):
    """Rows ``[gamma, gain, maximum]`` (column_stack's matrix); whether every gamma is within
    ``[lo, hi]`` and every gain finite (per_sample's checks, with closed_range's bounds)."""
    ok = True
    for i in range(g.shape[0]):
        a, b = np.float64(g[i]), np.float64(k[i])
        ok &= (a >= lo) & (a <= hi) & np.isfinite(b)
        rows[i, 0] = a
        rows[i, 1] = b
        rows[i, 2] = m
    return ok


def _example(rng, n, h, w):
    return {"gamma": rng.uniform(0.5, 2.0, n), "gain": rng.uniform(0.8, 1.2, n)}


SPECS = (
    OpSpec("gamma", gamma, params=(
        Param("gamma", low=0, doc="exponent >= 0"),
        Param("gain", 1.0, doc="multiplier after the power"),
    ), geometric=False, example=_example, kernels=KERNELS, doc=gamma.__doc__,
        demo={"gamma": 0.5}),
)

__all__ = ["gamma"]
