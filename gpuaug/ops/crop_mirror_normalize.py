"""crop_mirror_normalize: DALI's fused crop + horizontal mirror + normalise + layout change."""
from __future__ import annotations

import math

import numpy as np

from gpuaug._batch import as_batch
from gpuaug._compiled import compiled, plain
from gpuaug._layout import chw_list_out, uniform_out
from gpuaug._params import _EXACT, column_stack, count_nonzero, host_size, per_sample
from gpuaug._registry import OpSpec, Param
from gpuaug._run import Kernels, choose_backend, run
from gpuaug._util import check_choice, check_flag, dtype_name, kept_array
from gpuaug.kernels._cuda import CTYPES
from gpuaug.ops._intensity import channel_param, cmn_vec_fast, float_dtype, nonzero

_TYPES = tuple(CTYPES.values())
_OUT = ("gpuaug::half", "float")
KERNELS = Kernels(
    cu=("crop_mirror_normalize.cu", "gpuaug_crop_mirror_normalize"),
    numba=("crop_mirror_normalize", "cmn_value"), kind="value",
    variants=tuple(f"gpuaug_crop_mirror_normalize<{t}, {c}, {o}, {co}>"
                   for t in _TYPES for c in (1, 3, 4) for o in _OUT for co in {c, 4 if c == 3 else c})
    + tuple(f"gpuaug_crop_mirror_normalize_vec<{t}, {c}, {o}, {co}, {pl}{rows}>"
            for t in _TYPES for c in (1, 3, 4) for o in _OUT for co in {c, 4 if c == 3 else c}
            for pl in ("true", "false") for rows in ("", ", 1")))
LAYOUTS = ("NHWC", "NCHW")


def crop_mirror_normalize(x, crop=None, crop_pos=(0.5, 0.5), mirror=False, mean=0, std=1,
                          dtype="float32", output_layout="NCHW", pad_output=False, *, out=None,
                          layout="NHWC", stream=None, backend=None):
    """Crop, mirror and normalise in one pass, as DALI's ``fn.crop_mirror_normalize``.

    For sample ``n`` with an input of ``H x W`` and a window of ``h x w`` (``crop``):

    - window corner (DALI's rule, float32, ``rounding="round"``):
      ``top = roundf(pos_y * (H - h))``, ``left = roundf(pos_x * (W - w))``,
      half away from zero;
    - ``out[y, x, c] = (x_in[top + y, left + X, c] - mean[c]) / std[c]`` with
      ``X = w - 1 - x`` where ``mirror[n]`` is true, else ``x``;
    - with ``pad_output`` a 3-channel output gets a 4th channel of zeros (DALI pads to a
      power of two channels with its fill value, 0 by default); 1 and 4 channels are
      unchanged.

    Values are used in the input's own units, not rescaled: for uint8 input give mean and
    std in 0..255 (ImageNet: mean 123.675, 116.28, 103.53; std 58.395, 57.12, 57.375), as
    DALI does; for float input, in its units (usually 0..1). DALI's ``scale``/``shift``
    are not offered (fold them into mean and std).

    Args:
        x: batch (N, H, W, C) / (N, C, H, W), one image, or a list of HWC images of
            different sizes; uint8 (the usual case), float16 or float32; 1, 3 or 4
            channels; NumPy or any CUDA array.
        crop: window (h, w) (or one int for a square), the same for every sample and no
            larger than any image; None: the whole image (no crop).
        crop_pos: (pos_y, pos_x) in [0, 1], or N such pairs (one per sample).
        mirror: bool, or N bools: flip the window left-right.
        mean, std: a number, C numbers (per channel), an (N, C) array (per sample and
            channel) or an (N, 1) array (per sample); std must not be 0.
        dtype: output dtype, "float32" (default) or "float16".
        output_layout: "NCHW" (default, as DALI's "CHW") or "NHWC".
        pad_output: pad a 3-channel output to 4 channels (the 4th is 0).
        out: optional output array (a list of CHW/HWC arrays for a varshape batch without
            crop); with ``crop`` a varshape batch gives one 4-D batch.
        layout: the input's layout, "NHWC" (default) or "NCHW".
        stream, backend: as for every op (see :func:`gpuaug.flip`).

    Returns:
        (N, C', h, w) for "NCHW" or (N, h, w, C') for "NHWC", in ``dtype`` (C' = 4 when
        padded); one image (C', h, w) for one input image; a list for a varshape batch
        without ``crop``.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.arange(16, dtype=np.uint8).reshape(1, 4, 4, 1)
        >>> gpuaug.crop_mirror_normalize(x, crop=(2, 2), crop_pos=(0, 1), mirror=True,
        ...                              mean=1, std=2)[0, 0]
        array([[1. , 0.5],
               [3. , 2.5]], dtype=float32)
    """
    b = as_batch(x, layout)
    be = choose_backend(b, backend)
    odt = float_dtype(dtype)
    check_choice("output_layout", output_layout, LAYOUTS)
    pos = plain(crop_pos, b.n, (2,))  # N positions in [0, 1] as they are, checked in one loop
    if pos is None or pos.dtype.char == "?" or not _in_unit(pos):
        pos = per_sample(crop_pos, b.n, "crop_pos", shape=(2,), **_POS_LIMITS, device=b.device)
    if type(mirror) is np.ndarray and mirror.dtype.char == "?" and mirror.shape == (b.n,):
        mir = mirror  # N bools, as they are: the parameter matrix converts them to 1.0 / 0.0
    else:
        mir = per_sample(mirror, b.n, "mirror", device=b.device, boolean=True)
    window = None
    if crop is not None:
        window = host_size(crop, "crop")
        hw = getattr(b.shapes, "hw", None)  # a uniform batch: one size to compare
        if hw is not None:
            bad = [0] if window[0] > hw[0] or window[1] > hw[1] else []
        else:
            hs, ws = b.sizes()
            bad = np.nonzero((window[0] > hs) | (window[1] > ws))[0][:1].tolist()
        for i in bad:
            h, w = b.shapes[i]
            raise ValueError(f"crop: got {window}; image {i} is {h}x{w}; expected a window "
                             "no larger than every image")
    co = 4 if check_flag("pad_output", pad_output) and b.channels == 3 else b.channels
    return cmn(b, be, KERNELS, pos, mir, window, mean, std, odt, output_layout, co, out, stream)


def cmn(b, be, kernels, pos, mir, window, mean, std, odt, out_layout, co, out, stream):
    """Shared by normalize and crop_mirror_normalize: parameters, output, launch. ``pos`` and
    ``mir``: (N, 2) and (N,) host or device columns, or None for zeros (normalize)."""
    n, c = b.n, b.channels
    shapes = b.uniform(window) if window is not None else b.shapes
    size = window if window is not None else getattr(b.shapes, "hw", None)  # one (h, w), or None
    params = _host_params(n, c, pos, mir, size if size is not None else _size_rows(b, None), mean, std)
    if params is None:
        hw = _size_rows(b, window)
        m = channel_param(mean, n, c, "mean", b.device)
        s = nonzero(channel_param(std, n, c, "std", b.device), "std", std)
        pos = np.zeros((n, 2)) if pos is None else pos
        mir = np.zeros(n) if mir is None else mir
        params = column_stack([pos, mir, hw, m, s], n)
    padded = kernels.cu[1] == "gpuaug_crop_mirror_normalize"
    template = (dtype_name(b.dtype), c, dtype_name(odt)) + ((co,) if padded else ())
    kw = dict(backend=be, stream=stream, dtype=odt, channels=co, template=template,
              fast=cmn_vec_fast(kernels.cu[0], kernels.cu[1] + "_vec", co))
    if b.varshape and window is not None:
        result, views = uniform_out(b, out, window, odt, co, out_layout)
        run(b, kernels, params, shapes=shapes, out=views, **kw)
        return result
    if b.varshape and out_layout == "NCHW":
        result, views = chw_list_out(b, out, shapes, odt, co)
        run(b, kernels, params, shapes=shapes, out=views, **kw)
        return result
    return run(b, kernels, params, shapes=shapes, out=out, layout=out_layout, **kw)


def _host_params(n, c, pos, mir, hw, mean, std):
    """cmn's (N, 5 + 2C) parameter rows ``[pos_y, pos_x, mirror, h, w, mean.., std..]`` written
    in place when every part is on the host in a usual form (mean and std: a number, C numbers,
    or an (N, 1) / (N, C) float array; all finite, std without zeros): the same values as
    channel_param + column_stack, without their per-part copies. None otherwise: the general
    path then converts, checks and says what is wrong. ``hw``: one ``(h, w)`` tuple for every
    row (a window, a uniform batch: the rows start as a copy of kept zeros with the sizes in
    place) or the (N, 2) sizes; ``pos`` / ``mir`` None: zeros (normalize)."""
    fm, fs = _plain_channels(mean, n, c), _plain_channels(std, n, c)
    if fm is None or fs is None or not (pos is None or type(pos) is np.ndarray) or not (
            mir is None or type(mir) is np.ndarray):
        return None
    if type(hw) is tuple:
        p = kept_array(_ROWS, (n, c) + hw, lambda: _zero_rows(n, c, hw)).copy()
    else:
        p = _zero_rows(n, c, hw)
    m, sd = _as_block(fm), _as_block(fs)
    if m is not None and sd is not None:  # the rest of the rows written and checked in one loop
        ok = _rows_in(_NO_POS if pos is None else pos, _NO_MIRROR if mir is None else mir, m, sd, c, p)
        return p if ok else None
    if pos is not None:
        p[:, :2] = pos
    if mir is not None:
        p[:, 2] = mir
    p[:, 5:5 + c] = fm
    p[:, 5 + c:] = fs
    if (type(fm) is np.ndarray or type(fs) is np.ndarray) and count_nonzero(np.isfinite(p[:, 5:])) != 2 * n * c:
        return None  # a NaN or infinity in an array (numbers were checked one by one)
    if count_nonzero(p[:, 5 + c:]) != n * c:
        return None  # a zero std: the general path's error
    return p


def _as_block(v):
    """A :func:`_plain_channels` value as a 2-D array :func:`_rows_in` reads (a number: (1, 1); a
    tuple: (1, C)); None for a dtype the compiled loop does not take."""
    if type(v) is np.ndarray:
        return v if v.dtype.char in "fd" else None
    return np.array(v, np.float64).reshape(1, -1)


@compiled
def _in_unit(pos):
    """Whether every value of ``pos`` is within [0, 1] (NaN is not)."""
    ok = True
    for i in range(pos.shape[0]):
        for j in range(pos.shape[1]):
            ok &= (pos[i, j] >= 0) & (pos[i, j] <= 1)
    return ok


@compiled
def _rows_in(pos, mir, mean, std, c, p):
    """Columns 0-2 and 5.. of the rows ``p`` (see :func:`_host_params`): ``pos`` (N, 2) or (0, 2)
    (none: zeros kept), ``mir`` (N,) or (0,), ``mean`` and ``std`` (R, K) blocks with R 1 or N and
    K 1 or C (broadcast); False at a mean or std that is not finite or a zero std."""
    n = p.shape[0]
    for i in range(n):
        if pos.shape[0]:
            p[i, 0] = pos[i, 0]
            p[i, 1] = pos[i, 1]
        if mir.shape[0]:
            p[i, 2] = np.float64(mir[i])
        mi, si = min(i, mean.shape[0] - 1), min(i, std.shape[0] - 1)
        for j in range(c):
            m = np.float64(mean[mi, min(j, mean.shape[1] - 1)])
            s = np.float64(std[si, min(j, std.shape[1] - 1)])
            if not (np.isfinite(m) and np.isfinite(s) and s != 0):
                return False
            p[i, 5 + j] = m
            p[i, 5 + c + j] = s
    return True


_NO_POS, _NO_MIRROR = np.zeros((0, 2)), np.zeros(0, np.bool_)


def _zero_rows(n, c, hw):
    """_host_params' starting rows: zeros, the sizes ``hw`` ((h, w) or (N, 2)) in columns 3 and 4."""
    p = np.zeros((n, 5 + 2 * c))
    p[:, 3:5] = hw
    return p


_ROWS: dict = {}  # (N, C, h, w) -> _zero_rows, read-only


def _plain_channels(value, n, c):
    """``value`` as it can be assigned to an (N, C) block, when it is a finite float or exact
    int, a tuple of C of them, or a float NumPy array of shape (N, 1) or (N, C) (whose values
    :func:`_host_params` checks once written, in one pass for mean and std); else None."""
    t = type(value)
    if t is float:
        return value if math.isfinite(value) else None
    if t is int:
        return value if -_EXACT <= value <= _EXACT else None
    if t is tuple:
        if len(value) != c:
            return None
        for v in value:
            tv = type(v)
            if not (tv is float and math.isfinite(v) or tv is int and -_EXACT <= v <= _EXACT):
                return None
        return value
    if t is np.ndarray and value.dtype.kind == "f" and value.ndim == 2 and value.shape[0] == n and (
            value.shape[1] == 1 or value.shape[1] == c):
        return value
    return None


def _size_rows(b, window):
    """The (N, 2) float64 (h, w) columns: the window's, or the images'; read-only and kept per
    (N, size) when every row is the same (a window, a uniform batch)."""
    hw = window if window is not None else getattr(b.shapes, "hw", None)
    if hw is None:
        return np.stack(b.sizes(), axis=1).astype(np.float64)
    def make():
        rows = np.empty((b.n, 2))
        rows[:] = hw
        return rows
    return kept_array(_SIZES, (b.n, hw[0], hw[1]), make)


_SIZES: dict = {}


def _example(rng, n, h, w):
    return {"crop": (max(1, h * 3 // 4), max(1, w * 3 // 4)), "crop_pos": rng.random((n, 2)),
            "mirror": rng.random(n) < 0.5, "mean": rng.uniform(100, 150, (n, 1)),
            "std": rng.uniform(50, 70, (n, 1))}


SPECS = (
    OpSpec("crop_mirror_normalize", crop_mirror_normalize, params=(
        Param("crop", None, per_sample=False, kind="size", range_doc="(h, w) no larger than any image",
              doc="window (h, w); None: whole image"),
        Param("crop_pos", (0.5, 0.5), shape=(2,), low=0, high=1, doc="window position (y, x) in [0, 1]"),
        Param("mirror", False, kind="bool", doc="flip the window left-right"),
        Param("mean", 0.0, shape=("C",), doc="per-channel mean, input units"),
        Param("std", 1.0, shape=("C",), nonzero=True, expect="non-zero values",
              doc="per-channel standard deviation, input units, non-zero"),
        Param("dtype", "float32", per_sample=False, kind="choice", choices=("float16", "float32"),
              doc="output dtype"),
        Param("output_layout", "NCHW", per_sample=False, kind="choice", choices=LAYOUTS,
              doc="output layout"),
        Param("pad_output", False, per_sample=False, kind="bool", doc="pad 3 channels to 4 (zeros)"),
    ), geometric=False, changes_shape=True, example=_example, kernels=KERNELS,
        doc=crop_mirror_normalize.__doc__,
        demo={"crop": (200, 200), "mirror": True, "mean": [123.7, 116.3, 103.5], "std": [58.4, 57.1, 57.4],
              "output_layout": "NHWC"},
        peers={"dali": "crop_mirror_normalize"},
        bench_params=lambda h, w: {"crop": (h * 6 // 7, w * 6 // 7), "mean": [123.675, 116.28, 103.53],
                                   "std": [58.395, 57.12, 57.375]}),
)

#: crop_pos's range as per_sample keywords, looked up once
_POS_LIMITS = SPECS[0].limits("crop_pos")

__all__ = ["crop_mirror_normalize"]
