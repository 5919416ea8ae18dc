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
  the ``params`` list argument, DataNodes (one value per sample, CPU, as DALI's own argument
  inputs) are cast to float32 and concatenated with constants into one per-sample vector;
- columns that depend on the images' dtype (the value range 255 / 1) as ``dtype_cols``;
- a parameter *program* where the row needs host maths on the image size or in double precision,
  run by the operator per sample, as gpuaug does it: ``rotation`` (OpenCV's inverse matrix from
  angle, scale and centre, the centre defaulting to each image's), ``affine`` (the 2x3 matrix
  inverted, singular ones refused naming ``matrix``), ``cmn`` (crop_mirror_normalize and
  normalize: mean/std broadcast to the channels);
- colour ops: whether the grayscale mean is reduced first (contrast, color_jitter); warps: the
  dense kernel for contiguous batches and a constant output ``size``.
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

Not native (they keep ``python_function``): crop, pad, resize, resized_crop, rot90, transpose
(per-sample output shapes or offsets read on the host), warp_perspective (the 3x3 inversion is
not a program yet), the blurs, sharpen, noise, erase, grid_mask, equalize, grayscale (other
launch shapes, seeds or outputs); and calls with CHW layouts, GPU DataNode parameters,
per-channel or per-sample ``fill``, per-sample constant arrays, mean/std mixing a constant
with a DataNode. A DataNode parameter's per-sample shape is checked by the operator against
the registry, and a wrong one is an error naming the parameter. ``gd.compose`` runs its native ops natively
and fuses the rest; ``gd.policy`` (the fused policy kernel) is not native yet.

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
    tries to build and load it), why not, the library path and the native ops."""
    m = mode()
    ok = load() if m != "off" else False
    return {"mode": m, "active": ok, "reason": None if ok else (_state["reason"] if m != "off"
                                                                   else f"{ENV}=0 (python_function forced)"),
            "library": _state["path"], "ops": sorted(NATIVE_OPS)}


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
MAXV = (255.0, 1.0, 1.0)  # the value range's top per dtype: uint8, float16, float32


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
    from gpuaug.ops._warp import _fill_scalar

    fill = a["fill"]
    if _is_node(fill) or isinstance(fill, bool) or not isinstance(fill, (int, float, np.integer, np.floating)):
        raise Unsupported("fill: only a constant number runs natively (per-sample or per-channel fill: "
                          "backend='cuda')")
    fill = float(fill)
    return (float(_fill_scalar(fill, np.uint8)), float(_fill_scalar(fill, np.float16)),
            float(_fill_scalar(fill, np.float32)))


def _affine_row(a):
    from gpuaug.ops._warp import BORDERS, INTERPOLATIONS

    m = a["matrix"]
    if not _is_node(m):
        m = np.asarray(m, np.float64)
        if m.shape != (2, 3):
            raise Unsupported("matrix: a per-sample (N, 2, 3) constant; give a DataNode or one 2x3 matrix")
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
    "channel_shuffle": _colour("channel_shuffle", lambda a: [a["permutation"]]),
    "warp_affine": NativeOp("warp_affine.cu", "gpuaug_warp_affine", _affine_row, program="affine",
                            extra=_rotate_extra, dense="gpuaug_warp_affine_dense", out_size=_out_size),
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


class _Stop(Exception):
    pass


def _check_constants(step, args):
    """Run the standalone op's own argument checks on the constants (DataNodes replaced by the
    registry example's values) on a 1-sample NumPy batch, stopping before any kernel runs;
    a bad constant fails here, at graph definition, naming the op and the argument."""
    from gpuaug._run import PLAN_HOOK

    spec = step.spec
    kw = {k: v for k, v in args.items() if not _is_node(v)}
    nodes = [k for k, v in args.items() if _is_node(v)]
    if nodes:
        ex = spec.example(np.random.default_rng(0), 1, 8, 8) if spec.example else {}
        for k in nodes:
            if k not in ex:
                return
            kw[k] = ex[k]
    c = 3 if 3 in spec.channels else spec.channels[0]
    side = 8  # large enough for any constant window (crop) the op checks against the image
    for p in spec.params:
        if p.kind == "size" and kw.get(p.name) is not None:
            side = max(side, int(np.max(np.asarray(kw[p.name], np.float64))))

    def stop(*a):
        raise _Stop

    tok = PLAN_HOOK.set(stop)
    try:
        spec.func(np.zeros((1, side, side, c), np.uint8), **kw, backend="cpu")
    except _Stop:
        pass
    except (ValueError, TypeError) as e:
        raise op_error(step.op, str(e), type(e)) from None
    finally:
        PLAN_HOOK.reset(tok)


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
    if step.layout != "NHWC":
        return no("only HWC samples run natively (layout='CHW': backend='cuda')")
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
                and want is not None and np.size(v) != want):
            return no(f"{p.name}: a constant array of per-sample values (give a DataNode, e.g. from "
                      "fn.external_source, or backend='cuda')")
    shapes = {p.name: p.shape for p in spec.params}

    def width(node):
        name = next(k for k, v in args.items() if v is node)
        return size_of(shapes[name])

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
    _check_constants(step, args)
    try:
        params, num, dcols, dvals = _params_node(entries, width)
    except Unsupported as e:
        return no(str(e))
    from nvidia.dali import fn

    checks = _shape_checks([e for e in entries if _is_node(e)], args, shapes)
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
    kw.update(checks)
    kw = {k: v for k, v in kw.items() if not (isinstance(v, list) and not v)}  # DALI cannot type an empty list
    return fn.gpuaug.kernel(data, params=params, **kw)


def _shape_checks(nodes, args, shapes):
    """Arguments that let the operator check each DataNode parameter's per-sample shape and name
    it in the error: ``node_shapes`` (per sample, for every node: ndim, dims; from fn.shapes),
    ``node_names`` and ``node_expect`` (ndim, dims; -1 where the registry says "C")."""
    if not nodes:
        return {}
    from nvidia.dali import fn, types

    parts, names, expect = [], [], []
    for node in nodes:
        name = next(k for k, v in args.items() if v is node)
        shape = shapes[name]
        names.append(name)
        expect += [len(shape)] + [d if isinstance(d, int) else -1 for d in shape]
        dims = node.shape(dtype=types.INT32)
        parts += [dims.shape(dtype=types.INT32), dims]
    return dict(node_shapes=fn.cat(*parts, axis=0), node_names=names, node_expect=expect)
