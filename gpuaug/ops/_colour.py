"""What the colour ops share: value ranges, the per-sample grayscale mean (contrast,
color_jitter), and the CUDA C launcher that picks the packed fast path.

Value ranges follow torchvision: uint8 images hold [0, 255], float16/float32 images [0, 1].
Every op's parameter matrix ends with the dtype's maximum (255 or 1), which the Numba twins
read (the CUDA C kernels know it from their element type); ops with a grayscale mean get it
as one more column on the Numba backends and as per-block partial sums on the CUDA C one.

CUDA C path (``backend="cuda"``): one launch of ``<name>_packed`` when every sample of the
input and output is packed HWC and both are 16-byte aligned at a common pixel (every
contiguous NHWC batch CuPy allocates, varshape lists of contiguous images too): each thread
moves 16 bytes per channel (uint8 RGB: 16 pixels in three 16-byte loads and stores).
Anything else (NCHW, strided views) runs ``<name>``, one thread per pixel through the
descriptor tables. Ops with a mean first run ``gpuaug_gray_sum[_packed]`` (up to 32 blocks
per sample, partial sums in double, fixed order, so repeated calls give identical results);
packed uint8 batches of enough samples run ``<name>_fused`` instead, the mean and the map in
one launch with a block per sample (the same mean bit for bit: see :func:`plan`).
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

import numpy as np

import gpuaug._plan as _plan
from gpuaug._batch import Batch, descriptor_table, layout_key, memo_plan
from gpuaug._layout import packed_layout
from gpuaug._params import column_stack, count_nonzero, host_rows, per_sample
from gpuaug._run import Kernels, run
from gpuaug._stream import on_device  # at import: a from-import per call costs ~0.4 us
from gpuaug._util import cupy_module, dtype_max, dtype_name

BLOCK = 256
MAX_PARTS = 32  # partial sums per sample: one warp adds them up in the per-pixel kernel
#: ``<op>_fused`` (colour.cuh fused_mean_map: the mean and the map in one launch, a block of
#: FUSED_THREADS per sample) for packed uint8 batches of at least FUSED_MIN_N samples (and at
#: least one per SM for color_jitter, see plan()) of at most FUSED_MAX_BYTES each; below that, or
#: for other dtypes, the partial sums' launch first.
FUSED_THREADS = 512
FUSED_MIN_N = 16
FUSED_MAX_BYTES = 1 << 20


def maxv_column(b: Batch):
    """The parameter column holding the dtype's maximum (the Numba twins' value range):
    read-only, one per (N, dtype) (apply() only copies it into the parameter matrix)."""
    key = (b.n, b.dtype.char)
    got = _MAXV.get(key)
    if got is None:
        if len(_MAXV) >= 64:
            _MAXV.clear()
        got = _MAXV[key] = np.full(b.n, dtype_max(b.dtype))
        got.flags.writeable = False
    return got


_MAXV: dict = {}


_sm_count: dict = {}


def _multiprocessors(cp):
    dev = cp.cuda.runtime.getDevice()
    if dev not in _sm_count:
        _sm_count[dev] = cp.cuda.runtime.getDeviceProperties(dev)["multiProcessorCount"]
    return _sm_count[dev]


def apply_one(b: Batch, kernels: Kernels, value, name, limits, rows, *, out, backend, stream, mean=None,
              skip_unit=False):
    """:func:`apply` for an op of one per-sample value (brightness's factor, hue's shift...)
    and the max-value column: a NumPy array of N numbers goes as :func:`host_rows`' whole
    matrix (one checked pass, no column stack), anything else through :func:`per_sample`
    (its checks and messages). ``limits``: the value's range (``OpSpec.limits``); ``rows``:
    the same as a :class:`gpuaug._params.RowLimits`. ``skip_unit``: host values all 1.0 mean
    the sample mean is not used (contrast): ``skip_mean`` then."""
    m = host_rows((value,), b.n, rows, maxv_column(b))
    if m is not None:
        cols, v = [m], m[:, 0]
    else:
        v = per_sample(value, b.n, name, **limits, device=b.device)
        cols = [v, maxv_column(b)]
    skip = skip_unit and isinstance(v, np.ndarray) and not count_nonzero(v != 1)
    return apply(b, kernels, cols, out=out, backend=backend, stream=stream, mean=mean, skip_mean=skip)


def apply(b: Batch, kernels: Kernels, cols, *, out, backend, stream, channels=None, mean=None,
          skip_mean=False):
    """Run a colour op; return its result.

    ``cols``: per-sample parameter columns (the last one being :func:`maxv_column`), or one
    (N, P) float64 NumPy matrix of them all that the op made for this call (it is used as it is).
    ``mean``: None, or ``(bright, (numba module, gray function))`` for ops that blend with
    the sample's mean grayscale: ``bright`` True when params column 0 (brightness) applies
    before the grayscale (color_jitter). ``channels``: the output's, for ops that choose it
    (their kernels then take it as a third template argument). ``skip_mean``: the op knows
    the mean is not used (e.g. every contrast factor is 1): no reduction runs, the mean is 0.
    """
    if not b.device:
        params = column_stack(cols, b.n)
        if mean is not None:
            target = "cuda" if backend == "numba" else "cpu"
            means = np.zeros(b.n) if skip_mean else _numba_means(b, params, mean[1], target)
            params = np.concatenate([params, means[:, None]], axis=1)
        return run(b, kernels, params, shapes=b.shapes, out=out, backend=backend, stream=stream,
                   channels=channels)
    whole = len(cols) == 1 and type(cols[0]) is np.ndarray and cols[0].ndim == 2
    planned = backend == "cuda" and stream is None and not b.varshape  # run()'s launch plans (gpuaug._plan)
    if planned and whole:  # host rows: the replay first, outside the device scope (it checks the device)
        m = None if skip_mean else mean
        got = _plan.launch(b, kernels, cols[0], (), ("colour", channels, m),
                           lambda: _run_cuda_on_device(b, kernels, cols[0], out, channels, m), out)
        if got is not None:
            return got
    with on_device(b.device_id(), stream):
        if whole:
            params = cols[0]  # the op's own matrix (host_rows'), already whole: no copy
        else:
            params = column_stack(cols, b.n)
        if backend == "numba":
            cp = cupy_module()
            if mean is not None:
                means = cp.zeros(b.n) if skip_mean else _numba_means(b, params, mean[1], "cuda")
                params = cp.concatenate([cp.asarray(params, dtype=cp.float64), means[:, None]], axis=1)
            return run(b, kernels, params, shapes=b.shapes, out=out, backend=backend, stream=stream,
                       channels=channels)
        m = None if skip_mean else mean
        if planned and not whole:  # (host rows tried their plan above)
            got = _plan.launch(b, kernels, params, (), ("colour", channels, m),
                               lambda: _run_cuda(b, kernels, params, out, channels, m), out)
            if got is not None:
                return got
        return _run_cuda(b, kernels, params, out, channels, m)


def _run_cuda_on_device(b, kernels, params, out, channels, mean):
    """_run_cuda on the batch's device (a plan being recorded outside apply's device scope)."""
    with on_device(b.device_id(), None):
        return _run_cuda(b, kernels, params, out, channels, mean)


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a colour op: ``name<...>`` from the op's .cu file on grid x block.

    ``kind``: "sum" (gpuaug_gray_sum*, args src, params, P, n, bcol, partials, nparts),
    "map" (the op's kernel, args src, dst, params, P, n, partials, nparts) or "fused" (the
    op's mean and map, args src, dst, params, P, n, bcol).
    """

    kind: str
    name: str
    grid: tuple
    block: tuple


def plan(src_t, dst_t, dtype_name, ci, co, n, mean_bright, sms, with_co=False, fused=(0, 0)):
    """The launches for one call (``mean_bright``: None for ops without a mean, or whose mean
    is not needed: with no partial sums the kernels' mean is 0) and the number of partial
    sums per sample. ``with_co``: the kernels take the output channel
    count as a third template argument (grayscale). ``fused``: (least samples, most bytes per
    sample) for the one-launch ``{op}_fused`` kernel of packed uint8 batches (0, 0: never; its
    mean is bit for bit the partial sums' one, see colour.cuh fused_mean_map). Pure host logic
    (tests replay it on an emulator)."""
    from gpuaug.kernels._cuda import grid_2d, kernel_name

    esize = np.dtype(dtype_name).itemsize
    template = (dtype_name, ci, co) if with_co else (dtype_name, ci)
    launches, nparts = [], 0
    # color_jitter (mean_bright: the brightness first) is compute-bound per pixel: one block per
    # sample loses to the partial sums' two launches (whose map spreads over every SM) until the
    # samples fill the SMs (H200, 32 x 224 x 224: 25.5 against 14.9 us of device time)
    least = max(fused[0], sms) if mean_bright else fused[0]
    if (mean_bright is not None and dtype_name == "uint8" and ci == co and not with_co and (ci >= 3 or not mean_bright)
            and fused[0] and n >= least and int((src_t[:, 1] * src_t[:, 2]).max()) * ci <= fused[1]
            and packed_layout(src_t, dst_t, ci, co, esize)[0]):
        return [Launch("fused", kernel_name("{op}_fused", dtype_name, ci), (min(n, 65535), 1, 1),
                       (FUSED_THREADS, 1, 1))], 0
    if mean_bright is not None:
        ok, items = packed_layout(src_t, None, ci, ci, esize)
        if not ok:
            items = int((src_t[:, 1] * src_t[:, 2]).max())
        nparts = max(1, min(MAX_PARTS, math.ceil(4 * sms / n), math.ceil(items / BLOCK)))
        name = "gpuaug_gray_sum_packed" if ok else "gpuaug_gray_sum"
        launches.append(Launch("sum", kernel_name(name, dtype_name, ci, int(mean_bright)),
                               (nparts, min(n, 65535), 1), (BLOCK, 1, 1)))
    ok, items = packed_layout(src_t, dst_t, ci, co, esize)
    if ok:
        launches.append(Launch("map", kernel_name("{op}_packed", *template),
                               (math.ceil(items / BLOCK), min(n, 65535), 1), (BLOCK, 1, 1)))
    else:
        grid, block = grid_2d(int(dst_t[:, 1].max()), int(dst_t[:, 2].max()), n)
        launches.append(Launch("map", kernel_name("{op}", *template), grid, block))
    return launches, nparts


def _run_cuda(b: Batch, kernels: Kernels, params, out, channels, mean):
    from gpuaug._run import device_params
    from gpuaug.kernels._cuda import get_function
    cp = cupy_module()

    n = b.n
    result, dst = b.alloc(out, b.shapes, channels=channels)
    src_t, dst_t = descriptor_table(b), descriptor_table(dst)
    src_d, dst_d, par = device_params(params, n, b, dst)
    P, N = np.int32(par.shape[1]), np.int32(n)
    args = (dtype_name(b.dtype), b.channels, dst.channels, n, None if mean is None else mean[0],
            _multiprocessors(cp), channels is not None, (FUSED_MIN_N, FUSED_MAX_BYTES))
    launches, nparts = memo_plan((layout_key(b), layout_key(dst)), args,
                                 lambda: plan(src_t, dst_t, *args))
    partials = cp.empty((n, nparts), cp.float64) if nparts else np.uint64(0)  # a null pointer
    for ln in launches:
        fn = get_function(kernels.cu[0], ln.name.format(op=kernels.cu[1]))
        if ln.kind == "sum":
            fn(ln.grid, ln.block, (src_d, par, P, N, np.int32(0), partials, np.int32(nparts)))
        elif ln.kind == "fused":
            fn(ln.grid, ln.block, (src_d, dst_d, par, P, N, np.int32(0)))
        else:
            fn(ln.grid, ln.block, (src_d, dst_d, par, P, N, partials, np.int32(nparts)))
    return result


def _numba_means(b: Batch, params, gray, target):
    """Per-sample mean of the Numba ``gray`` function ((module, name)) over each image."""
    from gpuaug._run import launch_twin
    from gpuaug.kernels.numba._colour import mean_kernel

    mod = importlib.import_module(f"gpuaug.kernels.numba.{gray[0]}")
    kern = mean_kernel(getattr(mod, gray[1]), target)
    if target == "cpu":  # the fast CPU kernel first, where there is one (kernels/numba/cpu_fast)
        from gpuaug.kernels.numba.cpu_fast import with_fast_path

        kern = with_fast_path(tuple(gray), kern)
    xp = b.xp
    n = b.n
    sums = xp.zeros(n, np.float64)
    if target == "cuda":
        par = xp.asarray(params, dtype=xp.float32)
    else:
        par = np.asarray(params, np.float64)
    items = ([(b.nhwc, slice(None))] if not b.varshape else
             [(b.views[i][None], slice(i, i + 1)) for i in range(n)])
    for s, sl in items:
        if s.dtype == np.float16:
            s = s.astype(np.float32)
        launch_twin(kern, target, b, s.shape, (s, sums[sl], par[sl]))
    hs, ws = b.sizes()
    counts = xp.asarray((hs * ws).astype(np.float64))
    return sums / counts


def colour_kernels(op, channels, *, mean_bright=None, out_channels=None):
    """The op's Kernels: ``gpuaug_<op>`` in ``kernels/<op>.cu`` and the Numba ``<op>_value``;
    ``variants`` lists the fast path and reduction instances for the compile checks."""
    from gpuaug._registry import DTYPES
    from gpuaug.kernels._cuda import kernel_name as name  # NumPy only: no CUDA import

    variants = []
    for d in DTYPES:
        for c in channels:
            for co in (out_channels or (None,)):
                extra = () if co is None else (co,)
                variants.append(name(f"gpuaug_{op}_packed", d, c, *extra))
                if co is not None:
                    variants.append(name(f"gpuaug_{op}", d, c, *extra))
            if mean_bright is not None:
                variants += [name("gpuaug_gray_sum", d, c, int(mean_bright)),
                             name("gpuaug_gray_sum_packed", d, c, int(mean_bright))]
                if d == "uint8" and (c >= 3 or not mean_bright):
                    variants.append(name(f"gpuaug_{op}_fused", d, c))
    return Kernels(cu=(f"{op}.cu", f"gpuaug_{op}"), numba=(op, f"{op}_value"), kind="value",
                   variants=tuple(variants))
