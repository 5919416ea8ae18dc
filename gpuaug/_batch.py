"""The batch model: what every op accepts, and how its output is made.

A *batch* is one of
- a 4-D array, NHWC (default) or NCHW (``layout="NCHW"``);
- a 3-D array, one HWC (or CHW) image, returned as one image;
- a *varshape batch*: a list of HWC arrays of different heights and widths, returned
  as a list.

NumPy arrays go to the CPU backend; anything with ``__cuda_array_interface__`` or a
CUDA DLPack device (CuPy, PyTorch, Numba, pycuda) is viewed as CuPy without a copy.
dtypes: uint8, float16, float32. Channels: 1, 3 or 4.

Kernels never see layouts: they get NHWC-ordered *views* (an NCHW array is viewed
through its strides) and, on the CUDA C path, a per-sample descriptor table of
``(address, height, width, stride_y, stride_x, stride_c)`` (strides in elements), which
is what lets a varshape batch and non-contiguous inputs run in one launch.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from gpuaug._util import BATCH_DEVICE, DTYPE_NAMES, check_choice, cupy_module, is_cuda_array

LAYOUTS = ("NHWC", "NCHW")


class Same(tuple):
    """``n`` copies of one ``(h, w)``: the per-sample sizes of a uniform batch, without a
    Python loop over samples (ops are called with N in the hundreds, per batch)."""

    def __new__(cls, hw, n):
        return super().__new__(cls, (tuple(hw),) * n)

    def __init__(self, hw, n):
        self.hw = tuple(hw)


_UNIFORM: dict = {}  # Batch.uniform's (hw, N) -> Same


def same_size(shapes):
    """The common (h, w) of ``shapes``, or None when they differ."""
    hw = getattr(shapes, "hw", None)
    if hw is not None:
        return hw
    first = tuple(shapes[0])
    if isinstance(shapes, list) and shapes.count(first) == len(shapes):  # a C loop, not a genexpr
        return first
    return first if all(tuple(s) == first for s in shapes) else None


def max_size(shapes):
    """(max h, max w) over ``shapes``."""
    hw = getattr(shapes, "hw", None)
    if hw is not None:
        return hw
    return max(s[0] for s in shapes), max(s[1] for s in shapes)


def max_over(shapes, f):
    """``max(f(h, w))`` over ``shapes``, once for a uniform batch."""
    hw = getattr(shapes, "hw", None)
    if hw is not None:
        return f(*hw)
    return max(f(h, w) for h, w in shapes)


TABLE_COLS = 6  # address, height, width, stride_y, stride_x, stride_c


def _describe(x):
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is not None:
        return f"{type(x).__name__} with shape {tuple(shape)} and dtype {dtype}"
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of {len(x)} items"
    return repr(x)[:80]


def _to_array(x, name):
    """Host or CUDA array view of ``x`` (no copy), and whether it lives on a GPU."""
    if isinstance(x, np.ndarray):
        return x, False
    if is_cuda_array(x):  # CuPy arrays are recognised there first
        cp = cupy_module()
        if isinstance(x, cp.ndarray):
            return x, True
        if hasattr(x, "__cuda_array_interface__"):
            return cp.asarray(x), True
        return cp.from_dlpack(x), True
    if hasattr(x, "__dlpack__"):  # a CPU tensor (PyTorch, JAX, ...)
        return np.from_dlpack(x), False
    raise TypeError(f"{name}: got {_describe(x)}; expected a NumPy array, a CUDA array "
                    "(CuPy, PyTorch, Numba, pycuda) or a list of HWC arrays")


@dataclass(slots=True)  # made on every op call: slots make that cheaper
class Batch:
    """A parsed input batch (see module docstring)."""

    device: bool            # True: CUDA arrays (CuPy views); False: NumPy
    varshape: bool
    single: bool            # the input was one 3-D image
    layout: str             # the caller's layout (NHWC / NCHW)
    dtype: np.dtype
    channels: int
    views: list             # per-sample HWC views (varshape) or [one NHWC 4-D view]
    shapes: list            # per-sample (h, w)
    arrays: list = field(default_factory=list)  # the caller's arrays, for overlap checks

    @property
    def n(self):
        return len(self.shapes)

    def sizes(self):
        """Per-sample heights and widths as two int64 arrays (no Python loop for a uniform batch)."""
        hw = getattr(self.shapes, "hw", None)
        if hw is not None:
            return np.full(self.n, hw[0], np.int64), np.full(self.n, hw[1], np.int64)
        a = np.array(self.shapes, np.int64).reshape(-1, 2)
        return a[:, 0], a[:, 1]

    def uniform(self, hw):
        """``hw`` for every sample, as :class:`Same` (what ``alloc`` and the kernels read); one
        object per (hw, N), shared (a tuple: nothing changes it)."""
        key = (hw, self.n) if type(hw) is tuple else None
        got = _UNIFORM.get(key) if key is not None else None
        if got is None:
            got = Same(hw, self.n)
            if key is not None:
                if len(_UNIFORM) >= 256:
                    _UNIFORM.clear()
                _UNIFORM[key] = got
        return got

    @property
    def xp(self):
        return cupy_module() if self.device else np

    @property
    def nhwc(self):
        """The 4-D NHWC view of a uniform batch."""
        assert not self.varshape
        return self.views[0]

    def sample(self, i):
        """HWC view of sample ``i``."""
        return self.views[i] if self.varshape else self.views[0][i]

    def device_id(self):
        return self.arrays[0].data.device_id if self.device else None  # .device builds a Device

    # -- outputs --------------------------------------------------------------------
    def alloc(self, out, shapes, *, dtype=None, channels=None, layout=None, name="out"):
        """Make (or check the caller's ``out=``) the output of an op.

        ``shapes``: one ``(h, w)`` for every sample (a uniform batch needs them all
        equal). A varshape batch whose outputs all have one size may also write into one
        dense NHWC ``out`` array of shape (N, h, w, C) (one check instead of one per image;
        the result is then that array). Returns ``(result, dst)`` where ``result`` is what the op returns and
        ``dst`` is a Batch over the same memory (NHWC views) for the kernels.
        """
        hw = getattr(shapes, "hw", None)
        if out is None and hw is not None and not self.varshape:  # the common case, memoised
            key = (self.n, hw, dtype, channels, layout, self.single, self.layout, self.dtype, self.channels)
            plan = _ALLOCS.get(key)
            if plan is not None:
                want, dt, ch, lay = plan
                arr = _empty(self.xp, want, dt, name)
                arr4 = arr[None] if self.single else arr
                nhwc = arr4 if lay == "NHWC" else arr4.transpose(0, 2, 3, 1)
                same = shapes if len(shapes) == self.n else Same(hw, self.n)
                return arr, Batch(self.device, False, False, lay, dt, ch, [nhwc], same, [arr])
        else:
            key = None
        dtype = np.dtype(dtype or self.dtype)
        channels = channels or self.channels
        layout = layout or self.layout
        xp = self.xp
        big = max(int(h) * int(w) for h, w in (shapes if self.varshape else shapes[:1])) * channels
        if big > MAX_IMAGE_ELEMENTS:
            raise ValueError(f"{name}: an output image would hold {big} elements; the kernels index within "
                             f"one image with 32-bit integers, so at most {MAX_IMAGE_ELEMENTS} (2**31 - 1)")
        if self.varshape and out is not None and not isinstance(out, (list, tuple)) and layout == "NHWC":
            hw = same_size(shapes)
            if hw is not None:  # every output the same size: one dense (N, h, w, C) array may take them
                arr = self._check_out(out, (self.n, *hw, channels), dtype, name, layout="NHWC",
                                      against_input=False)
                _check_disjoint(self.arrays, [arr], name, bool(self.device), indexed=False)
                dst = Batch(self.device, False, False, "NHWC", dtype, channels, [arr], Same(hw, self.n), [arr])
                return out, dst
        if self.varshape:
            want = [(h, w, channels) for h, w in shapes]
            if out is None:
                result = [_empty(xp, s, dtype, f"{name}[{i}]") for i, s in enumerate(want)]
            else:
                if not isinstance(out, (list, tuple)) or len(out) != len(want):
                    raise ValueError(f"{name}: a varshape batch needs a list of {len(want)} arrays; "
                                     f"got {_describe(out)}")
                views = [self._check_out(o, s, dtype, f"{name}[{i}]", against_input=False)
                         for i, (o, s) in enumerate(zip(out, want))]
                _check_apart(views, name, bool(self.device))
                _check_disjoint(self.arrays, views, name, bool(self.device))
                result = list(out)
            if out is None:
                views = result
            dst = Batch(self.device, True, False, "NHWC", dtype, channels, views,
                        [tuple(s) for s in shapes], list(result))
            return result, dst
        if isinstance(out, (list, tuple)):
            raise TypeError(f"{name}: got {_describe(out)}; the input is one array (not a list of images), "
                            f"so {name} must be one array")
        hw = same_size(shapes)
        if hw is None:
            hs = sorted({tuple(s) for s in shapes})
            raise ValueError(f"per-sample output sizes differ ({hs[:4]}...); a uniform "
                             "batch needs one output size (pass a list of images for varshape output)")
        h, w = hw
        full = (self.n, h, w, channels) if layout == "NHWC" else (self.n, channels, h, w)
        want = full[1:] if self.single else full
        if out is None:
            result = _empty(xp, want, dtype, name)
            arr = result
            if key is not None:
                if len(_ALLOCS) >= 256:
                    _ALLOCS.pop(next(iter(_ALLOCS)))
                _ALLOCS[key] = (want, dtype, channels, layout)
        else:
            arr = self._check_out(out, want, dtype, name, layout=layout[1:] if self.single else layout)
            result = out
        arr4 = arr[None] if self.single else arr
        nhwc = arr4 if layout == "NHWC" else arr4.transpose(0, 2, 3, 1)
        dst = Batch(self.device, False, False, layout, dtype, channels, [nhwc],
                    Same((h, w), self.n), [arr])
        return result, dst

    def _check_out(self, out, shape, dtype, name, layout="HWC", against_input=True):
        arr, dev = _to_array(out, name)
        if dev != self.device:
            where = "a CUDA array" if self.device else "a NumPy array"
            raise TypeError(f"{name}: got {_describe(out)}; the input is on the "
                            f"{'GPU' if self.device else 'CPU'}, so {name} must be {where}")
        if tuple(arr.shape) != tuple(shape) or arr.dtype != dtype:
            raise ValueError(f"{name}: got shape {tuple(arr.shape)} and dtype {arr.dtype}; "
                             f"expected shape {tuple(shape)} ({layout}) and dtype {dtype}")
        if not dev and not arr.flags.writeable:
            raise ValueError(f"{name}: the array is read-only; pass a writeable array")
        if _self_overlapping(arr):
            raise ValueError(f"{name}: its elements overlap one another (strides {tuple(arr.strides)} for "
                             f"shape {tuple(arr.shape)}, e.g. a stride of 0); samples would overwrite each "
                             "other: pass an array with one element per output value")
        if dev and arr.device.id != self.device_id():
            raise ValueError(f"{name}: is on GPU {arr.device.id} but the input is on GPU "
                             f"{self.device_id()}; put both on one device")
        if against_input:
            _check_disjoint(self.arrays, [arr], name, dev, indexed=False)
        return arr


#: Uniform outputs allocated before: (n, (h, w), the op's dtype/channels/layout requests, the
#: input's single/layout/dtype/channels) -> (shape, dtype, channels, layout) of the new array.
_ALLOCS: dict = {}

#: The most elements one image may hold (the kernels' per-image index maths is 32-bit).
MAX_IMAGE_ELEMENTS = 2 ** 31 - 1


def _empty(xp, shape, dtype, name):
    """``xp.empty``; running out of memory raises a MemoryError that says what was asked for."""
    try:
        return xp.empty(shape, dtype)
    except MemoryError as e:
        nbytes = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
        where = "GPU" if xp is not np else "host"
        free = ""
        if xp is not np:
            try:
                free = f" ({xp.cuda.runtime.memGetInfo()[0] / 2 ** 30:.2f} GiB free on the GPU, plus "
                free += f"{xp.get_default_memory_pool().free_bytes() / 2 ** 30:.2f} GiB cached by CuPy's pool)"
            except Exception:  # noqa: BLE001 - the message is best effort
                pass
        raise MemoryError(f"{name}: cannot allocate the output, shape {tuple(shape)} {np.dtype(dtype)} "
                          f"= {nbytes / 2 ** 30:.2f} GiB of {where} memory{free}; use a smaller batch "
                          "or pass out=") from e


def extent(a, dev):
    """[lo, hi) byte addresses the array ``a`` touches (any strides; ``dev``: a CUDA array)."""
    if dev:
        lo = hi = a.data.ptr
    else:
        lo = hi = a.__array_interface__["data"][0]
    if a.size == 0:
        return lo, lo
    for s, st in zip(a.shape, a.strides):
        if st < 0:
            lo += (s - 1) * st
        else:
            hi += (s - 1) * st
    return lo, hi + a.itemsize


def _self_overlapping(a) -> bool:
    """True when two elements of ``a`` may share memory: sorted by stride, each axis must step
    past everything the smaller-stride axes span (true of every slice/transpose of an array;
    false for stride 0 on an axis of length > 1 and most ``as_strided`` tricks)."""
    dims = sorted((abs(int(st)), int(n)) for n, st in zip(a.shape, a.strides) if n > 1)
    span = a.itemsize
    for st, n in dims:
        if st < span:
            return True
        span += st * (n - 1)
    return False


def _check_apart(arrays, name, dev):
    """ValueError when two arrays of an ``out=`` list share memory (``out=[buf, b, buf]``):
    extents sorted by start, neighbours compared; on the host a candidate pair is confirmed
    with ``np.shares_memory`` (so interleaved views that share no element still pass)."""
    ext = sorted((extent(a, dev), i) for i, a in enumerate(arrays) if a.size)
    for ((_, hi0), i), ((lo1, _), j) in zip(ext, ext[1:]):
        if lo1 < hi0:
            a, b = arrays[i], arrays[j]
            if not dev:
                try:
                    if not np.shares_memory(a, b, max_work=10 ** 5):
                        continue
                except np.exceptions.TooHardError if hasattr(np, "exceptions") else Exception:
                    pass
            i, j = sorted((i, j))
            raise ValueError(f"{name}[{i}] and {name}[{j}]: share memory; each image of a varshape out= "
                             "needs its own buffer (samples would overwrite each other)")


def _check_disjoint(inputs, outs, name, dev, indexed=True):
    """ValueError when an array of ``outs`` overlaps an input in memory (by extent, as
    ``np.may_share_memory``). The inputs' extents are merged and sorted once, then each output
    is one bisection: O((N + M) log N), where testing every pair cost O(N * M) (a varshape batch
    of 256 decoded images into 256 rows of one dense ``out`` spent 300 ms here on an H100 host).
    The arrays of one batch lie on one device (``as_batch`` and ``_check_out`` make sure)."""
    merged = []
    for lo, hi in sorted(extent(a, dev) for a in inputs if a.size):
        if merged and lo < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    if not merged:
        return
    starts = [m[0] for m in merged]
    for i, o in enumerate(outs):
        if not o.size:
            continue
        lo, hi = extent(o, dev)
        k = bisect.bisect_left(starts, hi) - 1  # the last input starting below hi ends furthest
        if k >= 0 and merged[k][1] > lo:
            where = f"{name}[{i}]" if indexed else name
            raise ValueError(f"{where}: overlaps the input in memory; ops are not in place, "
                             "pass a separate array")


_ALLOWED: dict = {}


#: Arrays seen before: (type, shape, dtype, layout, dtypes, channels) -> (single, channels,
#: per-sample sizes). Everything as_batch checks of an array is a function of that key, so a
#: loop over same-shaped batches skips the checks (a few microseconds of each call).
_SEEN: dict = {}
_CP_NDARRAY = []


def as_batch(x, layout="NHWC", *, name="x", dtypes=tuple(DTYPE_NAMES), channels=(1, 3, 4)) -> Batch:
    """Parse ``x`` into a :class:`Batch`; raise a ValueError/TypeError naming what is wrong."""
    t = type(x)
    keyed = type(dtypes) is tuple and type(channels) is tuple and type(layout) is str
    if keyed and (t is np.ndarray or (_CP_NDARRAY and t is _CP_NDARRAY[0])):
        key = (t, x.shape, x.dtype, layout, dtypes, channels)
        seen = _SEEN.get(key)
        if seen is not None:
            single, c, same = seen
            a4 = x[None] if single else x
            nhwc = a4 if layout == "NHWC" else a4.transpose(0, 2, 3, 1)
            dev = t is not np.ndarray
            BATCH_DEVICE.set(x.data.device_id if dev else None)
            return Batch(dev, False, single, layout, x.dtype, c, [nhwc], same, [x])
    b = _parse(x, layout, name, dtypes, channels)
    if keyed and not b.varshape and (t is np.ndarray or (b.device and type(b.arrays[0]) is t)):
        if b.device and not _CP_NDARRAY:
            _CP_NDARRAY.append(t)
        if len(_SEEN) >= 256:
            _SEEN.pop(next(iter(_SEEN)))
        _SEEN[(t, x.shape, x.dtype, layout, dtypes, channels)] = (b.single, b.channels, b.shapes)
    return b


def _parse(x, layout, name, dtypes, channels) -> Batch:
    check_choice("layout", layout, LAYOUTS)
    allowed = _ALLOWED.get(dtypes)
    if allowed is None:
        allowed = _ALLOWED.setdefault(tuple(dtypes), frozenset(np.dtype(d) for d in dtypes))
    if isinstance(x, (list, tuple)):
        if len(x) == 0:
            raise ValueError(f"{name}: got an empty list; a varshape batch needs at least one image")
        if layout != "NHWC":
            raise ValueError(f"layout: got {layout!r}; a varshape batch (list) holds HWC images, "
                             "so layout must be 'NHWC'")
        views, shapes, devs = [], [], set()
        for i, item in enumerate(x):
            a, dev = _to_array(item, f"{name}[{i}]")
            devs.add(dev)
            if a.ndim != 3:
                raise ValueError(f"{name}[{i}]: got shape {tuple(a.shape)}; each image of a varshape "
                                 "batch must be 3-D HWC")
            views.append(a)
            shapes.append((int(a.shape[0]), int(a.shape[1])))
        if len(devs) != 1:
            raise TypeError(f"{name}: mixes NumPy and CUDA arrays; put every image on one side")
        dev = devs.pop()
        dt = {v.dtype for v in views}
        ch = {int(v.shape[2]) for v in views}
        if len(dt) != 1:
            i = next(i for i, v in enumerate(views) if v.dtype != views[0].dtype)
            raise TypeError(f"{name}: images have different dtypes {sorted(map(str, dt))} ({name}[0] is "
                            f"{views[0].dtype}, {name}[{i}] is {views[i].dtype}); expected one dtype for "
                            "every image of a varshape batch")
        if len(ch) != 1:
            i = next(i for i, v in enumerate(views) if v.shape[2] != views[0].shape[2])
            raise ValueError(f"{name}: images have different channel counts {sorted(ch)} ({name}[0] has "
                             f"{views[0].shape[2]}, {name}[{i}] has {views[i].shape[2]}); expected one "
                             "channel count for every image of a varshape batch")
        if dev and len({v.device.id for v in views}) != 1:
            i = next(i for i, v in enumerate(views) if v.device.id != views[0].device.id)
            raise ValueError(f"{name}: images lie on different GPUs ({name}[0] on GPU {views[0].device.id}, "
                             f"{name}[{i}] on GPU {views[i].device.id}); put every image on one GPU")
        b = Batch(dev, True, False, "NHWC", dt.pop(), ch.pop(), views, shapes, list(views))
    else:
        a, dev = _to_array(x, name)
        if a.ndim not in (3, 4):
            raise ValueError(f"{name}: got {a.ndim}-D shape {tuple(a.shape)}; expected a 4-D batch "
                             f"({layout}) or a 3-D image ({layout[1:]})")
        single = a.ndim == 3
        a4 = a[None] if single else a
        nhwc = a4 if layout == "NHWC" else a4.transpose(0, 2, 3, 1)
        n, h, w, c = (int(s) for s in nhwc.shape)
        if n == 0:
            raise ValueError(f"{name}: got an empty batch (shape {tuple(a.shape)}); expected at least one sample")
        b = Batch(dev, False, single, layout, a.dtype, c, [nhwc], Same((h, w), n), [a])
    if b.dtype not in allowed:
        allowed_txt = ", ".join(str(np.dtype(d)) for d in dtypes)
        raise TypeError(f"{name}: got dtype {b.dtype}; expected one of {allowed_txt}")
    if b.channels not in channels:
        shown, hint = "", ""
        if not b.varshape:
            shape = tuple(b.arrays[0].shape)
            other = "NCHW" if b.layout == "NHWC" else "NHWC"
            c_other = shape[-3] if other == "NCHW" else shape[-1]
            shown = f" (shape {shape} read as {b.layout if not b.single else b.layout[1:]})"
            if c_other in channels:
                hint = f" (as {other} it has {c_other}: pass layout={other!r})"
        raise ValueError(f"{name}: got {b.channels} channels{shown}; expected one of "
                         f"{', '.join(map(str, channels))}{hint}")
    if not b.varshape and min(b.nhwc.shape[1:3]) == 0:
        h, w = b.nhwc.shape[1:3]
        raise ValueError(f"{name}: got shape {tuple(b.arrays[0].shape)}, images of height {h} and width {w}; "
                         "expected images of at least 1x1 pixels")
    if b.varshape:
        for i, (h, w) in enumerate(b.shapes):
            if h == 0 or w == 0:
                raise ValueError(f"{name}[{i}]: got shape {tuple(b.views[i].shape)}, an image of height {h} "
                                 f"and width {w}; expected images of at least 1x1 pixels")
    big = max_over(b.shapes, lambda h, w: h * w) * b.channels
    if big > MAX_IMAGE_ELEMENTS:
        raise ValueError(f"{name}: has an image of {big} elements; the kernels index within one image with "
                         f"32-bit integers, so an image may hold at most {MAX_IMAGE_ELEMENTS} (2**31 - 1) "
                         "elements (batches may be larger: samples are addressed with 64-bit pointers)")
    BATCH_DEVICE.set(b.device_id() if b.device else None)
    return b


_TABLES: dict = {}


def _dense_table(v) -> np.ndarray:
    n = v.shape[0]
    t = np.empty((n, TABLE_COLS), np.int64)
    it = v.itemsize
    ptr = v.data.ptr if not isinstance(v, np.ndarray) else v.__array_interface__["data"][0]
    t[:, 0] = ptr + np.arange(n, dtype=np.int64) * v.strides[0]
    t[:, 1], t[:, 2] = v.shape[1], v.shape[2]
    t[:, 3], t[:, 4], t[:, 5] = v.strides[1] // it, v.strides[2] // it, v.strides[3] // it
    return t


def layout_key(batch: Batch):
    """A hashable key that decides everything a launch plan reads from the batch's descriptor
    table except the addresses themselves (shape, element strides, dtype, and each sample's
    address modulo 16), or None for a varshape batch (no shortcut: read the table).

    For a uniform batch sample ``i`` starts at ``ptr + i * stride_n``, so the set of alignments
    is fixed by ``ptr % 16`` and ``stride_n % 16``. Launch plans (packed fast paths, grids) are
    memoised on it, so a loop over same-shaped batches skips their NumPy analysis."""
    if batch.varshape:
        return None
    v = batch.nhwc
    ptr = v.data.ptr if batch.device else v.__array_interface__["data"][0]
    return (v.shape, v.strides, v.itemsize, ptr % 16, v.strides[0] % 16)


_PLANS: dict = {}


def memo_plan(keys, args, make):
    """``make()``, memoised on the batches' :func:`layout_key` s and ``args``
    (nothing is memoised for varshape batches, whose key is None). The plan's NumPy analysis
    of the descriptor tables (colour ops, the fused policy) cost ~100 us per call on the H100 host."""
    if None in keys:
        return make()
    key = (keys, args)
    got = _PLANS.get(key)
    if got is None:
        got = make()
        if len(_PLANS) >= 512:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = got
    return got


def _table_key(batch: Batch):
    """What a dense batch's descriptor table is a function of (None for varshape). The
    itemsize too: byte strides alone collided (a uint8 view with stride 2 and a contiguous
    float16 array at a reused address have the same byte strides)."""
    if batch.varshape:
        return None
    v = batch.nhwc
    return (v.data.ptr if batch.device else v.__array_interface__["data"][0], v.shape, v.strides, v.itemsize)


def table_item(batch: Batch):
    """``(key, table)`` for :func:`gpuaug.kernels._cuda.stage`: a dense batch's table is keyed,
    so its device copy comes from the constant cache (no upload in a loop)."""
    key = _table_key(batch)
    return (None if key is None else ("table",) + key), descriptor_table(batch)


def descriptor_table(batch: Batch) -> np.ndarray:
    """int64 (N, 6) table: address, height, width and element strides y, x, c per sample.

    Works for uniform batches (any strides, e.g. NCHW viewed as NHWC) and varshape ones,
    so one kernel signature serves both.
    """
    n = batch.n
    key = _table_key(batch)
    if key is not None:  # a pure function of pointer, shape and strides: cached
        t = _TABLES.get(key)
        if t is None:
            t = _dense_table(batch.nhwc)
            t.flags.writeable = False
            if len(_TABLES) >= 256:
                _TABLES.pop(next(iter(_TABLES)))
            _TABLES[key] = t
        return t
    t = np.empty((n, TABLE_COLS), np.int64)
    for i, v in enumerate(batch.views):
        it = v.itemsize
        t[i] = (v.data.ptr, v.shape[0], v.shape[1], v.strides[0] // it,
                v.strides[1] // it, v.strides[2] // it)
    return t
