"""``backend="numba"``: gpuaug ops as DALI ``numba_function`` operators, built from the registry.

DALI's ``numba_function`` (``nvidia.dali.plugin.numba.fn.experimental.numba_function``)
compiles a plain Python ``run_fn(out0, in0, ...)`` with fixed dtypes and ranks, and calls
it once per sample (CPU: as an njit function in DALI's thread pool; GPU: as a CUDA kernel
with fixed ``blocks``/``threads_per_block``). It cannot run Python, so the per-sample
parameter maths of an op (rotation matrices, colour means, histograms...) runs before it,
in a small ``python_function`` (the *planner*), and only the per-pixel loop runs in Numba:

1. planner: ``fn.python_function(images, *param nodes)`` calls the op itself with
   ``gpuaug._run.describe``, so the op checks its arguments and builds its per-sample
   parameter matrix exactly as it does standalone, then stops where it would launch. It
   returns per sample: a zero-size uint8 *carrier* of shape ``(0, h, w, c)`` (the output's
   size, which DALI's ``setup_fn`` can read: setup functions see input shapes only), the
   parameter row ``(1, P)`` and the fill values ``(1, C)``;
2. ``numba_function(carrier, images[None], params, fills)``: the op's Numba twin (the
   ``@dual`` MAP/VALUE function of ``gpuaug.kernels.numba``) inside a generic driver
   loop, one generated ``run_fn`` per (op, dtypes, layouts, target);
3. ``squeeze`` + ``reshape(layout=...)``: back to one HWC (or CHW) sample.

What cannot go this way runs the Numba twin in ``python_function`` instead, with a
warning once per op and reason (see :func:`numba_support`):

- ops whose Numba kernels choose their own launch shape (filters, noise: they do not
  go through ``gpuaug._run.run``);
- float16 data (DALI 2.4's numba_function refuses float16);
- GPU data where DALI refuses the GPU mode (DALI 2.4 on CUDA 13: "Unsupported CUDA toolkit
  version"): there the Numba CUDA twin runs inside ``python_function(device="gpu")`` on
  DALI's stream.
"""
from __future__ import annotations

import functools
import textwrap
import warnings

import numpy as np

from gpuaug._registry import REGISTRY

from ._callback import _channels, batch_view, call_op, op_kwargs, wrap_error
from ._nodes import python_function_node
from ._steps import SAMPLE_LAYOUT, op_error

#: Launch shape of the GPU run function, per sample (it strides over larger images).
THREADS = (32, 8, 1)
BLOCKS = (8, 32, 1)

_warned: set = set()


def warn_once(key, message):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=5)


def capture(func, x, kw):
    """The :class:`gpuaug._run.Launch` that ``func(x, **kw)`` would make (its parameter
    matrix, output shapes and fills: nothing launched), or None when the op does not go
    through ``gpuaug._run.run`` (then it ran for real)."""
    from gpuaug._run import describe

    return describe(func, x, **kw)


@functools.lru_cache(maxsize=None)
def _probe(op):
    """None when ``op`` runs through ``gpuaug._run.run`` with a per-pixel copy/value twin (what
    numba_function can run), else why not; read from the registry (``kernels``), nothing runs."""
    spec = REGISTRY[op]
    kernels = spec.kernels
    if kernels is None or kernels.kind not in ("copy", "value"):
        return f"its Numba twin is of kind {getattr(kernels, 'kind', None)!r}, not a per-pixel map"
    if kernels.numba[1] == "kernel":  # gpuaug.ops._launch.run_custom's convention: kernel(target)
        return ("its Numba kernel picks its own launch shape (filters and noise do not go through "
                "gpuaug._run.run)")
    return None


@functools.lru_cache(maxsize=None)
def gpu_refusal():
    """None when DALI accepts numba_function on the GPU here, else DALI's reason."""
    try:
        from nvidia.dali.plugin.numba import NumbaFunction

        NumbaFunction._check_minimal_numba_version()
        NumbaFunction._check_cuda_compatibility()
    except Exception as e:  # noqa: BLE001
        return f"DALI refuses numba_function on the GPU here ({type(e).__name__}: {e})"
    return None


def numba_support(device="cpu"):
    """``{op: None or reason}``: which ops run as DALI numba_function operators on ``device``
    ("cpu" or "gpu"), and why the others run their Numba twin inside python_function."""
    out = {}
    for op in REGISTRY:
        why = _probe(op)
        if why is None and device == "gpu":
            why = gpu_refusal()
        out[op] = why
    return out


def _dali_type(dtype):
    from nvidia.dali import types

    return {np.dtype(np.uint8): types.UINT8, np.dtype(np.float32): types.FLOAT,
            np.dtype(np.float64): types.FLOAT64}[np.dtype(dtype)]


def _out_dtype(step, in_dt):
    """Output dtype: the op's ``dtype`` choice parameter when it has one, else the input's."""
    for p in step.spec.params:
        if p.name == "dtype" and p.kind == "choice":
            return np.dtype(step.consts.get("dtype", p.default))
    return in_dt


def numba_node(step, data, nodes, input_dtype):
    """The DataNode of ``step`` run through DALI's numba_function (see module docstring)."""

    op, device = step.op, data.device
    try:
        in_dt = np.dtype(input_dtype)
    except TypeError:
        in_dt = None
    if in_dt is None or in_dt.name not in step.spec.dtypes:
        raise op_error(op, f"input_dtype: got {input_dtype!r}; expected one of {', '.join(step.spec.dtypes)} "
                           "(the images' dtype: numba_function compiles for fixed types)")
    out_dt = _out_dtype(step, in_dt)
    why = _probe(op)
    if why is None and np.dtype(np.float16) in (in_dt, out_dt):
        why = "DALI's numba_function does not take float16"
    if why is None and device == "gpu":
        why = gpu_refusal()
    if why is not None:
        where = ("the Numba CUDA twin inside python_function on DALI's stream" if device == "gpu" else
                 "the Numba njit twin inside python_function")
        warn_once((op, device, why), f"gpuaug.dali.{op}: backend='numba' runs {where}: {why}")
        return python_function_node([step], data, nodes, "numba" if device == "gpu" else "cpu")

    from nvidia.dali import fn

    gpu = device == "gpu"
    par_dt = np.dtype(np.float32 if gpu else np.float64)
    if gpu:
        nodes = [nd.gpu() for nd in nodes]
    planner = Planner(step, device, in_dt, out_dt, par_dt)
    carrier, params, fills = fn.python_function(data, *nodes, function=planner, batch_processing=True,
                                                device=device, num_outputs=3)
    x4 = fn.expand_dims(data, axes=[0])
    operator = numba_operator(op, device, step.spec.kernels.kind, step.layout, step.out_layout, in_dt.name,
                              out_dt.name, _device_id() if gpu else None)
    out = fn.squeeze(operator(carrier, x4, params, fills), axes=[0])
    return fn.reshape(out, layout=SAMPLE_LAYOUT[step.out_layout])


def _device_id():
    from nvidia.dali.pipeline import Pipeline

    pipe = Pipeline.current()
    return getattr(pipe, "device_id", None) if pipe is not None else None


@functools.lru_cache(maxsize=None)
def numba_operator(op, device, kind, in_layout, out_layout, in_dtype, out_dtype, device_id=None):
    """DALI's NumbaFunction operator (ops API) for one op variant, made once per process:
    DALI compiles its wrappers for every instance (seconds each), and an instance can be
    called in any number of pipelines. ``device_id``: the GPU it compiles for."""
    from nvidia.dali import types
    from nvidia.dali.plugin.numba import NumbaFunction

    gpu = device == "gpu"
    par_dt = np.dtype(np.float32 if gpu else np.float64)
    run_fn = run_function(op, "cuda" if gpu else "cpu", kind, in_layout, out_layout, in_dtype, out_dtype)
    kw = dict(blocks=list(BLOCKS), threads_per_block=list(THREADS)) if gpu else {}
    return NumbaFunction(run_fn=run_fn, setup_fn=setup_function(out_layout), out_types=[_dali_type(out_dtype)],
                         in_types=[types.UINT8, _dali_type(in_dtype), _dali_type(par_dt), _dali_type(out_dtype)],
                         outs_ndim=[4], ins_ndim=[4, 4, 2, 2], device=device, **kw)


class Planner:
    """The planner ``python_function`` (see module docstring): ``(images, *param_lists) ->
    (carriers, param rows, fill rows)``."""

    def __init__(self, step, device, in_dt, out_dt, par_dt):
        self.step, self.device = step, device
        self.in_dt, self.out_dt, self.par_dt = in_dt, out_dt, par_dt
        self.calls = 0

    def __call__(self, images, *lists):
        step = self.step
        try:
            xp = np
            if self.device == "gpu":
                import cupy as xp
            x = batch_view(images, xp, step.op, step.layout)
            if images[0].dtype != self.in_dt:
                raise op_error(step.op, f"input_dtype: the images are {images[0].dtype} but the operator was "
                                        f"built for {self.in_dt}; pass input_dtype={images[0].dtype.name!r}")
            n = len(images)
            kw = op_kwargs(step, x, lists, n, xp, self.calls)
            self.calls += 1
            backend = "numba" if self.device == "gpu" else "cpu"
            changes = step.spec.changes_shape
            plan = capture(lambda x, **k: call_op(step.spec.func, x, k, changes), x,
                           dict(kw, layout=step.layout, backend=backend))
            if plan is None:
                raise op_error(step.op, "the op ran without planning a launch (no per-pixel Numba map)",
                               RuntimeError)
            return self._outputs(plan, x, n, xp)
        except Exception as e:  # noqa: BLE001 - re-raised, naming the op
            raise wrap_error(step.op, e) from e

    def _outputs(self, plan, x, n, xp):
        from gpuaug._run import fill_values

        step = self.step
        odt = np.dtype(plan.dtype) if plan.dtype is not None else self.in_dt
        lay = plan.layout or step.layout
        if odt != self.out_dt or lay != step.out_layout:
            raise op_error(step.op, f"planned output {odt}/{lay} differs from the operator's "
                                    f"{self.out_dt}/{step.out_layout}", RuntimeError)
        co = plan.channels or _channels(x, step.layout)
        carriers = [xp.zeros((0, int(h), int(w), co), np.uint8) for h, w in plan.shapes]
        params = xp.ascontiguousarray(xp.asarray(plan.params, dtype=self.par_dt).reshape(n, -1))
        fills = fill_values(plan.fill if plan.fill is not None else np.zeros(n), n, co, odt)
        fills = xp.asarray(np.ascontiguousarray(fills))
        return carriers, [params[i:i + 1] for i in range(n)], [fills[i:i + 1] for i in range(n)]


_TRANSPOSE = {"NHWC": "{a}", "NCHW": "{a}.transpose((0, 2, 3, 1))"}

_CPU_SRC = """
def run_fn(out0, in0, in1, in2, in3):
    KERNEL({src}, {dst}, in2, {tail})
"""

_GPU_SRC = """
def run_fn(out0, in0, in1, in2, in3):
    src = {src}
    dst = {dst}
    p = in2[0]
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    sh = src.shape[1]
    sw = src.shape[2]
    nc = dst.shape[3]
    for y in range(y0, dst.shape[1], sy):
        for x in range(x0, dst.shape[2], sx):
{body}
"""

_GPU_COPY = """
            yy, xx = MAP(y, x, sh, sw, p)
            if yy >= 0:
                for c in range(nc):
                    dst[0, y, x, c] = src[0, yy, xx, c]
            else:
                for c in range(nc):
                    dst[0, y, x, c] = in3[0, c]
"""

_GPU_VALUE = """
            for c in range(nc):
                dst[0, y, x, c] = STORE(VALUE(src, 0, y, x, c, p), LO, HI, RND)
"""


@functools.lru_cache(maxsize=None)
def run_function(op, target, kind, in_layout, out_layout, in_dtype, out_dtype):
    """The plain-Python ``run_fn(out0, carrier, src, params, fills)`` that DALI compiles for one
    op, target ("cpu"/"cuda"), twin kind ("copy"/"value"), layouts and dtypes.

    Assumes the layout of :func:`numba_node`: 4-D arrays with one sample (``(1, h, w, c)``,
    or ``(1, c, h, w)`` for NCHW, viewed as NHWC by a transpose), params ``(1, P)`` and
    fills ``(1, C)``. CPU: calls the op's driver loop (:func:`gpuaug._twins.cpu_loop`, compiled
    without ``parallel``: DALI already runs samples on its own threads). GPU: a grid-stride
    loop over the output pixels calling the twin's ``@dual`` device function.
    """
    from gpuaug import _twins

    kernels = REGISTRY[op].kernels
    lo, hi, rnd = (0.0, 255.0, True) if out_dtype == "uint8" else (-np.inf, np.inf, False)
    src = _TRANSPOSE[in_layout].format(a="in1")
    dst = _TRANSPOSE[out_layout].format(a="out0")
    g = {"np": np, "LO": lo, "HI": hi, "RND": rnd}
    if target == "cpu":
        g["KERNEL"] = _twins.cpu_loop(kernels)
        code = _CPU_SRC.format(src=src, dst=dst, tail="in3" if kind == "copy" else "LO, HI, RND")
    else:
        from numba import cuda

        g["cuda"] = cuda
        if kind == "copy":
            g["MAP"] = _twins.device_function(kernels, "cuda")
        else:
            g["VALUE"] = _twins.device_function(kernels, "cuda")
            g["STORE"] = _twins.store_function("cuda")
        body = textwrap.indent(textwrap.dedent(_GPU_COPY if kind == "copy" else _GPU_VALUE), " " * 12)
        code = _GPU_SRC.format(src=src, dst=dst, body=body)
    exec(compile(code, f"<gpuaug.dali numba run_fn {op} {target} {in_dtype}->{out_dtype}>", "exec"), g)  # noqa: S102
    fn = g["run_fn"]
    fn.__qualname__ = fn.__name__ = f"gpuaug_{op}_{target}_{in_dtype}_{out_dtype}"
    return fn


def _setup_nhwc(outs, ins):
    for i in range(len(outs[0])):
        s = ins[0][i]
        o = outs[0][i]
        o[0] = 1
        o[1] = s[1]
        o[2] = s[2]
        o[3] = s[3]


def _setup_nchw(outs, ins):
    for i in range(len(outs[0])):
        s = ins[0][i]
        o = outs[0][i]
        o[0] = 1
        o[1] = s[3]
        o[2] = s[1]
        o[3] = s[2]


def setup_function(out_layout):
    """DALI setup function: output i has the shape the planner's carrier (input 0) carries.

    (DALI 2.4's setup wrapper exposes only the first ``num_outputs`` input shapes, which is
    why the carrier comes first.)"""
    return _setup_nhwc if out_layout == "NHWC" else _setup_nchw
