"""The peers' machinery: the library table, registration, :class:`PeerInput`, :func:`cycle`,
:class:`Marginal`, and helpers that read an op's keyword arguments the way every library's
peer needs them. The peers themselves live in one module per library."""
from __future__ import annotations

import importlib
import importlib.util
import itertools
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
        from gpuaug._util import dtype_max

        return dtype_max(self.dtype)

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


def _t(batch, values, dtype="float32"):
    """A per-sample torch tensor on the batch's device."""
    torch = _import("torch", "torch")
    dev = "cuda" if batch.gpu else "cpu"
    return torch.as_tensor(np.ascontiguousarray(values), dtype=getattr(torch, dtype), device=dev)


def _pad_sides(kw, n):
    """Per-sample (top, bottom, left, right), (n, 4), from an int, 4 ints or (n, 4)."""
    a = np.asarray(kw.get("padding", 0), np.int64)
    if a.ndim == 0:
        a = np.full(4, int(a))
    return per_sample(a, n, shape=(4,), dtype=np.int64)


def _boxes(kw, n):
    return per_sample(kw["boxes"], n, shape=(4,), dtype=np.float64)  # top, left, height, width


def _forward(kw, n, dims=2):
    """Per-sample source->destination matrices (n, 3, 3) from gpuaug's ``matrix`` argument."""
    m = _mat3(per_sample(kw["matrix"], n, shape=(2, 3) if dims == 2 else (3, 3), dtype=np.float64))
    if kw.get("inverse_map", False):
        m = np.linalg.inv(m)
    return m


def _affine_size(kw, batch):
    return hw(kw.get("size"), batch.h, batch.w)


def _mean_std(kw, c):
    mean = np.asarray(s0(kw.get("mean", 0.0), 1) if np.ndim(kw.get("mean", 0.0)) > 1 else kw.get("mean", 0.0),
                      np.float64)
    std = np.asarray(s0(kw.get("std", 1.0), 1) if np.ndim(kw.get("std", 1.0)) > 1 else kw.get("std", 1.0),
                     np.float64)
    return (np.broadcast_to(mean.reshape(-1), (c,)).tolist() if mean.size in (1, c) else mean[:c].tolist(),
            np.broadcast_to(std.reshape(-1), (c,)).tolist() if std.size in (1, c) else std[:c].tolist())


def _cmn_window(kw, batch):
    h, w = hw(kw.get("crop"), batch.h, batch.w)
    pos = per_sample(kw.get("crop_pos", (0.5, 0.5)), batch.n, shape=(2,), dtype=np.float64)
    # crop_pos is taken as (y, x), relative, as DALI's crop_pos_y / crop_pos_x.
    return h, w, pos[:, 0], pos[:, 1]


def _sigma_k(kw):
    s = f0(kw.get("sigma", 1.0))
    return s, _ksize(s, kw.get("kernel_size"))


def _k(kw, default=3):
    v = kw.get("kernel_size", default)
    return int(s0(v, 1) if np.ndim(v) > 1 else (np.asarray(v).reshape(-1)[0]))


def _erase_boxes(kw, n):
    b = np.asarray(kw["boxes"], np.float64)
    if b.ndim == 1:
        b = b[None, None]
    elif b.ndim == 2:
        b = b[:, None] if b.shape[0] == n and b.shape[1] == 4 else b[None]
    return np.broadcast_to(b, (n,) + b.shape[1:])  # (n, k, 4): top, left, height, width
