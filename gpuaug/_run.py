"""Running an op on one of its three backends.

An op module checks its arguments, builds the per-sample parameter matrix, then calls
:func:`run`, which allocates (or checks) the output and launches:

- ``"cuda"``: the CUDA C kernel ``kernels/<file>`` via CuPy, one launch for the batch
  (uniform, strided or varshape) on the caller's stream; descriptor tables and host
  parameters travel in one asynchronous copy from pinned memory;
- ``"numba"``: the Numba CUDA twin on the same stream (one launch per uniform batch,
  one per sample for a varshape batch); under ``NUMBA_ENABLE_CUDASIM=1`` it runs on
  NumPy arrays in the simulator;
- ``"cpu"``: the Numba njit twin on NumPy arrays.

float16 on the Numba twins: copies move the raw 16-bit patterns; arithmetic runs on a
float32 copy and rounds to float16 at the end (CUDA C computes in float32 too).
"""
from __future__ import annotations

import contextvars
import functools
import importlib
from dataclasses import dataclass

import numpy as np

import gpuaug._plan as _plan
from gpuaug._batch import Batch, max_size, table_item
from gpuaug._stream import check_stream, on_device
from gpuaug._params import param_item
from gpuaug._registry import BACKENDS
from gpuaug._util import check_choice, cupy_module, dtype_name, simulator


@dataclass(frozen=True)
class Launch:
    """What :func:`run` would launch for one op call: the op's checked arguments reduced to
    its kernels, the (N, P) per-sample parameter matrix, the output's per-sample shapes, fill
    values, dtype, channels and layout (None: the input's)."""

    batch: object
    kernels: object
    params: object
    shapes: object
    fill: object
    dtype: object
    channels: object
    layout: object


#: Set by :func:`describe`: run() hands it the call's :class:`Launch` and returns at once.
_DESCRIBE = contextvars.ContextVar("gpuaug_describe", default=None)


def describe(func, x, **kw):
    """Run op ``func`` on ``x`` up to its launch and return its :class:`Launch`: the op checks
    its arguments and builds its parameter matrix exactly as it does standalone, and nothing
    is allocated or launched (``func`` returns None). None when the op does not go through
    :func:`run` (filters, noise: it then ran for real). Bad arguments raise as the op does.
    How gpuaug.dali's numba_function planner and the native operator's checks of constant
    arguments reuse the ops' own parameter code."""
    got = []
    tok = _DESCRIBE.set(got.append)
    try:
        func(x, **kw)
    finally:
        _DESCRIBE.reset(tok)
    return got[0] if got else None


def choose_backend(batch: Batch, backend, allowed=BACKENDS) -> str:
    """Default: "cuda" for CUDA arrays, "cpu" for NumPy arrays. Checks the pairing."""
    if backend is None:
        return "cuda" if batch.device else "cpu"
    check_choice("backend", backend, allowed)
    if backend == "cuda" and not batch.device:
        raise ValueError("backend: got 'cuda' with a NumPy input; pass a CUDA array "
                         "(e.g. cupy.asarray(x)) or use backend='cpu'")
    if backend == "numba" and not batch.device and not simulator():
        raise ValueError("backend: got 'numba' with a NumPy input; the Numba CUDA twin needs a "
                         "CUDA array (or NUMBA_ENABLE_CUDASIM=1); use backend='cpu' for NumPy")
    if backend == "cpu" and batch.device:
        raise ValueError("backend: got 'cpu' with a CUDA array input; pass a NumPy array "
                         "(e.g. cupy.asnumpy(x)) or use backend='cuda' or 'numba'")
    return backend


@dataclass(frozen=True)
class Kernels:
    """Where an op's twins live.

    ``cu``: (file under kernels/, template name) of the CUDA C kernel, instantiated as
    ``name<T, C>``. ``numba``: (module under kernels/numba/, function name) of the
    ``@dual`` per-pixel function. ``kind``: "copy" (exact element moves, MAP function)
    or "value" (float maths, VALUE function).
    """

    cu: tuple
    numba: tuple
    kind: str = "copy"
    variants: tuple = ()  # other kernel names in the same .cu file (fast paths), for compile checks


def fill_values(fill, n, channels, dtype):
    """Per-sample fill values (N,) or (N, C) -> (N, C) in the element type (raw bits for float16)."""
    f = np.broadcast_to(np.asarray(fill, np.float64).reshape(n, -1), (n, channels))
    if dtype == np.uint8:
        f = np.clip(np.floor(f + 0.5), 0, 255).astype(np.uint8)
    else:
        f = f.astype(dtype)
    return f.view(np.uint16) if dtype == np.float16 else f


def run(batch: Batch, kernels: Kernels, params, *, shapes, out, backend, stream,
        fill=None, dtype=None, channels=None, layout=None, extra=(), template=None, fast=None):
    """Allocate the output and launch the op's kernel on ``backend``; return the result.

    ``params``: (N, P) per-sample parameters (NumPy, or CuPy when they came from the
    GPU). ``shapes``: per-sample output (h, w). ``fill``: per-sample fill values for
    copy kernels (the CUDA C kernel reads its own fill from ``params``). ``extra``:
    additional scalar kernel arguments (NumPy scalars) for the CUDA C kernel.
    ``dtype``/``channels``/``layout``: of the output, when they differ from the input's.
    ``template``: the CUDA C template arguments (default: input dtype name, channels).
    ``fast``: optional CUDA C fast path, ``fast(src, dst) -> launch(params_dev) or None``;
    when it returns a launcher (the inputs suit it), that runs instead of the generic kernel.
    A hook whose launches depend on values of the call other than the parameter matrix and
    the geometry carries them as ``fast.key`` (hashable): run()'s plans are keyed by it.
    """
    check_stream(stream)
    describing = _DESCRIBE.get()
    if describing is not None:
        return describing(Launch(batch, kernels, params, shapes, fill, dtype, channels, layout))
    if batch.device:
        if backend == "cuda" and stream is None and not batch.varshape:
            hw = getattr(shapes, "hw", None)
            if hw is not None:
                # a fast hook's ``key``: the call's values its launches hold as constants (pad's
                # border mode): a plan made with one must not replay for another
                fk = None if fast is None else getattr(fast, "key", True)
                got = _plan.launch(batch, kernels, params, extra, (hw, dtype, channels, layout, template, fk),
                                   lambda: _alloc_run_cuda(batch, shapes, dtype, channels, layout, kernels,
                                                           params, extra, template, fast, out), out)
                if got is not None:
                    return got
        with on_device(batch.device_id(), stream):
            result, dst = batch.alloc(out, shapes, dtype=dtype, channels=channels, layout=layout)
            if backend == "cuda":
                _run_cuda(batch, dst, kernels, params, extra, template, fast)
            else:
                _run_numba(batch, dst, kernels, params, fill, "cuda")
        return result
    result, dst = batch.alloc(out, shapes, dtype=dtype, channels=channels, layout=layout)
    params = params if isinstance(params, np.ndarray) else cupy_module().asnumpy(params)
    _run_numba(batch, dst, kernels, params, fill, "cuda" if backend == "numba" else "cpu")
    return result


def _alloc_run_cuda(batch, shapes, dtype, channels, layout, kernels, params, extra, template, fast, out=None):
    """run()'s CUDA C path into ``out`` or a new output (what its launch plans record and check)."""
    with on_device(batch.device_id(), None):
        result, dst = batch.alloc(out, shapes, dtype=dtype, channels=channels, layout=layout)
        _run_cuda(batch, dst, kernels, params, extra, template, fast)
    return result


def _run_cuda(src: Batch, dst: Batch, kernels: Kernels, params, extra, template=None, fast=None):
    from gpuaug.kernels._cuda import get_function, grid_2d, kernel_name

    n = src.n
    launch = fast(src, dst) if fast is not None else None
    if launch is not None:
        (par,) = device_params(params, n)
        launch(par)
        return
    p = np.asarray(params.shape[1], np.int32)
    src_t, dst_t, par = device_params(params, n, src, dst)
    template = template or (dtype_name(src.dtype), src.channels)
    fn = get_function(kernels.cu[0], kernel_name(kernels.cu[1], *template))
    hmax, wmax = max_size(dst.shapes)
    grid, block = grid_2d(hmax, wmax, n)
    fn(grid, block, (src_t, dst_t, par, np.int32(p), np.int32(n)) + tuple(extra))


def device_params(params, n, *batches):
    """The device copies of ``batches``' descriptor tables, then of the (n, P) parameters, as
    float32 (what every kernel reads): host parameters and tables travel in one staged copy
    from pinned memory, or come from the constant cache (dense batches' tables, parameter
    matrices whose rows are all equal); device parameters are used in place when they are
    already contiguous float32. The one way host data reaches a CUDA C launch."""
    from gpuaug.kernels._cuda import RECORDING, log, stage

    items = [table_item(b) for b in batches]
    if isinstance(params, np.ndarray):
        got = stage(*items, param_item(params, n))
    else:
        cp = cupy_module()
        got = stage(*items) + [cp.ascontiguousarray(params, dtype=cp.float32).reshape(n, -1)]
    if RECORDING[0]:  # what a launch plan of run() patches per call (gpuaug._plan)
        log("params", got[-1])
    return got


def contiguous_rows(src: Batch, dst: Batch):
    """Row geometry shared by ``src`` and ``dst`` when both are dense batches in the same
    layout: ``(planes, planes_per_sample, H, W, bytes_per_pixel)`` where a plane is an
    HWC image (NHWC) or one channel of a CHW image (NCHW). None otherwise (varshape,
    strided views, different layouts): the generic kernel handles those.
    """
    if src.varshape or dst.varshape or src.layout != dst.layout:
        return None
    a, b = src.arrays[0], dst.arrays[0]
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        return None
    n, h, w, c = src.nhwc.shape
    es = a.itemsize
    if src.layout == "NHWC":
        return n, 1, h, w, es * c
    return n * c, c, h, w, es


@functools.lru_cache(maxsize=None)
def numba_function(kernels: Kernels, target: str):
    from gpuaug.kernels.numba._driver import copy_kernel, value_kernel

    mod = importlib.import_module(f"gpuaug.kernels.numba.{kernels.numba[0]}")
    fn = getattr(mod, kernels.numba[1])
    kern = (copy_kernel if kernels.kind == "copy" else value_kernel)(fn, target)
    if target == "cpu":  # the op's fast CPU kernel first, where there is one (kernels/numba/cpu_fast)
        from gpuaug.kernels.numba.cpu_fast import with_fast_path

        kern = with_fast_path(tuple(kernels.numba), kern)
    return kern


def _run_numba(src: Batch, dst: Batch, kernels: Kernels, params, fill, target):
    kern = numba_function(kernels, target)
    n = src.n
    xp = src.xp
    if target == "cuda":
        params = xp.asarray(params, dtype=xp.float32)
    else:
        params = np.asarray(params, np.float64)
    items = ([(src.nhwc, dst.nhwc, params, slice(None))] if not src.varshape else
             [(src.views[i][None], dst.sample(i)[None], params[i:i + 1], slice(i, i + 1))
              for i in range(n)])
    if kernels.kind == "copy":
        if fill is None:  # zeros in every dtype's bits (float16 travels as uint16)
            fills = np.zeros((n, dst.channels), np.uint16 if dst.dtype == np.float16 else dst.dtype)
        else:
            fills = fill_values(fill, n, dst.channels, dst.dtype)
        if target == "cuda" and src.device:
            fills = xp.asarray(fills)
        for s, d, p, sl in items:
            if src.dtype == np.float16:
                s, d = s.view(xp.uint16), d.view(xp.uint16)
            launch_twin(kern, target, src, d.shape, (s, d, p, fills[sl]))
        return
    if dst.dtype == np.uint8:
        lo, hi, rnd = 0.0, 255.0, True
    else:
        lo, hi, rnd = -np.inf, np.inf, False
    for s, d, p, _ in items:
        if s.dtype == np.float16:
            s = s.astype(np.float32)
        tmp = d if d.dtype != np.float16 else xp.empty(d.shape, np.float32)
        launch_twin(kern, target, src, tmp.shape, (s, tmp, p, lo, hi, rnd))
        if tmp is not d:
            d[...] = tmp.astype(np.float16)


def launch_twin(kern, target, src, shape, args):
    """Launch a Numba twin ``kern`` on ``target``: the njit function on the CPU, or the CUDA
    kernel with one thread per pixel of ``shape`` (N, H, W, ...) on the current stream (the
    CUDA simulator for NumPy arrays)."""
    if target == "cpu":
        kern(*args)
        return
    n, h, w = shape[:3]
    block = (32, 8, 1)
    grid = ((w + 31) // 32, (h + 7) // 8, n)
    if not src.device:  # the CUDA simulator, on NumPy arrays (it needs contiguous buffers)
        cargs = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in args]
        kern[grid, block](*cargs)
        if cargs[1] is not args[1]:
            args[1][...] = cargs[1]
        return
    from numba import cuda

    from gpuaug._stream import stream_ptr

    cp = cupy_module()
    nb_args = [cuda.as_cuda_array(a, sync=False) if isinstance(a, cp.ndarray) else a for a in args]
    kern[grid, block, cuda.external_stream(stream_ptr(None))](*nb_args)
