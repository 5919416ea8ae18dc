"""Fast CPU (``numba.njit``) paths for the Numba twins' most used ops (``backend="cpu"``).

The generic CPU twin runs one per-pixel function per output element (see ``_driver.py``).
These kernels compute the same maths with CPU-shaped loops: separable filters through
row buffers, resize and warps from per-row / per-column coordinates and weights
computed once, colour ops as contiguous passes, median as a min/max network, copies as
row copies. Not specialised (the generic twin runs): area resize, float16 and float32
mixes other than the twins' own (float16 arrives as float32), non-symmetric filter taps.

:data:`FAST` maps an op's twin (``Kernels.numba`` for :func:`gpuaug._run.run` ops, the
module name for :func:`gpuaug.ops._launch.run_custom` ops, the grayscale function for the
per-image means of contrast and color_jitter) to ``"module:function"`` here.
The function takes the generic kernel's arguments (``src, dst, params, fills`` for copy
kernels, ``src, dst, params, lo, hi, rnd`` for value kernels, NHWC 4-D arrays) and
returns True when it has written ``dst``, False when the inputs are outside what it was
written for (a dtype, layout, border or mode it does not specialise); the generic kernel
then runs, so every parameter combination keeps its results, only the speed differs.

Results (tests/test_cpu_fast.py compares every kernel with the generic twin): copies,
median, resize (nearest, bilinear), brightness, contrast, color_jitter and normalize are
bit-identical; gaussian_blur and box_blur compute in float32 (box_blur on uint8 in whole
numbers), uint8 within 1 of the twin, floats within 1e-5 relative, as the op tests allow;
the warps use the twin's float64 maths, float32 outputs possibly 1 ulp apart (LLVM may
fuse a multiply-add differently). Strided views run through dense copies, so a view gives
the same bits as the same batch made dense.

Threads: the kernels ``prange`` over images, image planes, rows or bands of rows unless
``GPUAUG_CPU_PARALLEL=0`` (see ``_dual.cpu_parallel``). ``GPUAUG_CPU_FAST=0`` turns these
paths off (the generic twins run; for benchmarks and tests). Timings against OpenCV and
DALI's CPU operators: bench/results/2026-11-25-cpu/results.md.
"""
from __future__ import annotations

import importlib
import os

import numpy as np

#: twin -> "module:function" in this package
FAST = {
    ("flip", "flip_map"): "_copy:flip",
    ("crop", "crop_map"): "_copy:crop",
    ("pad", "pad_map"): "_copy:pad",
    ("resize", "resample_value"): "_resample:resize",
    ("warp_affine", "warp_affine_value"): "_resample:warp_affine",
    ("rotate", "rotate_value"): "_resample:warp_affine",
    ("brightness", "brightness_value"): "_colour:brightness",
    ("contrast", "contrast_value"): "_colour:contrast",
    ("contrast", "contrast_gray"): "_colour:contrast_gray",
    ("color_jitter", "color_jitter_value"): "_colour:color_jitter",
    ("color_jitter", "jitter_gray"): "_colour:jitter_gray",
    ("normalize", "normalize_value"): "_colour:normalize",
    ("crop_mirror_normalize", "cmn_value"): "_colour:normalize",
    "gaussian_blur": "_separable:separable",
    "box_blur": "_separable:separable",
    "median_blur": "_median:median",
}


# os.environ's bytes mapping (CPython's os._Environ keeps it in step with os.environ):
# a lookup there skips the str -> bytes encoding of every os.environ.get (about 1 us a call)
_ENV_BYTES = getattr(os.environ, "_data", None) if os.name == "posix" else None


def enabled() -> bool:
    """Whether the fast paths run: on unless ``GPUAUG_CPU_FAST=0``."""
    if _ENV_BYTES is not None:
        return _ENV_BYTES.get(b"GPUAUG_CPU_FAST", b"1") not in (b"", b"0")
    return os.environ.get("GPUAUG_CPU_FAST", "1") not in ("", "0")


def fast_function(key):
    """The fast function for twin ``key`` (see :data:`FAST`), or None."""
    spec = FAST.get(key)
    if spec is None:
        return None
    mod, name = spec.split(":")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)


#: twin -> its fast function, resolved on first use (tests swap this dict to spy on calls)
_RESOLVED: dict = {}


def with_fast_path(key, kern):
    """``kern`` (a generic CPU kernel) behind the fast path of ``key``, if there is one:
    a callable with ``kern``'s arguments that runs the fast function and falls back to
    ``kern`` when that declines. ``.generic`` is ``kern``."""
    if key not in FAST:
        return kern

    def call(*args):
        if enabled():
            fn = _RESOLVED.get(key)
            if fn is None:
                fn = _RESOLVED[key] = fast_function(key)
            if fn(*args):
                return
        kern(*args)

    call.generic = kern
    call.key = key
    return call


def dense(src, dst):
    """``(s, d, done)``: C-contiguous NHWC arrays holding ``src`` and standing for ``dst``: the
    arrays themselves where they are C-contiguous, else copies (``done()`` then writes ``d``
    back into ``dst``). Fast kernels whose float results are not bit-identical to the generic
    twin's take strided views this way, so a view and a contiguous copy of the same batch
    give the same bits (tests/test_properties.py checks that)."""
    s = src if src.flags.c_contiguous else np.ascontiguousarray(src)
    if dst.flags.c_contiguous:
        return s, dst, _nothing
    d = np.empty(dst.shape, dst.dtype)

    def done():
        dst[...] = d

    return s, d, done


def _nothing():
    pass


def planes(src, dst):
    """Dense views for channel-blind kernels: ``(s, d, c, per)`` where ``s``/``d`` are
    C-contiguous (P, H, W, c) arrays sharing memory with the NHWC views ``src``/``dst``:
    NHWC batches as they are (P = N, ``per`` = 1), NCHW batches (NHWC views of C-contiguous
    NCHW arrays) as N*C one-channel planes (``per`` = C: plane i is sample i // C).
    None when the two are not both one of these (see :func:`dense` for the others)."""
    if src.flags.c_contiguous and dst.flags.c_contiguous:
        return src, dst, src.shape[3], 1
    st, dt = src.transpose(0, 3, 1, 2), dst.transpose(0, 3, 1, 2)
    if st.flags.c_contiguous and dt.flags.c_contiguous and src.shape[3] == dst.shape[3]:
        n, c = src.shape[0], src.shape[3]
        return (st.reshape(n * c, st.shape[2], st.shape[3], 1), dt.reshape(n * c, dt.shape[2], dt.shape[3], 1),
                1, c)
    return None


def per_plane(a, per):
    """Rows of the per-sample array ``a`` repeated for each of a sample's ``per`` planes."""
    return a if per == 1 else np.repeat(a, per, axis=0)


def kernel(fn):
    """``fn`` compiled as a CPU kernel (``prange`` threads per GPUAUG_CPU_PARALLEL, nogil,
    disk cache), lazily, memoised (here by ``fn`` alone: specialize's own key is built from
    its bindings on every call)."""
    k = _KERNELS.get(fn)
    if k is None:
        from .._dual import specialize

        k = _KERNELS[fn] = specialize(fn, "cpu", "kernel")
    return k


_KERNELS: dict = {}
