"""gpuaug ops as a native DALI operator (C++ plugin) instead of ``fn.python_function``.

``gpuaug.dali.<op>`` on GPU data runs, when it can, through ``gpuaug__Kernel``
(``fn.gpuaug.kernel``): one generic C++ operator (:mod:`gpuaug.dali.native`, built on first use
against the installed DALI) that launches the op's CUDA C kernel from ``kernels/*.cu`` once per
batch on DALI's stream. It costs what DALI's built-ins cost (no Python, no GIL, no lock shared
with every other Python operator) and a pipeline of them can be serialized (Triton's DALI
backend: load the plugin, deserialize).

What each op sends the operator (graph side, built here from the registry call):
- the kernel's source (``kernels/<op>.cu`` with its ``#include "*.cuh"`` inlined), template
  name and extra template ints (interpolation, border);
- the per-sample parameter row, in the column order the standalone op builds: constants become
  the ``params`` list argument; each DataNode parameter (CPU, as DALI's own argument inputs) is
  its own argument input ``p0``.. ``p7``, as it is (any numeric type, its own shape, checked by
  the operator against the registry's), and ``segments`` says how the operator interleaves them
  with the constants (so a gd op adds no DALI operator besides the user's random draws;
  ``GPUAUG_DALI_NATIVE_ARGS=cat`` restores the previous form, where the graph casts, reshapes
  and concatenates the row and fn.shapes feeds the checks: ~8 CPU operators per op);
- columns that depend on the images' dtype (the value range 255 / 1) as ``dtype_cols``;
- a parameter *program* where the row needs host maths (the image's size, double precision, a
  check of DataNode values, a per-batch counter), run by the operator per sample, as gpuaug does
  it: ``rotation`` (OpenCV's inverse matrix from angle, scale and centre, the centre defaulting
  to each image's), ``affine`` / ``perspective`` (the 2x3 / 3x3 matrix inverted, singular ones
  refused naming ``matrix``), ``cmn`` (crop_mirror_normalize and normalize: mean/std broadcast
  to the channels), ``rot90`` (k checked, reduced to 0..3), ``crop`` (the window checked inside
  each image), ``center_crop`` (torchvision's offsets per image size), ``pad`` (the value stored
  as the output's dtype stores it), ``resize`` / ``resized_crop`` (resample_params per image
  size or box), ``erase`` (boxes checked, value stored), ``median`` (k checked; the 3x3 kernel
  when every k is 3), ``box`` (1/k taps), ``gaussian`` (the taps gpuaug computed at definition
  for a constant sigma, for uint8 and for float images), ``grid_mask`` (cos / sin and the
  float32 values the op uses), ``noise`` / ``salt_pepper`` (batch i of the operator uses
  seed + i, as the python_function path does);
- the output shape rule (``out_shape``: the input's, a constant ``out_size``, transposed, rot90's
  per-sample swap, pad's growth read in Setup), the output channels (grayscale), the launch
  (2-D tiles; replace_rows and noise 1-D plans; the separable blurs' plan with dynamic shared
  memory), the signature (plain, colour with the grayscale mean reduced first, cmn, equalize's
  histogram / lookup-table / lookup launches) and, for warps, the dense kernel for contiguous
  batches; HWC or CHW samples (``layout="CHW"``: the descriptor tables carry the strides; the
  packed colour and dense warp fast paths are HWC only, as in the standalone ops).
The operator launches the kernels the standalone op launches on the same batch (packed colour
path, dense warp path, same partial-sum split for the mean), so outputs are bit-identical when
the parameters are: DataNode values travel as float32 (DALI's argument type), as do constants.

Which path runs (``gpuaug info`` shows it):
- ``GPUAUG_DALI_NATIVE`` unset / ``auto``: native when the plugin loads and the op and its
  arguments are supported (:data:`NATIVE_OPS`), else ``python_function``; when the plugin cannot
  be built or loaded, one warning says why, once per process;
- ``GPUAUG_DALI_NATIVE=0`` (``off``/``python``): always ``python_function``;
- ``GPUAUG_DALI_NATIVE=1`` (``on``/``native``): native or an error saying why;
- per call: ``gpuaug.dali.<op>(..., backend="native")`` forces native, ``backend="cuda"`` (or
  its alias ``"python"``) forces ``python_function`` (both run the CUDA C kernels); the default
  ``backend=None`` picks as above.

Every registry op but autocontrast has a native form (:data:`NATIVE_OPS`); autocontrast (two reduction
launches, then the map) runs through ``python_function``. Other calls that keep ``python_function``:
gaussian_blur with a DataNode sigma (its taps are NumPy's exp and pairwise sums, which a C++
copy would not match bit for bit everywhere), crop with per-sample window sizes, GPU DataNode
parameters, per-channel or per-sample ``fill``, per-sample constant arrays, mean/std mixing a
constant with a DataNode. A DataNode parameter's per-sample shape is checked by the operator
against the registry, and a wrong one is an error naming the parameter. ``gd.compose`` runs its
native ops natively and fuses the rest; with ``native_chain=True`` (or
``GPUAUG_DALI_NATIVE_CHAIN=1``; off by default until its GPU tests have run) each run of
consecutive native ops is ONE ``gpuaug__Chain`` (``fn.gpuaug.chain``): a C++ operator holding one
gpuaug__Kernel per op (each built from the arguments fn.gpuaug.kernel would get, sent as text
typed by gpuaug__Kernel's schema), run in order on DALI's stream with the intermediate batches
in buffers it keeps, so the result is the ops' bit for bit (at most 32 DataNode parameters per
chain).

``gd.policy`` (a ``gpuaug.Compose``) runs natively as ``gpuaug__Policy`` (``fn.gpuaug.policy``), one
operator per fused stage of the policy's plan (kernels/fused.cu, as gpuaug runs it), when every
transform has a native form (:data:`NATIVE_TRANSFORMS`: flips, rotation, affine, resize, centre
crop, colour jitter, grayscale, gamma, solarize, posterize, invert, and the writes Normalize /
ToDtype / ToLayout) and the images are HWC; it is gd.policy's default where the plugin loads.
Its random parameters come from the policy's own generator: the operator holds a copy of its
PCG64 state (``rng_state``, taken when the pipeline is defined, so the pipeline serializes) and
draws per batch exactly the uniforms the policy's call would (``Generator.random`` rows, every
transform's, in order; ``row_slots`` picks its stage's), so batch i gets the parameters of the
policy's i-th call, as gd.policy's python_function path and ``policy(x)`` do (checked when the
pipeline is defined: :func:`check_policy_draws`; a policy the operator cannot replay keeps
python_function). ``draws="dali"`` takes one ``fn.random.uniform(range=[0, 1], shape=[K])`` per
stage (the pipeline's seed) instead. The operator turns the uniforms into each transform's
values with the transform's own rules (``u < p``, ``lo + (hi - lo) u``) and builds the stage's
parameter rows in C++ per image size (``gpuaug_host.h``, checked bit for bit against
``gpuaug/policy/_fused.py``'s ``build``).

Example::

    import gpuaug.dali as gd
    from gpuaug.dali import _native
    print(_native.status())                # {'mode': 'auto', 'active': True, ...}
    images = gd.flip(images, horizontal=fn.random.coin_flip())   # fn.gpuaug.kernel inside
"""
from __future__ import annotations

import math
import os
import re
import threading
import warnings
from dataclasses import dataclass

import numpy as np

from gpuaug._util import dtype_max

from ._steps import op_error

ENV = "GPUAUG_DALI_NATIVE"
_MODES = {"": "auto", "auto": "auto", "1": "on", "on": "on", "native": "on", "true": "on",
          "0": "off", "off": "off", "python": "off", "false": "off"}

_lock = threading.Lock()
_state = {"tried": False, "ok": False, "reason": None, "path": None, "warned": False}


def mode() -> str:
    """"auto", "on" or "off", from ``GPUAUG_DALI_NATIVE`` (see module docstring)."""
    raw = os.environ.get(ENV, "").strip().lower()
    if raw not in _MODES:
        raise ValueError(f"{ENV}: got {raw!r}; expected auto, 1/on/native or 0/off/python")
    return _MODES[raw]


def load() -> bool:
    """Build (first use) and load the plugin once per process; True when it is loaded."""
    with _lock:
        if _state["tried"]:
            return _state["ok"]
        _state["tried"] = True
        try:
            from . import native

            path = native.build()
            nvrtc = native.nvrtc_library()
            _check_nvrtc(nvrtc)
            if nvrtc and not os.environ.get("GPUAUG_NVRTC_LIBRARY"):
                os.environ["GPUAUG_NVRTC_LIBRARY"] = nvrtc  # read by the plugin when it first compiles
            if "GPUAUG_DALI_KERNEL_CACHE" not in os.environ:  # compiled kernels, kept across processes
                kdir = os.path.join(native.cache_root(), "kernels")
                try:
                    os.makedirs(kdir, exist_ok=True)
                    os.environ["GPUAUG_DALI_KERNEL_CACHE"] = kdir
                except OSError:
                    pass
            import nvidia.dali.plugin_manager as pm

            pm.load_library(path)
            from nvidia.dali import fn

            if not hasattr(getattr(fn, "gpuaug", None), "kernel"):
                raise native.NativeUnavailable(f"{path} loaded but DALI has no fn.gpuaug.kernel")
            _state.update(ok=True, path=path)
        except Exception as e:  # noqa: BLE001 - any failure means: fall back, and say why
            _state.update(ok=False, reason=f"{type(e).__name__}: {e}")
        return _state["ok"]


def _check_nvrtc(path):
    """The plugin compiles its kernels with NVRTC when a pipeline first runs: find it now, so a
    missing NVRTC means python_function (with the reason) rather than a pipeline that fails."""
    import ctypes

    tried = [path] if path else []
    tried += ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]
    for name in tried:
        try:
            ctypes.CDLL(name)
            return
        except OSError:
            continue
    from .native import NativeUnavailable

    raise NativeUnavailable("NVRTC (libnvrtc.so) not found: the native operator compiles gpuaug's kernels with it; "
                            "install the CUDA toolkit or pip install nvidia-cuda-nvrtc-cu12 (CUDA 12) / "
                            "nvidia-cuda-nvrtc (CUDA 13), or set GPUAUG_NVRTC_LIBRARY")


def status() -> dict:
    """What ``gpuaug info`` prints: the mode, whether the native operator is active (this
    tries to build and load it), why not, the library path, the native ops and policy
    transforms, where gd.policy's native draws come from and whether gd.compose chains
    (``GPUAUG_DALI_NATIVE_CHAIN``)."""
    m = mode()
    ok = load() if m != "off" else False
    return {"mode": m, "active": ok, "reason": None if ok else (_state["reason"] if m != "off"
                                                                   else f"{ENV}=0 (python_function forced)"),
            "library": _state["path"], "ops": sorted(NATIVE_OPS), "policy_transforms": list(NATIVE_TRANSFORMS),
            "policy_draws": "the policy's own generator (PCG64 replayed; Compose(draws='device') policies: "
                            "python_function)",
            "args": args_mode(), "compose_chain": chain_enabled()}


def _warn_once(reason):
    if not _state["warned"]:
        _state["warned"] = True
        warnings.warn("gpuaug.dali: the native DALI operator is unavailable, so gpuaug ops run in "
                      f"fn.python_function (slower, not serializable). Why: {reason}. Set {ENV}=0 to "
                      "silence this.", RuntimeWarning, stacklevel=4)


def reset_for_tests():
    """Forget the load attempt and the warning (tests only)."""
    with _lock:
        _state.update(tried=False, ok=False, reason=None, path=None, warned=False)


# ---- kernel sources --------------------------------------------------------------------------
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)
_sources: dict = {}


def kernel_source(filename: str) -> str:
    """``kernels/<filename>`` with its local ``#include "x.cuh"`` inlined (each header once,
    ``#pragma once`` dropped): one self-contained string for NVRTC, stored in the pipeline."""
    src = _sources.get(filename)
    if src is None:
        from gpuaug.kernels._cuda import source

        seen = set()

        def expand(name):
            if name in seen:
                return ""
            seen.add(name)
            text = source(name).replace("#pragma once", "")
            return _INCLUDE.sub(lambda m: expand(m.group(1)), text)

        src = _sources[filename] = expand(filename)
    return src


# ---- what each native op sends ---------------------------------------------------------------
MAXV = tuple(dtype_max(d) for d in ("uint8", "float16", "float32"))  # the value range's top, in DTYPE's order


class Unsupported(Exception):
    """This call cannot run natively (the message says why)."""


@dataclass(frozen=True)
class NativeOp:
    """How a registry op runs on ``gpuaug__Kernel``.

    ``row(args) -> list`` of entries in the kernel's column order: a number, a tuple of numbers,
    a DataNode (per-sample scalar or vector), or ``DTYPE(values)`` (a column set from the images'
    dtype). ``args``: the call's parameters with defaults filled in. ``extra(args)``: extra
    template ints. ``channels``: accepted channel counts.
    """

    file: str
    kernel: str
    row: object
    signature: str = "generic"
    program: str = "identity"
    extra: object = None
    channels: tuple = (1, 3, 4)
    mean: object = None  # colour ops with a grayscale mean: args -> -1 (skip) / 0 / 1 (brightness first)
    dense: str = ""  # warp ops: the kernel the op runs on C-contiguous uniform batches
    out_size: object = None  # warp ops: args -> (h, w) of every output, or None (the input's)
    out: object = None  # signature "cmn": args -> dict(out_dtype=..., out_layout=..., pad_output=...)
    out_shape: str = "same"  # "swap" (transpose), "rot90" (swapped where k is odd), "pad" (grown)
    tile: tuple = (32, 8)  # generic launches: output pixels (w, h) per 32 x 8 block
    launch: str = "grid"  # "rows" (replace_rows kernels), "noise" (gaussian_noise's 1-D plan)
    check: object = None  # args -> None (ValueError naming the argument): instead of running the op's
    #                       own checks on a tiny batch (ops whose launch has no plan hook)


@dataclass(frozen=True)
class DTYPE:
    values: tuple  # uint8, float16, float32


def _flag(v):
    return v if _is_node(v) else float(bool(v))


def _rotate_row(a):
    from gpuaug.ops._warp import BORDERS, INTERPOLATIONS

    fill = _fill_entry(a)
    center = a["center"]
    if center is None:
        center = (math.nan, math.nan)
    elif not _is_node(center):
        center = tuple(float(c) for c in np.asarray(center, np.float64).reshape(-1))
        if len(center) != 2:
            raise Unsupported("center: a per-sample (N, 2) constant; give a DataNode or one (cx, cy)")
    return [a["angle"], a["scale"], center, float(INTERPOLATIONS[a["interpolation"]]),
            float(BORDERS[a["border"]]), fill]


def _fill_entry(a):
    from gpuaug.ops._warp import fill_scalar

    fill = a["fill"]
    if _is_node(fill) or isinstance(fill, bool) or not isinstance(fill, (int, float, np.integer, np.floating)):
        raise Unsupported("fill: only a constant number runs natively (per-sample or per-channel fill: "
                          "backend='cuda')")
    fill = float(fill)
    return (float(fill_scalar(fill, np.uint8)), float(fill_scalar(fill, np.float16)),
            float(fill_scalar(fill, np.float32)))


def _affine_row(a):
    from gpuaug.ops._warp import BORDERS, INTERPOLATIONS

    m = a["matrix"]
    if not _is_node(m):
        m = np.asarray(m, np.float64)
        if m.shape != (2, 3):
            raise Unsupported("matrix: a per-sample (N, 2, 3) constant; give a DataNode or one 2x3 matrix")
    return [m, float(bool(a["inverse_map"])), float(INTERPOLATIONS[a["interpolation"]]),
            float(BORDERS[a["border"]]), _fill_entry(a)]


def _perspective_row(a):
    from gpuaug.ops._warp import BORDERS, INTERPOLATIONS

    m = a["matrix"]
    if not _is_node(m):
        m = np.asarray(m, np.float64)
        if m.shape != (3, 3):
            raise Unsupported("matrix: a per-sample (N, 3, 3) constant; give a DataNode or one 3x3 matrix")
    return [m, float(bool(a["inverse_map"])), float(INTERPOLATIONS[a["interpolation"]]),
            float(BORDERS[a["border"]]), _fill_entry(a)]


def _out_size(a):
    if a.get("size") is None:
        return None
    from gpuaug._params import host_size

    return tuple(int(v) for v in host_size(a["size"], "size"))


def _cmn_row(a):
    """[crop_pos (2), mirror, mean (k), std (k)], k = 1 or C (the operator's "cmn" program)."""
    m, sd = a["mean"], a["std"]
    if _is_node(m) != _is_node(sd):
        raise Unsupported("mean/std: give both as constants or both as DataNodes of the same width")
    if not _is_node(m):
        m, sd = np.asarray(m, np.float64).reshape(-1), np.asarray(sd, np.float64).reshape(-1)
        if m.size != sd.size:
            if min(m.size, sd.size) != 1:
                raise Unsupported("mean/std: constants of different lengths")
            k = max(m.size, sd.size)
            m, sd = np.broadcast_to(m, (k,)), np.broadcast_to(sd, (k,))
    pos = a["crop_pos"]
    if not _is_node(pos):
        pos = np.asarray(pos, np.float64).reshape(-1)
        if pos.size != 2:
            raise Unsupported("crop_pos: a per-sample (N, 2) constant; give a DataNode or one (y, x)")
    return [pos, _flag(a["mirror"]), m, sd]


def _cmn_out(a):
    lay = {"NCHW": "CHW", "NHWC": "HWC", "CHW": "CHW", "HWC": "HWC"}[a["output_layout"] or "NCHW"]
    return dict(out_dtype=str(np.dtype(a["dtype"])), out_layout=lay, pad_output=bool(a["pad_output"]))


def _normalize_row(a):
    return _cmn_row(dict(a, crop_pos=(0.0, 0.0), mirror=False))


def _normalize_out(a):
    lay = {"NCHW": "CHW", "NHWC": "HWC", "CHW": "CHW", "HWC": "HWC"}[a["output_layout"] or "NHWC"]
    return dict(out_dtype=str(np.dtype(a["dtype"])), out_layout=lay, cmn_co=False)


def _crop_size(a):
    return None if a.get("crop") is None else _out_size({"size": a["crop"]})


def _window(a):
    """crop's (height, width): host ints, one window size for the batch."""
    hw = []
    for name in ("height", "width"):
        v = a[name]
        if v is None or _is_node(v):
            raise Unsupported(f"{name}: host ints (the output size is set when the pipeline is defined)")
        u = np.unique(np.asarray(v, np.int64).reshape(-1))
        if u.size != 1:
            raise Unsupported(f"{name}: per-sample window sizes (give one size, or backend='cuda')")
        hw.append(int(u[0]))
    return tuple(hw)


def _pad_row(a):
    """[padding (top, bottom, left, right), mode, value] (the operator's "pad" program: the
    output grows by the padding, the value is stored as the output's dtype stores it)."""
    from gpuaug.ops._launch import as_stored
    from gpuaug.ops.pad import MODES

    pad = a["padding"]
    if not _is_node(pad):
        pad = np.asarray(pad, np.float64).reshape(-1)
        if pad.size == 1:
            pad = np.repeat(pad, 4)
        if pad.size != 4:
            raise Unsupported("padding: per-sample constants; give a DataNode or one (top, bottom, left, right)")
    v = a["value"]
    if not _is_node(v):
        if np.size(v) != 1:
            raise Unsupported("value: per-sample constants; give a DataNode or one number")
        f = np.asarray([float(np.asarray(v, np.float64).reshape(-1)[0])])
        v = DTYPE(tuple(float(as_stored(f, d)[0]) for d in (np.uint8, np.float16, np.float32)))
    return [pad, float(MODES[a["mode"]]), v]


def _resample_mode(a):
    from gpuaug.ops.resize import INTERPOLATIONS

    return INTERPOLATIONS[a["interpolation"]]


def _resized_crop_row(a):
    bx = a["boxes"]
    if not _is_node(bx):
        bx = np.asarray(bx, np.float64).reshape(-1)
        if bx.size != 4:
            raise Unsupported("boxes: per-sample (N, 4) constants; give a DataNode or one (top, left, height, width)")
    return [bx, float(_resample_mode(a))]


def _erase_row(a):
    """[boxes (K x 4), value] (the operator's "erase" program)."""
    from gpuaug.ops._launch import as_stored

    bx = a["boxes"]
    if bx is None:
        raise Unsupported("boxes: required")
    if not _is_node(bx):
        bx = np.asarray(bx, np.float64)
        if bx.ndim != 2 or bx.shape[1] != 4:
            raise Unsupported("boxes: per-sample (N, K, 4) constants; give a DataNode or one (K, 4) set")
    v = a["value"]
    if not _is_node(v):
        if np.size(v) != 1:
            raise Unsupported("value: per-channel or per-sample constants; give a DataNode or one number")
        f = np.asarray([float(np.asarray(v, np.float64).reshape(-1)[0])])
        v = DTYPE(tuple(float(as_stored(f, d)[0]) for d in (np.uint8, np.float16, np.float32)))
    return [bx, v]


def _seed_chunks(a):
    """The step's base seed (gpuaug.dali's: batch i uses seed + i; the operator adds i) as four
    16-bit chunks, exact in float32 (gpuaug.ops._launch.seed_columns)."""
    seed = a["__seed__"]
    if seed is None:
        raise Unsupported("seed: none (internal)")
    return tuple(float((int(seed) >> s) & 0xFFFF) for s in (0, 16, 32, 48))


def _check_noise(a):
    if "std" in a:
        sd = a["std"]
        if sd is None:
            raise TypeError("std: missing; expected a number >= 0 or a sequence of N of them")
        if np.any(np.asarray(sd, np.float64) < 0):
            raise ValueError(f"std: got {sd!r}; expected numbers >= 0")


def _check_salt_pepper(a):
    for name in ("prob", "salt_vs_pepper"):
        if name in a:
            v = a[name]
            if v is None:
                raise TypeError(f"{name}: missing; expected a number in [0, 1]")
            v = np.asarray(v, np.float64)
            if np.any(v < 0) or np.any(v > 1):
                raise ValueError(f"{name}: got {a[name]!r}; expected numbers in [0, 1]")


def _check_grid_mask(a):
    if "tile" in a:
        t = a["tile"]
        if t is None:
            raise TypeError("tile: missing; expected a number > 0 (required)")
        with np.errstate(over="ignore"):
            t32 = np.asarray(t, np.float64).astype(np.float32)
        if np.any(t32 <= 0) or not np.all(np.isfinite(t32)):
            raise ValueError(f"tile: got {t!r}; expected numbers > 0 that float32 holds")
    if "ratio" in a:
        r = a["ratio"]
        if r is None:
            raise TypeError("ratio: missing; expected a number in [0, 1] (required)")
        if np.any(np.asarray(r, np.float64) < 0) or np.any(np.asarray(r, np.float64) > 1):
            raise ValueError(f"ratio: got {r!r}; expected numbers in [0, 1]")


def _gaussian_row(a):
    """Constant sigma (and kernel_size): the taps as gpuaug.gaussian_blur computes them (NumPy),
    for uint8 images then for floats (the default kernel size depends on the dtype: the
    operator's "gaussian" program takes the dtype's half): [k, w_0 .. w_{k-1}] twice. DataNode
    values: not native (a C++ copy of NumPy's exp and pairwise sums would not be bit-exact
    everywhere)."""
    from gpuaug.ops.gaussian_blur import gaussian_kernel_size, gaussian_weight_rows
    from gpuaug.ops._launch import MAX_KERNEL_SIZE

    sig, k = a["sigma"], a["kernel_size"]
    if _is_node(sig) or _is_node(k):
        raise Unsupported("sigma / kernel_size: DataNodes (the taps are NumPy's; give constants, or backend='cuda')")
    if sig is None or np.size(sig) != 1 or (k is not None and np.size(k) != 1):
        raise Unsupported("sigma / kernel_size: one constant each (per-sample arrays: backend='cuda')")
    sig = np.asarray([float(np.asarray(sig, np.float64).reshape(-1)[0])])
    row = []
    for dt in (np.uint8, np.float32):
        kk = (np.asarray([int(np.asarray(k).reshape(-1)[0])]) if k is not None
              else gaussian_kernel_size(np.minimum(sig, MAX_KERNEL_SIZE), dt))
        if kk[0] < 1 or kk[0] % 2 == 0 or kk[0] > MAX_KERNEL_SIZE:
            raise Unsupported("kernel_size: not an odd size 1..255 (the op says why: backend='cuda')")
        row += [float(v) for v in gaussian_weight_rows(kk, sig)[0]]
    return [tuple(row)]


def _check_box(a):
    if "kernel_size" in a:
        k = a["kernel_size"]
        if k is None:
            raise TypeError("kernel_size: got None; expected an odd size from 1 to 255 (required)")
        k = np.asarray(k, np.float64)
        if np.any(k != np.floor(k)) or np.any(k < 1) or np.any(k > 255) or np.any(k % 2 == 0):
            raise ValueError(f"kernel_size: got {a['kernel_size']!r}; expected odd sizes from 1 to 255")


def _check_sharpen(a):  # a: the constant arguments (a DataNode's is absent: the operator gets it)
    if "factor" not in a:
        return
    f = a["factor"]
    if f is None:
        raise TypeError("factor: got None; expected a number >= 0 (required)")
    if np.any(np.asarray(f, np.float64) < 0) or not np.all(np.isfinite(np.asarray(f, np.float64))):
        raise ValueError(f"factor: got {f!r}; expected finite numbers >= 0")


def _check_median(a):
    if "kernel_size" not in a:
        return
    k = a["kernel_size"]
    if k is None:
        raise TypeError("kernel_size: got None; expected 3 or 5 (required)")
    if not np.all(np.isin(np.asarray(k, np.float64), (3, 5))):
        raise ValueError(f"kernel_size: got {k!r}; expected 3 or 5")


def _rotate_extra(a):
    from gpuaug.ops._warp import BORDERS, INTERPOLATIONS

    return (INTERPOLATIONS[a["interpolation"]], BORDERS[a["border"]])


def _colour(name, row, channels=(1, 3, 4), mean=None):
    return NativeOp(f"{name}.cu", f"gpuaug_{name}", row, signature="colour", channels=channels, mean=mean)


def _mean_flag(bright, name):
    """The op needs the mean unless ``name`` is the constant 1 (as the standalone op skips it)."""
    def flag(a):
        v = a[name]
        if not _is_node(v) and np.all(np.asarray(v, np.float64) == 1):
            return -1
        return int(bright)
    return flag


#: op name -> NativeOp (the ops gpuaug.dali runs natively).
NATIVE_OPS = {
    "flip": NativeOp("flip.cu", "gpuaug_flip", lambda a: [_flag(a["horizontal"]), _flag(a["vertical"])]),
    "invert": NativeOp("invert.cu", "gpuaug_invert", lambda a: [DTYPE(MAXV)]),
    "solarize": NativeOp("solarize.cu", "gpuaug_solarize", lambda a: [a["threshold"], DTYPE(MAXV)]),
    "posterize": NativeOp("posterize.cu", "gpuaug_posterize", lambda a: [a["bits"], DTYPE((0.0, 1.0, 1.0))]),
    "gamma": NativeOp("gamma.cu", "gpuaug_gamma", lambda a: [a["gamma"], a["gain"], DTYPE(MAXV)]),
    "brightness": _colour("brightness", lambda a: [a["factor"], DTYPE(MAXV)]),
    "saturation": _colour("saturation", lambda a: [a["factor"], DTYPE(MAXV)]),
    "hue": _colour("hue", lambda a: [a["shift"], DTYPE(MAXV)]),
    "contrast": _colour("contrast", lambda a: [a["factor"], DTYPE(MAXV)], mean=_mean_flag(False, "factor")),
    "color_jitter": _colour("color_jitter", lambda a: [a["brightness"], a["contrast"], a["saturation"], a["hue"],
                                                      DTYPE(MAXV)], mean=_mean_flag(True, "contrast")),
    "color_twist": _colour("color_twist", lambda a: [a["matrix"], DTYPE(MAXV)], channels=(3, 4)),
    "grayscale": NativeOp("grayscale.cu", "gpuaug_grayscale", lambda a: [DTYPE(MAXV)], signature="colour",
                          extra=lambda a: (int(a["num_output_channels"]),),
                          out=lambda a: dict(out_channels=int(a["num_output_channels"]))),
    "channel_shuffle": _colour("channel_shuffle", lambda a: [a["permutation"]]),
    "warp_affine": NativeOp("warp_affine.cu", "gpuaug_warp_affine", _affine_row, program="affine",
                            extra=_rotate_extra, dense="gpuaug_warp_affine_dense", out_size=_out_size),
    "warp_perspective": NativeOp("warp_perspective.cu", "gpuaug_warp_perspective", _perspective_row,
                                 program="perspective", extra=_rotate_extra, dense="gpuaug_warp_perspective_dense",
                                 out_size=_out_size),
    "transpose": NativeOp("transpose.cu", "gpuaug_transpose", lambda a: [0.0], out_shape="swap"),
    "rot90": NativeOp("rot90.cu", "gpuaug_rot90", lambda a: [a["k"]], program="rot90", out_shape="rot90"),
    "crop": NativeOp("crop.cu", "gpuaug_crop", lambda a: [a["top"], a["left"]], program="crop", out_size=_window),
    "center_crop": NativeOp("crop.cu", "gpuaug_crop", lambda a: [], program="center_crop",
                            out_size=lambda a: _out_size({"size": a["size"]})),
    "resize": NativeOp("resize.cu", "gpuaug_resize", lambda a: [float(_resample_mode(a))], program="resize",
                       extra=lambda a: (_resample_mode(a),), out_size=lambda a: _out_size({"size": a["size"]})),
    "resized_crop": NativeOp("resized_crop.cu", "gpuaug_resized_crop", _resized_crop_row, program="resized_crop",
                             extra=lambda a: (_resample_mode(a),), out_size=lambda a: _out_size({"size": a["size"]})),
    "sharpen": NativeOp("sharpen.cu", "gpuaug_sharpen", lambda a: [a["factor"], DTYPE(MAXV), DTYPE((1.0, 0.0, 0.0))],
                        tile=(32, 32), check=_check_sharpen),
    "median_blur": NativeOp("median_blur.cu", "gpuaug_median_blur", lambda a: [a["kernel_size"]], program="median",
                            tile=(128, 8), check=_check_median),
    "grid_mask": NativeOp("grid_mask.cu", "gpuaug_grid_mask",
                          lambda a: [a["tile"], a["ratio"], a["angle"], a["shift"]], program="grid_mask",
                          launch="rows", check=_check_grid_mask),
    "gaussian_blur": NativeOp("gaussian_blur.cu", "gpuaug_gaussian_blur", _gaussian_row, program="gaussian",
                              launch="separable"),
    "box_blur": NativeOp("box_blur.cu", "gpuaug_box_blur", lambda a: [a["kernel_size"]], program="box",
                         launch="separable", check=_check_box),
    "equalize": NativeOp("equalize.cu", "gpuaug_equalize", lambda a: [], signature="equalize",
                         check=lambda a: None),
    "erase": NativeOp("erase.cu", "gpuaug_erase", _erase_row, program="erase", launch="rows"),
    "gaussian_noise": NativeOp("gaussian_noise.cu", "gpuaug_gaussian_noise",
                               lambda a: [a["mean"], a["std"], _seed_chunks(a), 0.0], program="noise", launch="noise",
                               check=_check_noise),
    "salt_and_pepper": NativeOp("salt_and_pepper.cu", "gpuaug_salt_and_pepper",
                                lambda a: [a["prob"], a["salt_vs_pepper"], _seed_chunks(a), DTYPE(MAXV), 0.0],
                                program="salt_pepper", launch="rows", check=_check_salt_pepper),
    "pad": NativeOp("pad.cu", "gpuaug_pad", _pad_row, program="pad", out_shape="pad"),
    "crop_mirror_normalize": NativeOp("crop_mirror_normalize.cu", "gpuaug_crop_mirror_normalize", _cmn_row,
                                      signature="cmn", program="cmn", out_size=_crop_size, out=_cmn_out),
    "normalize": NativeOp("normalize.cu", "gpuaug_normalize", _normalize_row, signature="cmn", program="cmn",
                          out=_normalize_out),
    "rotate": NativeOp("rotate.cu", "gpuaug_rotate", _rotate_row, program="rotation", extra=_rotate_extra,
                       dense="gpuaug_rotate_dense"),
}


def _is_node(v):
    from ._steps import is_node

    return is_node(v)


def _check_constants(step, args):
    """Run the standalone op's own argument checks on the constants (DataNodes replaced by the
    registry example's values) on a 1-sample NumPy batch, stopping before any kernel runs;
    a bad constant fails here, at graph definition, naming the op and the argument."""
    from gpuaug._run import describe

    spec = step.spec
    kw = {k: v for k, v in args.items() if not _is_node(v) and not k.startswith("__")}
    nodes = [k for k, v in args.items() if _is_node(v)]
    if nodes:
        ex = spec.example(np.random.default_rng(0), 1, 8, 8) if spec.example else {}
        for k in nodes:
            if k not in ex:
                return
            kw[k] = ex[k]
    c = 3 if 3 in spec.channels else spec.channels[0]
    # large enough for any constant window (crop: offset + size) the op checks against the image
    size, offset = 8, 0
    for p in spec.params:
        v = kw.get(p.name)
        if v is None or isinstance(v, (str, bool)):
            continue
        if p.kind == "size":
            size = max(size, int(np.max(np.asarray(v, np.float64))))
        elif p.kind == "int":
            try:
                offset = max(offset, int(np.max(np.abs(np.asarray(v, np.float64)))))
            except (TypeError, ValueError):
                pass
    side = size + offset

    try:
        describe(spec.func, np.zeros((1, side, side, c), np.uint8), **kw, backend="cpu")
    except (ValueError, TypeError) as e:
        raise op_error(step.op, str(e), type(e)) from None


def _params_node(entries, width):
    """entries (numbers, tuples, DataNodes, DTYPE) -> (params argument, num_params, dtype_cols,
    dtype_values). ``width(node)``: how many values a DataNode holds per sample."""
    from nvidia.dali import fn, types

    consts, parts, pending, dcols, dvals, col, any_node = [], [], [], [], [], 0, False

    def flush():
        if pending:
            parts.append(fn.constant(fdata=list(pending), shape=[len(pending)], dtype=types.FLOAT, device="cpu"))
            pending.clear()

    for e in entries:
        if isinstance(e, DTYPE):
            if col is None:
                raise Unsupported("internal: a dtype column after a parameter of per-image width")
            dcols.append(col)
            dvals += [float(v) for v in e.values]
            consts.append(0.0)
            pending.append(0.0)
            col += 1
        elif _is_node(e):
            if e.device != "cpu":
                raise Unsupported("a GPU DataNode parameter (DALI's argument inputs are CPU nodes; "
                                  "give a CPU node, e.g. from fn.random.*)")
            any_node = True
            flush()
            parts.append(fn.cast(fn.reshape(e, shape=[-1]), dtype=types.FLOAT))
            w = width(e)
            if w is None and dcols:
                raise Unsupported("internal: a dtype column before a parameter of per-image width")
            col = None if (w is None or col is None) else col + w
        else:
            vals = [float(x) for x in np.asarray(e, np.float64).reshape(-1)]
            consts += vals
            pending += vals
            col = None if col is None else col + len(vals)
    num = -1 if col is None else col  # -1: the operator does not check the row's width
    if not any_node:
        return consts, num, dcols, dvals
    flush()
    return (parts[0] if len(parts) == 1 else fn.cat(*parts, axis=0)), num, dcols, dvals


def native_node(step, data, nodes, *, forced=False, probe=False):
    """The ``fn.gpuaug.kernel`` node running ``step`` on ``data``, or None to fall back to
    ``python_function`` (when not ``forced``; forced: an error saying why). ``probe``: only
    say whether it would run natively (True / None), building nothing."""
    kw = native_kwargs(step, nodes, forced=forced, probe=probe)
    if kw is None or kw is True:
        return kw
    from nvidia.dali import fn

    return fn.gpuaug.kernel(data, **kw)


def native_kwargs(step, nodes, *, forced=False, probe=False):
    """The arguments of ``fn.gpuaug.kernel`` running ``step`` (see :func:`native_node`), or None
    (python_function), or True (``probe``)."""
    m = mode()
    forced_env = m == "on"

    def no(reason, warn=False):
        if forced or (warn and forced_env):
            raise op_error(step.op, f"backend='native': {reason}", RuntimeError)
        if warn:
            _warn_once(reason)
        return None

    if m == "off" and not forced:
        return None
    nat = NATIVE_OPS.get(step.op)
    if nat is None:
        return no(f"op {step.op!r} has no native form yet (native ops: {', '.join(sorted(NATIVE_OPS))})")
    if step.layout not in ("NHWC", "NCHW"):
        return no(f"layout {step.layout!r}: the native operator takes HWC or CHW samples")
    if not load():
        return no(_state["reason"], warn=True)
    spec = step.spec
    args = {p.name: p.default for p in spec.params}
    args.update(step.consts)
    args.update(zip(step.node_params, nodes))
    def size_of(shape):  # values per sample, None when the shape depends on the image ("C")
        return int(np.prod(shape)) if all(isinstance(d, int) for d in shape) else None

    for p in spec.params:  # a constant with one value per sample: python_function takes it
        v = step.consts.get(p.name)
        want = size_of(p.shape)
        if (v is not None and p.per_sample and p.kind not in ("size", "choice") and p.name != "fill"
                and want is not None and np.size(v) != want and not (step.op == "pad" and np.size(v) == 1)):
            return no(f"{p.name}: a constant array of per-sample values (give a DataNode, e.g. from "
                      "fn.external_source, or backend='cuda')")
    shapes = {p.name: p.shape for p in spec.params}

    def width(node):
        name = next(k for k, v in args.items() if v is node)
        return size_of(shapes[name])

    args["__seed__"] = step.seed  # the noise ops' base seed (gpuaug.dali._steps)
    try:
        entries = nat.row(args)
        for e in entries:
            if _is_node(e) and e.device != "cpu":
                raise Unsupported("a GPU DataNode parameter (DALI's argument inputs are CPU nodes; "
                                  "give a CPU node, e.g. from fn.random.*)")
    except Unsupported as e:
        return no(str(e))
    if probe:
        return True
    if nat.check is not None:
        try:
            nat.check({k: v for k, v in args.items() if not _is_node(v)})
        except (ValueError, TypeError) as e:
            raise op_error(step.op, str(e), type(e)) from None
    else:
        _check_constants(step, args)
    node_entries = [e for e in entries if _is_node(e)]
    direct = args_mode() == "direct" and 0 < len(node_entries) <= MAX_NODES
    try:
        if direct:
            params, segments, pnodes, num, dcols, dvals = _params_direct(entries, width)
        else:
            params, num, dcols, dvals = _params_node(entries, width)
    except Unsupported as e:
        return no(str(e))
    checks = _shape_checks(node_entries, args, shapes, with_shapes=not direct)
    if direct:
        checks["segments"] = segments
        checks.update({f"p{k}": node for k, node in enumerate(pnodes)})
    kw = dict(op=step.op, source=kernel_source(nat.file), kernel=nat.kernel,
              template_extra=list(nat.extra(args)) if nat.extra else [], channels=list(nat.channels),
              signature=nat.signature, program=nat.program, dtype_cols=dcols, dtype_values=dvals,
              num_params=num, mean=nat.mean(args) if nat.mean else -1, dense_kernel=nat.dense)
    if not nat.dense:
        del kw["dense_kernel"]
    size = nat.out_size(args) if nat.out_size else None
    if size is not None:
        kw["out_size"] = list(size)
    if nat.out:
        kw.update(nat.out(args))
    if nat.out_shape != "same":
        kw["out_shape"] = nat.out_shape
    if tuple(nat.tile) != (32, 8):
        kw["tile"] = list(nat.tile)
    if nat.launch != "grid":
        kw["launch"] = nat.launch
    if step.layout == "NCHW":  # descriptor tables: the kernels read CHW samples as they are
        kw["in_layout"] = "CHW"
        kw["out_layout"] = "CHW" if step.out_layout == "NCHW" else "HWC"  # the op's own rule (_steps)
    kw.update(checks)
    kw = {k: v for k, v in kw.items() if not (isinstance(v, list) and not v)}  # DALI cannot type an empty list
    if not (isinstance(params, list) and not params):  # center_crop: no parameters (DALI cannot type [])
        kw["params"] = params
    return kw


# ---- gd.compose: consecutive native ops as ONE gpuaug__Chain ---------------------------------
CHAIN_ENV = "GPUAUG_DALI_NATIVE_CHAIN"
MAX_CHAIN_INPUTS = 32  # the chain's argument inputs q0..q31 (gpuaug_dali.cc's kChainInputs)


def chain_enabled() -> bool:
    """``GPUAUG_DALI_NATIVE_CHAIN=1``: gd.compose runs consecutive native ops as one
    ``gpuaug__Chain`` (off by default until its GPU tests have run)."""
    raw = os.environ.get(CHAIN_ENV, "").strip().lower()
    if raw not in ("", "0", "1", "on", "off", "true", "false"):
        raise ValueError(f"{CHAIN_ENV}: got {raw!r}; expected 1/on or 0/off")
    return raw in ("1", "on", "true")


def chainable(kw) -> bool:
    """The step's arguments can travel in a chain: DataNodes only as argument inputs p0..p7
    (the "cat" form's params / node_shapes nodes cannot)."""
    return all(not _is_node(v) or re.fullmatch(r"p\d", k) for k, v in kw.items())


def _arg_text(v):
    """An argument value as gpuaug__Chain's step_args text (gpuaug_dali.cc's add_typed reads it)."""
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (list, tuple, np.ndarray)):
        return " ".join(_arg_text(x) for x in v)
    if isinstance(v, (float, np.floating)):
        return repr(float(v))  # the shortest text that reads back exactly (float32 values too)
    if isinstance(v, np.integer):
        return str(int(v))
    return str(v)


def chain_args(kws):
    """``fn.gpuaug.chain`` arguments for steps given as fn.gpuaug.kernel arguments ``kws`` (see
    gpuaug_dali.cc's Chain): (sources, step_args, {"q<j>": DataNode})."""
    sources, lines, inputs = [], [], {}
    for k, kw in enumerate(kws):
        for name, v in kw.items():
            if name == "source":
                if v not in sources:
                    sources.append(v)
                lines.append(f"{k}\tsource\t{sources.index(v)}")
            elif _is_node(v):
                j = len(inputs)
                if j >= MAX_CHAIN_INPUTS:
                    raise Unsupported(f"more than {MAX_CHAIN_INPUTS} DataNode parameters in one chain")
                inputs[f"q{j}"] = v
                lines.append(f"{k}\t@{name}\t{j}")
            else:
                text = _arg_text(v)
                if "\t" in text or "\n" in text:
                    raise Unsupported(f"argument {name!r} holds a tab or newline")
                lines.append(f"{k}\t{name}\t{text}")
    return sources, lines, inputs


def chain_node(data, kws):
    """ONE ``fn.gpuaug.chain`` running the fn.gpuaug.kernel steps ``kws`` in order on ``data``."""
    from nvidia.dali import fn

    if len(kws) == 1:
        return fn.gpuaug.kernel(data, **kws[0])
    sources, lines, inputs = chain_args(kws)
    return fn.gpuaug.chain(data, num_steps=len(kws), sources=sources, step_args=lines, **inputs)


def _shape_checks(nodes, args, shapes, with_shapes=True):
    """Arguments that let the operator check each DataNode parameter's per-sample shape and name
    it in the error: ``node_names`` and ``node_expect`` (ndim, dims; -1 where the registry says
    "C"), and with ``with_shapes`` (the "cat" path, where the row arrives flattened)
    ``node_shapes`` (per sample, for every node: ndim, dims; from fn.shapes)."""
    if not nodes:
        return {}
    from nvidia.dali import fn, types

    parts, names, expect = [], [], []
    for node in nodes:
        name = next(k for k, v in args.items() if v is node)
        shape = shapes[name]
        names.append(name)
        expect += [len(shape)] + [d if isinstance(d, int) else -1 for d in shape]
        if with_shapes:
            dims = node.shape(dtype=types.INT32)
            parts += [dims.shape(dtype=types.INT32), dims]
    out = dict(node_names=names, node_expect=expect)
    if with_shapes:
        out["node_shapes"] = fn.cat(*parts, axis=0)
    return out


#: "direct" (default): each DataNode parameter is its own argument input (p0..p7) and the
#: operator puts the row together; "cat": the graph concatenates it (reshape, cast, constant,
#: cat, and fn.shapes for the checks: about 8 DALI CPU operators for a gd op with one random
#: parameter, 30 for flip + rotate + color_jitter + crop_mirror_normalize, where DALI's
#: built-ins need 4).
ARGS_ENV = "GPUAUG_DALI_NATIVE_ARGS"
MAX_NODES = 8


def args_mode() -> str:
    raw = os.environ.get(ARGS_ENV, "").strip().lower() or "direct"
    if raw not in ("direct", "cat"):
        raise ValueError(f"{ARGS_ENV}: got {raw!r}; expected 'direct' (default) or 'cat'")
    return raw


def _params_direct(entries, width):
    """entries -> (constants, segments, DataNodes, num_params, dtype_cols, dtype_values) for the
    operator's "segments" form: k > 0 takes the next k constants, -k the values of node k - 1
    (argument input p(k-1), any numeric type, converted to float32 by the operator)."""
    consts, segments, nodes, dcols, dvals, col = [], [], [], [], [], 0

    def take(k):
        if k:
            if segments and segments[-1] > 0:
                segments[-1] += k
            else:
                segments.append(k)

    for e in entries:
        if isinstance(e, DTYPE):
            if col is None:
                raise Unsupported("internal: a dtype column after a parameter of per-image width")
            dcols.append(col)
            dvals += [float(v) for v in e.values]
            consts.append(0.0)
            take(1)
            col += 1
        elif _is_node(e):
            if e.device != "cpu":
                raise Unsupported("a GPU DataNode parameter (DALI's argument inputs are CPU nodes; "
                                  "give a CPU node, e.g. from fn.random.*)")
            nodes.append(e)
            segments.append(-len(nodes))
            w = width(e)
            if w is None and dcols:
                raise Unsupported("internal: a dtype column before a parameter of per-image width")
            col = None if (w is None or col is None) else col + w
        else:
            vals = [float(x) for x in np.asarray(e, np.float64).reshape(-1)]
            consts += vals
            take(len(vals))
            col = None if col is None else col + len(vals)
    return consts, segments, nodes, -1 if col is None else col, dcols, dvals


# ---- gd.policy: a gpuaug.Compose as gpuaug__Policy operators ---------------------------------
# Codes and constants: dali_plugins/native/gpuaug_host.h (PolicyPlan). Each fused stage of the
# policy's plan becomes one fn.gpuaug.policy. Its uniforms come, by default, from the policy's
# own generator: the operator holds a copy of its PCG64 state (rng_state, taken when the
# pipeline is defined; serializable) and consumes per batch every row of uniforms the policy's
# call would (row_slots says which rows are its stage's), so batch i gets the parameters of the
# policy's i-th call. With draws="dali" they come from one fn.random.uniform(range=[0, 1],
# shape=[K]) per stage (DALI's seed) instead. Either way the operator turns them into the
# transforms' values with their own sampling rules (u < p, lo + (hi - lo) u).
G_HFLIP, G_VFLIP, G_ROTATE, G_AFFINE, G_RESIZE, G_CENTER_CROP = 1, 2, 3, 4, 5, 6
K_JITTER, K_GRAY, K_GAMMA, K_SOLARIZE, K_POSTERIZE, K_INVERT = 1, 2, 4, 5, 6, 7

#: transforms gd.policy runs natively (the rest keep python_function for the whole policy)
NATIVE_TRANSFORMS = ("RandomHorizontalFlip", "RandomVerticalFlip", "RandomRotation", "RandomAffine", "Resize",
                     "CenterCrop", "ColorJitter", "RandomGrayscale", "RandomGamma", "RandomSolarize",
                     "RandomPosterize", "RandomInvert", "Normalize", "ToDtype", "ToLayout")


def _center_args(t):
    if t.center is None:
        return [0.0, 0.0, 0.0]
    return [1.0, float(t.center[0]) - 0.5, float(t.center[1]) - 0.5]  # as transforms.py: pixel centres


def _range_or(r, neutral):
    return [float(r[0]), float(r[1])] if r is not None else [float(neutral), float(neutral)]


def _transform_record(t):
    """(kind, code, constants, uniforms per sample) of one transform of a fused stage."""
    from gpuaug.policy import transforms as TF

    if isinstance(t, TF.RandomHorizontalFlip):
        return "geo", G_HFLIP, [float(t.p)], 1
    if isinstance(t, TF.RandomVerticalFlip):
        return "geo", G_VFLIP, [float(t.p)], 1
    if isinstance(t, TF.RandomRotation):
        return "geo", G_ROTATE, _center_args(t) + _range_or(t.degrees, 0), 1
    if isinstance(t, TF.RandomAffine):
        tr = [float(v) for v in t.translate] if t.translate is not None else [0.0, 0.0]
        sh = list(t.shear) if t.shear is not None else [0.0, 0.0]
        sh = [float(v) for v in (sh + [0.0, 0.0] if len(sh) == 2 else sh)]
        return "geo", G_AFFINE, _center_args(t) + tr + _range_or(t.degrees, 0) + _range_or(t.scale, 1) + sh, 6
    if type(t) is TF.Resize:
        return "geo", G_RESIZE, [float(v) for v in t.size], 0
    if type(t) is TF.CenterCrop:
        return "geo", G_CENTER_CROP, [float(v) for v in t.size], 0
    if isinstance(t, TF.ColorJitter):
        return "colour", K_JITTER, ([float(t.p)] + _range_or(t.brightness, 1) + _range_or(t.contrast_range, 1)
                                    + _range_or(t.saturation, 1) + _range_or(t.hue, 0)), 5
    if isinstance(t, TF.RandomGrayscale):
        return "colour", K_GRAY, [float(t.p)], 1
    if isinstance(t, TF.RandomGamma):
        return "colour", K_GAMMA, [float(t.p)] + _range_or(t.gamma_limit, 100), 2
    if isinstance(t, TF.RandomSolarize):
        from gpuaug.ops._launch import float32_at_least

        return "colour", K_SOLARIZE, [float(t.p), float(float32_at_least(np.asarray(t.threshold, np.float64)))], 1
    if isinstance(t, TF.RandomPosterize):
        return "colour", K_POSTERIZE, [float(t.p), float(t.bits)], 1
    if isinstance(t, TF.RandomInvert):
        return "colour", K_INVERT, [float(t.p)], 1
    raise Unsupported(f"{type(t).__name__} has no native form (native transforms: {', '.join(NATIVE_TRANSFORMS)})")


def _draw_rows(t):
    """Per row of n uniforms ``t.sample`` draws (``rng.random``, in its order): the index of the
    value it gives in the transform's draws (:func:`_transform_record`'s order)."""
    from gpuaug.policy import transforms as TF

    if isinstance(t, TF.RandomAffine):  # gpuaug.random.affine: angle, then each range given
        return ([0] + ([1, 2] if t.translate is not None else []) + ([3] if t.scale is not None else [])
                + ([4] if t.shear is not None else []) + ([5] if t.shear is not None and len(t.shear) == 4 else []))
    if isinstance(t, TF.ColorJitter):  # p, then each range given
        return [0] + [1 + j for j, r in enumerate((t.brightness, t.contrast_range, t.saturation, t.hue))
                      if r is not None]
    if isinstance(t, TF.RandomGamma):
        return [0, 1]
    if isinstance(t, (TF.RandomHorizontalFlip, TF.RandomVerticalFlip, TF.RandomRotation, TF.RandomGrayscale,
                      TF.RandomSolarize, TF.RandomPosterize, TF.RandomInvert)):
        return [0]
    if t.kind in ("write",) or type(t) in (TF.Resize, TF.CenterCrop):
        return []
    raise Unsupported(f"{type(t).__name__} has no native form (native transforms: {', '.join(NATIVE_TRANSFORMS)})")


def _row_slots(transforms, indices):
    """``row_slots`` of the stage drawing for ``indices``: per row of the policy's call, the stage's
    draw index it fills, or -1."""
    base, k = {}, 0
    for i in indices:
        base[i] = k
        k += _transform_record(transforms[i])[3]
    slots = []
    for i, t in enumerate(transforms):
        slots += [base[i] + r if i in base else -1 for r in _draw_rows(t)]
    return slots


def policy_rng_state(policy) -> str:
    """The policy's generator as ``fn.gpuaug.policy``'s ``rng_state`` (PCG64 state and increment,
    32 hex digits each), or :class:`Unsupported`."""
    draws = getattr(policy, "draws", "host")
    if draws == "device":  # "auto" draws on the host outside an eager call on a CUDA batch: replayed
        raise Unsupported(f"the policy draws on the device (draws={draws!r}: Philox keyed by its seed and call "
                          "counter); the native operator replays host draws (draws='host' or 'auto') only, so gd.policy "
                          "keeps python_function (or pass draws='dali' to gd.policy: the pipeline's seed)")
    g = getattr(policy, "_rng", None)
    if not isinstance(g, np.random.Generator) or not isinstance(g.bit_generator, np.random.PCG64):
        raise Unsupported("the policy's generator is not numpy's PCG64 (gpuaug.Compose(seed=int)); draws='dali' "
                          "draws from DALI's seed instead")
    st = g.bit_generator.state["state"]
    return f"{int(st['state']):032x} {int(st['inc']):032x}"


def check_policy_draws(policy, stages, state, n=3, sizes=(37, 45)):
    """The operator's draws (numpy's PCG64 from ``state``, rows dealt out by ``row_slots``, turned
    into values by :func:`policy_params`, which mirrors gpuaug_host.h) equal what
    ``policy.sample`` draws from the same state, for two calls; else :class:`Unsupported` (the
    policy samples in a way the operator does not replay)."""
    def gen():
        g = np.random.Generator(np.random.PCG64())
        s, i = (int(v, 16) for v in state.split())
        g.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": s, "inc": i}, "has_uint32": 0,
                                 "uinteger": 0}
        return g

    hw = np.tile(np.asarray(sizes, np.int64), (n, 1))
    ref_g, op_g = gen(), gen()
    rows = len(stages[0]["row_slots"]) if stages else 0
    for call in range(2):
        want = policy.sample(hw, seed=ref_g)
        u = op_g.random((rows, n))
        draws = []
        for st in stages:
            d = np.zeros((n, st["width"]))
            for r, slot in enumerate(st["row_slots"]):
                if slot >= 0:
                    d[:, slot] = u[r]
            draws.append(d)
        got = policy_params(policy, stages, draws, hw)
        for i in range(len(policy.transforms)):
            for key, v in got.values[i].items():
                w = want.values[i].get(key)
                if w is None or not np.array_equal(np.asarray(v, np.float64), np.asarray(w, np.float64)):
                    raise Unsupported(f"the native operator would not draw what {type(policy.transforms[i]).__name__}"
                                      f".sample draws ({key!r}, call {call}); draws='dali' draws from DALI's seed")


def _text(values):
    return " ".join(repr(float(v)) for v in values)  # repr: the shortest text that reads back exactly


def policy_stages(policy, input_dtype="uint8"):
    """The policy's fused stages as ``fn.gpuaug.policy`` arguments: a list of dicts (``width``:
    uniforms per sample; ``indices``: the stage's geometry then colour transforms, the order the
    operator reads its uniforms in; ``row_slots``: where each row of uniforms the policy's call
    draws goes; the rest are the operator's arguments). Raises
    :class:`Unsupported` (saying why) when the policy cannot run natively."""
    from gpuaug.policy import _fused as F
    from gpuaug.policy.compose import plan_stages

    transforms = list(getattr(policy, "transforms", None) or [])
    if not transforms or not hasattr(policy, "plan"):
        raise Unsupported("only a gpuaug.Compose runs natively (a callable runs in python_function)")
    dt = np.dtype(input_dtype).name
    if dt not in ("uint8", "float16", "float32"):
        raise Unsupported(f"input_dtype: got {input_dtype!r}; expected uint8, float16 or float32")
    out, layout = [], "NHWC"
    for kind, spec in plan_stages(transforms, dt):
        if kind != "fused":
            raise Unsupported(f"{type(transforms[spec]).__name__} runs as its own gpuaug op (not fusable)")
        if layout != "NHWC":
            raise Unsupported("a stage after one that writes CHW (the native policy reads HWC)")
        geo, gargs, col, cargs, width = [], [], [], [], 0
        for i in spec.geometry + spec.colour:
            kind_, code, args, k = _transform_record(transforms[i])
            (geo if kind_ == "geo" else col).append(code)
            (gargs if kind_ == "geo" else cargs).extend(args)
            width += k
        bilinear = any(transforms[i].interpolation == "bilinear" for i in spec.geometry)
        geo_kind = max([2 if transforms[i].perspective else 1 for i in spec.geometry], default=0)
        fill = next((transforms[i].fill for i in spec.geometry if transforms[i].needs_fill()), None)
        write, st3 = [], None
        for c in (1, 3, 4):
            st = {"dtype": spec.sem, "layout": spec.layout or layout, "scale": np.ones(c), "bias": np.zeros(c)}
            try:
                for i in spec.writes:
                    st = transforms[i].apply(st)
                write += list(st["scale"]) + list(st["bias"])
            except ValueError:
                write += [math.nan] * (2 * c)
                st = None
            if st is not None:
                st3 = st
        if st3 is None:
            raise Unsupported("the writes (Normalize's mean / std) fit no channel count")
        # the colour program's codes and the contrast step (values do not matter: one sample)
        rng = np.random.default_rng(0)
        tparams = {i: transforms[i].sample(rng, 1, np.array([[8, 8]])) for i in spec.colour}
        codes, _, jidx = F.colour_program(transforms, tparams, spec, 3)
        sum_kind, sum_prog = "", 0
        if jidx >= 0:
            gray = jidx == 0 and spec.in_scale == 1.0 and (spec.sem == "uint8") == (dt == "uint8")
            sum_kind = "gray" if gray else "fused"
            sum_prog = F.prog_value(codes[:jidx + 1])
        out_layout = "CHW" if st3["layout"] == "NCHW" else "HWC"
        out.append(dict(width=width, indices=list(spec.geometry + spec.colour), input_dtype=dt,
                        row_slots=_row_slots(transforms, spec.geometry + spec.colour),
                        out_dtype=str(st3["dtype"]), out_layout=out_layout, sem_uint8=spec.sem == "uint8",
                        pre=bool(spec.pre), bilinear=bool(bilinear), geo_kind=int(geo_kind),
                        border=0 if fill is not None else 1, sum_kind=sum_kind, sum_prog=str(sum_prog),
                        geometry=geo, geometry_args=_text(gargs), colour=col, colour_args=_text(cargs),
                        codes=[int(c) for c in codes], fill="" if fill is None else _text(fill),
                        write=_text(write), in_scale=repr(float(spec.in_scale))))
        dt, layout = str(st3["dtype"]), st3["layout"]
    return out


def policy_params(policy, stages, uniforms, sizes):
    """The :class:`gpuaug.policy.compose.PolicyParams` the native operators compute from
    ``uniforms`` (per stage, an (n, width) float32 or float64 array) for images of ``sizes`` ((n, 2)):
    ``policy.replay(x, policy_params(...))`` is what ``gd.policy`` gives with those draws (the
    tests' reference; it mirrors gpuaug_host.h, which mirrors the transforms' ``sample``)."""
    from gpuaug.policy import transforms as TF
    from gpuaug.policy.compose import PolicyParams

    transforms = policy.transforms
    sizes = np.asarray(sizes, np.int64).reshape(-1, 2)
    n = len(sizes)
    values = [dict(t.sample(np.random.default_rng(0), n, sizes)) for t in transforms]
    cur = sizes
    for st, u in zip(stages, uniforms):
        u = np.asarray(u).astype(np.float64).reshape(n, -1)  # float32 (DALI's) or float64 (the policy's)
        k = 0
        for i in st["indices"]:
            t = transforms[i]
            _, _, args, width = _transform_record(t)
            v = [u[:, k + j] for j in range(width)]
            k += width

            def lerp(lo, hi, x):
                return lo + (hi - lo) * x
            if isinstance(t, (TF.RandomHorizontalFlip, TF.RandomVerticalFlip, TF.RandomGrayscale,
                              TF.RandomSolarize, TF.RandomPosterize, TF.RandomInvert)):
                values[i] = {"apply": v[0] < t.p}
            elif isinstance(t, TF.RandomRotation):
                values[i] = {"angle": lerp(args[3], args[4], v[0])}
            elif isinstance(t, TF.RandomAffine):
                mx, my = args[3] * cur[:, 1], args[4] * cur[:, 0]
                values[i] = {"angle": lerp(args[5], args[6], v[0]), "tx": np.rint(mx * (2 * v[1] - 1)),
                             "ty": np.rint(my * (2 * v[2] - 1)), "scale": lerp(args[7], args[8], v[3]),
                             "shear_x": lerp(args[9], args[10], v[4]), "shear_y": lerp(args[11], args[12], v[5])}
            elif isinstance(t, TF.ColorJitter):
                on = v[0] < t.p
                d = {"apply": on}
                for j, (key, neutral) in enumerate((("brightness", 1.0), ("contrast", 1.0), ("saturation", 1.0),
                                                     ("hue", 0.0))):
                    d[key] = np.where(on, lerp(args[1 + 2 * j], args[2 + 2 * j], v[1 + j]), neutral)
                values[i] = d
            elif isinstance(t, TF.RandomGamma):
                on = v[0] < t.p
                values[i] = {"apply": on, "gamma": np.where(on, lerp(args[1], args[2], v[1]) / 100.0, 1.0)}
            if t.kind == "geometry":
                cur = t.out_sizes(cur)
    return PolicyParams(n, sizes, tuple(values))


def policy_node(data, policy, *, input_dtype="uint8", forced=False, uniforms=None, draws="policy"):
    """``fn.gpuaug.policy`` nodes running ``policy`` (a gpuaug.Compose) on HWC ``data``, or None
    to fall back to python_function (when not ``forced``; forced: an error saying why).

    ``draws``: "policy" (default): the policy's own generator, from its state now, so batch i
    gets the parameters of the policy's i-th call (as gd.policy's python_function path and
    ``policy(x)`` give, for a policy not called in between); "dali": one fn.random.uniform per
    stage (the pipeline's seed). ``uniforms``: per stage, a CPU DataNode of (width,) float32
    values in [0, 1) to use instead (tests)."""
    m = mode()

    def no(reason, warn=False):
        if forced or (warn and m == "on"):
            raise op_error("policy", f"backend='native': {reason}", RuntimeError)
        if warn:
            _warn_once(reason)
        return None

    if draws not in ("policy", "dali"):
        raise op_error("policy", f"draws: got {draws!r}; expected 'policy' (the policy's own seed) or 'dali' "
                                 "(the pipeline's seed)")
    if m == "off" and not forced:
        return None
    try:
        stages = policy_stages(policy, input_dtype)
        state = None
        if uniforms is None and draws == "policy":
            state = policy_rng_state(policy)
            check_policy_draws(policy, stages, state)
    except Unsupported as e:
        return no(str(e))
    if not load():
        return no(_state["reason"], warn=True)
    from nvidia.dali import fn

    x = data
    for k, st in enumerate(stages):
        kw = {key: v for key, v in st.items() if key not in ("width", "indices", "row_slots")}
        kw = {key: v for key, v in kw.items() if not (isinstance(v, list) and not v)}
        if uniforms is not None:
            kw["draws"] = uniforms[k]
        elif state is not None:
            kw["rng_state"] = state
            if st["row_slots"]:
                kw["row_slots"] = st["row_slots"]
        elif st["width"]:
            kw["draws"] = fn.random.uniform(range=[0.0, 1.0], shape=[st["width"]])
        x = fn.gpuaug.policy(x, source=kernel_source("fused.cu"), **kw)
    return x
