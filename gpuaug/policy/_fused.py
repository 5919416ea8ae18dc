"""One fused stage of a Compose: parameter rows from the sampled parameters, the output, the launch.

A stage (planned in :mod:`gpuaug.policy.compose`) holds a run of geometric transforms, a run
of colour transforms (before or after the geometry) and the write transforms. Here it becomes
one per-sample parameter row (layout: kernels/fused.cuh) and:

- ``backend="cuda"``: the CUDA C kernel ``gpuaug_fused_dense`` (dense NHWC source, dense NHWC
  or NCHW output) or ``gpuaug_fused`` (descriptor tables: anything else), specialised at
  compile time on dtypes, channels, geometry kind, border and the colour program; before it,
  when the program has contrast, one reduction launch for the per-sample mean
  (``gpuaug_gray_sum``, color_jitter's own, when the jitter is the program's first step, else
  ``gpuaug_fused_sum``);
- ``backend="numba"`` / ``"cpu"``: kernels/numba/fused.py (one kernel for every policy, the
  stage's shape passed as data).
"""
from __future__ import annotations

import functools

import math
from dataclasses import dataclass, field

import numpy as np

from gpuaug._batch import Batch, descriptor_table, layout_key, max_size, memo_plan, same_size
from gpuaug._util import cupy_module
from gpuaug.policy import transforms as TF
from gpuaug.policy._args import channels_of

P_INTERP, P_MAP, P_FILL, P_SCALE, P_BIAS, P_IN, P_COLOUR = 0, 2, 11, 15, 19, 23, 24
MAX_STEPS = 15  # 4-bit step codes in a 64-bit template argument, 0 ends the program
DENSE_ROWS = 4  # GPUAUG_FUSED_ROWS in fused.cu
MAX_PARTS = 32


@dataclass
class StageSpec:
    """What the planner decided for one fused stage (no parameter values)."""

    geometry: list = field(default_factory=list)   # policy indices
    colour: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    pre: bool = False           # colour before geometry: the program runs on the source taps
    in_dtype: str = "uint8"     # storage dtype of the stage's input
    sem: str = "uint8"          # the dtype whose value range the geometry and colour work in
    in_scale: float = 1.0       # sem units per input unit (a leading ToDtype)
    folded: list = field(default_factory=list)     # leading ToDtype / ToLayout folded in
    layout: str | None = None   # output layout set by a ToLayout (None: the writes' or the input's)
    contrast: bool = False

    def empty(self):
        return not (self.geometry or self.colour or self.writes or self.folded)

    def __getstate__(self):  # pickles (a Compose's plans) leave the memos out: rebuilt on use
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


@functools.lru_cache(maxsize=64)
def uniform_sizes(n, h, w):
    """(n, 2) int64 sizes (h, w) of a uniform batch: a read-only broadcast, memoised (~3 us a
    call to build; every reader copies or only reads it)."""
    return np.broadcast_to(np.asarray((h, w), np.int64), (n, 2))


# the adjugate's entries (rows of 3x3 a..i = 0..8): e*i - f*h, c*h - b*i, b*f - c*e, f*g - d*i,
# a*i - c*g, c*d - a*f, d*h - e*g, b*g - a*h, a*e - b*d
_COFACTOR_TAKE = np.array([[4, 2, 1, 5, 0, 2, 3, 1, 0], [8, 7, 5, 6, 8, 3, 7, 6, 4],
                           [5, 1, 2, 3, 2, 0, 4, 0, 1], [7, 8, 4, 8, 6, 5, 6, 7, 3]], np.intp)


def _inverse(m):
    """(n, 3, 3) -> (n, 9) inverses (adjugate / determinant) and the determinants.

    The nine entries are taken as contiguous rows first (arithmetic on the strided columns of
    ``m`` cost ~50 us per call for n = 256); the same operations in the same order as before."""
    inv, det = _inverse_cols(np.ascontiguousarray(m.reshape(-1, 9).T))
    return inv.T, det


def _inverse_cols(e9):
    """:func:`_inverse` of maps given as a (9, n) C-contiguous array of their entries (row k:
    entry k of every map, a..i): (the (9, n) inverses, the (n,) determinants)."""
    # cofactor k = t[0, k] * t[1, k] - t[2, k] * t[3, k] for all nine at once (one gather and
    # three ufuncs instead of 27 ufuncs on n-vectors); the same products and differences as
    # the entry-by-entry form, so the same bits (take: fancy indexing's values, ~1 us less)
    t = e9.take(_COFACTOR_TAKE, axis=0)
    inv = t[0] * t[1]
    inv -= t[2] * t[3]
    det = e9[0] * inv[0]
    det += e9[1] * inv[3]
    det += e9[2] * inv[6]
    n = det.shape[0]
    if np.count_nonzero(det) == n and np.count_nonzero(np.isfinite(det)) == n:
        # finite, nonzero divisors: no division raises divide or invalid (quiet NaNs divide
        # silently), so errstate's context (~1.2 us) has nothing to silence
        inv /= det
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            inv /= det
    return inv, det


def _integer_maps(a):
    """Per sample: the destination -> source map sends pixel centres onto pixel centres (a signed
    permutation of the axes plus a whole-pixel shift: flips, quarter turns, integer crops), so
    nearest sampling reproduces it exactly."""
    return _integer_cols(a.T)


def _integer_cols(c):
    """:func:`_integer_maps` of maps given as (9, n) entries (row k: entry k of every map)."""
    c0 = c[0]
    if not np.count_nonzero(c0 == np.rint(c0)):  # (the usual rotated / scaled maps: one test, not six)
        return np.zeros(c.shape[1], bool)
    v = c[:6]
    ok = (v == np.rint(v)).all(axis=0)  # integer entries (rint: np.round's values, without its wrapper) ...
    if not ok.any():
        return ok
    a0, a1, a3, a4 = np.abs(c[0]), np.abs(c[1]), np.abs(c[3]), np.abs(c[4])
    # ... one +-1 per row of the linear part (integers with |row| sums of 1), no perspective
    ok &= (a0 + a1 == 1) & (a3 + a4 == 1) & (a0 + a3 == 1)
    return ok & (c[6] == 0) & (c[7] == 0) & (c[8] == 1)


def _gray_matrix(on):
    n = len(on)
    m = np.zeros((n, 3, 4))
    m[:, :, :3] = np.eye(3)
    m[on, :, :3] = np.asarray(TF.GRAY_WEIGHTS)[None, None, :]
    return m


def colour_program(transforms, tparams, spec, channels):
    """(codes, blocks, jidx): the colour program's step codes, their (n, k) parameter blocks and
    the index of the step whose contrast needs the per-image mean (-1: none).

    With float semantics, runs of linear steps (grayscale, channel permutations) are multiplied
    into one 3x4 matrix on the host (exact there: nothing rounds or clamps between them); with
    uint8 semantics each stays a step, rounded to the uint8 grid as a chain of ops would store it."""
    steps = []  # (code, block, needs the mean)
    for i in spec.colour:
        t = transforms[i]
        steps += [(code, block, t.contrast and code == TF.OP_JITTER) for code, block in t.steps(tparams[i], channels)]
    if spec.sem != "uint8":
        merged = []
        for code, block, mean in steps:
            if code in (TF.OP_GRAY, TF.OP_AFFINE):
                m = _gray_matrix(block[:, 0] != 0) if code == TF.OP_GRAY else block.reshape(-1, 3, 4)
                if merged and merged[-1][0] == TF.OP_AFFINE:
                    prev = merged[-1][1].reshape(-1, 3, 4)
                    full = np.concatenate([prev, np.tile([[[0.0, 0.0, 0.0, 1.0]]], (len(prev), 1, 1))], axis=1)
                    merged[-1] = (TF.OP_AFFINE, np.matmul(m, full).reshape(-1, 12), False)
                    continue
                merged.append((TF.OP_AFFINE, m.reshape(-1, 12), False))
                continue
            merged.append((code, block, mean))
        steps = merged
    if len(steps) > MAX_STEPS:
        raise ValueError(f"transforms: a fused stage holds at most {MAX_STEPS} colour steps; got {len(steps)}")
    jidx = -1
    for k, st in enumerate(steps):
        if st[2]:
            jidx = k
            break
    return [st[0] for st in steps], [st[1] for st in steps], jidx


def prog_value(codes):
    return sum(int(c) << (4 * k) for k, c in enumerate(codes))


@dataclass
class Built:
    """A stage ready to launch."""

    rows: np.ndarray        # (n, P) float64
    shapes: list            # output (h, w) per sample
    codes: list
    geo: int                # 0 none, 1 affine, 2 perspective
    border: int             # 0 constant, 1 replicate
    out_dtype: str
    out_layout: str
    jidx: int               # index of the contrast JITTER step, -1 for none
    maps: object = None     # (n, 3, 3) composed source -> destination maps (None: no geometry), what targets follow


def build(spec: StageSpec, transforms, tparams, b: Batch, layout):
    """The stage's parameter rows and output description for batch ``b`` (in ``layout``).

    Everything that does not depend on the drawn parameters (the output shapes, the sizes
    each geometry transform sees, geometry kind, border, fill, in_scale and the write's scale
    and bias columns) is worked out once per stage, batch sizes, channels and layout by
    :func:`_build_full` and kept on ``spec`` (a :class:`_Template`); later calls compute only
    the drawn columns (:func:`_build_fast`): the same values, ~6 us less per call."""
    n, c = b.n, b.channels
    key = (layout, c, n, tuple(b.shapes)) if b.varshape else (layout, c, n, b.nhwc.shape[1], b.nhwc.shape[2])
    memo = spec.__dict__.setdefault("_build_memo", {})
    tpl = memo.get(key)
    if tpl is not None and (tpl.seen is transforms or (tpl.count == len(transforms)
                                                    and all(transforms[i] is t for i, t in tpl.who))):
        built = _build_fast(tpl, spec, transforms, tparams, n, c)
        if built is not None:
            return built
    built, tpl = _build_full(spec, transforms, tparams, b, layout)
    if type(transforms) is tuple:  # (Compose's: a tuple it never replaces)
        tpl.seen = transforms
    if len(memo) >= 64:  # varshape batches of ever new sizes: keep the memo small
        memo.clear()
    memo[key] = tpl
    return built


@dataclass
class _Template:
    """What :func:`build` keeps per stage and batch geometry (see there)."""

    count: int              # len(transforms) of the policy
    who: tuple              # ((policy index, transform), ...) of the stage: the memo's identity check
    base: np.ndarray        # (n, P) rows with the constant columns set, the drawn ones 0
    sizes_in: tuple         # the sizes each geometry transform of the stage sees
    bilinear: bool
    shapes: object          # Built.shapes (Same, or a list of (h, w) for varshape)
    geo: int
    border: int
    out_dtype: str
    out_layout: str
    #: the tuple of transforms the template was made from (an identity check, ~1 us less than
    #: ``who``'s per-transform one): the same tuple holds the same transforms
    seen: tuple = None


def _build_fast(tpl: _Template, spec: StageSpec, transforms, tparams, n, c):
    """:func:`_build_full`'s Built from a template (None when the colour program's width
    changed, which the caller then builds afresh)."""
    codes, blocks, jidx = colour_program(transforms, tparams, spec, c)
    widths = [_width(bl) for bl in blocks]
    if P_COLOUR + sum(widths) != tpl.base.shape[1]:
        return None
    rows = tpl.base.copy()
    m = None
    if spec.geometry:
        for i, sizes in zip(spec.geometry, tpl.sizes_in):
            mi = transforms[i].matrices(tparams[i], sizes)
            m = mi if m is None else np.matmul(mi, m)
        inv = _checked_inverse_cols(np.ascontiguousarray(m.reshape(-1, 9).T))
        rows[:, P_MAP:P_MAP + 9] = inv.T
        if tpl.bilinear:  # (else the column stays 0: nearest); bools store as 1.0 / 0.0
            c0 = inv[0]
            if np.count_nonzero(c0 == np.rint(c0)):
                rows[:, P_INTERP] = ~_integer_cols(inv)
            else:  # no integer map (_integer_cols' first test): bilinear everywhere
                rows[:, P_INTERP] = 1.0
    o = P_COLOUR
    for bl, wd in zip(blocks, widths):
        rows[:, o:o + wd] = np.asarray(bl, np.float64).reshape(n, wd)
        o += wd
    shapes = list(tpl.shapes) if isinstance(tpl.shapes, list) else tpl.shapes
    return Built(rows, shapes, codes, tpl.geo, tpl.border, tpl.out_dtype, tpl.out_layout, jidx, m)


def _width(bl):
    """A colour block's parameter count: np.shape(bl)[1] for 2-D blocks, else 1 (the steps'
    float64 arrays without np.shape's and np.ndim's wrappers)."""
    if type(bl) is np.ndarray:
        return bl.shape[1] if bl.ndim == 2 else 1
    return np.shape(bl)[1] if np.ndim(bl) == 2 else 1


def _checked_inverse(m):
    return _checked_inverse_cols(np.ascontiguousarray(m.reshape(-1, 9).T)).T


def _checked_inverse_cols(e9):
    inv, det = _inverse_cols(e9)
    # (a zero determinant makes its row of inv all inf or NaN: isfinite alone says it)
    if np.count_nonzero(np.isfinite(inv)) != inv.size:  # (.all()'s wrapper: ~1 us more)
        raise ValueError("transforms: a sampled geometry is singular (e.g. a zero scale); "
                         "check the transforms' ranges")
    return inv


def _build_full(spec: StageSpec, transforms, tparams, b: Batch, layout):
    """(Built, _Template): the stage built from scratch, and what later calls can reuse."""
    n, c = b.n, b.channels
    if b.varshape:
        sizes = np.asarray(b.shapes, np.int64).reshape(n, 2)
    else:
        sizes = uniform_sizes(n, b.nhwc.shape[1], b.nhwc.shape[2])
    codes, blocks, jidx = colour_program(transforms, tparams, spec, c)
    widths = [_width(bl) for bl in blocks]
    rows = np.zeros((n, P_COLOUR + sum(widths)))
    geo, border = 0, 1
    sizes_in, bilinear = [], False
    m = None
    if spec.geometry:
        fill = None
        for i in spec.geometry:
            t = transforms[i]
            sizes_in.append(sizes)
            mi = t.matrices(tparams[i], sizes)
            m = mi if m is None else np.matmul(mi, m)
            sizes = t.out_sizes(sizes)
            bilinear |= t.interpolation == "bilinear"
            geo = max(geo, 2 if t.perspective else 1)
            if t.needs_fill() and fill is None:
                fill = t.fill
        inv = _checked_inverse(m)
        rows[:, P_MAP:P_MAP + 9] = inv
        rows[:, P_INTERP] = np.where(bilinear & ~_integer_maps(inv), 1.0, 0.0)
        if fill is not None:
            border = 0
            rows[:, P_FILL:P_FILL + c] = channels_of("fill", fill, c) / spec.in_scale
    rows[:, P_IN] = spec.in_scale
    o = P_COLOUR
    for bl, wd in zip(blocks, widths):
        rows[:, o:o + wd] = np.asarray(bl, np.float64).reshape(n, wd)
        o += wd
    st = _write_state(spec, transforms, layout, c)
    rows[:, P_SCALE:P_SCALE + c] = st["scale"]
    rows[:, P_BIAS:P_BIAS + c] = st["bias"]
    shapes = [tuple(int(v) for v in s) for s in sizes] if b.varshape else b.uniform(tuple(int(v) for v in sizes[0]))
    built = Built(rows, shapes, codes, geo, border, st["dtype"], st["layout"], jidx, m)
    base = rows.copy()
    base[:, P_INTERP] = 0.0
    base[:, P_MAP:P_MAP + 9] = 0.0
    base[:, P_COLOUR:] = 0.0
    who = tuple((i, transforms[i]) for i in sorted(spec.geometry + spec.colour + spec.writes))
    tpl = _Template(len(transforms), who, base, tuple(sizes_in), bool(bilinear), list(shapes) if b.varshape else shapes,
                    geo, border, st["dtype"], st["layout"])
    return built, tpl


def _write_state(spec: StageSpec, transforms, layout, c):
    """The stage's write state (dtype, layout, per-channel scale and bias) after its write
    transforms, memoised on ``spec`` per (layout, channels, the stage's semantics and layout)
    and the write transforms' identities: the writes draw nothing, so the state is the same
    every call (~8 us per call for a Normalize). Callers only read the returned dict and arrays."""
    memo = spec.__dict__.setdefault("_write_memo", {})
    ws = tuple(transforms[i] for i in spec.writes)
    key = (layout, c, spec.sem, spec.layout)
    got = memo.get(key)
    if got is not None and len(got[0]) == len(ws) and all(a is b for a, b in zip(got[0], ws)):
        return got[1]
    st = {"dtype": spec.sem, "layout": spec.layout or layout, "scale": np.ones(c), "bias": np.zeros(c)}
    for t in ws:
        st = t.apply(st)
    memo[key] = (ws, st)
    return st


# ------------------------------------------------------------------------------ outputs
_NP_DTYPES: dict = {}


def _np_dtype(name):
    """np.dtype(name), memoised (a dict lookup instead of numpy's parse)."""
    got = _NP_DTYPES.get(name)
    if got is None:
        got = _NP_DTYPES[name] = np.dtype(name)
    return got


def allocate(b: Batch, out, built: Built):
    """(result, dst Batch of NHWC views) for the stage's output."""
    c = b.channels
    odt = _np_dtype(built.out_dtype)
    if not b.varshape:  # (first: the import and the checks below are the varshape path's, ~1.5 us)
        return b.alloc(out, built.shapes, dtype=odt, channels=c, layout=built.out_layout)
    from gpuaug._layout import chw_list_out, uniform_out

    hw = built.shapes[0]
    if same_size(built.shapes) is not None:
        result, views = uniform_out(b, out, hw, odt, c, built.out_layout)
    elif built.out_layout == "NCHW":
        result, views = chw_list_out(b, out, built.shapes, odt, c)
    else:
        return b.alloc(out, built.shapes, dtype=odt, channels=c)
    dst = Batch(b.device, True, False, "NHWC", odt, c, views, list(built.shapes), list(views))
    return result, dst


# ------------------------------------------------------------------------------ launches
def _ctype(dtype):
    from gpuaug.kernels._cuda import CTYPES

    return CTYPES[np.dtype(dtype).name]


def _b(v):
    return "true" if v else "false"


def kernel_names(spec: StageSpec, built: Built, dtype, channels, dense, planar=False):
    """The CUDA C kernels the stage launches, as NVRTC name expressions (for the compile checks too)."""
    t, o = _ctype(dtype), _ctype(built.out_dtype)
    semi = _b(spec.sem == "uint8")
    prog = f"{prog_value(built.codes)}ull"
    names = []
    if built.jidx >= 0:
        if _gray_sum_ok(spec, built, dtype):
            names.append(f"gpuaug_gray_sum{{packed}}<{t}, {channels}, 1>")
        else:
            names.append(f"gpuaug_fused_sum<{t}, {channels}, {semi}, {prog_value(built.codes[:built.jidx + 1])}ull>")
    if dense:
        names.append(f"gpuaug_fused_dense<{t}, {channels}, {o}, {semi}, {built.geo}, {built.border}, {prog}, "
                     f"{_b(planar)}>")
    else:
        names.append(f"gpuaug_fused<{t}, {channels}, {o}, {semi}, {built.geo}, {built.border}, {_b(spec.pre)}, {prog}>")
    return names


def _gray_sum_ok(spec, built, dtype):
    """color_jitter's own reduction fits: the jitter comes first and the source is read as is,
    in the semantics of its dtype."""
    return built.jidx == 0 and spec.in_scale == 1.0 and (spec.sem == "uint8") == (np.dtype(dtype) == np.uint8)


def _dense(src: Batch, dst: Batch, spec: StageSpec):
    """(ok, planar): the dense kernel can run (dense NHWC source; dense NHWC / NCHW output)."""
    if spec.pre or src.varshape or dst.varshape or src.layout != "NHWC":
        return False, False
    a, d = src.arrays[0], dst.arrays[0]
    if not (a.flags.c_contiguous and d.flags.c_contiguous):
        return False, False
    return True, dst.layout == "NCHW"  # 32-bit offsets: Batch refuses images over 2**31 - 1 elements


_sms: dict = {}


def _nparts(cp, n, items):
    dev = cp.cuda.runtime.getDevice()
    if dev not in _sms:
        _sms[dev] = cp.cuda.runtime.getDeviceProperties(dev)["multiProcessorCount"]
    return max(1, min(MAX_PARTS, math.ceil(4 * _sms[dev] / n), math.ceil(items / 256)))


@dataclass
class LaunchPlan:
    """What a stage's launches need besides the arrays: the kernels, grids and sizes."""

    dense: bool
    planar: bool
    need_tables: bool
    sum_fn: object          # the contrast reduction (None: no contrast)
    gray: bool              # it is colour.cuh's gpuaug_gray_sum (arguments with the brightness column)
    nparts: int
    fn: object              # the fused kernel
    grid: tuple
    dims: tuple             # dense: (h, w, H, W) as int32


def launch_plan(spec: StageSpec, built: Built, src: Batch, dst: Batch):
    """The stage's :class:`LaunchPlan` for these batches (host work only)."""
    from gpuaug._layout import packed_layout
    from gpuaug.kernels._cuda import get_function

    cp = cupy_module()
    n, c = src.n, src.channels
    dense, planar = _dense(src, dst, spec)
    names = kernel_names(spec, built, src.dtype, c, dense, planar)
    sum_fn, gray, nparts = None, False, 0
    if built.jidx >= 0:
        src_t = descriptor_table(src)
        gray = _gray_sum_ok(spec, built, src.dtype)
        if gray:
            def layout():
                ok, items = packed_layout(src_t, None, c, c, src.dtype.itemsize)
                return ok, items if ok else int((src_t[:, 1] * src_t[:, 2]).max())
            ok, items = memo_plan((layout_key(src),), ("fused_sum", c), layout)
            sum_fn = get_function("fused.cu", names[0].format(packed="_packed" if ok else ""))
        else:
            items = int((src_t[:, 1] * src_t[:, 2]).max())
            sum_fn = get_function("fused.cu", names[0])
        nparts = _nparts(cp, n, items)
    if dense:
        _, h, w, _ = src.nhwc.shape
        hh, ww = dst.nhwc.shape[1:3]
        grid = ((ww + 31) // 32, (hh + 8 * DENSE_ROWS - 1) // (8 * DENSE_ROWS), min(n, 65535))
        dims = tuple(np.int32(v) for v in (h, w, hh, ww))
    else:
        hmax, wmax = max_size(dst.shapes)
        grid = ((wmax + 31) // 32, min((hmax + 7) // 8, 65535), min(n, 65535))
        dims = ()
    return LaunchPlan(dense, planar, not dense or built.jidx >= 0, sum_fn, gray, nparts,
                      get_function("fused.cu", names[-1]), grid, dims)


def _memo_launch_plan(spec, built, src, dst):
    """launch_plan, kept on ``built`` (a device-drawn call's Built lives as long as its policy's
    plan) per device and batch layouts."""
    cp = cupy_module()
    key = (cp.cuda.runtime.getDevice(), layout_key(src), layout_key(dst))
    return _memo(built, key, lambda: launch_plan(spec, built, src, dst))


def _memo(holder, key, make):
    """``make()``, kept in ``holder``'s ``_launch`` dict under ``key`` (at most 64 entries)."""
    memo = holder.__dict__.setdefault("_launch", {})
    lp = memo.get(key)
    if lp is None:
        if len(memo) >= 64:
            memo.clear()
        lp = memo[key] = make()
    return lp


def _memo_host_launch_plan(spec, built, src, dst):
    """launch_plan for a host-drawn call (a new Built every call), kept on ``spec`` per device,
    batch layouts and everything of ``built`` that launch_plan reads (its kernel names: the
    colour program, geometry kind, border, output dtype, contrast step); varshape batches
    (no layout key) are planned afresh. ~30 us per call on the H100's host."""
    ks, kd = layout_key(src), layout_key(dst)
    if ks is None or kd is None:
        return launch_plan(spec, built, src, dst)
    cp = cupy_module()
    key = (cp.cuda.runtime.getDevice(), ks, kd, src.dtype, tuple(built.codes), built.geo, built.border,
           built.out_dtype, built.jidx)
    return _memo(spec, key, lambda: launch_plan(spec, built, src, dst))


def launch_cuda(spec: StageSpec, built: Built, src: Batch, dst: Batch, par=None, stride=None, partials=None,
                lp=None):
    """Launch the stage's CUDA C kernels on CuPy's current stream (the caller set device and stream).

    The parameter rows are ``built.rows`` (uploaded), or, from a device draw, ``par``: a device
    array or the address of the stage's first row (an int) in rows of ``stride`` floats (the
    launch plan is then memoised on ``built``). ``partials``: a preallocated (n, nparts) float64
    buffer for the contrast reduction (a captured graph keeps its own; or its address, an int);
    None allocates one. ``lp``: the device-rows call's :func:`stage_launch_plan` when the caller
    has it."""
    from gpuaug._batch import table_item
    from gpuaug.kernels._cuda import stage, upload

    if par is None:
        lp = _memo_host_launch_plan(spec, built, src, dst)
        host = [np.ascontiguousarray(built.rows, np.float32)]
        if lp.need_tables:
            host += [descriptor_table(src)] if lp.dense else [descriptor_table(src), descriptor_table(dst)]
        dev = upload(*host)
        par, tabs = dev[0], dev[1:]
        P = np.int32(par.shape[1])
    else:
        lp = lp or _memo_launch_plan(spec, built, src, dst)
        # device rows: only the (cached, keyed) descriptor tables travel
        tabs = stage(*(table_item(b) for b in ([src] if lp.dense else [src, dst]))) \
            if lp.need_tables else ()
        P = np.int32(stride)
    N = np.int32(src.n)
    nparts = np.int32(lp.nparts)
    if lp.sum_fn is not None:
        if partials is None:
            partials = cupy_module().empty((src.n, lp.nparts), np.float64)
        if lp.gray:
            lp.sum_fn((lp.nparts, min(src.n, 65535), 1), (256, 1, 1),
                      (tabs[0], par, P, N, np.int32(P_COLOUR), partials, nparts))
        else:
            lp.sum_fn((lp.nparts, min(src.n, 65535), 1), (256, 1, 1), (tabs[0], par, P, N, partials, nparts))
    else:
        partials = np.uint64(0)
    if lp.dense:
        lp.fn(lp.grid, (256, 1, 1), (src.arrays[0], dst.arrays[0], par, P, N) + lp.dims + (partials, nparts))
    else:
        lp.fn(lp.grid, (256, 1, 1), (tabs[0], tabs[1], par, P, N, partials, nparts))


def partials_shape(spec: StageSpec, built: Built, src: Batch, dst: Batch):
    """(n, nparts) of the contrast reduction's buffer for this stage and batches, or None."""
    lp = _memo_launch_plan(spec, built, src, dst)
    return None if lp.sum_fn is None else (src.n, lp.nparts)


def stage_launch_plan(spec: StageSpec, built: Built, src: Batch, dst: Batch):
    """A device-rows stage's memoised :class:`LaunchPlan` (``lp.sum_fn`` None: no contrast
    sums; else they take ``src.n * lp.nparts`` float64), to hand to :func:`launch_cuda`."""
    return _memo_launch_plan(spec, built, src, dst)


_METAS: dict = {}


def meta_array(spec: StageSpec, built: Built):
    """kernels/numba/fused.py's ``meta``: [geo, border, pre, semi, ncodes, codes...] (memoised:
    the same array for the same values; the kernels only read it)."""
    key = (built.geo, built.border, bool(spec.pre), spec.sem == "uint8", tuple(built.codes))
    got = _METAS.get(key)
    if got is None:
        got = np.asarray([built.geo, built.border, int(spec.pre), int(spec.sem == "uint8"), len(built.codes)]
                         + list(built.codes) + [0], np.int64)
        if len(_METAS) < 1024:
            _METAS[key] = got
    return got


def launch_numba(spec: StageSpec, built: Built, src: Batch, dst: Batch, target: str):
    """Run the Numba twin: ``target`` "cpu" (njit) or "cuda" (Numba CUDA, or its simulator).

    The CPU kernel gets C-contiguous float32 copies of the source and output (exact for every
    dtype: uint8 and float16 values are float32 values, and the kernel rounds and saturates
    uint8 results itself), so one compiled signature serves every dtype and layout."""
    meta = meta_array(spec, built)
    cpu = target == "cpu"
    if cpu and not src.varshape:
        kern, skern, nf = _CPU_KERNELS or _cpu_kernels()
        _numba_cpu_dense(built, src, dst, meta, kern, skern if built.jidx >= 0 else None,
                         src.nhwc.size < nf.PARALLEL_MIN_ELEMENTS)
        return
    from gpuaug._run import launch_twin
    from gpuaug.kernels.numba.fused import kernel, sum_kernel

    xp = src.xp
    n = src.n
    if cpu:
        params, meta_d = np.ascontiguousarray(built.rows, np.float64), meta
    else:
        params, meta_d = xp.asarray(built.rows, dtype=xp.float32), xp.asarray(meta)
    if dst.dtype == np.uint8:
        lo, hi, rnd = 0.0, 255.0, True
    else:
        lo, hi, rnd = -np.inf, np.inf, False
    items = ([(src.nhwc, dst.nhwc, slice(None))] if not src.varshape else
             [(src.views[i][None], dst.sample(i)[None], slice(i, i + 1)) for i in range(n)])

    def source(s):
        if cpu:
            return np.ascontiguousarray(s, np.float32)
        return s.astype(np.float32) if s.dtype == np.float16 else s

    means = xp.zeros(n, np.float64)
    converted = {}  # item index -> its float32 source (the sums and the stage read the same one)
    if built.jidx >= 0:
        skern = sum_kernel(target)
        for k, (s, _, sl) in enumerate(items):
            s32 = converted[k] = source(s)
            launch_twin(skern, target, src, s32.shape, (s32, means[sl], params[sl], meta_d, built.jidx))
        if src.varshape:
            counts = xp.asarray(np.array([h * w for h, w in src.shapes], np.float64))
        else:  # one size: divide by the number (the same quotients as by an array of it)
            counts = float(src.nhwc.shape[1] * src.nhwc.shape[2])
        means = means / counts
    kern = kernel(target)
    for k, (s, d, sl) in enumerate(items):
        s32 = converted.pop(k, None)
        if s32 is None:
            s32 = source(s)
        direct = d.dtype == np.float32 and (not cpu or d.flags.c_contiguous)
        tmp = d if direct else xp.empty(d.shape, np.float32)
        launch_twin(kern, target, src, tmp.shape, (s32, tmp, params[sl], meta_d, means[sl], lo, hi, rnd))
        if tmp is not d:
            d[...] = tmp.astype(d.dtype)


_CPU_KERNELS: list = []


def _cpu_kernels():
    """[kernels/numba/fused.py's kernel("cpu"), sum_kernel("cpu"), that module], imported once
    (the import statement and the two lru_cache lookups cost ~1.5 us a call)."""
    from gpuaug.kernels.numba import fused as NF

    if not _CPU_KERNELS:
        _CPU_KERNELS[:] = [NF.kernel("cpu"), NF.sum_kernel("cpu"), NF]
    return _CPU_KERNELS


def _numba_cpu_dense(built: Built, src: Batch, dst: Batch, meta, kern, skern, serial=False):
    """:func:`launch_numba` on the CPU for a uniform batch: the same arrays and kernel calls as
    its general loop (one item: the whole batch), without its per-item machinery (~5 us).
    ``serial``: the source is below the kernels' PARALLEL_MIN_ELEMENTS, so the chunked wrappers
    would call their serial kernels over all samples: called here directly (~1 us less)."""
    params = np.ascontiguousarray(built.rows, np.float64)
    s32 = np.ascontiguousarray(src.nhwc, np.float32)
    d = dst.nhwc
    n = s32.shape[0]
    means = np.zeros(n, np.float64)
    if skern is not None:
        if serial:
            skern.serial(s32, means, params, meta, built.jidx, 0, n)
        else:
            skern(s32, means, params, meta, built.jidx)
        means /= float(s32.shape[1] * s32.shape[2])  # (in place: the same quotients)
    if d.dtype == np.uint8:
        lo, hi, rnd = 0.0, 255.0, True
    else:
        lo, hi, rnd = -np.inf, np.inf, False
    direct = d.dtype == np.float32 and d.flags.c_contiguous
    tmp = d if direct else np.empty(d.shape, np.float32)
    if serial:
        kern.serial(s32, tmp, params, meta, means, lo, hi, rnd, 0, n)
    else:
        kern(s32, tmp, params, meta, means, lo, hi, rnd)
    if direct:
        return
    np.copyto(d, tmp, casting="unsafe")  # the cast astype(d.dtype) makes, without its copy
