"""gaussian_noise: add seeded normal noise, reproducible on every backend."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch, max_over
from gpuaug._compiled import compiled, plain
from gpuaug._params import column_stack, per_sample, spec_range
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend
from gpuaug.ops._launch import (CudaPlan, float32_exact, host_seed, run_custom, seed_chunks,
                                seed_columns)

KERNELS = Kernels(cu=("gaussian_noise.cu", "gpuaug_gaussian_noise"), numba=("gaussian_noise", "kernel"),
                  kind="value")
_BLOCK = 256


def _plan(dst, src=None):
    ept = 16 // dst.dtype.itemsize  # elements per thread: one 16-byte chunk of a row
    work = max_over(dst.shapes, lambda h, w: h * -(-(w * dst.channels) // ept))
    return CudaPlan("gpuaug_gaussian_noise", (-(-work // _BLOCK), min(dst.n, 65535), 1), (_BLOCK, 1, 1))


def gaussian_noise(x, mean=0.0, std=None, seed=None, *, out=None, layout="NHWC", stream=None, backend=None):
    """Add normal noise: ``out = x + mean + std * z`` with ``z ~ N(0, 1)`` per element.

    ``mean`` and ``std`` are in the dtype's units (uint8: 0..255 levels; floats: the
    values' own scale, e.g. 0.05 for images in [0, 1]). uint8 results round to nearest
    and saturate; float results are not clipped.

    The noise is a pure function of ``seed`` and the element's position: element
    ``e = x*C + c`` of row ``y`` of sample ``n`` uses lane ``e % 4`` of the
    Philox4x32-10 block with counter ``(e // 4, y, n, 0)`` and key ``seed``; lanes
    ``(a, b)`` = (0, 1) and (2, 3) become two normals each by Box-Muller,
    ``sqrt(-2 ln((a + 1) / 2**32)) * (cos, sin)(2 pi floor(b / 32) / 2**27)``, computed
    in float32 with polynomial log/sin/cos and explicit fused multiply-adds, so every
    backend (CUDA C, Numba CUDA, Numba CPU) gives the same bits, whatever the layout or
    launch shape (|z| <= 6.67). A different seed gives independent noise. Draw a fresh seed per batch (for example
    ``rng.integers(2**63)``) for new noise each time.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        mean: number or N numbers (one per sample); default 0.
        std: number or N numbers >= 0 (required).
        seed: int in [0, 2**64) (required).
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (or a list, for a varshape batch).

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.full((2, 4, 4, 3), 128, np.uint8)
        >>> y = gpuaug.gaussian_noise(x, std=[0, 10], seed=7)
        >>> bool((y[0] == 128).all()), bool((y[1] != 128).any())
        (True, True)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    if std is None:
        raise TypeError("std: missing; expected a number >= 0 or a sequence of N of them")
    seed = host_seed(seed)
    mu, sd = plain(mean, b.n), plain(std, b.n)
    if mu is not None and sd is not None:  # NumPy arrays: checked and packed in one compiled loop
        params = np.empty((b.n, 7))
        s, r = seed_chunks(seed), spec_range(SPECS[0], "std")
        if _host_rows(mu, sd, r[0], r[1], float(s[0]), float(s[1]), float(s[2]), float(s[3]), params):
            return run_custom(b, params, out=out, backend=be, stream=stream, cu_file=KERNELS.cu[0], plan=_plan,
                              numba_module=KERNELS.numba[0], numba_extra=(b.dtype == np.uint8,))
    mu = per_sample(mean, b.n, "mean", device=b.device)
    sd = per_sample(std, b.n, "std", **SPECS[0].limits("std"), device=b.device)
    if type(mu) is np.ndarray and type(sd) is np.ndarray:  # [mean, std, seed x 4, index]: one loop
        params = np.empty((b.n, 7))
        s = seed_chunks(seed)
        _host_rows(mu, sd, -np.inf, np.inf, float(s[0]), float(s[1]), float(s[2]), float(s[3]), params)
    else:
        if isinstance(mu, np.ndarray):
            mu = float32_exact(mu)
        if isinstance(sd, np.ndarray):
            sd = float32_exact(sd)
        params = column_stack([mu, sd, seed_columns(seed, b.n), np.arange(b.n, dtype=np.float64)], b.n)
    rnd = b.dtype == np.uint8
    return run_custom(b, params, out=out, backend=be, stream=stream, cu_file=KERNELS.cu[0], plan=_plan,
                      numba_module=KERNELS.numba[0], numba_extra=(rnd,))


@compiled
def _host_rows(mu, sd, lo, hi, s0, s1, s2, s3, rows):
    """Rows ``[mean, std, seed x 4, sample index]``, mean and std rounded to float32 each
    (:func:`float32_exact`), as the general path's columns; whether every mean is finite and
    every std within ``[lo, hi]`` (per_sample's checks, with closed_range's bounds)."""
    ok = True
    for i in range(mu.shape[0]):
        m, d = np.float64(mu[i]), np.float64(sd[i])
        ok &= np.isfinite(m) & (d >= lo) & (d <= hi)
        rows[i, 0] = np.float64(np.float32(m))
        rows[i, 1] = np.float64(np.float32(d))
        rows[i, 2] = s0
        rows[i, 3] = s1
        rows[i, 4] = s2
        rows[i, 5] = s3
        rows[i, 6] = i
    return ok


def _example(rng, n, h, w):
    return {"mean": rng.uniform(-5, 5, n), "std": rng.uniform(0, 20, n), "seed": int(rng.integers(2 ** 63))}


SPECS = (
    OpSpec("gaussian_noise", gaussian_noise, params=(
        Param("mean", 0.0, doc="noise mean, in the dtype's units"),
        Param("std", None, low=0.0, doc="noise standard deviation >= 0, in the dtype's units (required)"),
        Param("seed", None, per_sample=False, kind="int", low=0, high=2 ** 64 - 1,
              expect="an int in [0, 2**64)", range_doc="an int in [0, 2**64) (required)",
              doc="Philox key, int in [0, 2**64) (required)"),
    ), example=_example, kernels=KERNELS, geometric=False, doc=gaussian_noise.__doc__,
        demo={"std": 25.0, "seed": 1}),
)

__all__ = ["gaussian_noise"]
