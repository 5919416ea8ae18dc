"""The run-time side of the DALI adapters: what a ``python_function`` calls once per batch.

DALI (``batch_processing=True``) hands the callback one list of samples per input: NumPy
arrays in a CPU pipeline, CuPy arrays on DALI's own stream (CuPy's current stream) in a
GPU pipeline. :class:`Chain` turns them into one gpuaug call per op per batch:

- the images: a uniform batch whose samples lie back to back in memory (what DALI hands
  over, batch after batch) is viewed as one 4-D array without a copy; any other batch
  goes through gpuaug's varshape path (a list, one launch through the descriptor table);
- a DataNode parameter: its samples are stacked into one ``(N,) + shape`` array on the
  same device (a view when they lie back to back) and passed to the op as per-sample
  values. Nothing is read back to the host here: device values stay on the device;
- the result goes back as DALI's batch contract asks, a list of per-sample arrays.

Any error inside is re-raised naming the op (``gpuaug.dali.<op>: ...``); DALI reports it
as a ``RuntimeError`` from the pipeline's ``run()``.
"""
from __future__ import annotations

import numpy as np

from gpuaug._registry import REGISTRY

_INT_KINDS = "biu"
_NUM_KINDS = "biuf"


#: How the callbacks saw their image batches (for tests and benchmarks): "dense" (one 4-D
#: view), "list" (gpuaug's varshape path), "stacked" (copied into one array: uniform CHW
#: samples that did not lie back to back).
STATS = {"dense": 0, "list": 0, "stacked": 0}


class CallbackError(RuntimeError):
    """An error inside a gpuaug DALI callback that did not come from a ValueError/TypeError."""


def _err(op, message, cls=ValueError):
    return cls(f"gpuaug.dali.{op}: {message}")


def _ptr(a) -> int:
    data = a.data
    return data.ptr if hasattr(data, "ptr") else a.__array_interface__["data"][0]


def _dense(samples, xp):
    """A 4-D view of ``samples`` (same shape and dtype, C-contiguous) when they lie back to
    back in memory; None otherwise."""
    a0 = samples[0]
    n = len(samples)
    step = a0.nbytes
    base = _ptr(a0)
    if xp is np:
        for i, a in enumerate(samples):
            if not a.flags.c_contiguous or _ptr(a) != base + i * step:
                return None
    else:  # one C-level list comparison: this runs per input per batch, on 256 samples
        if [a.data.ptr for a in samples] != list(range(base, base + n * step, step)):
            return None
        if not a0.flags.c_contiguous:  # DALI's samples are dense tensors: all or none
            return None
    shape = (n,) + tuple(a0.shape)
    if xp is np:
        # writeable like DALI's own samples: Numba compiles one specialisation per (readonly) flag
        return np.lib.stride_tricks.as_strided(a0, shape, (step,) + a0.strides, writeable=a0.flags.writeable)
    mem = xp.cuda.UnownedMemory(base, n * step, samples, a0.device.id)
    return xp.ndarray(shape, a0.dtype, xp.cuda.MemoryPointer(mem, 0))


def batch_view(samples, xp, op, layout):
    """The images of one DALI batch as a gpuaug batch: a 4-D array or a list (see module)."""
    a0 = samples[0]
    if a0.ndim != 3:
        raise _err(op, f"the data samples have shape {tuple(a0.shape)}; expected 3-D images "
                       f"({'HWC' if layout == 'NHWC' else 'CHW'}, set by layout=)")
    if len(samples) == 1:
        STATS["dense"] += 1
        return a0[None]
    if len({a.shape for a in samples}) == 1 and len({a.dtype for a in samples}) == 1:
        view = _dense(samples, xp)
        if view is not None:
            STATS["dense"] += 1
            return view
        if layout == "NCHW":  # gpuaug's varshape path holds HWC images
            STATS["stacked"] += 1
            return xp.stack(samples)
        STATS["list"] += 1
        return list(samples)
    if layout == "NCHW":
        raise _err(op, "layout: 'CHW' samples of different sizes are not supported (gpuaug's varshape "
                       "batches hold HWC images); use layout='HWC' data or resize to one size first")
    STATS["list"] += 1
    return list(samples)


def stack_param(op, p, values, n, channels, xp):
    """The samples of a DataNode argument as one ``(N,) + shape`` array, checked against the
    registry's :class:`~gpuaug._registry.Param`."""
    name = p.name
    v0 = values[0]
    kinds = _INT_KINDS if p.kind == "bool" else _NUM_KINDS
    if v0.dtype.kind not in kinds:
        want = ("bool or integer values (e.g. fn.random.coin_flip())" if p.kind == "bool" else "numbers")
        raise _err(op, f"argument {name!r} (a DataNode) gave values of dtype {v0.dtype}; expected {want}",
                   TypeError)
    s = tuple(v0.shape)
    if len({v.shape for v in values}) != 1 or len({v.dtype for v in values}) != 1:
        i, v = next((i, v) for i, v in enumerate(values) if tuple(v.shape) != s or v.dtype != v0.dtype)
        raise _err(op, f"argument {name!r} (a DataNode): sample {i} has shape {tuple(v.shape)} "
                       f"({v.dtype}) but sample 0 has {s} ({v0.dtype}); expected one shape and dtype")
    want = tuple(channels if d == "C" else d for d in p.shape)
    if want == ():
        ok, new = s in ((), (1,)), (n,)
    elif "C" in p.shape and len(p.shape) == 1:
        ok, new = s in ((), (1,), (channels,)), (n, max(1, int(np.prod(s))))
    else:
        ok = len(s) == len(want) and all(w is None or w == d for w, d in zip(want, s))
        new = (n,) + s
    if not ok:
        shown = "(" + ", ".join("K" if w is None else str(w) for w in want) + ("," if len(want) == 1 else "") + ")"
        extra = " or (1,)" if want == () else (" or (1,)" if "C" in p.shape else "")
        raise _err(op, f"argument {name!r} (a DataNode) gave samples of shape {s}; expected shape "
                       f"{shown}{extra} per sample (one value per sample)")
    stacked = _dense(values, xp) if n > 1 else v0[None]
    if stacked is None:
        stacked = xp.stack(values)
    return stacked.reshape(new)


def _channels(x, layout):
    if isinstance(x, list):
        return int(x[0].shape[2])
    return int(x.shape[3] if layout == "NHWC" else x.shape[1])


def wrap_error(op, e):
    """``e`` re-raised naming the op; ValueError/TypeError keep their class."""
    msg = str(e)
    if msg.startswith(f"gpuaug.dali.{op}:"):
        return e
    cls = type(e) if type(e) in (ValueError, TypeError) else CallbackError
    text = f"gpuaug.dali.{op}: {msg}" if cls is not CallbackError else f"gpuaug.dali.{op}: {type(e).__name__}: {msg}"
    return cls(text)


class Chain:
    """The ``python_function`` callback for a chain of steps (one op, or a composed chain):
    ``chain(images, *param_lists) -> list of output samples``.

    ``backend``: the gpuaug backend every op runs on ("cpu" for NumPy samples, "cuda" or
    "numba" for CuPy samples).

    On the GPU the final output buffer and its per-sample views are kept and written again
    (``out=``) by the next batch of the same shape on the same stream: making 256 CuPy views
    costs more host time than most kernels. This is safe for the same reason CuPy's memory
    pool is: DALI copies the outputs away on its stream inside the same ``run``, and the next
    batch's kernel is queued behind that copy on the same stream.
    """

    def __init__(self, steps, backend, device):
        self.steps = tuple(steps)
        self.backend = backend
        self.device = device
        self.calls = 0  # batches seen: the noise ops' seed advances by one per batch
        self._reuse = None  # (key, output buffer, its per-sample views), GPU only
        self._key = None
        self._host = [set() for _ in self.steps]  # per step: arguments the op reads on the host

    def __call__(self, images, *params):
        op = self.steps[0].op
        try:
            xp = np
            if self.device == "gpu":
                import cupy as xp
            x = batch_view(images, xp, op, self.steps[0].layout)
            n = len(images)
            k = 0
            last = len(self.steps) - 1
            for i, step in enumerate(self.steps):
                op = step.op
                x = self._apply(step, x, params[k:k + len(step.node_params)], n, xp, self._host[i], i == last)
                k += len(step.node_params)
            self.calls += 1
            return x if isinstance(x, list) else self._samples(x)
        except Exception as e:  # noqa: BLE001 - re-raised, naming the op
            err = wrap_error(op, e)
            if self.device == "gpu":
                # DALI 2.4 can crash the process (segfault/abort) after an exception out of a
                # GPU python_function, in run() or when the pipeline is destroyed (H200, CUDA 13:
                # tests/gpu/dali_debug.py, tests/test_dali_faults_gpu.py): say what went wrong
                # first, so the cause is never lost with the process.
                import sys

                print(f"{type(err).__name__}: {err}", file=sys.stderr, flush=True)
            raise err from e

    def _apply(self, step, x, lists, n, xp, host, last=False):
        if isinstance(x, list) and step.layout != "NHWC":
            x = xp.stack(x)
        spec = REGISTRY[step.op]
        kw = dict(op_kwargs(step, x, lists, n, xp, self.calls), layout=step.layout, backend=self.backend)
        self._key = None
        if last and self.device == "gpu" and not isinstance(x, list):
            self._key = (tuple(x.shape), x.strides, x.dtype.str, xp.cuda.get_current_stream().ptr)
            hit = self._reuse
            if hit is not None and hit[0] == self._key:
                try:
                    return call_host(spec.func, x, dict(kw, out=hit[1]), host)
                except ValueError:  # this batch's output differs in shape or dtype: allocate
                    self._reuse = None
        return call_op(spec.func, x, kw, spec.changes_shape, host)

    def _samples(self, out):
        hit = self._reuse
        if hit is not None and hit[1] is out:
            return hit[2]
        views = list(out)
        if self._key is not None:
            self._reuse = (self._key, out, views)
        return views


def call_op(func, x, kw, changes_shape, host=None):
    """``func(x, **kw)`` through :func:`call_host`; when an op that changes shapes refuses a
    uniform batch (its per-sample output sizes differ: rot90 with mixed k, per-sample
    padding...), the same samples again as a varshape list: DALI's outputs are per sample
    anyway."""
    try:
        return call_host(func, x, kw, host)
    except ValueError:
        if not changes_shape or isinstance(x, list) or kw.get("layout") != "NHWC" or x.shape[0] == 1:
            raise
    return call_host(func, list(x), kw, host)


def call_host(func, x, kw, host=None):
    """``func(x, **kw)``. A per-sample value that the op must read on the host (it decides
    the output shape: pad's padding, rot90's k on non-square images...) arrives from a GPU
    pipeline as a CuPy array: the op refuses it (a TypeError naming the argument and "host")
    before launching anything, and it is copied back (a wait on DALI's stream) and the call
    repeated. ``host`` (a set) remembers those names, so the next batches copy them first
    instead of failing first."""
    host = set() if host is None else host
    kw = host_kwargs(kw, host)
    while True:
        try:
            return func(x, **kw)
        except TypeError as e:
            name = str(e).split(":", 1)[0]
            v = kw.get(name)
            if "host" not in str(e) or name in host or isinstance(v, np.ndarray) or not hasattr(v, "get"):
                raise
            host.add(name)
            kw = dict(kw, **{name: v.get()})


def host_kwargs(kw, names):
    """``kw`` with the values named in ``names`` copied to the host (NumPy)."""
    if not names:
        return kw
    return {k: (v.get() if k in names and not isinstance(v, np.ndarray) and hasattr(v, "get") else v)
            for k, v in kw.items()}


def op_kwargs(step, x, lists, n, xp, calls):
    """The op's keyword arguments for one batch: constants, stacked DataNode values, seed."""
    kw = dict(step.consts)
    if lists:
        by_name = {p.name: p for p in REGISTRY[step.op].params}
        ch = _channels(x, step.layout)
        for name, values in zip(step.node_params, lists):
            if len(values) != n:
                raise _err(step.op, f"argument {name!r} has {len(values)} samples; the data has {n}")
            kw[name] = stack_param(step.op, by_name[name], values, n, ch, xp)
    if step.seed is not None:
        kw["seed"] = (step.seed + calls) % 2 ** 64
    return kw
