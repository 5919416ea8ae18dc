"""gaussian_blur: separable Gaussian blur with a per-sample sigma."""
from __future__ import annotations

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled, plain
from gpuaug._params import count_nonzero, per_sample, spec_range
from gpuaug._registry import DTYPES, OpSpec, Param
from gpuaug._run import Kernels, choose_backend
from gpuaug.kernels._cuda import kernel_name
from gpuaug.ops._launch import MAX_KERNEL_SIZE, normalized_rows, odd_sizes, run_custom, separable_plan, store_range

_ALL = [(d, c) for d in DTYPES for c in (1, 3, 4)]
KERNELS = Kernels(
    cu=("gaussian_blur.cu", "gpuaug_gaussian_blur"), numba=("gaussian_blur", "kernel"), kind="value",
    variants=tuple(kernel_name("gpuaug_gaussian_blur_1", d, c) for d, c in _ALL)
    + tuple(kernel_name("gpuaug_gaussian_blur_k", d, c, k) for d, c in _ALL for k in (3, 11))
    + (kernel_name("gpuaug_gaussian_blur_k", "uint8", 3, 15),))


def gaussian_kernel_size(sigma, dtype):
    """OpenCV's default size for ``sigma``: ``round(2 * m * sigma + 1) | 1`` with m = 3 for
    uint8 and m = 4 for floats (cv::GaussianBlur with ksize (0, 0); round half to even)."""
    return np.rint(np.multiply(sigma, 6.0 if np.dtype(dtype) == np.uint8 else 8.0, dtype=np.float64) + 1
                   ).astype(np.int64) | 1


def gaussian_weights(k, sigma):
    """Normalised Gaussian taps ``exp(-(i - (k-1)/2)^2 / (2 sigma^2))`` (cv::getGaussianKernel
    with sigma > 0, torchvision's _get_gaussian_kernel1d)."""
    t = np.arange(k, dtype=np.float64) - (k - 1) / 2
    w = np.exp(-0.5 * (t / sigma) ** 2)
    return w / w.sum()


def gaussian_weight_rows(k, sigma) -> np.ndarray:
    """The (N, 1 + max k) parameter rows ``[k, w_0 .. w_{k-1}, 0 ...]`` of
    :func:`gaussian_weights` per sample, bit-identical to it: the exponents of every sample in
    one compiled loop (:func:`_exponents`, operation by operation), NumPy's exponential of the
    whole (N, max k) array (element-wise, so each tap is the value the 1-D call gives), and
    each row normalised by :func:`gpuaug.ops._launch.normalized_rows`."""
    k = np.asarray(k, np.int64)
    return _weight_rows(k, np.asarray(sigma, np.float64), int(np.maximum.reduce(k)) if k.shape[0] else 1)


def _weight_rows(k, sigma, kmax):
    """:func:`gaussian_weight_rows` of int64 sizes ``k`` whose maximum is ``kmax`` and (N,) sigmas
    (any dtype :func:`_exponents` reads)."""
    n = k.shape[0]
    w = _exponents(sigma, k, np.zeros((n, kmax)))
    return normalized_rows(np.exp(w, out=w), k, np.empty((n, 1 + kmax)))


@compiled
def _sizes(sigma, lo, hi, m, k):
    """:func:`gaussian_kernel_size` of (N,) sigmas into ``k`` (``m``: its 6 or 8) and their
    maximum, or -1 when a sigma is outside ``[lo, hi]`` or its size exceeds MAX_KERNEL_SIZE
    (the general path then says so)."""
    kmax = 1
    for i in range(sigma.shape[0]):
        s = np.float64(sigma[i])
        if not ((s >= lo) & (s <= hi)):
            return -1
        k[i] = np.int64(np.rint(min(s, MAX_KERNEL_SIZE) * m + 1.0)) | 1
        if k[i] > MAX_KERNEL_SIZE:
            return -1
        kmax = max(kmax, k[i])
    return kmax


@compiled
def _exponents(sigma, k, w):
    """``w[i, j] = -0.5 * ((j - (k_i - 1) / 2) / sigma_i) ** 2`` for ``j < k_i`` (zeros past k_i,
    as ``w`` comes), the exponents of the Gaussian taps operation by operation: the offset
    (exact: a half-integer), the division, the square, the product."""
    for i in range(w.shape[0]):
        s = np.float64(sigma[i])
        c = (k[i] - 1) / 2
        for j in range(k[i]):
            q = (np.float64(j) - c) / s
            w[i, j] = (q * q) * -0.5
    return w


def gaussian_blur(x, sigma, kernel_size=None, *, out=None, layout="NHWC", stream=None, backend=None):
    """Gaussian blur, separable, with reflect-101 borders (OpenCV's default border).

    ``out[y, x] = sum_i sum_j g_i g_j x[refl(y + i - r), refl(x + j - r)]`` per channel,
    with ``r = k // 2``, ``g_i = exp(-(i - r)^2 / (2 sigma^2)) / sum`` (the weights of
    ``cv2.getGaussianKernel`` / torchvision) and ``refl`` reflecting about the edge pixel
    without repeating it (``...cb|abcd|cb...``, cv2.BORDER_REFLECT_101). Computed in
    float32 (float64 on the CPU backend); uint8 rounds to nearest.

    ``kernel_size=None`` uses OpenCV's rule for ``cv2.GaussianBlur(x, (0, 0), sigma)``:
    ``k = round(2 * m * sigma + 1) | 1`` with ``m = 3`` for uint8 and ``m = 4`` for
    float16/float32 (so sigma 1.5 gives 11 for uint8 and 13 for floats). torchvision has
    no such default (its kernel_size is required); pass ``kernel_size`` to match it.

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images;
            uint8, float16 or float32; 1, 3 or 4 channels; NumPy or any CUDA array.
        sigma: standard deviation in pixels (> 0); number or N numbers. Read on the host
            (the weights are computed there).
        kernel_size: odd size from 1 to 255, number or N numbers; default from sigma.
        out, layout, stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        An array like ``x`` (or a list, for a varshape batch).

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.zeros((1, 1, 7, 1), np.float32); x[0, 0, 3, 0] = 1
        >>> np.round(gpuaug.gaussian_blur(x, sigma=1.0, kernel_size=[3])[0, 0, :, 0], 3)
        array([0.   , 0.   , 0.274, 0.452, 0.274, 0.   , 0.   ], dtype=float32)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    s = plain(sigma, b.n) if kernel_size is None else None
    if s is not None and s.dtype.char != "?":  # sizes checked in one compiled loop
        lo, hi = spec_range(SPECS[0], "sigma")
        k = np.empty(b.n, np.int64)
        kmax = _sizes(s, lo, hi, 6.0 if b.dtype == np.uint8 else 8.0, k)
        if kmax > 0:
            return run_custom(b, _weight_rows(k, s, kmax), out=out, backend=be, stream=stream,
                              cu_file=KERNELS.cu[0], plan=separable_plan(KERNELS.cu[1], kmax),
                              numba_module=KERNELS.numba[0], numba_extra=store_range(b.dtype))
    sig = per_sample(sigma, b.n, "sigma", **SPECS[0].limits("sigma"))
    if kernel_size is None:
        k = gaussian_kernel_size(np.minimum(sig, MAX_KERNEL_SIZE), b.dtype)  # no int64 overflow for huge sigmas
        if count_nonzero(k > MAX_KERNEL_SIZE):  # np.any, without its Python-level dispatch
            shown = f"{int(k.max())} " if sig.max() < MAX_KERNEL_SIZE else ""
            raise ValueError(f"sigma: got {float(sig.max())}, whose default kernel size {shown}"
                             f"exceeds {MAX_KERNEL_SIZE}; pass a smaller sigma or a kernel_size")
    else:
        k = odd_sizes(kernel_size, b.n)
    params = gaussian_weight_rows(k, sig)
    return run_custom(b, params, out=out, backend=be, stream=stream, cu_file=KERNELS.cu[0],
                      plan=separable_plan(KERNELS.cu[1], int(np.maximum.reduce(k))), numba_module=KERNELS.numba[0],
                      numba_extra=store_range(b.dtype))


def _example(rng, n, h, w):
    return {"sigma": rng.uniform(1.4, 1.6, n)}  # around the benchmark's sigma 1.5


SPECS = (
    OpSpec("gaussian_blur", gaussian_blur, params=(
        Param("sigma", None, low=0.0, low_open=True, doc="standard deviation in pixels, > 0 (required)"),
        Param("kernel_size", None, kind="int", low=1, high=255, expect="odd sizes from 1 to 255",
              range_doc="odd, 1..255",
              doc="odd size 1..255; default from sigma as OpenCV"),
    ), example=_example, kernels=KERNELS, geometric=False, doc=gaussian_blur.__doc__,
        range_notes="without `kernel_size`, `sigma` small enough for a kernel of at most 255",
        demo={"sigma": 3.0}, peers={"dali": "gaussian_blur"}, bench_params=lambda h, w: {"sigma": 1.5}),
)

__all__ = ["gaussian_blur"]
