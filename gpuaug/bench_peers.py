"""Peers for ``gpuaug bench --peers``: the same op in the libraries people use instead.

:data:`PEERS` maps a registry op name to ``{library: make}``. ``make(batch, kwargs)``
gets a :class:`PeerInput` (the benchmark's rotated input buffers) and the op's keyword
arguments (the per-sample values gpuaug is timed with, from ``OpSpec.example``) and
returns either

- a zero-argument callable that runs the peer once on the next buffer (see
  :func:`cycle`), timed like gpuaug with CUDA events (on the CPU: a wall clock), or
- a :class:`Marginal` (DALI): two pipelines, with and without the op, timed by the
  difference of their wall times.

It may raise :class:`NotInstalled`, :class:`Unsupported` or :class:`NeedsGPU`; the row then
says so instead of failing. Any other exception becomes an "error" row with its message.

Each peer is given its best case, so that a speed-up of gpuaug over it is not flattered:
its input is prepared outside the timing in the layout and dtype it wants (contiguous
NCHW tensors for torchvision; float32 in [0, 1] for kornia, which works in float), and
where its API takes one value for the whole batch it gets sample 0's value (gpuaug applies
one value per sample). Each row's note says which of these applied. Peer conventions
(pixel centres, rounding, what "brightness" means) differ; peers are timed, not checked.

Libraries: torchvision (``transforms.v2.functional`` on CUDA tensors), torch (plain
PyTorch where torchvision has no such op), kornia, cupy (``cupyx.scipy.ndimage`` and CuPy
array expressions), dali (built-in operators, GPU or CPU pipelines; a CPU pipeline gets
:data:`CPU_THREADS` threads), cvcuda, opencv (``cv2`` on the CPU, one call per image with
that image's values, :data:`CPU_THREADS` threads; optional: its rows say "not installed"
without it). Nothing is
imported until a peer is made.

Example::

    >>> import numpy as np
    >>> from gpuaug import bench_peers as bp
    >>> sorted(bp.peers_for("flip"))
    ['cupy', 'cvcuda', 'dali', 'kornia', 'opencv', 'torchvision']
    >>> x = [np.random.default_rng(0).integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)]
    >>> bp.PeerInput(x, "NHWC", gpu=False).n
    2
"""
from __future__ import annotations

import importlib
import importlib.util
import itertools
import math
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: library -> (modules that must be importable, what to install)
LIBRARIES = {
    "torchvision": (("torch", "torchvision"), "torchvision (with torch)"),
    "torch": (("torch",), "torch"),
    "kornia": (("torch", "kornia"), "kornia (with torch)"),
    "cupy": (("cupyx",), "cupy-cuda12x or cupy-cuda13x"),
    "dali": (("nvidia.dali",), "nvidia-dali-cuda120 or nvidia-dali-cuda130"),
    "cvcuda": (("cvcuda",), "cvcuda-cu12 or cvcuda-cu13"),
    "opencv": (("cv2",), "opencv-python-headless (CPU peers, --device cpu)"),
}

#: Threads each CPU peer may use (OpenCV's setNumThreads, a DALI CPU pipeline's num_threads):
#: ``GPUAUG_BENCH_CPU_THREADS``, default 1, so CPU rows compare per thread (run gpuaug with
#: GPUAUG_CPU_PARALLEL=0 alike; bench/results/2026-11-25-cpu/run.sh does).
CPU_THREADS = max(1, int(os.environ.get("GPUAUG_BENCH_CPU_THREADS", "1") or 1))

ONE_PER_BATCH = "one value for the batch (sample 0's)"
FLOAT_IN = "float32 [0, 1] NCHW input"

#: op name -> {library: make(batch, kwargs) -> callable | Marginal}
PEERS: dict[str, dict[str, Callable]] = {}


class PeerUnavailable(Exception):
    """A peer that cannot run here; ``status`` goes into the row."""

    status = "unsupported"


class NotInstalled(PeerUnavailable):
    status = "not installed"


class Unsupported(PeerUnavailable):
    status = "unsupported"


class NeedsGPU(PeerUnavailable):
    status = "needs GPU"


def peer(op: str, library: str, variant: str = "", note: str = ""):
    """Register ``make`` as ``library``'s version of ``op`` (stackable)."""
    if library not in LIBRARIES:
        raise ValueError(f"library: got {library!r}; expected one of {', '.join(LIBRARIES)}")

    def deco(make):
        make.variant = getattr(make, "variant", "") or variant
        make.note = getattr(make, "note", "") or note
        PEERS.setdefault(op, {})[library] = make
        return make

    return deco


def peers_for(op: str, libraries=None) -> dict:
    """``{library: make}`` for ``op`` (restricted to ``libraries`` when given), in a stable
    order (gpuaug's usual competitors first)."""
    table = PEERS.get(op, {})
    order = [lib for lib in LIBRARIES if lib in table]
    if libraries is not None:
        order = [lib for lib in order if lib in libraries]
    return {lib: table[lib] for lib in order}


def _found(module: str) -> bool:
    parts = module.split(".")
    for i in range(1, len(parts) + 1):
        try:
            if importlib.util.find_spec(".".join(parts[:i])) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


def missing(library: str) -> str | None:
    """None if ``library`` looks importable, else why not (without importing it)."""
    if library not in LIBRARIES:
        return f"unknown library {library!r}"
    modules, what = LIBRARIES[library]
    absent = [m for m in modules if not _found(m)]
    return f"{', '.join(absent)} not importable (install {what})" if absent else None


def _import(module: str, library: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise NotInstalled(f"{module} failed to import: {e}") from None


# ----------------------------------------------------------------------------- inputs
class PeerInput:
    """The benchmark's input buffers, as each peer library wants them.

    ``arrays``: the rotated batches (CuPy on a GPU, NumPy on the CPU) in ``layout``.
    Conversions are made once, outside the timing, and cached.
    """

    def __init__(self, arrays, layout="NHWC", gpu=True):
        self.arrays = list(arrays)
        if not self.arrays:
            raise ValueError("arrays: got an empty list; expected at least one batch")
        self.layout = layout
        self.gpu = bool(gpu)
        a = self.arrays[0]
        if a.ndim != 4:
            raise ValueError(f"arrays: got {a.ndim}-D arrays; expected 4-D batches")
        if layout == "NHWC":
            self.n, self.h, self.w, self.c = (int(s) for s in a.shape)
        else:
            self.n, self.c, self.h, self.w = (int(s) for s in a.shape)
        self.dtype = np.dtype(a.dtype)
        self._cache = {}

    @property
    def hax(self):
        return 1 if self.layout == "NHWC" else 2

    @property
    def wax(self):
        return 2 if self.layout == "NHWC" else 3

    @property
    def cax(self):
        return 3 if self.layout == "NHWC" else 1

    @property
    def xp(self):
        if not self.gpu:
            return np
        import cupy

        return cupy

    @property
    def maxval(self):
        return 255.0 if self.dtype == np.uint8 else 1.0

    def need_gpu(self, what: str):
        if not self.gpu:
            raise NeedsGPU(f"{what} runs on CUDA arrays only; this run has no GPU")

    def need_nhwc(self, what: str):
        if self.layout != "NHWC":
            raise Unsupported(f"{what}: HWC samples only; run with --layout NHWC")

    def nhwc(self) -> list:
        """Contiguous NHWC arrays."""
        if "nhwc" not in self._cache:
            xp = self.xp
            self._cache["nhwc"] = [a if self.layout == "NHWC" else xp.ascontiguousarray(a.transpose(0, 2, 3, 1))
                                   for a in self.arrays]
        return self._cache["nhwc"]

    def torch(self, float32: bool = False) -> list:
        """Contiguous NCHW torch tensors on the GPU (or CPU); ``float32``: scaled to [0, 1]."""
        key = ("torch", float32)
        if key not in self._cache:
            torch = _import("torch", "torch")
            out = []
            for a in self.arrays:
                t = torch.from_dlpack(a) if self.gpu else torch.from_numpy(a)
                if self.layout == "NHWC":
                    t = t.permute(0, 3, 1, 2)
                t = t.contiguous()
                if float32:
                    t = t.float().div_(255.0) if self.dtype == np.uint8 else t.float()
                out.append(t)
            self._cache[key] = out
        return self._cache[key]


def cycle(items, fn, *, variant="", note="", in_dtype=None):
    """A zero-argument callable running ``fn(item)`` on the next of ``items`` in turn.

    ``items`` are what the peer reads (so the benchmark counts their bytes).
    """
    items = list(items)
    state = itertools.count()

    def call():
        return fn(items[next(state) % len(items)])

    call.inputs = items
    call.variant = variant
    call.note = note
    call.in_dtype = in_dtype
    return call


@dataclass
class Marginal:
    """A peer timed as (pipeline with the op) - (the same pipeline without it)."""

    with_op: Callable
    without_op: Callable
    variant: str = ""
    note: str = ""

    @staticmethod
    def output_bytes(out) -> tuple[int, int]:
        """(bytes, elements) of a DALI pipeline's first output."""
        from nvidia.dali import types

        tl = out[0] if isinstance(out, (tuple, list)) else out
        item = np.dtype(types.to_numpy_type(tl.dtype)).itemsize
        elems = sum(int(np.prod(s)) for s in tl.shape())
        return elems * item, elems


# ----------------------------------------------------------------------------- params
def s0(v, ndim=0):
    """Sample 0's value of a parameter given as one value or one per sample."""
    a = np.asarray(v)
    return a[0] if a.ndim > ndim else a


def f0(v) -> float:
    return float(s0(v))


def i0(v) -> int:
    return int(s0(v))


def per_sample(v, n, shape=(), dtype=np.float32) -> np.ndarray:
    """``v`` broadcast to ``(n,) + shape``."""
    a = np.asarray(v, dtype)
    if a.ndim == len(shape):
        a = np.broadcast_to(a, (n,) + tuple(a.shape))
    return np.ascontiguousarray(a)


def hw(size, h, w) -> tuple[int, int]:
    """An ``(h, w)`` size given as an int, a pair or None (the input's)."""
    if size is None:
        return h, w
    a = np.asarray(size).reshape(-1)
    return (int(a[0]), int(a[0])) if a.size == 1 else (int(a[0]), int(a[1]))


def _mat3(m):
    m = np.asarray(m, np.float64)
    if m.shape[-2:] == (2, 3):
        last = np.zeros(m.shape[:-2] + (1, 3))
        last[..., 0, 2] = 1
        m = np.concatenate([m, last], axis=-2)
    return m


def _ksize(sigma, kernel_size) -> int:
    if kernel_size is not None:
        return int(s0(kernel_size, 1) if np.ndim(kernel_size) else kernel_size) | 1
    return int(round(float(sigma) * 6 + 1)) | 1


# ----------------------------------------------------------------------------- library glue
def _tvf():
    _import("torch", "torch")
    return _import("torchvision.transforms.v2.functional", "torchvision")


def _interp(name, lib="torchvision"):
    name = (name or "bilinear").lower()
    if lib == "torchvision":
        from torchvision.transforms import InterpolationMode

        return InterpolationMode.NEAREST if name == "nearest" else InterpolationMode.BILINEAR
    return "nearest" if name == "nearest" else "bilinear"


def _kornia(sub):
    _import("torch", "torch")
    return _import(f"kornia.{sub}", "kornia")


def _ndi(batch, what="cupyx.scipy.ndimage"):
    batch.need_gpu(what)
    return _import("cupyx.scipy.ndimage", "cupy")


def _cv(batch):
    batch.need_gpu("CV-CUDA")
    cv = _import("cvcuda", "cvcuda")
    import cupy

    stream = cv.as_stream(int(cupy.cuda.get_current_stream().ptr))
    tensors = [cv.as_tensor(a, "NHWC") for a in batch.nhwc()]
    return cv, stream, tensors


def _t(batch, values, dtype="float32"):
    """A per-sample torch tensor on the batch's device."""
    torch = _import("torch", "torch")
    dev = "cuda" if batch.gpu else "cpu"
    return torch.as_tensor(np.ascontiguousarray(values), dtype=getattr(torch, dtype), device=dev)


def _const(value):
    def source():
        return value

    return source


def _dali_arg(x):
    """One sample's argument value as DALI wants it: an array (0-d for a number), 32-bit."""
    a = np.array(x)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    elif a.dtype in (np.int64, np.bool_):
        a = a.astype(np.int32)
    return a


def dali_peer(batch, body, args=None, *, variant="", note="", gpu_only=False):
    """Two DALI pipelines fed the batch's buffers by ``external_source`` (GPU memory on a
    GPU): one returns ``body(fn, types, data, **arg_nodes)``, the other ``data``.

    ``args``: name -> per-sample host values (a list of N arrays), given to the op as
    argument inputs (one value per sample, like gpuaug's). Synchronous executor, queue
    depth 1; each run is followed by a device synchronisation so the wall time covers it.
    """
    _import("nvidia.dali", "dali")
    from nvidia.dali import fn, pipeline_def, types

    if batch.layout != "NHWC":
        note = "; ".join(x for x in ("HWC input (converted outside the timing)", note) if x)
    if gpu_only:
        batch.need_gpu(variant or "this DALI operator")
    device = "gpu" if batch.gpu else "cpu"
    arrays = batch.nhwc()
    args = {k: [_dali_arg(x) for x in v] for k, v in (args or {}).items()}
    if batch.gpu:
        import cupy

        dev_id = int(cupy.cuda.runtime.getDevice())

        def sync():
            cupy.cuda.runtime.deviceSynchronize()
    else:
        dev_id = None

        def sync():
            pass

    def build(with_op):
        cnt = itertools.count()

        @pipeline_def(batch_size=batch.n, num_threads=4 if batch.gpu else CPU_THREADS, device_id=dev_id,
                      prefetch_queue_depth=1,
                      exec_async=False, exec_pipelined=False, seed=1234)
        def pipe():
            data = fn.external_source(source=lambda: arrays[next(cnt) % len(arrays)], batch=True,
                                      layout="HWC", device=device)
            if not with_op:
                return data
            # A source callable must take no arguments (DALI passes one to those that do).
            nodes = {k: fn.external_source(source=_const(v), batch=True) for k, v in args.items()}
            return body(fn, types, data, **nodes)

        p = pipe()
        p.build()
        return p

    p_with, p_without = build(True), build(False)

    def with_op():
        out = p_with.run()
        sync()
        return out

    def without_op():
        out = p_without.run()
        sync()
        return out

    return Marginal(with_op, without_op, variant=variant,
                    note="; ".join(x for x in ("marginal cost in a pipeline", note) if x))


def _cp_slices(batch, ys, xs):
    idx = [slice(None)] * 4
    idx[batch.hax], idx[batch.wax] = ys, xs
    return tuple(idx)


# ============================================================================= geometric
@peer("flip", "torchvision")
def _tv_flip(batch, kw):
    F = _tvf()
    h, v = bool(s0(kw.get("horizontal", True))), bool(s0(kw.get("vertical", False)))
    f, name = (F.vertical_flip, "F.vertical_flip") if (v and not h) else (F.horizontal_flip, "F.horizontal_flip")
    return cycle(batch.torch(), f, variant=name, note=f"whole batch flipped ({ONE_PER_BATCH})")


@peer("flip", "kornia")
def _kornia_flip(batch, kw):
    K = _kornia("geometry.transform")
    h, v = bool(s0(kw.get("horizontal", True))), bool(s0(kw.get("vertical", False)))
    f, name = (K.vflip, "vflip") if (v and not h) else (K.hflip, "hflip")
    return cycle(batch.torch(float32=True), f, variant=name, note=f"{FLOAT_IN}; {ONE_PER_BATCH}",
                 in_dtype="float32")


@peer("flip", "cupy")
def _cp_flip(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    h, v = bool(s0(kw.get("horizontal", True))), bool(s0(kw.get("vertical", False)))
    sl = _cp_slices(batch, slice(None, None, -1) if v else slice(None),
                    slice(None, None, -1) if (h or not v) else slice(None))
    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(x[sl]), variant="ascontiguousarray(x[..., ::-1])",
                 note=f"slicing + copy; {ONE_PER_BATCH}")


@peer("flip", "dali")
def _dali_flip(batch, kw):
    n = batch.n
    args = {"h": list(per_sample(kw.get("horizontal", True), n, dtype=np.int32)),
            "v": list(per_sample(kw.get("vertical", False), n, dtype=np.int32))}
    return dali_peer(batch, lambda fn, types, d, h, v: fn.flip(d, horizontal=h, vertical=v), args,
                     variant="fn.flip", note="per sample")


@peer("flip", "cvcuda")
def _cv_flip(batch, kw):
    cv, st, ts = _cv(batch)
    h, v = bool(s0(kw.get("horizontal", True))), bool(s0(kw.get("vertical", False)))
    code = -1 if (h and v) else (0 if v else 1)
    return cycle(ts, lambda t: cv.flip(t, flipCode=code, stream=st), variant="cvcuda.flip", note=ONE_PER_BATCH)


@peer("rot90", "torch")
def _torch_rot90(batch, kw):
    torch = _import("torch", "torch")
    k = i0(kw.get("k", 1))
    return cycle(batch.torch(), lambda x: torch.rot90(x, k, dims=(-2, -1)).contiguous(),
                 variant="torch.rot90().contiguous()", note=ONE_PER_BATCH)


@peer("rot90", "cupy")
def _cp_rot90(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    k = i0(kw.get("k", 1))
    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(cupy.rot90(x, k, axes=(batch.hax, batch.wax))),
                 variant="ascontiguousarray(rot90)", note=ONE_PER_BATCH)


@peer("rot90", "dali")
def _dali_rot90(batch, kw):
    ang = [np.float32(90.0 * k) for k in per_sample(kw.get("k", 1), batch.n, dtype=np.int64)]
    return dali_peer(batch, lambda fn, types, d, a: fn.rotate(d, angle=a, keep_size=False,
                                                              interp_type=types.INTERP_NN),
                     {"a": ang}, variant="fn.rotate(90k, NN)", note="per sample")


@peer("transpose", "torch")
def _torch_transpose(batch, kw):
    _import("torch", "torch")
    return cycle(batch.torch(), lambda x: x.transpose(-1, -2).contiguous(), variant="x.transpose().contiguous()")


@peer("transpose", "cupy")
def _cp_transpose(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(x.swapaxes(batch.hax, batch.wax)),
                 variant="ascontiguousarray(swapaxes)")


@peer("transpose", "dali")
def _dali_transpose(batch, kw):
    return dali_peer(batch, lambda fn, types, d: fn.transpose(d, perm=[1, 0, 2]), variant="fn.transpose")


@peer("crop", "torchvision")
def _tv_crop(batch, kw):
    F = _tvf()
    t, le = i0(kw.get("top", 0)), i0(kw.get("left", 0))
    h, w = int(kw["height"]), int(kw["width"])
    return cycle(batch.torch(), lambda x: F.crop(x, t, le, h, w).contiguous(), variant="F.crop().contiguous()",
                 note="one window for the batch (sample 0's); a crop is a view, .contiguous() copies it")


@peer("crop", "cupy")
def _cp_crop(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    t, le = i0(kw.get("top", 0)), i0(kw.get("left", 0))
    sl = _cp_slices(batch, slice(t, t + int(kw["height"])), slice(le, le + int(kw["width"])))
    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(x[sl]), variant="ascontiguousarray(x[window])",
                 note=ONE_PER_BATCH)


@peer("crop", "dali")
def _dali_crop(batch, kw):
    n = batch.n
    h, w = int(kw["height"]), int(kw["width"])
    t = per_sample(kw.get("top", 0), n, dtype=np.float64)
    le = per_sample(kw.get("left", 0), n, dtype=np.float64)
    py = [np.float32(v / (batch.h - h)) if batch.h > h else np.float32(0.5) for v in t]
    px = [np.float32(v / (batch.w - w)) if batch.w > w else np.float32(0.5) for v in le]
    return dali_peer(batch, lambda fn, types, d, py, px: fn.crop(d, crop_h=h, crop_w=w, crop_pos_x=px,
                                                                 crop_pos_y=py),
                     {"py": py, "px": px}, variant="fn.crop", note="per-sample windows")


@peer("center_crop", "torchvision")
def _tv_center_crop(batch, kw):
    F = _tvf()
    h, w = hw(kw.get("size"), batch.h, batch.w)
    return cycle(batch.torch(), lambda x: F.center_crop(x, [h, w]).contiguous(),
                 variant="F.center_crop().contiguous()")


@peer("center_crop", "cupy")
def _cp_center_crop(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    h, w = hw(kw.get("size"), batch.h, batch.w)
    if h > batch.h or w > batch.w:
        raise Unsupported("a window larger than the image needs padding; CuPy slicing has none")
    t, le = (batch.h - h) // 2, (batch.w - w) // 2
    sl = _cp_slices(batch, slice(t, t + h), slice(le, le + w))
    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(x[sl]), variant="ascontiguousarray(x[window])")


@peer("center_crop", "dali")
def _dali_center_crop(batch, kw):
    h, w = hw(kw.get("size"), batch.h, batch.w)
    return dali_peer(batch, lambda fn, types, d: fn.crop(d, crop=(h, w), out_of_bounds_policy="pad"),
                     variant="fn.crop(crop=(h, w))")


def _pad_sides(kw, n):
    """Per-sample (top, bottom, left, right), (n, 4), from an int, 4 ints or (n, 4)."""
    a = np.asarray(kw.get("padding", 0), np.int64)
    if a.ndim == 0:
        a = np.full(4, int(a))
    return per_sample(a, n, shape=(4,), dtype=np.int64)


@peer("pad", "torchvision")
def _tv_pad(batch, kw):
    F = _tvf()
    t, b, le, r = (int(v) for v in _pad_sides(kw, batch.n)[0])
    mode = kw.get("mode", "constant")
    fill = float(f0(kw.get("value", 0)))
    return cycle(batch.torch(), lambda x: F.pad(x, [le, t, r, b], fill=fill, padding_mode=mode),
                 variant=f"F.pad({mode})", note=ONE_PER_BATCH)


@peer("pad", "cupy")
def _cp_pad(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    t, b, le, r = (int(v) for v in _pad_sides(kw, batch.n)[0])
    mode = kw.get("mode", "constant")
    widths = [(0, 0)] * 4
    widths[batch.hax], widths[batch.wax] = (t, b), (le, r)
    extra = {"constant_values": f0(kw.get("value", 0))} if mode == "constant" else {}
    return cycle(batch.arrays, lambda x: cupy.pad(x, widths, mode=mode, **extra), variant=f"cupy.pad({mode})",
                 note=ONE_PER_BATCH)


@peer("pad", "dali")
def _dali_pad(batch, kw):
    mode = kw.get("mode", "constant")
    if mode != "constant":
        raise Unsupported(f"DALI pads with a constant only (mode {mode!r} asked)")
    sides = _pad_sides(kw, batch.n)
    ch = batch.h + int(sides[0, 0] + sides[0, 1])
    cw = batch.w + int(sides[0, 2] + sides[0, 3])
    # crop_pos p puts the window's corner at p * (in - crop) = -p * (sum of sides).
    py = [np.float32(s[0] / (s[0] + s[1])) if s[0] + s[1] else np.float32(0.5) for s in sides]
    px = [np.float32(s[2] / (s[2] + s[3])) if s[2] + s[3] else np.float32(0.5) for s in sides]
    fill = f0(kw.get("value", 0))
    return dali_peer(batch, lambda fn, types, d, py, px: fn.crop(
        d, crop_h=ch, crop_w=cw, crop_pos_x=px, crop_pos_y=py, out_of_bounds_policy="pad", fill_values=fill),
        {"py": py, "px": px}, variant="fn.crop(out_of_bounds_policy='pad')", note=f"fill: {ONE_PER_BATCH}")


@peer("resize", "torchvision")
def _tv_resize(batch, kw):
    F = _tvf()
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    aa = interp == "area"
    return cycle(batch.torch(), lambda x: F.resize(x, [h, w], interpolation=_interp(interp), antialias=aa),
                 variant=f"F.resize({'bilinear, antialias' if aa else interp})")


@peer("resize", "kornia")
def _kornia_resize(batch, kw):
    K = _kornia("geometry.transform")
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    mode = "area" if interp == "area" else _interp(interp, "kornia")
    return cycle(batch.torch(float32=True), lambda x: K.resize(x, (h, w), interpolation=mode),
                 variant=f"resize({mode})", note=FLOAT_IN, in_dtype="float32")


@peer("resize", "cupy")
def _cp_resize(batch, kw):
    ndi = _ndi(batch)
    h, w = hw(kw.get("size"), batch.h, batch.w)
    z = [1.0] * 4
    z[batch.hax], z[batch.wax] = h / batch.h, w / batch.w
    order = 0 if kw.get("interpolation", "bilinear") == "nearest" else 1
    return cycle(batch.arrays, lambda x: ndi.zoom(x, z, order=order, grid_mode=True, mode="nearest"),
                 variant=f"ndimage.zoom(order={order})")


@peer("resize", "dali")
def _dali_resize(batch, kw):
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")

    def body(fn, types, d):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.resize(d, resize_x=w, resize_y=h, interp_type=it, antialias=interp == "area")

    return dali_peer(batch, body, variant=f"fn.resize({interp})")


@peer("resize", "cvcuda")
def _cv_resize(batch, kw):
    cv, st, ts = _cv(batch)
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    it = {"nearest": cv.Interp.NEAREST, "area": cv.Interp.AREA}.get(interp, cv.Interp.LINEAR)
    return cycle(ts, lambda t: cv.resize(t, (batch.n, h, w, batch.c), it, stream=st),
                 variant=f"cvcuda.resize({interp})")


def _boxes(kw, n):
    return per_sample(kw["boxes"], n, shape=(4,), dtype=np.float64)  # top, left, height, width


@peer("resized_crop", "torchvision")
def _tv_resized_crop(batch, kw):
    F = _tvf()
    t, le, bh, bw = (int(round(v)) for v in _boxes(kw, batch.n)[0])
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    return cycle(batch.torch(), lambda x: F.resized_crop(x, t, le, bh, bw, [h, w], interpolation=_interp(interp),
                                                        antialias=interp == "area"),
                 variant="F.resized_crop", note="one box for the batch (sample 0's)")


@peer("resized_crop", "kornia")
def _kornia_resized_crop(batch, kw):
    K = _kornia("geometry.transform")
    b = _boxes(kw, batch.n)
    t, le, bh, bw = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    corners = np.stack([np.stack([le, t], -1), np.stack([le + bw - 1, t], -1),
                        np.stack([le + bw - 1, t + bh - 1], -1), np.stack([le, t + bh - 1], -1)], 1)
    boxes = _t(batch, corners)
    h, w = hw(kw.get("size"), batch.h, batch.w)
    return cycle(batch.torch(float32=True), lambda x: K.crop_and_resize(x, boxes, (h, w)),
                 variant="crop_and_resize", note=f"{FLOAT_IN}; per-sample boxes", in_dtype="float32")


@peer("resized_crop", "dali")
def _dali_resized_crop(batch, kw):
    b = _boxes(kw, batch.n)
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    start = [np.array([r[0], r[1]], np.float32) for r in b]
    end = [np.array([r[0] + r[2], r[1] + r[3]], np.float32) for r in b]

    def body(fn, types, d, rs, re):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.resize(d, roi_start=rs, roi_end=re, roi_relative=False, resize_x=w, resize_y=h,
                         interp_type=it, antialias=interp == "area")

    return dali_peer(batch, body, {"rs": start, "re": end}, variant="fn.resize(roi_start, roi_end)",
                     note="per-sample boxes")


def _forward(kw, n, dims=2):
    """Per-sample source->destination matrices (n, 3, 3) from gpuaug's ``matrix`` argument."""
    m = _mat3(per_sample(kw["matrix"], n, shape=(2, 3) if dims == 2 else (3, 3), dtype=np.float64))
    if kw.get("inverse_map", False):
        m = np.linalg.inv(m)
    return m


def _affine_size(kw, batch):
    return hw(kw.get("size"), batch.h, batch.w)


@peer("warp_affine", "torchvision")
def _tv_warp_affine(batch, kw):
    F = _tvf()
    m = _forward(kw, batch.n)[0]
    a = m[:2, :2]
    scale = float(math.sqrt(abs(np.linalg.det(a)))) or 1.0
    angle = float(math.degrees(math.atan2(a[1, 0], a[0, 0])))
    interp = kw.get("interpolation", "bilinear")
    note = "one matrix for the batch (sample 0's, as rotation + scale); output keeps the input size"
    return cycle(batch.torch(), lambda x: F.affine(x, angle=angle, translate=[0.0, 0.0], scale=scale,
                                                   shear=[0.0, 0.0], interpolation=_interp(interp)),
                 variant="F.affine", note=note)


@peer("warp_affine", "kornia")
def _kornia_warp_affine(batch, kw):
    K = _kornia("geometry.transform")
    m = _t(batch, _forward(kw, batch.n)[:, :2, :])
    h, w = _affine_size(kw, batch)
    mode = _interp(kw.get("interpolation", "bilinear"), "kornia")
    return cycle(batch.torch(float32=True), lambda x: K.warp_affine(x, m, dsize=(h, w), mode=mode,
                                                                    padding_mode="zeros", align_corners=True),
                 variant="warp_affine", note=f"{FLOAT_IN}; per-sample matrices", in_dtype="float32")


def _ndi_matrix(batch, inv2d):
    """A (5, 5) homogeneous matrix for ndimage.affine_transform of a 4-D batch: output
    index -> input index, with ``inv2d`` mapping destination (x, y) to source (x, y)."""
    mm = np.eye(5)
    y, x = batch.hax, batch.wax
    mm[y, y], mm[y, x], mm[y, 4] = inv2d[1, 1], inv2d[1, 0], inv2d[1, 2]
    mm[x, y], mm[x, x], mm[x, 4] = inv2d[0, 1], inv2d[0, 0], inv2d[0, 2]
    return mm


@peer("warp_affine", "cupy")
def _cp_warp_affine(batch, kw):
    ndi = _ndi(batch)
    import cupy

    inv = np.linalg.inv(_forward(kw, batch.n)[0])
    mm = cupy.asarray(_ndi_matrix(batch, inv))
    h, w = _affine_size(kw, batch)
    shape = [batch.n, 0, 0, 0]
    shape[batch.cax], shape[batch.hax], shape[batch.wax] = batch.c, h, w
    order = 0 if kw.get("interpolation", "bilinear") == "nearest" else 1
    cval = f0(kw.get("fill", 0))
    return cycle(batch.arrays, lambda x: ndi.affine_transform(x, mm, output_shape=tuple(shape), order=order,
                                                               mode="constant", cval=cval),
                 variant=f"ndimage.affine_transform(order={order})", note="one matrix for the batch (sample 0's)")


@peer("warp_affine", "dali")
def _dali_warp_affine(batch, kw):
    m = _forward(kw, batch.n)
    mats = [np.ascontiguousarray(x[:2, :], np.float32) for x in m]
    h, w = _affine_size(kw, batch)
    interp = kw.get("interpolation", "bilinear")
    fill = f0(kw.get("fill", 0))

    def body(fn, types, d, mt):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.warp_affine(d, matrix=mt, size=(h, w), inverse_map=False, fill_value=fill, interp_type=it)

    return dali_peer(batch, body, {"mt": mats}, variant="fn.warp_affine", note="per-sample matrices")


@peer("warp_affine", "cvcuda")
def _cv_warp_affine(batch, kw):
    cv, st, ts = _cv(batch)
    inv = np.linalg.inv(_forward(kw, batch.n)[0])[:2, :].astype(np.float32)
    return cycle(ts, lambda t: cv.warp_affine(t, inv, cv.Interp.LINEAR | cv.Interp.WARP_INVERSE_MAP,
                                              border_mode=cv.Border.CONSTANT, border_value=[0.0], stream=st),
                 variant="cvcuda.warp_affine", note="one matrix for the batch (sample 0's)")


@peer("warp_perspective", "torchvision")
def _tv_warp_perspective(batch, kw):
    F = _tvf()
    inv = np.linalg.inv(_forward(kw, batch.n, dims=3)[0])
    inv = inv / inv[2, 2]
    coeffs = [float(v) for v in inv.reshape(-1)[:8]]
    interp = kw.get("interpolation", "bilinear")
    return cycle(batch.torch(), lambda x: F.perspective(x, None, None, interpolation=_interp(interp),
                                                        coefficients=coeffs),
                 variant="F.perspective", note="one matrix for the batch (sample 0's)")


@peer("warp_perspective", "kornia")
def _kornia_warp_perspective(batch, kw):
    K = _kornia("geometry.transform")
    m = _t(batch, _forward(kw, batch.n, dims=3))
    h, w = _affine_size(kw, batch)
    mode = _interp(kw.get("interpolation", "bilinear"), "kornia")
    return cycle(batch.torch(float32=True), lambda x: K.warp_perspective(x, m, dsize=(h, w), mode=mode,
                                                                         padding_mode="zeros", align_corners=True),
                 variant="warp_perspective", note=f"{FLOAT_IN}; per-sample matrices", in_dtype="float32")


@peer("warp_perspective", "dali")
def _dali_warp_perspective(batch, kw):
    m = _forward(kw, batch.n, dims=3)
    mats = [np.ascontiguousarray(x, np.float32) for x in m]
    h, w = _affine_size(kw, batch)
    interp = kw.get("interpolation", "bilinear")

    def body(fn, types, d, mt):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.experimental.warp_perspective(d, matrix=mt, size=(h, w), inverse_map=False, interp_type=it)

    return dali_peer(batch, body, {"mt": mats}, variant="fn.experimental.warp_perspective",
                     note="per-sample matrices")


@peer("warp_perspective", "cvcuda")
def _cv_warp_perspective(batch, kw):
    cv, st, ts = _cv(batch)
    inv = np.linalg.inv(_forward(kw, batch.n, dims=3)[0]).astype(np.float32)
    return cycle(ts, lambda t: cv.warp_perspective(t, inv, cv.Interp.LINEAR | cv.Interp.WARP_INVERSE_MAP,
                                                   border_mode=cv.Border.CONSTANT, border_value=[0.0], stream=st),
                 variant="cvcuda.warp_perspective", note="one matrix for the batch (sample 0's)")


@peer("rotate", "torchvision")
def _tv_rotate(batch, kw):
    F = _tvf()
    a = f0(kw.get("angle", 0))
    interp = kw.get("interpolation", "bilinear")
    return cycle(batch.torch(), lambda x: F.rotate(x, a, interpolation=_interp(interp)), variant="F.rotate",
                 note=ONE_PER_BATCH)


@peer("rotate", "kornia")
def _kornia_rotate(batch, kw):
    K = _kornia("geometry.transform")
    ang = _t(batch, per_sample(kw.get("angle", 0), batch.n))
    mode = _interp(kw.get("interpolation", "bilinear"), "kornia")
    return cycle(batch.torch(float32=True), lambda x: K.rotate(x, ang, mode=mode, padding_mode="zeros",
                                                               align_corners=True),
                 variant="rotate", note=f"{FLOAT_IN}; per-sample angles", in_dtype="float32")


@peer("rotate", "cupy")
def _cp_rotate(batch, kw):
    ndi = _ndi(batch)
    a = f0(kw.get("angle", 0))
    order = 0 if kw.get("interpolation", "bilinear") == "nearest" else 1
    return cycle(batch.arrays, lambda x: ndi.rotate(x, a, axes=(batch.wax, batch.hax), reshape=False,
                                                     order=order, mode="constant"),
                 variant=f"ndimage.rotate(order={order})", note=ONE_PER_BATCH)


@peer("rotate", "dali")
def _dali_rotate(batch, kw):
    ang = list(per_sample(kw.get("angle", 0), batch.n))
    interp = kw.get("interpolation", "bilinear")

    def body(fn, types, d, a):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.rotate(d, angle=a, keep_size=True, interp_type=it, fill_value=0)

    return dali_peer(batch, body, {"a": ang}, variant="fn.rotate", note="per-sample angles")


@peer("rotate", "cvcuda")
def _cv_rotate(batch, kw):
    cv, st, ts = _cv(batch)
    a = f0(kw.get("angle", 0))
    # cvcuda.rotate turns about the origin then shifts; shift so the centre stays put.
    cx, cy = (batch.w - 1) / 2, (batch.h - 1) / 2
    r = math.radians(a)
    sx = cx - (cx * math.cos(r) + cy * math.sin(r))
    sy = cy - (-cx * math.sin(r) + cy * math.cos(r))
    return cycle(ts, lambda t: cv.rotate(t, a, (sx, sy), cv.Interp.LINEAR, stream=st), variant="cvcuda.rotate",
                 note=ONE_PER_BATCH)


# ============================================================================= colour
def _tv_simple(name, fname, param, default=1.0, transform=None):
    @peer(name, "torchvision")
    def make(batch, kw):
        F = _tvf()
        f = getattr(F, fname)
        v = f0(kw.get(param, default))
        v = transform(v, batch) if transform else v
        return cycle(batch.torch(), lambda x: f(x, v), variant=f"F.{fname}", note=ONE_PER_BATCH)

    return make


def _kornia_per_sample(name, module, fname, param, default=1.0, transform=None, dtype="float32"):
    @peer(name, "kornia")
    def make(batch, kw):
        K = _kornia(module)
        f = getattr(K, fname)
        vals = per_sample(kw.get(param, default), batch.n, dtype=np.float64)
        vals = transform(vals, batch) if transform else vals
        t = _t(batch, vals, dtype)
        return cycle(batch.torch(float32=True), lambda x: f(x, t), variant=f"{fname}",
                     note=f"{FLOAT_IN}; per-sample values", in_dtype="float32")

    return make


def _dali_per_sample(name, op, param, arg, default=1.0, transform=None, gpu_only=False):
    @peer(name, "dali")
    def make(batch, kw):
        vals = per_sample(kw.get(param, default), batch.n, dtype=np.float64)
        vals = transform(vals) if transform else vals
        args = {"v": [np.float32(v) for v in vals]}

        def body(fn, types, d, v):
            f = fn
            for part in op.split("."):
                f = getattr(f, part)
            return f(d, **{arg: v})

        return dali_peer(batch, body, args, variant=f"fn.{op}", note="per-sample values", gpu_only=gpu_only)

    return make


_tv_simple("brightness", "adjust_brightness", "factor")
_kornia_per_sample("brightness", "enhance", "adjust_brightness", "factor", transform=lambda v, b: v - 1.0)
PEERS["brightness"]["kornia"].note = "kornia's brightness adds (factor - 1)"
_dali_per_sample("brightness", "brightness", "factor", "brightness")

_tv_simple("contrast", "adjust_contrast", "factor")
_kornia_per_sample("contrast", "enhance", "adjust_contrast", "factor")
_dali_per_sample("contrast", "contrast", "factor", "contrast")

_tv_simple("saturation", "adjust_saturation", "factor")
_kornia_per_sample("saturation", "enhance", "adjust_saturation", "factor")
_dali_per_sample("saturation", "saturation", "factor", "saturation")

_tv_simple("hue", "adjust_hue", "shift", default=0.0)
_kornia_per_sample("hue", "enhance", "adjust_hue", "shift", default=0.0, transform=lambda v, b: v * 2 * math.pi)
_dali_per_sample("hue", "hue", "shift", "hue", default=0.0, transform=lambda v: v * 360.0)

_tv_simple("sharpen", "adjust_sharpness", "factor")
_kornia_per_sample("sharpen", "enhance", "sharpness", "factor")

_tv_simple("solarize", "solarize", "threshold", default=128.0)
_kornia_per_sample("solarize", "enhance", "solarize", "threshold", default=128.0,
                   transform=lambda v, b: v / b.maxval)


@peer("color_jitter", "torchvision")
def _tv_color_jitter(batch, kw):
    F = _tvf()
    b, c = f0(kw.get("brightness", 1.0)), f0(kw.get("contrast", 1.0))
    s, h = f0(kw.get("saturation", 1.0)), f0(kw.get("hue", 0.0))

    def run(x):
        return F.adjust_hue(F.adjust_saturation(F.adjust_contrast(F.adjust_brightness(x, b), c), s), h)

    return cycle(batch.torch(), run, variant="4 x F.adjust_*", note=f"ColorJitter's four calls; {ONE_PER_BATCH}")


@peer("color_jitter", "kornia")
def _kornia_color_jitter(batch, kw):
    K = _kornia("enhance")
    n = batch.n
    b = _t(batch, per_sample(kw.get("brightness", 1.0), n) - 1.0)
    c = _t(batch, per_sample(kw.get("contrast", 1.0), n))
    s = _t(batch, per_sample(kw.get("saturation", 1.0), n))
    h = _t(batch, per_sample(kw.get("hue", 0.0), n) * 2 * math.pi)

    def run(x):
        return K.adjust_hue(K.adjust_saturation(K.adjust_contrast(K.adjust_brightness(x, b), c), s), h)

    return cycle(batch.torch(float32=True), run, variant="4 x adjust_*", note=f"{FLOAT_IN}; per-sample values",
                 in_dtype="float32")


@peer("color_jitter", "dali")
def _dali_color_jitter(batch, kw):
    n = batch.n
    args = {k: [np.float32(v) for v in per_sample(kw.get(k, d), n) * m]
            for k, d, m in (("brightness", 1.0, 1), ("contrast", 1.0, 1), ("saturation", 1.0, 1), ("hue", 0.0, 360))}
    return dali_peer(batch, lambda fn, types, d, brightness, contrast, saturation, hue: fn.color_twist(
        d, brightness=brightness, contrast=contrast, saturation=saturation, hue=hue), args,
        variant="fn.color_twist", note="per-sample values")


@peer("color_twist", "torch")
def _torch_color_twist(batch, kw):
    torch = _import("torch", "torch")
    if batch.c != 3:
        raise Unsupported("a 3x4 colour matrix needs 3 channels")
    m = _t(batch, per_sample(kw["matrix"], batch.n, shape=(3, 4)))
    a, off = m[:, :, :3], m[:, :, 3, None, None]
    u8 = batch.dtype == np.uint8

    def run(x):
        y = torch.einsum("nchw,ndc->ndhw", x.float(), a) + off
        return y.round_().clamp_(0, 255).to(torch.uint8) if u8 else y.to(x.dtype)

    return cycle(batch.torch(), run, variant="einsum + round + cast", note="eager PyTorch; per-sample matrices")


@peer("gamma", "torchvision")
def _tv_gamma(batch, kw):
    F = _tvf()
    g, gain = f0(kw.get("gamma", 1.0)), f0(kw.get("gain", 1.0))
    return cycle(batch.torch(), lambda x: F.adjust_gamma(x, g, gain), variant="F.adjust_gamma", note=ONE_PER_BATCH)


@peer("gamma", "kornia")
def _kornia_gamma(batch, kw):
    K = _kornia("enhance")
    g = _t(batch, per_sample(kw.get("gamma", 1.0), batch.n))
    gain = _t(batch, per_sample(kw.get("gain", 1.0), batch.n))
    return cycle(batch.torch(float32=True), lambda x: K.adjust_gamma(x, g, gain), variant="adjust_gamma",
                 note=f"{FLOAT_IN}; per-sample values", in_dtype="float32")


@peer("gamma", "dali")
def _dali_gamma(batch, kw):
    if batch.dtype != np.uint8:
        raise Unsupported("DALI has no gamma operator; the lookup-table stand-in needs uint8")
    g, gain = f0(kw.get("gamma", 1.0)), f0(kw.get("gain", 1.0))
    vals = [float(min(255.0, max(0.0, math.floor(255.0 * gain * (i / 255.0) ** g + 0.5)))) for i in range(256)]
    return dali_peer(batch, lambda fn, types, d: fn.lookup_table(d, keys=list(range(256)), values=vals,
                                                                 dtype=types.UINT8),
                     variant="fn.lookup_table", note=f"a 256-entry table; {ONE_PER_BATCH}")


@peer("grayscale", "torchvision")
def _tv_grayscale(batch, kw):
    F = _tvf()
    k = int(kw.get("num_output_channels", 1))
    return cycle(batch.torch(), lambda x: F.rgb_to_grayscale(x, num_output_channels=k), variant="F.rgb_to_grayscale")


@peer("grayscale", "kornia")
def _kornia_grayscale(batch, kw):
    K = _kornia("color")
    return cycle(batch.torch(float32=True), K.rgb_to_grayscale, variant="rgb_to_grayscale", note=FLOAT_IN,
                 in_dtype="float32")


@peer("grayscale", "dali")
def _dali_grayscale(batch, kw):
    return dali_peer(batch, lambda fn, types, d: fn.color_space_conversion(d, image_type=types.RGB,
                                                                           output_type=types.GRAY),
                     variant="fn.color_space_conversion(GRAY)")


@peer("grayscale", "cvcuda")
def _cv_grayscale(batch, kw):
    cv, st, ts = _cv(batch)
    return cycle(ts, lambda t: cv.cvtcolor(t, cv.ColorConversion.RGB2GRAY, stream=st), variant="cvcuda.cvtcolor")


@peer("invert", "torchvision")
def _tv_invert(batch, kw):
    F = _tvf()
    return cycle(batch.torch(), F.invert, variant="F.invert")


@peer("invert", "kornia")
def _kornia_invert(batch, kw):
    K = _kornia("enhance")
    return cycle(batch.torch(float32=True), K.invert, variant="invert", note=FLOAT_IN, in_dtype="float32")


@peer("invert", "cupy")
def _cp_invert(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    f = cupy.invert if batch.dtype == np.uint8 else (lambda x: 1 - x)
    return cycle(batch.arrays, f, variant="cupy.invert" if batch.dtype == np.uint8 else "1 - x")


@peer("invert", "dali")
def _dali_invert(batch, kw):
    if batch.dtype != np.uint8:
        raise Unsupported("the DALI expression is written for uint8")
    return dali_peer(batch, lambda fn, types, d: types.Constant(255, dtype=types.UINT8) - d,
                     variant="255 - data (arithmetic op)")


@peer("solarize", "cupy")
def _cp_solarize(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    t = f0(kw.get("threshold", 128))
    top = batch.maxval
    return cycle(batch.arrays, lambda x: cupy.where(x >= t, top - x, x).astype(x.dtype), variant="cupy.where",
                 note=ONE_PER_BATCH)


@peer("posterize", "torchvision")
def _tv_posterize(batch, kw):
    F = _tvf()
    if batch.dtype != np.uint8:
        raise Unsupported("torchvision posterizes uint8 only")
    bits = i0(kw.get("bits", 4))
    return cycle(batch.torch(), lambda x: F.posterize(x, bits), variant="F.posterize", note=ONE_PER_BATCH)


@peer("posterize", "kornia")
def _kornia_posterize(batch, kw):
    K = _kornia("enhance")
    bits = _t(batch, per_sample(kw.get("bits", 4), batch.n, dtype=np.int64), "int64")
    return cycle(batch.torch(float32=True), lambda x: K.posterize(x, bits), variant="posterize",
                 note=f"{FLOAT_IN}; per-sample values", in_dtype="float32")


@peer("posterize", "cupy")
def _cp_posterize(batch, kw):
    batch.need_gpu("CuPy")
    if batch.dtype != np.uint8:
        raise Unsupported("bit masking needs uint8")
    bits = i0(kw.get("bits", 4))
    mask = np.uint8((0xFF << (8 - bits)) & 0xFF)
    return cycle(batch.arrays, lambda x: x & mask, variant="x & mask", note=ONE_PER_BATCH)


@peer("channel_shuffle", "torchvision")
def _tv_channel_shuffle(batch, kw):
    F = _tvf()
    perm = [int(v) for v in s0(kw["permutation"], 1)]
    return cycle(batch.torch(), lambda x: F.permute_channels(x, perm), variant="F.permute_channels",
                 note=ONE_PER_BATCH)


@peer("channel_shuffle", "cupy")
def _cp_channel_shuffle(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    perm = cupy.asarray([int(v) for v in s0(kw["permutation"], 1)])
    return cycle(batch.arrays, lambda x: cupy.take(x, perm, axis=batch.cax), variant="cupy.take",
                 note=ONE_PER_BATCH)


@peer("equalize", "torchvision")
def _tv_equalize(batch, kw):
    F = _tvf()
    return cycle(batch.torch(), F.equalize, variant="F.equalize")


@peer("equalize", "kornia")
def _kornia_equalize(batch, kw):
    K = _kornia("enhance")
    return cycle(batch.torch(float32=True), K.equalize, variant="equalize", note=FLOAT_IN, in_dtype="float32")


@peer("equalize", "dali")
def _dali_equalize(batch, kw):
    def body(fn, types, d):
        eq = getattr(fn, "equalize", None) or fn.experimental.equalize  # moved out of experimental in 2.x
        return eq(d)

    return dali_peer(batch, body, variant="fn.equalize")


def _mean_std(kw, c):
    mean = np.asarray(s0(kw.get("mean", 0.0), 1) if np.ndim(kw.get("mean", 0.0)) > 1 else kw.get("mean", 0.0),
                      np.float64)
    std = np.asarray(s0(kw.get("std", 1.0), 1) if np.ndim(kw.get("std", 1.0)) > 1 else kw.get("std", 1.0),
                     np.float64)
    return (np.broadcast_to(mean.reshape(-1), (c,)).tolist() if mean.size in (1, c) else mean[:c].tolist(),
            np.broadcast_to(std.reshape(-1), (c,)).tolist() if std.size in (1, c) else std[:c].tolist())


@peer("normalize", "torchvision")
def _tv_normalize(batch, kw):
    F = _tvf()
    torch = _import("torch", "torch")
    mean, std = _mean_std(kw, batch.c)
    return cycle(batch.torch(), lambda x: F.normalize(F.to_dtype(x, torch.float32, scale=False), mean, std),
                 variant="F.normalize(F.to_dtype(x))", note="cast then normalise (two kernels); NCHW out")


@peer("normalize", "kornia")
def _kornia_normalize(batch, kw):
    K = _kornia("enhance")
    mean, std = _mean_std(kw, batch.c)
    m, s = _t(batch, np.asarray(mean) / 255.0), _t(batch, np.asarray(std) / 255.0)
    return cycle(batch.torch(float32=True), lambda x: K.normalize(x, m, s), variant="normalize",
                 note=f"{FLOAT_IN} (the cast is not timed)", in_dtype="float32")


@peer("normalize", "dali")
def _dali_normalize(batch, kw):
    mean, std = _mean_std(kw, batch.c)
    lay = kw.get("output_layout") or "NHWC"
    out_layout = "CHW" if lay == "NCHW" else "HWC"
    return dali_peer(batch, lambda fn, types, d: fn.crop_mirror_normalize(
        d, mean=mean, std=std, dtype=types.FLOAT, output_layout=out_layout),
        variant="fn.crop_mirror_normalize (no crop)")


def _cmn_window(kw, batch):
    h, w = hw(kw.get("crop"), batch.h, batch.w)
    pos = per_sample(kw.get("crop_pos", (0.5, 0.5)), batch.n, shape=(2,), dtype=np.float64)
    # crop_pos is taken as (y, x), relative, as DALI's crop_pos_y / crop_pos_x.
    return h, w, pos[:, 0], pos[:, 1]


@peer("crop_mirror_normalize", "torch")
def _torch_cmn(batch, kw):
    _import("torch", "torch")
    h, w, py, px = _cmn_window(kw, batch)
    t, le = int(round(py[0] * (batch.h - h))), int(round(px[0] * (batch.w - w)))
    mirror = bool(s0(kw.get("mirror", False)))
    mean, std = _mean_std(kw, batch.c)
    m = _t(batch, np.asarray(mean).reshape(1, -1, 1, 1))
    s = _t(batch, np.asarray(std).reshape(1, -1, 1, 1))

    def run(x):
        y = x[:, :, t:t + h, le:le + w]
        if mirror:
            y = y.flip(-1)
        return (y.float() - m) / s

    return cycle(batch.torch(), run, variant="slice, flip, (x - mean) / std", note=f"eager PyTorch; {ONE_PER_BATCH}")


@peer("crop_mirror_normalize", "torchvision")
def _tv_cmn(batch, kw):
    F = _tvf()
    torch = _import("torch", "torch")
    h, w, py, px = _cmn_window(kw, batch)
    t, le = int(round(py[0] * (batch.h - h))), int(round(px[0] * (batch.w - w)))
    mirror = bool(s0(kw.get("mirror", False)))
    mean, std = _mean_std(kw, batch.c)

    def run(x):
        y = F.crop(x, t, le, h, w)
        if mirror:
            y = F.horizontal_flip(y)
        return F.normalize(F.to_dtype(y, torch.float32, scale=False), mean, std)

    return cycle(batch.torch(), run, variant="F.crop, F.horizontal_flip, F.normalize", note=ONE_PER_BATCH)


@peer("crop_mirror_normalize", "dali")
def _dali_cmn(batch, kw):
    h, w, py, px = _cmn_window(kw, batch)
    mirror = per_sample(kw.get("mirror", False), batch.n, dtype=np.int32)
    mean, std = _mean_std(kw, batch.c)
    lay = kw.get("output_layout", "NCHW") or "NCHW"
    args = {"py": [np.float32(v) for v in py], "px": [np.float32(v) for v in px], "mi": list(mirror)}
    return dali_peer(batch, lambda fn, types, d, py, px, mi: fn.crop_mirror_normalize(
        d, crop=(h, w), crop_pos_x=px, crop_pos_y=py, mirror=mi, mean=mean, std=std, dtype=types.FLOAT,
        output_layout="CHW" if lay == "NCHW" else "HWC"), args,
        variant="fn.crop_mirror_normalize", note="per-sample windows and mirror")


# ============================================================================= filters
def _sigma_k(kw):
    s = f0(kw.get("sigma", 1.0))
    return s, _ksize(s, kw.get("kernel_size"))


@peer("gaussian_blur", "torchvision")
def _tv_gaussian_blur(batch, kw):
    F = _tvf()
    s, k = _sigma_k(kw)
    return cycle(batch.torch(), lambda x: F.gaussian_blur(x, [k, k], [s, s]), variant=f"F.gaussian_blur({k}x{k})",
                 note=ONE_PER_BATCH)


@peer("gaussian_blur", "kornia")
def _kornia_gaussian_blur(batch, kw):
    K = _kornia("filters")
    s, k = _sigma_k(kw)
    sig = per_sample(kw.get("sigma", 1.0), batch.n, dtype=np.float64)
    sig = _t(batch, np.stack([sig, sig], -1))
    return cycle(batch.torch(float32=True), lambda x: K.gaussian_blur2d(x, (k, k), sig, border_type="reflect"),
                 variant=f"gaussian_blur2d({k}x{k})", note=f"{FLOAT_IN}; per-sample sigma", in_dtype="float32")


@peer("gaussian_blur", "cupy")
def _cp_gaussian_blur(batch, kw):
    ndi = _ndi(batch)
    s, k = _sigma_k(kw)
    sig = [0.0] * 4
    sig[batch.hax] = sig[batch.wax] = s
    return cycle(batch.arrays, lambda x: ndi.gaussian_filter(x, sig, mode="mirror", truncate=(k // 2) / s),
                 variant=f"ndimage.gaussian_filter({k}x{k})", note=ONE_PER_BATCH)


@peer("gaussian_blur", "dali")
def _dali_gaussian_blur(batch, kw):
    s, k = _sigma_k(kw)
    sig = [np.float32(v) for v in per_sample(kw.get("sigma", 1.0), batch.n)]
    return dali_peer(batch, lambda fn, types, d, sg: fn.gaussian_blur(d, sigma=sg, window_size=k), {"sg": sig},
                     variant=f"fn.gaussian_blur({k}x{k})", note="per-sample sigma")


@peer("gaussian_blur", "cvcuda")
def _cv_gaussian_blur(batch, kw):
    cv, st, ts = _cv(batch)
    s, k = _sigma_k(kw)
    return cycle(ts, lambda t: cv.gaussian(t, (k, k), (s, s), cv.Border.REFLECT101, stream=st),
                 variant=f"cvcuda.gaussian({k}x{k})", note=ONE_PER_BATCH)


def _k(kw, default=3):
    v = kw.get("kernel_size", default)
    return int(s0(v, 1) if np.ndim(v) > 1 else (np.asarray(v).reshape(-1)[0]))


@peer("box_blur", "kornia")
def _kornia_box_blur(batch, kw):
    K = _kornia("filters")
    k = _k(kw)
    return cycle(batch.torch(float32=True), lambda x: K.box_blur(x, (k, k), border_type="reflect"),
                 variant=f"box_blur({k}x{k})", note=FLOAT_IN, in_dtype="float32")


@peer("box_blur", "cupy")
def _cp_box_blur(batch, kw):
    ndi = _ndi(batch)
    k = _k(kw)
    size = [1] * 4
    size[batch.hax] = size[batch.wax] = k
    return cycle(batch.arrays, lambda x: ndi.uniform_filter(x, size, mode="mirror"),
                 variant=f"ndimage.uniform_filter({k}x{k})")


@peer("box_blur", "dali")
def _dali_box_blur(batch, kw):
    k = _k(kw)
    kern = np.full((k, k), 1.0 / (k * k), np.float32)
    return dali_peer(batch, lambda fn, types, d: fn.filter(d, kern, border="reflect_101"),
                     variant=f"fn.filter(box {k}x{k})")


@peer("box_blur", "cvcuda")
def _cv_box_blur(batch, kw):
    cv, st, ts = _cv(batch)
    k = _k(kw)
    return cycle(ts, lambda t: cv.averageblur(t, (k, k), (-1, -1), cv.Border.REFLECT101, stream=st),
                 variant=f"cvcuda.averageblur({k}x{k})")


@peer("median_blur", "kornia")
def _kornia_median_blur(batch, kw):
    K = _kornia("filters")
    k = _k(kw)
    return cycle(batch.torch(float32=True), lambda x: K.median_blur(x, (k, k)), variant=f"median_blur({k}x{k})",
                 note=FLOAT_IN, in_dtype="float32")


@peer("median_blur", "cupy")
def _cp_median_blur(batch, kw):
    ndi = _ndi(batch)
    k = _k(kw)
    size = [1] * 4
    size[batch.hax] = size[batch.wax] = k
    return cycle(batch.arrays, lambda x: ndi.median_filter(x, size, mode="mirror"),
                 variant=f"ndimage.median_filter({k}x{k})")


@peer("median_blur", "dali")
def _dali_median_blur(batch, kw):
    k = _k(kw)
    return dali_peer(batch, lambda fn, types, d: fn.experimental.median_blur(d, window_size=k),
                     variant=f"fn.experimental.median_blur({k}x{k})", gpu_only=True)


@peer("median_blur", "cvcuda")
def _cv_median_blur(batch, kw):
    cv, st, ts = _cv(batch)
    k = _k(kw)
    return cycle(ts, lambda t: cv.median_blur(t, (k, k), stream=st), variant=f"cvcuda.median_blur({k}x{k})")


# ============================================================================= noise, occlusion
@peer("gaussian_noise", "torchvision")
def _tv_gaussian_noise(batch, kw):
    F = _tvf()
    torch = _import("torch", "torch")
    m, s = f0(kw.get("mean", 0.0)) / batch.maxval, f0(kw.get("std", 0.1)) / batch.maxval
    dt = torch.uint8 if batch.dtype == np.uint8 else None

    def run(x):
        y = F.gaussian_noise(F.to_dtype(x, torch.float32, scale=True), mean=m, sigma=s, clip=True)
        return F.to_dtype(y, dt, scale=True) if dt is not None else y

    return cycle(batch.torch(), run, variant="F.gaussian_noise between to_dtype casts",
                 note=f"torchvision's noise needs float: cast, noise, cast back; {ONE_PER_BATCH}")


@peer("gaussian_noise", "cupy")
def _cp_gaussian_noise(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    m, s = f0(kw.get("mean", 0.0)), f0(kw.get("std", 0.1))
    top = batch.maxval

    def run(x):
        y = x + cupy.random.normal(m, s, x.shape, dtype=np.float32)
        return cupy.clip(cupy.rint(y) if x.dtype == np.uint8 else y, 0, top).astype(x.dtype)

    return cycle(batch.arrays, run, variant="x + cupy.random.normal", note=ONE_PER_BATCH)


@peer("gaussian_noise", "dali")
def _dali_gaussian_noise(batch, kw):
    args = {"m": [np.float32(v) for v in per_sample(kw.get("mean", 0.0), batch.n)],
            "s": [np.float32(v) for v in per_sample(kw.get("std", 0.1), batch.n)]}
    return dali_peer(batch, lambda fn, types, d, m, s: fn.noise.gaussian(d, mean=m, stddev=s), args,
                     variant="fn.noise.gaussian", note="per-sample values")


@peer("salt_and_pepper", "torch")
def _torch_salt_and_pepper(batch, kw):
    torch = _import("torch", "torch")
    p, sv = f0(kw.get("prob", 0.05)), f0(kw.get("salt_vs_pepper", 0.5))
    top = batch.maxval

    xs = batch.torch()
    salt = torch.tensor(top, dtype=xs[0].dtype, device=xs[0].device)
    pepper = torch.zeros((), dtype=xs[0].dtype, device=xs[0].device)

    def run(x):
        r = torch.rand((x.shape[0], 1) + tuple(x.shape[2:]), device=x.device)
        y = torch.where(r < p * sv, salt, x)
        return torch.where((r >= p * sv) & (r < p), pepper, y)

    return cycle(xs, run, variant="torch.rand + 2 x torch.where", note=f"eager PyTorch; {ONE_PER_BATCH}")


@peer("salt_and_pepper", "dali")
def _dali_salt_and_pepper(batch, kw):
    args = {"p": [np.float32(v) for v in per_sample(kw.get("prob", 0.05), batch.n)],
            "sv": [np.float32(v) for v in per_sample(kw.get("salt_vs_pepper", 0.5), batch.n)]}
    return dali_peer(batch, lambda fn, types, d, p, sv: fn.noise.salt_and_pepper(d, prob=p, salt_vs_pepper=sv),
                     args, variant="fn.noise.salt_and_pepper", note="per-sample values")


def _erase_boxes(kw, n):
    b = np.asarray(kw["boxes"], np.float64)
    if b.ndim == 1:
        b = b[None, None]
    elif b.ndim == 2:
        b = b[:, None] if b.shape[0] == n and b.shape[1] == 4 else b[None]
    return np.broadcast_to(b, (n,) + b.shape[1:])  # (n, k, 4): top, left, height, width


@peer("erase", "torchvision")
def _tv_erase(batch, kw):
    F = _tvf()
    torch = _import("torch", "torch")
    t, le, bh, bw = (int(v) for v in _erase_boxes(kw, batch.n)[0, 0])
    xs = batch.torch()
    v = torch.tensor(f0(kw.get("value", 0)), device=xs[0].device).to(xs[0].dtype)
    return cycle(xs, lambda x: F.erase(x, t, le, bh, bw, v, inplace=False),
                 variant="F.erase", note="one box for the batch (sample 0's first); copies the batch")


@peer("erase", "dali")
def _dali_erase(batch, kw):
    b = _erase_boxes(kw, batch.n)
    anchor = [np.ascontiguousarray(s[:, :2].reshape(-1), np.float32) for s in b]
    shape = [np.ascontiguousarray(s[:, 2:].reshape(-1), np.float32) for s in b]
    fill = f0(kw.get("value", 0))
    return dali_peer(batch, lambda fn, types, d, a, s: fn.erase(d, anchor=a, shape=s, axis_names="HW",
                                                                fill_value=fill),
                     {"a": anchor, "s": shape}, variant="fn.erase", note="per-sample boxes")


@peer("grid_mask", "dali")
def _dali_grid_mask(batch, kw):
    tile = i0(kw.get("tile", 32))
    ratio, angle = f0(kw.get("ratio", 0.5)), f0(kw.get("angle", 0.0))
    shift = np.asarray(s0(kw.get("shift", (0, 0)), 1) if np.ndim(kw.get("shift", (0, 0))) > 1
                       else kw.get("shift", (0, 0)), np.float64).reshape(-1)
    sx, sy = float(shift[0]), float(shift[-1])
    return dali_peer(batch, lambda fn, types, d: fn.grid_mask(d, tile=tile, ratio=ratio, angle=angle,
                                                              shift_x=sx, shift_y=sy),
                     variant="fn.grid_mask", note=ONE_PER_BATCH)


__all__ = ["PEERS", "LIBRARIES", "peer", "peers_for", "missing", "PeerInput", "cycle", "Marginal",
           "dali_peer", "PeerUnavailable", "NotInstalled", "Unsupported", "NeedsGPU"]


# ============================================================================= OpenCV (CPU)
def _opencv(batch):
    """cv2 with :data:`CPU_THREADS` threads, and the batch as contiguous NHWC NumPy arrays."""
    if batch.gpu:
        raise Unsupported("the OpenCV peers run on NumPy batches (gpuaug bench --device cpu)")
    cv2 = _import("cv2", "opencv")
    cv2.setNumThreads(CPU_THREADS)
    return cv2, batch.nhwc()


def _per_image(batch, fn, variant, note=""):
    """A callable running ``fn(cv2, i, image)`` on every image of the next buffer."""
    cv2, arrays = _opencv(batch)
    note = "; ".join(x for x in ("one cv2 call per image, per-sample values", note) if x)
    return cycle(arrays, lambda x: [fn(cv2, i, x[i]) for i in range(x.shape[0])], variant=variant, note=note)


_CV_BORDER = {"constant": 0, "replicate": 1, "edge": 1, "reflect": 4}  # cv2.BORDER_* (reflect: REFLECT_101)


@peer("flip", "opencv")
def _ocv_flip(batch, kw):
    h = per_sample(kw.get("horizontal", True), batch.n, dtype=np.int64)
    v = per_sample(kw.get("vertical", False), batch.n, dtype=np.int64)
    codes = [(-1 if (a and b) else (1 if a else 0)) for a, b in zip(h, v)]

    def one(cv2, i, img):
        return cv2.flip(img, codes[i]) if (h[i] or v[i]) else img.copy()

    return _per_image(batch, one, "cv2.flip")


@peer("crop", "opencv")
def _ocv_crop(batch, kw):
    t = per_sample(kw.get("top", 0), batch.n, dtype=np.int64)
    le = per_sample(kw.get("left", 0), batch.n, dtype=np.int64)
    hh, ww = int(kw["height"]), int(kw["width"])
    return _per_image(batch, lambda cv2, i, img: img[t[i]:t[i] + hh, le[i]:le[i] + ww].copy(),
                      "img[window].copy()", note="NumPy slicing: OpenCV has no crop call")


@peer("pad", "opencv")
def _ocv_pad(batch, kw):
    sides = _pad_sides(kw, batch.n)
    mode = kw.get("mode", "constant")
    if mode not in _CV_BORDER:
        raise Unsupported(f"pad mode {mode!r} has no cv2 border")
    value = per_sample(kw.get("value", 0), batch.n, dtype=np.float64)

    def one(cv2, i, img):
        t, b, le, r = (int(v) for v in sides[i])
        return cv2.copyMakeBorder(img, t, b, le, r, _CV_BORDER[mode], value=[float(value[i])] * 4)

    return _per_image(batch, one, f"cv2.copyMakeBorder({mode})")


@peer("resize", "opencv")
def _ocv_resize(batch, kw):
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    code = {"nearest": 0, "bilinear": 1, "area": 3}[interp]  # cv2.INTER_*
    return _per_image(batch, lambda cv2, i, img: cv2.resize(img, (w, h), interpolation=code),
                      f"cv2.resize({interp})")


def _warp_peer(batch, fwd, size, kw, variant):
    interp = 0 if kw.get("interpolation", "bilinear") == "nearest" else 1
    border = _CV_BORDER.get(kw.get("border", "constant"), 0)
    fill = per_sample(kw.get("fill", 0), batch.n, dtype=np.float64)
    mats = [np.ascontiguousarray(m[:2, :], np.float64) for m in fwd]
    h, w = size
    return _per_image(batch, lambda cv2, i, img: cv2.warpAffine(
        img, mats[i], (w, h), flags=interp, borderMode=border, borderValue=[float(fill[i])] * 4), variant)


@peer("warp_affine", "opencv")
def _ocv_warp_affine(batch, kw):
    return _warp_peer(batch, _forward(kw, batch.n), _affine_size(kw, batch), kw, "cv2.warpAffine")


@peer("rotate", "opencv")
def _ocv_rotate(batch, kw):
    ang = per_sample(kw.get("angle", 0), batch.n, dtype=np.float64)
    scale = per_sample(kw.get("scale", 1.0), batch.n, dtype=np.float64)
    ctr = kw.get("center")
    cx, cy = ((batch.w - 1) / 2, (batch.h - 1) / 2) if ctr is None else (f0(np.asarray(ctr)[..., 0]),
                                                                       f0(np.asarray(ctr)[..., 1]))
    fwd = []
    for a, sc in zip(ang, scale):  # cv2.getRotationMatrix2D's matrix
        al, be = sc * math.cos(math.radians(a)), sc * math.sin(math.radians(a))
        fwd.append(np.array([[al, be, (1 - al) * cx - be * cy], [-be, al, be * cx + (1 - al) * cy], [0, 0, 1]]))
    return _warp_peer(batch, fwd, (batch.h, batch.w), kw, "cv2.warpAffine(getRotationMatrix2D)")


@peer("gaussian_blur", "opencv")
def _ocv_gaussian_blur(batch, kw):
    sig = per_sample(kw.get("sigma", 1.0), batch.n, dtype=np.float64)
    ks = kw.get("kernel_size")
    ks = per_sample(ks, batch.n, dtype=np.int64) if ks is not None else [0] * batch.n  # 0: from sigma
    return _per_image(batch, lambda cv2, i, img: cv2.GaussianBlur(img, (int(ks[i]), int(ks[i])), float(sig[i]),
                                                                  borderType=4), "cv2.GaussianBlur",
                      note="reflect-101 borders; default size from sigma as gpuaug's")


@peer("box_blur", "opencv")
def _ocv_box_blur(batch, kw):
    k = per_sample(kw.get("kernel_size", 3), batch.n, dtype=np.int64)
    return _per_image(batch, lambda cv2, i, img: cv2.blur(img, (int(k[i]), int(k[i])), borderType=4), "cv2.blur")


@peer("median_blur", "opencv")
def _ocv_median_blur(batch, kw):
    k = per_sample(kw.get("kernel_size", 3), batch.n, dtype=np.int64)
    return _per_image(batch, lambda cv2, i, img: cv2.medianBlur(img, int(k[i])), "cv2.medianBlur")


def _cv_gray_mean(cv2, img):
    return float(cv2.mean(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY))[0]) if img.shape[2] >= 3 else float(img.mean())


def _cv_scale(cv2, img, a, b=0.0):
    """a * img + b, saturated (uint8) / clamped to [0, 1] (floats)."""
    if img.dtype == np.uint8:
        return cv2.convertScaleAbs(img, alpha=a, beta=b)  # values stay >= 0 here, so |.| is a no-op
    return np.clip(cv2.addWeighted(img, a, img, 0.0, b), 0.0, 1.0)


def _need_u8_or_f32(batch, what):
    if batch.dtype not in (np.uint8, np.float32):
        raise Unsupported(f"{what}: uint8 or float32 images only")


@peer("brightness", "opencv")
def _ocv_brightness(batch, kw):
    _need_u8_or_f32(batch, "cv2.convertScaleAbs")
    f = per_sample(kw.get("factor", 1.0), batch.n, dtype=np.float64)
    return _per_image(batch, lambda cv2, i, img: _cv_scale(cv2, img, float(f[i])), "cv2.convertScaleAbs")


@peer("contrast", "opencv")
def _ocv_contrast(batch, kw):
    _need_u8_or_f32(batch, "cv2.convertScaleAbs")
    f = per_sample(kw.get("factor", 1.0), batch.n, dtype=np.float64)

    def one(cv2, i, img):
        return _cv_scale(cv2, img, float(f[i]), (1.0 - float(f[i])) * _cv_gray_mean(cv2, img))

    return _per_image(batch, one, "cvtColor(GRAY) mean + convertScaleAbs")


@peer("color_jitter", "opencv")
def _ocv_color_jitter(batch, kw):
    _need_u8_or_f32(batch, "color_jitter from cv2 calls")
    if batch.c != 3:
        raise Unsupported("color_jitter from cv2 calls: RGB images only")
    n = batch.n
    b, c, s, h = (per_sample(kw.get(k, d), n, dtype=np.float64) for k, d in
                  (("brightness", 1.0), ("contrast", 1.0), ("saturation", 1.0), ("hue", 0.0)))

    def one(cv2, i, img):
        x = _cv_scale(cv2, img, float(b[i]))
        x = _cv_scale(cv2, x, float(c[i]), (1.0 - float(c[i])) * _cv_gray_mean(cv2, x))
        gray = cv2.cvtColor(cv2.cvtColor(x, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
        x = cv2.addWeighted(x, float(s[i]), gray, 1.0 - float(s[i]), 0.0)
        if h[i] != 0.0:
            hsv = cv2.cvtColor(x, cv2.COLOR_RGB2HSV)
            if x.dtype == np.uint8:  # H in [0, 180): shift through a table
                lut = ((np.arange(256) + int(round(float(h[i]) * 180))) % 180).astype(np.uint8)
                hsv[..., 0] = cv2.LUT(hsv[..., 0], lut)
            else:  # H in [0, 360)
                hsv[..., 0] = (hsv[..., 0] + float(h[i]) * 360) % 360
            x = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
        return x

    return _per_image(batch, one, "convertScaleAbs x2 + cvtColor(GRAY) + addWeighted + cvtColor(HSV) x2",
                      note="brightness, contrast, saturation, hue from cv2 calls (OpenCV has no color jitter)")


@peer("normalize", "opencv")
def _ocv_normalize(batch, kw):
    mean, std = _mean_std(kw, batch.c)
    dt = kw.get("dtype", "float32")
    if dt != "float32":
        raise Unsupported("cv2 arithmetic: float32 output only")
    m = tuple(mean) + (0.0,) * (4 - batch.c)
    r = tuple(1.0 / v for v in std) + (0.0,) * (4 - batch.c)
    return _per_image(batch, lambda cv2, i, img: cv2.multiply(cv2.subtract(img, m, dtype=cv2.CV_32F), r),
                      "cv2.subtract(CV_32F) + cv2.multiply", note="sample 0's mean and std for every image")
