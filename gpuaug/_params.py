"""Per-sample parameters: one value for the batch, or one value per sample.

A parameter whose per-sample value has shape ``S`` (``()`` for a number, ``(4,)`` for
padding, ``(2, 3)`` for an affine matrix) accepts an array of shape ``S`` (the same for
every sample) or ``(N,) + S`` (one per sample), as a Python number/sequence, a NumPy
array or a CUDA array. Host values are checked (finite, in range) here; values already
on the GPU are checked for shape only, because reading them back would synchronise.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from gpuaug._compiled import CHARS as _CHARS, converted_in, int_bounds, rows_in
from gpuaug._util import BATCH_DEVICE, cupy_module, is_cuda_array

try:  # np.count_nonzero's C function, without its Python wrapper and dispatcher (~0.1 us a call)
    from numpy._core.multiarray import count_nonzero
except ImportError:  # pragma: no cover - NumPy 1.x
    count_nonzero = np.count_nonzero


def _host_copy(v):
    """``v`` itself, or a NumPy copy when it is a CUDA array (for messages only: error paths,
    where reading a value back is fine; ``np.asarray`` refuses CuPy arrays)."""
    if not is_cuda_array(v):
        return v
    cp = cupy_module()
    return cp.asnumpy(cp.asarray(v) if hasattr(v, "__cuda_array_interface__") else cp.from_dlpack(v))


def _fmt(v):
    a = np.asarray(_host_copy(v))
    return repr(a.tolist()) if a.size <= 8 else f"array of shape {a.shape}"


def _bad(value, arr, mask):
    """``value`` for a message: the whole value when small, else its first bad element
    (``mask`` over the broadcast ``arr``) and where it is."""
    a = np.asarray(_host_copy(value))
    if a.size <= 8 or not mask.any():
        return _fmt(value)
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"{arr[idx].item()!r} at index {list(idx)} (sample {idx[0]}) of an array of shape {a.shape}"


def _show(v):
    """A short description of a value NumPy may not be able to hold in one array."""
    r = repr(v)
    return r if len(r) <= 80 else f"{type(v).__name__} {r[:60]}..."


def value_shape(value, name, accepted="numbers"):
    """The shape of a parameter value (host or CUDA array, number, nested sequence), or a
    TypeError naming ``name`` when NumPy cannot hold it as one array (ragged nesting, strings
    mixed with numbers)."""
    if type(value) is np.ndarray and value.dtype.kind in "biuf":  # the usual host array, as it is
        return value.shape
    if hasattr(value, "shape") and not isinstance(value, np.ndarray) and is_cuda_array(value):
        return tuple(value.shape)
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        a = None
    if a is None or (a.dtype.kind not in "biuf" and value is not None):
        raise TypeError(f"{name}: got {_show(value)}; expected {accepted}")
    return tuple(a.shape)


_SCALARS = frozenset({bool, int, float, np.bool_, np.float64, np.float32, np.int64, np.int32, np.uint8,
                      np.int16, np.uint16, np.uint32, np.int8, np.float16})


def _scalar(v, n, integer, low, high, low_open, boolean):
    """One valid number for the whole batch, without NumPy's broadcasting machinery (a few
    microseconds per parameter per call); None sends anything unusual (NaN, inf, out of
    range) to the general path, whose checks and messages are the contract."""
    if boolean:
        if v == 0 or v == 1:
            a = np.empty(n)
            a.fill(1.0 if v else 0.0)
            return a
        return None
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if f != f or f in (math.inf, -math.inf):
            return None
        if integer:
            if f != round(f):
                return None
            v = f
    elif integer and isinstance(v, (bool, np.bool_)):
        v = int(v)
    if integer:
        iv = int(v)
        if not -2 ** 63 <= iv < 2 ** 63:
            return None
        if (low is not None and (iv <= low if low_open else iv < low)) or (high is not None and iv > high):
            return None
        a = np.empty(n, np.int64)
        a.fill(iv)
        return a
    f = float(v)
    if (low is not None and (f <= low if low_open else f < low)) or (high is not None and f > high):
        return None
    a = np.empty(n)  # np.empty + fill: np.full's Python wrapper costs as much again
    a.fill(f)
    return a


def _host_array(arr, n, shape, integer, finite, low, high, low_open, boolean):
    """The common case of a per-sample NumPy array, ``(n,) + shape`` already, converted and
    checked in one compiled loop (:func:`gpuaug._compiled.converted_in` with :func:`closed_range`'s
    bounds; a few NumPy calls for float16 or bounds that are not exact floats): the float64
    copy, or None for anything else (other shapes, integer parameters, flags that are not
    bool, any value out of range or not finite), which the general path then handles (its
    checks and messages are the contract; it gives the same array for values that pass)."""
    if arr.shape != ((n,) + shape if shape else (n,)):
        return None
    kind = arr.dtype.kind
    if integer:
        return _host_ints(arr, kind, low, high, low_open)
    if kind not in "biuf":
        return None
    if boolean:
        if kind != "b" and count_nonzero((arr == 0) | (arr == 1)) != arr.size:
            return None
        return arr.astype(np.float64)
    if finite:
        got = _RANGES.get((low, high, low_open), _NONE)
        if got is _NONE:
            if len(_RANGES) >= 256:
                _RANGES.clear()
            got = _RANGES[(low, high, low_open)] = closed_range(low, high, low_open)
        if got is not None and arr.dtype.char in _CHARS:  # converted and checked in one loop
            out = np.empty(arr.shape)
            return out if converted_in(arr, out, got[0], got[1]) else None
    arr = arr.astype(np.float64)  # float16 and the like, bounds that are not exact floats
    size = arr.size
    # count_nonzero of a bool array: a fraction of ndarray.all()'s reduction machinery
    if finite and count_nonzero(np.isfinite(arr)) != size:
        return None
    # element-wise, as the general path's NaN rule (NaN compares false: passes a bound); a
    # bound given as an int compares as the float NumPy would convert it to, made here once
    if low is not None:
        if type(low) is int and -_EXACT <= low <= _EXACT:
            low = float(low)
        if count_nonzero(arr <= low if low_open else arr < low):
            return None
    if high is not None:
        if type(high) is int and -_EXACT <= high <= _EXACT:
            high = float(high)
        if count_nonzero(arr > high):
            return None
    return arr


def _host_ints(arr, kind, low, high, low_open):
    """_host_array for integer parameters: a signed or (up to 32-bit) unsigned integer array as
    an int64 copy, converted and checked in one compiled loop (:func:`gpuaug._compiled.converted_in`;
    one min and one max for bounds that are not ints); None for anything else (floats,
    which must be checked integral; uint64, which may not fit; bools; values out of range),
    which the general path handles as before."""
    if not (kind == "i" or kind == "u" and arr.itemsize <= 4):
        return None
    bounds = _INT_BOUNDS.get((low, high, low_open), _NONE)
    if bounds is _NONE:
        if len(_INT_BOUNDS) >= 256:
            _INT_BOUNDS.clear()
        bounds = _INT_BOUNDS[(low, high, low_open)] = int_bounds(low, high, low_open)
    if bounds is not None:  # converted and checked in one loop
        out = np.empty(arr.shape, np.int64)
        return out if converted_in(arr, out, bounds[0], bounds[1]) else None
    arr = arr.astype(np.int64)
    if arr.size:
        if low is not None:
            lo = np.minimum.reduce(arr, axis=None)
            if lo <= low if low_open else lo < low:
                return None
        if high is not None and np.maximum.reduce(arr, axis=None) > high:
            return None
    return arr


_EXACT = 2 ** 53  # ints up to this size are floats exactly
_RANGES: dict = {}  # (low, high, low_open) -> closed_range(...), for _host_array
_INT_BOUNDS: dict = {}  # (low, high, low_open) -> int_bounds(...), for _host_ints


def host_rows(values, n, limits, tail=None):
    """The common case of several per-sample numbers given as NumPy arrays of shape ``(n,)``
    (color_jitter's four factors): one C-contiguous ``(n, k)`` float64 matrix, column ``j``
    holding ``values[j]`` as :func:`per_sample` would give it, converted and checked in one
    compiled loop (:func:`gpuaug._compiled.rows_in`: finite, each column against its range in
    ``limits``, a :class:`RowLimits`). ``tail``: an ``(n,)`` column appended as it is (a
    constant column such as the dtype's maximum). None when any value is something else (a
    scalar, flags, another shape, a CUDA array) or fails a check: the caller then takes each
    value through :func:`per_sample`, whose checks and messages are the contract."""
    for v in values:
        if type(v) is not np.ndarray or v.shape != (n,) or v.dtype.kind not in "biuf":
            return None
    bounds = limits.bounds
    if bounds is None:
        return None
    k = len(values)
    got = np.empty((n, k + (tail is not None)))
    # float64 arrays as they are (one compile per column count), the others converted first
    vals = tuple(v if v.dtype.char == "d" else v.astype(np.float64) for v in values)
    if not rows_in(vals, bounds[0], bounds[1], got):
        return None
    if tail is not None:
        got[:, k] = tail
    return got


class RowLimits:
    """The ranges of :func:`host_rows`' columns: :meth:`gpuaug._registry.OpSpec.limits` dicts,
    made once per op (at module level). ``bounds``: (lows, highs), (k,) float64 arrays of
    :func:`closed_range`'s bounds per column, or None for a bound that is no exact float (the
    general path compares those)."""

    __slots__ = ("key", "bounds")

    def __init__(self, *limits):
        self.key = tuple((d["low"], d["high"], d["low_open"]) for d in limits)
        got = [closed_range(low, high, low_open) for low, high, low_open in self.key]
        self.bounds = None if None in got else (np.array([g[0] for g in got]), np.array([g[1] for g in got]))

    def __len__(self):
        return len(self.key)


_MAX = sys.float_info.max


def closed_range(low, high, low_open):
    """``(lo, hi)``, floats such that a float64 value ``v`` is finite and passes
    :func:`per_sample`'s bounds (``v >= low`` or ``v > low`` when ``low_open``, ``v <= high``)
    exactly when ``lo <= v <= hi``: NaN fails both comparisons, infinities fall outside
    ``[-max, max]``, and an open bound moves to the next float (``v > L`` is ``v >= nextafter(L,
    inf)`` for floats). One pair of comparisons instead of an isfinite and one per bound. None
    for a bound that is not an exact float (an int past 2**53, another type)."""
    for b in (low, high):
        if b is not None and (type(b) not in (int, float) or type(b) is int and not -_EXACT <= b <= _EXACT):
            return None
    lo = -_MAX if low is None else float(low)
    if low_open and low is not None:
        lo = math.nextafter(lo, math.inf)
    hi = _MAX if high is None else float(high)
    return max(lo, -_MAX), min(hi, _MAX)


_NONE = object()


def spec_range(spec, name, dtype="uint8"):
    """:func:`closed_range` of op spec ``spec``'s parameter ``name`` (for ``dtype``), kept: the
    ``(lo, hi)`` an op's compiled rows check host values against, as :func:`per_sample` checks
    them with ``spec.limits(name, dtype)``; None for a bound that is not an exact float."""
    key = (spec.name, name, dtype)  # dtype as given (a name or a dtype): no np.dtype() per call
    got = _SPEC_RANGES.get(key, _NONE)
    if got is _NONE:
        if len(_SPEC_RANGES) >= 256:
            _SPEC_RANGES.clear()
        got = _SPEC_RANGES[key] = closed_range(**spec.limits(name, dtype))
    return got


_SPEC_RANGES: dict = {}


def _cupy_ndarray():
    """cupy.ndarray when CuPy is imported (else no value can be one): a type to compare with."""
    return getattr(sys.modules.get("cupy"), "ndarray", _NOT_A_TYPE)


class _NOT_A_TYPE:  # what _cupy_ndarray gives without CuPy: no value's type
    pass


def _device_array(arr, n, shape, integer, boolean):
    """The common case of per-sample values already on the GPU: a CuPy array of shape
    ``(n,) + shape`` on the batch's device (or, outside a batch's scope, on the current one)
    that needs no conversion (flags of any dtype; float64, or int64 for ``integer``) is
    returned as it is, as the general path returns it; None for anything else, which the
    general path handles (conversions, other devices and their errors)."""
    if arr.shape != ((n,) + shape if shape else (n,)):
        return None
    own = arr.data.device_id
    want = BATCH_DEVICE.get()
    if want is None:
        want = sys.modules["cupy"].cuda.runtime.getDevice()
    if own != want:
        return None
    if boolean or arr.dtype.char == ("q" if integer else "d"):
        return arr
    return None


def per_sample(value, n, name, *, shape=(), integer=False, finite=True, low=None, high=None,
               low_open=False, device=False, boolean=False):
    """Broadcast ``value`` to shape ``(n,) + shape``.

    Returns a float64 (or int64 when ``integer``) NumPy array, or a CuPy array when the
    value is already on the GPU and ``device`` is True (the op runs there; float64 / int64,
    except device flags, which keep their dtype for :func:`column_stack`). ``boolean``:
    a flag per sample; host values must be True/False or 0/1 (so that a probability such as
    0.5 passed by mistake is refused rather than read as True). Raises ValueError/TypeError
    naming ``name``, the value and what is accepted.
    """
    shape = tuple(shape)
    if device and type(value) is _cupy_ndarray():
        got = _device_array(value, n, shape, integer, boolean)
        if got is not None:
            return got
    if type(value) is np.ndarray:
        got = _host_array(value, n, shape, integer, finite, low, high, low_open, boolean)
        if got is not None:
            return got
        return _per_sample(value, n, name, shape, integer, finite, low, high, low_open, device, boolean)
    if not shape and type(value) in _SCALARS:
        fast = _scalar(value, n, integer, low, high, low_open, boolean)
        if fast is not None:
            return fast
    elif shape and type(value) is tuple and len(value) <= 16:  # e.g. a mean per channel
        key = (value, n, shape, integer, finite, low, high, low_open, boolean)
        try:
            got = _TUPLES.get(key)
        except TypeError:  # unhashable items: the general path says what is wrong
            got = key = None
        if got is not None:
            return got
        got = _per_sample(value, n, name, shape, integer, finite, low, high, low_open, device, boolean)
        if key is not None and isinstance(got, np.ndarray) and all(type(v) in _SCALARS for v in value):
            got.flags.writeable = False  # shared by every call with this tuple
            if len(_TUPLES) >= 256:
                _TUPLES.pop(next(iter(_TUPLES)))
            _TUPLES[key] = got
        return got
    return _per_sample(value, n, name, shape, integer, finite, low, high, low_open, device, boolean)


#: per_sample results for tuples of numbers (per-channel means, fills...), read-only.
_TUPLES: dict = {}


def _per_sample(value, n, name, shape, integer, finite, low, high, low_open, device, boolean):
    what = "flags (True/False or 0/1)" if boolean else "numbers"
    accepted = (f"a value of shape {shape} or {(n,) + shape} (one per sample)" if shape
                else f"{'a flag' if boolean else 'a number'} or a sequence of {n} {what} (one per sample)")
    if value is None:
        raise TypeError(f"{name}: got None; expected {accepted}")
    if is_cuda_array(value):
        cp = cupy_module()
        # a CuPy array's own device, read before cp.asarray: inside another device's scope
        # (the warp ops' parameter maths run on x's GPU) cp.asarray copies it across devices
        own = value.data.device_id if isinstance(value, cp.ndarray) else None
        arr = cp.asarray(value) if hasattr(value, "__cuda_array_interface__") else cp.from_dlpack(value)
        own = arr.data.device_id if own is None else own
        if BATCH_DEVICE.get() is not None and own != BATCH_DEVICE.get():
            raise ValueError(f"{name}: is on GPU {own} but x is on GPU {BATCH_DEVICE.get()}; "
                             "expected per-sample values on x's GPU (or host values)")
        if not device:
            arr = cp.asnumpy(arr)
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):  # ragged nesting, objects NumPy cannot hold in one array
            arr = None
        if arr is None or arr.dtype.kind not in "biuf":
            raise TypeError(f"{name}: got {_show(value)}; expected {accepted}")
    if tuple(arr.shape) == shape:
        arr = arr.reshape((1,) + shape)
        xp = np if isinstance(arr, np.ndarray) else cupy_module()
        arr = xp.broadcast_to(arr, (n,) + shape)
    elif tuple(arr.shape) != (n,) + shape:
        raise ValueError(f"{name}: got shape {tuple(arr.shape)} ({_fmt(value) if isinstance(arr, np.ndarray) else 'on the GPU'}); "
                         f"expected {accepted}")
    if not isinstance(arr, np.ndarray):  # on the GPU: no value checks (would synchronise)
        if boolean:  # flags only feed column_stack, whose gather kernel reads any numeric dtype
            return arr
        return arr.astype(np.int64 if integer else np.float64, copy=False)  # no copy kernel if it is one
    if boolean:
        if arr.dtype.kind != "b" and not np.all((arr == 0) | (arr == 1)):
            raise ValueError(f"{name}: got {_bad(value, arr, (arr != 0) & (arr != 1))}; expected True/False or 0/1 per sample "
                             "(a flag, not a probability: draw flags with gpuaug.random.bernoulli)")
        return arr.astype(np.float64)
    if integer:
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
                bad = ~np.isfinite(arr) | (arr != np.round(arr))
                raise ValueError(f"{name}: got {_bad(value, arr, bad)}; expected integers")
        if arr.dtype.kind in "uf" and arr.size:  # int64 would wrap them silently (uint64 2**64-2 -> -2)
            big = arr >= 2.0 ** 63 if arr.dtype.kind == "u" else np.abs(arr) >= 2.0 ** 63
            if np.any(big):
                raise ValueError(f"{name}: got {_bad(value, arr, big)}; expected integers in "
                                 "[-2**63, 2**63)")
        arr = arr.astype(np.int64)
    else:
        arr = arr.astype(np.float64)
        if finite and not np.isfinite(arr).all():
            raise ValueError(f"{name}: got {_bad(value, arr, ~np.isfinite(arr))}; expected finite numbers "
                             "(no NaN or inf)")
    if (low is not None or high is not None) and arr.size:
        # Without NaN (integers, or floats checked finite above) one min and one max decide;
        # else element-wise, where NaN compares false as before.
        plain = integer or finite
        if low is not None:
            below = arr.min() if plain else None
            below = (below <= low if low_open else below < low) if plain else \
                ((arr <= low) if low_open else (arr < low)).any()
        if low is not None and below:
            raise ValueError(f"{name}: got {_bad(value, arr, arr <= low if low_open else arr < low)}; expected "
                             f"values {'>' if low_open else '>='} {low}")
        if high is not None and (arr.max() > high if plain else (arr > high).any()):
            raise ValueError(f"{name}: got {_bad(value, arr, arr > high)}; expected values <= {high}")
    return arr


def host_size(value, name, n=None):
    """A ``(h, w)`` size (int or pair of ints, > 0); shapes are decided on the host."""
    t = type(value)  # the usual forms, an int or a tuple of two ints > 0, without NumPy
    if t is int and value > 0:
        return value, value
    if t is tuple and len(value) == 2 and type(value[0]) is int and type(value[1]) is int and (
            value[0] > 0 and value[1] > 0):
        return value[0], value[1]
    if is_cuda_array(value):
        raise TypeError(f"{name}: got a CUDA array; output sizes decide the output shape and must "
                        "be host values (ints)")
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: got {_show(value)}; expected an int or a pair (height, width) of ints") from None
    if a.shape == ():
        a = np.array([a, a])
    if a.shape != (2,) or not np.issubdtype(a.dtype, np.integer) and not (
            np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)) and np.all(a == np.round(a))):
        raise ValueError(f"{name}: got {_fmt(value)}; expected an int or a pair (height, width) of ints")
    if np.any(a <= 0):
        raise ValueError(f"{name}: got {_fmt(value)}; expected positive sizes")
    return int(a[0]), int(a[1])


def param_item(params, n):
    """``(key, matrix)`` for :func:`gpuaug.kernels._cuda.stage`: host parameters as the (n, P)
    float32 matrix the kernels read. When every row is the same (bit for bit: scalar arguments),
    the matrix is keyed by its shape and row, so its device copy comes from the constant cache
    and a loop of calls with the same scalars uploads nothing."""
    p = np.ascontiguousarray(params, np.float32).reshape(n, -1)
    return _uniform_key("params", p), p


def _uniform_key(tag, m):
    """A key for the C-contiguous 2-D matrix ``m`` when its rows are bit-identical, else None."""
    if m.size and m.size <= 1 << 16:
        row = m[0].tobytes()  # first and last rows first: per-sample values fail there, cheaply
        if m[-1].tobytes() == row and m.tobytes() == row * m.shape[0]:
            return (tag, m.shape, m.dtype.char, row)
    return None


def column_stack(cols, n):
    """Stack per-sample columns (each (n,) or (n, k)) into one (n, P) float array.

    NumPy float64 when every column is on the host; CuPy float32 (on the current stream, no
    sync; the kernels read float32 parameters) when any column is a CUDA array.
    """
    # device columns of shape (n,) stay 1-D (gather_table reads them as one column): a CuPy
    # reshape costs about a microsecond per column
    flat = [c if c.ndim == 2 and c.shape[0] == n or c.ndim == 1 and type(c) is not np.ndarray and c.shape[0] == n
            else c.reshape(n, -1) for c in cols]
    if all(isinstance(c, np.ndarray) for c in flat):
        return np.concatenate(flat, axis=1) if flat else np.zeros((n, 0))
    return _gather_device(flat, n)


#: dtype -> code of kernels/params.cu; 10 marks a column of the uploaded host block.
_GATHER_CODES = {np.dtype(t): c for t, c in ((np.bool_, 0), (np.uint8, 0), (np.int8, 1), (np.int32, 2),
                                             (np.int64, 3), (np.float32, 4), (np.float64, 5),
                                             (np.uint32, 6), (np.int16, 7), (np.uint16, 8),
                                             (np.float16, 9))}
_HOST_BLOCK = 10


def gather_table(flat, on_host, address):
    """(column table, host block or None, P) for kernels/params.cu: ``flat`` holds (n, k)
    columns (device columns may also be (n,): one column), ``on_host[g]`` says which are host
    arrays (packed into one float64 block) and
    ``address(c)`` gives a device column's address. Pure host logic (the tests run the
    kernel on an emulator with it)."""
    rows, col, hcol = [], 0, 0
    for c, h in zip(flat, on_host):
        k = c.shape[1] if c.ndim == 2 else 1
        if h:
            rows.append([hcol, _HOST_BLOCK, -1, 1, k, col])  # row stride filled in below
            hcol += k
        else:
            it = c.itemsize
            rows.append([address(c), _GATHER_CODES[c.dtype], c.strides[0] // it,
                         c.strides[1] // it if c.ndim == 2 else 1, k, col])
        col += k
    if hcol:
        for r in rows:
            if r[1] == _HOST_BLOCK:
                r[2] = hcol
    desc = np.array(rows, np.int64).reshape(len(flat), 6)
    if not hcol:
        return desc, None, col
    return desc, np.concatenate([np.asarray(c, np.float64) for c, h in zip(flat, on_host) if h], axis=1), col


def _gather_device(flat, n):
    """column_stack with a CUDA array among the columns: one launch of
    ``gpuaug_gather_params`` (kernels/params.cu) reads every column in place (any numeric dtype
    and strides) into a new (n, P) float32 array (what every kernel reads: the CUDA C launch
    then converts nothing); the host columns and the column table travel
    together in one copy from pinned memory (never a pageable upload, which can make the host
    wait for the stream). Replaces an astype per device column, a concatenate and its copies."""
    cp = cupy_module()
    from gpuaug.kernels import _cuda

    flat = [c if isinstance(c, np.ndarray) or c.dtype in _GATHER_CODES else c.astype(cp.float64)
            for c in flat]  # e.g. uint64, complex: converted first, as before
    # a recorded call (gpuaug._plan) must log its constants: no memo then
    key = None if _cuda.RECORDING[0] else _gather_key(flat, cp.cuda.get_current_stream().ptr)
    got = _GATHER.get(key) if key is not None else None
    if got is not None:  # the memo's own launch: tables and grid fixed
        out = cp.ndarray((n, got[2]), cp.float32)  # cupy.empty, less a call
        got[4](out.data.ptr)
        return out
    desc, host, col = gather_table(flat, [isinstance(c, np.ndarray) for c in flat], lambda c: c.data.ptr)
    out = cp.empty((n, col), cp.float32)
    if not col:
        return out
    # The column table is a function of the columns' addresses, dtypes and strides:
    # keyed, so a loop over the same (or recycled) parameter arrays uploads it once.
    table = (("gather",) + (desc.tobytes(),), desc)
    hkey = None
    if host is not None:
        hkey = _uniform_key("gather-host", host)
        dtab, block = _cuda.stage(table, (hkey, host))
    else:
        (dtab,), block = _cuda.stage(table), np.uint64(0)
    fn = _cuda.get_function("params.cu", "gpuaug_gather_params<float>")
    if key is not None and (host is None or hkey is not None):
        if len(_GATHER) >= 64:  # both uploads are constants: the next call may reuse them
            _GATHER.pop(next(iter(_GATHER)))
        elif _clear_gather not in _cuda.ON_CLEAR:
            _cuda.ON_CLEAR.append(_clear_gather)
        got = (dtab, block, col, fn)
        _GATHER[key] = got + (_gather_launch(got, len(flat), n),)
    total = n * col
    fn(((total + 255) // 256,), (256,), (dtab, np.int32(len(flat)), block, out, np.int32(col), np.int32(n)))
    return out


def _gather_launch(got, ncols, n):
    """``go(out_ptr)``: the memo's gather launch with its tables, grid and sizes packed once
    (``Kernel.prepared``; the output's address is the one argument left)."""
    dtab, block, col, fn = got
    total = n * col
    types = (int, np.int32, type(block) if type(block) is np.uint64 else int, int, np.int32, np.int32)
    go = fn.prepared(((total + 255) // 256,), (256,), types)
    head = (dtab.data.ptr, np.int32(ncols), block if type(block) is np.uint64 else block.data.ptr)
    tail = (np.int32(col), np.int32(n))
    return lambda ptr: go(head + (ptr,) + tail)


#: _gather_device's memo: the columns' layout (device columns by address, dtype, strides and
#: shape; host columns by their bytes) and the stream -> (device table, host block, P, kernel),
#: kept only when both uploads came from the constant cache (the host columns one value per
#: column, such as a flag given as False beside device flags) and used on the stream that made
#: them (which then reads them after their upload). Dropped with the constant cache.
_GATHER: dict = {}


def _gather_key(flat, stream):
    parts = [stream]
    for c in flat:
        if isinstance(c, np.ndarray):
            if c.size > 4096:
                return None  # large host columns: uploaded per call anyway
            parts.append((c.shape, c.dtype.char, c.tobytes()))
        else:
            parts.append((c.data.ptr, c.data.device_id, c.dtype.char, c.shape, c.strides))
    return tuple(parts)


def _clear_gather():
    _GATHER.clear()
