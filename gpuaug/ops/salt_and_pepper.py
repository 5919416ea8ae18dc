"""salt_and_pepper: replace random whole pixels by white (salt) or black (pepper)."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled, plain
from gpuaug._params import column_stack, per_sample, spec_range
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend
from gpuaug._util import cupy_module, dtype_max
from gpuaug.ops._launch import host_seed, rows_plan, run_custom, seed_chunks, seed_columns

KERNELS = Kernels(cu=("salt_and_pepper.cu", "gpuaug_salt_and_pepper"),
                  numba=("salt_and_pepper", "kernel"), kind="value")


_plan = rows_plan(KERNELS.cu[1])  # replace_rows: 16 / itemsize pixels of a row per thread


def _split(t, xp):
    """A threshold 0..2**32 as (low 16 bits, high part): both exact in float32."""
    lo = xp.mod(t, 65536.0)
    return lo, (t - lo) / 65536.0


def salt_and_pepper(x, prob, salt_vs_pepper=0.5, seed=None, *, out=None, layout="NHWC", stream=None,
                    backend=None):
    """Salt-and-pepper noise on whole pixels (all channels together).

    Each pixel independently becomes salt (the dtype's white: 255 for uint8, 1.0 for
    floats) with probability ``prob * salt_vs_pepper``, pepper (0) with probability
    ``prob * (1 - salt_vs_pepper)``, and is kept otherwise.

    Pixel ``(y, x)`` of sample ``n`` draws one 32-bit word ``r``: lane ``x % 4`` of the
    Philox4x32-10 block with counter ``(x // 4, y, n, 1)`` and key ``seed``. It is salt
    if ``r < floor(prob * salt_vs_pepper * 2**32)``, else pepper if
    ``r < floor(prob * 2**32)``. Integer decisions only: every backend gives the same
    output, whatever the layout or launch shape.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        prob: probability in [0, 1] that a pixel is replaced; number or N numbers.
        salt_vs_pepper: fraction in [0, 1] of replaced pixels that are salt; number or N numbers.
        seed: int in [0, 2**64) (required).
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (or a list, for a varshape batch).

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.full((1, 64, 64, 3), 100, np.uint8)
        >>> y = gpuaug.salt_and_pepper(x, prob=0.2, seed=3)
        >>> sorted(np.unique(y).tolist())
        [0, 100, 255]
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    seed = host_seed(seed)
    pr, sv = plain(prob, b.n), plain(salt_vs_pepper, b.n)
    if pr is not None and sv is not None:  # NumPy arrays: checked and packed in one compiled loop
        params = np.empty((b.n, 10))
        s, rp, rs = seed_chunks(seed), spec_range(SPECS[0], "prob"), spec_range(SPECS[0], "salt_vs_pepper")
        if _rows(pr, sv, rp[0], rp[1], rs[0], rs[1], float(s[0]), float(s[1]), float(s[2]), float(s[3]),
                 float(dtype_max(b.dtype)), params):
            return run_custom(b, params, out=out, backend=be, stream=stream, cu_file=KERNELS.cu[0], plan=_plan,
                              numba_module=KERNELS.numba[0])
    pr = per_sample(prob, b.n, "prob", **SPECS[0].limits("prob"), device=b.device)
    sv = per_sample(salt_vs_pepper, b.n, "salt_vs_pepper", **SPECS[0].limits("salt_vs_pepper"),
                    device=b.device)
    if type(pr) is np.ndarray and type(sv) is np.ndarray:
        params = _host_rows(pr, sv, seed, b.n, dtype_max(b.dtype))
        return run_custom(b, params, out=out, backend=be, stream=stream, cu_file=KERNELS.cu[0], plan=_plan,
                          numba_module=KERNELS.numba[0])
    xp = np if isinstance(pr, np.ndarray) and isinstance(sv, np.ndarray) else cupy_module()
    pr, sv = xp.asarray(pr, dtype=xp.float64), xp.asarray(sv, dtype=xp.float64)
    t_noisy = xp.floor(pr * 2.0 ** 32)
    t_salt = xp.floor(pr * sv * 2.0 ** 32)
    salt = np.full(b.n, dtype_max(b.dtype))
    params = column_stack([*_split(t_noisy, xp), *_split(t_salt, xp), seed_columns(seed, b.n), salt,
                           np.arange(b.n, dtype=np.float64)], b.n)
    return run_custom(b, params, out=out, backend=be, stream=stream, cu_file=KERNELS.cu[0], plan=_plan,
                      numba_module=KERNELS.numba[0])


def _host_rows(pr, sv, seed, n, salt):
    """The rows ``[noisy lo, noisy hi, salt lo, salt hi, seed x 4, salt value, sample index]``
    for host values (float64, checked), in one compiled loop (:func:`_rows`)."""
    rows = np.empty((n, 10))
    s = seed_chunks(seed)
    _rows(pr, sv, -np.inf, np.inf, -np.inf, np.inf, float(s[0]), float(s[1]), float(s[2]), float(s[3]), float(salt), rows)
    return rows


@compiled
def _rows(pr, sv, plo, phi, slo, shi, s0, s1, s2, s3, salt, rows):
    """The general path's columns (:func:`_split` of the two thresholds, :func:`seed_columns`,
    the salt value, the sample index) value for value, with the same operations in the same
    order (``floor(pr * 2**32)``, ``floor(pr * sv * 2**32)`` multiplied left to right; the
    split is exact: the thresholds are integers up to 2**32). Whether every prob is within
    ``[plo, phi]`` and every salt_vs_pepper within ``[slo, shi]`` (per_sample's checks, with
    closed_range's bounds; NaN is not)."""
    ok = True
    for i in range(pr.shape[0]):
        p = np.float64(pr[i])
        q = np.float64(sv[i])
        ok &= (p >= plo) & (p <= phi) & (q >= slo) & (q <= shi)
        t = np.floor(p * 4294967296.0)
        t0 = t % 65536.0
        rows[i, 0] = t0
        rows[i, 1] = (t - t0) / 65536.0
        t = np.floor(p * q * 4294967296.0)
        t0 = t % 65536.0
        rows[i, 2] = t0
        rows[i, 3] = (t - t0) / 65536.0
        rows[i, 4] = s0
        rows[i, 5] = s1
        rows[i, 6] = s2
        rows[i, 7] = s3
        rows[i, 8] = salt
        rows[i, 9] = i
    return ok


def _example(rng, n, h, w):
    return {"prob": rng.uniform(0, 0.2, n), "salt_vs_pepper": rng.uniform(0, 1, n),
            "seed": int(rng.integers(2 ** 63))}


SPECS = (
    OpSpec("salt_and_pepper", salt_and_pepper, params=(
        Param("prob", None, low=0.0, high=1.0, doc="probability in [0, 1] that a pixel is replaced (required)"),
        Param("salt_vs_pepper", 0.5, low=0.0, high=1.0, doc="fraction in [0, 1] of replaced pixels that are salt"),
        Param("seed", None, per_sample=False, kind="int", low=0, high=2 ** 64 - 1,
              expect="an int in [0, 2**64)", range_doc="an int in [0, 2**64) (required)",
              doc="Philox key, int in [0, 2**64) (required)"),
    ), example=_example, kernels=KERNELS, geometric=False, doc=salt_and_pepper.__doc__,
        demo={"prob": 0.08, "seed": 1}),
)

__all__ = ["salt_and_pepper"]

