"""Launch plans: an op call with host scalars, made once, replayed as its bare launches.

A call such as ``gpuaug.normalize(x, mean, std)`` in a training loop repeats with the same
shapes and the same scalar arguments. Its host work (argument checks, parameter matrices,
descriptor tables, kernel choice, output allocation checks) then gives the same launches
every time, apart from the input's and output's addresses. ``gpuaug.<op>`` (the functions
the package exports) keeps a plan per call signature:

- **key**: the op, the input's type, shape, strides, dtype, device and address modulo 16,
  and every other argument (type and value; hashable scalars, strings and tuples of them
  only). Calls with ``stream=``, a ``backend`` other than "cuda", a list or a NumPy input,
  an array argument (per-sample values), or an ``out=`` other than a CuPy array at a
  256-byte boundary (as fresh allocations are) are never planned. An ``out=`` is not part of
  the key: the plan, made without it, replays into it when it fits (shape, dtype, device,
  C order, no overlap with the input; else the op itself runs and says what is wrong).
- **made** the second time a key is seen (a random scalar per call never repeats, so it
  costs one dict update): the call runs normally while :class:`gpuaug.kernels._cuda.record`
  logs its kernel launches and the constant-cache entries it used. Every array a launch
  reads or writes must be the input, the output, a constant (a parameter matrix, or the
  descriptor table of the input or the output) or scratch memory (given a new allocation of
  the same size per replay); a fresh upload or a launch through CuPy leaves the key unplanned.
- **checked** before use: the op runs once more normally, and the plan replays twice into
  outputs (and scratch memory) filled with two different byte patterns; all four results must
  be equal bit for bit (this catches work the log cannot see, such as a CuPy kernel writing the output, and
  any call that is not a pure function of its key). The comparisons run on the device behind
  an event; the host never waits for them: calls run the op itself until the event has
  completed, then the plan is kept or refused.
- **replayed**: allocate the output, patch the addresses (and the descriptor tables, from the
  constant cache) and launch, on CuPy's current stream.

``GPUAUG_PLAN=0`` turns plans off. :func:`clear_plans` drops them (so does
``gpuaug.kernels._cuda.clear_constants``).
"""
from __future__ import annotations

import functools
import os

import numpy as np

_PLANS: dict = {}     # key -> Plan, or None (not plannable)
_SEEN: dict = {}      # key -> times seen before a plan was tried
_LIMIT = 256
_OFF = object()
_CP = []              # [cupy.ndarray], once cupy is imported by a planned call
#: op plans: replays, made, refused; run() plans (per-sample parameters): run_replays, run_made,
#: run_refused, and run_byval (the replays that passed their host values by value).
stats = {"replays": 0, "made": 0, "refused": 0, "run_replays": 0, "run_made": 0, "run_refused": 0,
         "run_byval": 0}


def _drop(entry):
    """A run() plan's parameter ring waits for its copies in flight before it is freed."""
    if type(entry) is tuple and entry[2] is not None:
        entry[2].drain()


def clear_plans():
    """Drop every plan (they hold device constants) and every count."""
    for entry in _RUN_PLANS.values():
        _drop(entry)
    _PLANS.clear()
    _SEEN.clear()
    _RUN_PLANS.clear()
    _RUN_SEEN.clear()


def enabled() -> bool:
    if _ENV is not None:  # os.environ's own dict (it updates it on every set/del): no key encoding
        return _ENV.get(_ENV_KEY, _ENV_ON) not in _ENV_OFF
    return os.environ.get("GPUAUG_PLAN", "1") not in ("", "0")


# enabled() runs on every planned call: os.environ.get encodes the key and decodes the value
# (about half a microsecond). Where os.environ keeps its data as CPython does, read that.
try:
    _ENV = os.environ._data
    _ENV_KEY = os.environ.encodekey("GPUAUG_PLAN")
    _ENV_ON = os.environ.encodevalue("1")
    _ENV_OFF = frozenset(map(os.environ.encodevalue, ("", "0")))
except (AttributeError, TypeError):  # pragma: no cover - another Python
    _ENV = None


def _arg_key(v):
    """A hashable (type, value) for a plannable argument, or _OFF."""
    t = type(v)
    if t is float:  # by its bits: -0.0 == 0.0 (and hashes alike), but a kernel may tell them apart
        return (t, v.hex())
    if t in (int, bool, str, type(None)):
        return (t, v)
    if isinstance(v, np.generic):
        return (t, v.tobytes())
    if t is tuple and len(v) <= 16:
        parts = tuple(_arg_key(e) for e in v)
        return _OFF if _OFF in parts else (t, parts)
    return _OFF


_WRAPPED: dict = {}
#: op plans replay into a caller's ``out=`` aligned as a fresh allocation is (CuPy's are at 512
#: bytes): a plan is recorded without out=, and fast paths choose by the output's alignment.
_OUT_ALIGN = 256


def planned_op(name, func):
    """:func:`planned` made once per op (so ``gpuaug.flip`` is one object wherever it is looked up)."""
    got = _WRAPPED.get(name)
    if got is None or getattr(got, "unplanned", got) is not func:
        got = _WRAPPED[name] = planned(name, func)
    return got


def planned(name, func):
    """``func`` (an op) behind its launch plans (see the module docstring)."""
    if not enabled():
        return func

    last = [None]  # (args, kw items, parts) of the last keyed call: see _same_args

    @functools.wraps(func)
    def call(x, *args, out=None, stream=None, backend=None, **kw):
        if stream is None and backend in (None, "cuda") and _CP and type(x) is _CP[0] and (
                out is None or type(out) is _CP[0] and out.data.ptr % _OUT_ALIGN == 0):
            items = tuple(kw.items()) if kw else ()
            memo = last[0]
            if memo is not None and _same_args(memo, args, items):
                parts = memo[2]  # the memo holds plannable keys only
            else:
                parts = _parts(args, items)
                if parts is not None:
                    last[0] = (args, items, parts)  # holds the objects: their ids cannot be reused
            if parts is not None:
                mem = x.data
                key = (name, x.shape, x.strides, x.dtype, mem.ptr % 16, mem.device_id, parts)
                plan = _PLANS.get(key, _OFF)
                if type(plan) is _Pending:
                    plan = plan.settle(key)
                if type(plan) is Plan:
                    got = plan.run(x) if out is None else plan.run(x, out) if _fits(out, plan, x) else None
                    if got is not None:
                        stats["replays"] += 1
                        return got
                elif plan is _OFF:
                    seen = _SEEN.get(key, 0)
                    if seen:
                        y = _make(key, func, x, args, kw)
                        if out is None:
                            return y
                        if _fits(out, y, x):  # the plan is made without out=: its result goes there
                            out[...] = y
                            return out
                        return func(x, *args, out=out, stream=stream, backend=backend, **kw)
                    if len(_SEEN) >= 4 * _LIMIT:
                        _SEEN.clear()
                    _SEEN[key] = 1
        elif not _CP and type(x).__module__.startswith("cupy"):
            import cupy

            _CP.append(cupy.ndarray)
            return call(x, *args, out=out, stream=stream, backend=backend, **kw)
        return func(x, *args, out=out, stream=stream, backend=backend, **kw)

    call.unplanned = func
    call.__gpuaug_op__ = name  # what gpuaug.dali.compose reads to recognise an op
    return call


def _parts(args, items):
    """The keys of a call's positional and keyword arguments (keywords sorted by name), or None
    at the first one that cannot be planned (a per-sample array: most unplanned calls stop at
    their first values, without keying the rest)."""
    nd = np.ndarray
    cp = _CP[0] if _CP else nd
    for a in args:  # per-sample arrays first: most unplanned calls are known by a type check
        if type(a) is nd or type(a) is cp:
            return None
    for _, v in items:
        if type(v) is nd or type(v) is cp:
            return None
    keys = []
    for a in args:
        k = _arg_key(a)
        if k is _OFF:
            return None
        keys.append(k)
    if items:
        for name, v in sorted(items):
            k = _arg_key(v)
            if k is _OFF:
                return None
            keys.append((name, k))
    return tuple(keys)


def _same_args(memo, args, items):
    """The call's positional and keyword arguments are the very objects of the memo's call (so
    their keys are its keys: :func:`_arg_key` takes immutable scalars, strings and tuples of
    them only, whose values an object keeps). A loop passes the same ``mean``/``std`` tuples
    every call: this replaces their per-element keys (float.hex per value) with identity checks."""
    margs, mitems = memo[0], memo[1]
    if len(margs) != len(args) or len(mitems) != len(items):
        return False
    for a, b in zip(margs, args):
        if a is not b:
            return False
    for (ka, va), (kb, vb) in zip(mitems, items):
        if va is not vb or ka != kb:
            return False
    return True


def _remember(key, plan):
    _keep(_PLANS, _SEEN, key, plan)


def _keep(plans, seen, key, plan):
    if len(plans) >= _LIMIT:
        _drop(plans.pop(next(iter(plans))))
    plans[key] = plan
    seen.pop(key, None)
    tag = "" if plans is _PLANS else "run_"
    stats[tag + ("made" if plan is not None else "refused")] += 1


def _make(key, func, x, args, kw):
    """Run the call under the recorder; start checking the plan made from its log (or remember
    None for ``key``)."""
    from gpuaug.kernels._cuda import record

    with record() as log:
        y = func(x, *args, **kw)
    plan = Plan.from_log(log, x, y)
    pending = plan.start_check(func, x, args, kw, y) if plan is not None else None
    if pending is None:
        _remember(key, None)
    else:
        _PLANS[key] = pending
    return y


class _Pending:
    """A plan whose check runs on the device: the comparisons' flags and an event behind them.
    The host never waits for it: until the event has completed, calls run the op itself."""

    __slots__ = ("plan", "flags", "event")

    def __init__(self, plan, flags, event):
        self.plan, self.flags, self.event = plan, flags, event

    def settle(self, key, plans=None, seen=None):
        """The plan (checked), None (refused), or self while the check is still running.
        ``plans``/``seen``: the tables it belongs to (default: the op plans')."""
        if not self.event.done:
            return self
        plan = self.plan if bool(self.flags.all()) else None  # done: reading it does not wait
        _keep(_PLANS if plans is None else plans, _SEEN if seen is None else seen, key, plan)
        return plan


class Plan:
    """The launches of one call, with the input's and output's addresses as slots."""

    __slots__ = ("shape", "dtype", "dev", "launches", "temps", "bound", "tables", "byval", "views", "kept")

    def __init__(self, shape, dtype, dev, launches, temps=()):
        self.shape, self.dtype, self.dev, self.launches = shape, dtype, dev, launches
        self.temps = temps  # byte sizes of the scratch allocations the launches use
        self.bound = None   # per launch: (go(args), template with arrays as addresses, patches)
        #: descriptor tables by (address of the array they describe) * 64 + argument index, kept
        #: once the constant cache has them uploaded (so any stream may read them): a replay's
        #: lookup without the cache's key. Small: a loop cycles through a few arrays.
        self.tables = {}
        self.byval = None   # per launch, as bound: the by-value builds (see bind_byval)
        self.views = None   # (thread's parameter block, its (n, P) view) of the last by-value run
        self.kept = None    # (stream, scratch arrays) of by-value replays (see _stream_scratch)

    def bind_byval(self, floats):
        """Bind every launch that reads the parameter matrix (run()'s plans) to its kernel's
        by-value build with blocks of ``floats`` floats, which takes the matrix in its launch
        arguments (kernels/common.cuh GPUAUG_BYVAL): a replay then copies nothing to the device.
        True when every such launch has one; else False and the plan keeps its pointer launches."""
        bound = []
        for fn, grid, block, smem, template, patches in self.launches:
            index = [i for i, kind, _ in patches if kind == 4]
            if len(index) > 1:
                return False
            other = fn.byval(index[0], floats) if index and hasattr(fn, "byval") else None
            if index and other is None:
                return False
            go = None
            if other is not None:
                cp = _CP[0]
                types = [int if type(a) is cp else type(a) for a in template]
                for i, _, _ in patches:
                    types[i] = int
                go = other.prepared(grid, block, tuple(types), smem, index[0])
                if go is None:
                    return False
            bound.append(go)
        plain = self.bound or self._bind()
        self.byval = [b if b is not None else p[0] for b, p in zip(bound, plain)]
        return True

    def _bind(self):
        """Each launch as a prepared launcher (``Kernel.prepared``: the argument packing fixed
        once) and its template with the kept arrays (parameter matrices) as addresses; the
        arrays themselves stay referenced by ``launches``."""
        cp = _CP[0] if _CP else None
        bound = []
        for fn, grid, block, smem, template, patches in self.launches:
            vals = [a.data.ptr if cp is not None and type(a) is cp else a for a in template]
            types = list(map(type, vals))
            for i, _, _ in patches:
                types[i] = int
            prep = getattr(fn, "prepared", None)
            go = prep(grid, block, tuple(types), smem) if prep is not None else None
            if go is None:
                def go(args, fn=fn, grid=grid, block=block, smem=smem):
                    fn(grid, block, tuple(args), shared_mem=smem)
            bound.append((go, vals, patches))
        self.bound = bound
        return bound

    @classmethod
    def from_log(cls, log, x, y, params=False):
        """A plan from a recorded call's log, or None when it cannot be replayed. ``params``:
        the per-sample parameter matrix (``("params", array)`` in the log) becomes a slot too,
        filled per replay (run()'s plans); else a fresh upload refuses the plan."""
        cp = _CP[0] if _CP else None
        if cp is None or type(y) is not cp or not y.flags.c_contiguous or y.size == 0:
            return None
        from gpuaug._batch import extent

        xs, ys = extent(x, True), extent(y, True)
        xs, ys = (xs[0], max(xs[1], xs[0] + 1)), (ys[0], max(ys[1], ys[0] + 1))
        if ys[0] < xs[1] and xs[0] < ys[1]:  # the output shares memory with the input
            return None
        consts, par, uploaded = {}, None, []
        for entry in log:
            if entry[0] == "dirty":
                return None
            if entry[0] == "const":
                consts[id(entry[2])] = (entry[1], entry[3])
            elif entry[0] == "upload":
                uploaded.extend(entry[1])
            elif entry[0] == "params":
                if par is not None:
                    return None  # two parameter matrices: not run()'s one launch
                par = entry[1]
        if not params:
            par = None
        if params and par is None or any(a is not par for a in uploaded):
            return None  # a fresh upload other than the parameters: not a function of the key
        launches, temps = [], {}  # temps: id of a scratch allocation -> (index, its bytes)
        for entry in log:
            if entry[0] != "launch":
                continue
            _, fn, grid, block, smem, args = entry
            template, patches = list(args), []  # patched slots hold None: no reference kept
            for i, a in enumerate(args):
                if type(a) is not cp:
                    continue
                p = a.data.ptr
                if a is par:
                    patches.append((i, 4, 0))
                elif xs[0] <= p < xs[1]:
                    patches.append((i, 0, p - xs[0]))
                elif ys[0] <= p < ys[1]:
                    patches.append((i, 1, p - ys[0]))
                elif id(a) in consts:
                    k, host = consts[id(a)]
                    if k[0] == "table":  # ("table", address, shape, strides, itemsize)
                        base = k[1]
                        if not (xs[0] <= base < xs[1] or ys[0] <= base < ys[1]):
                            return None
                        which = 0 if xs[0] <= base < xs[1] else 1
                        patches.append((i, 2, (which, base - (xs, ys)[which][0], k[2:], np.asarray(host))))
                    else:
                        continue  # a parameter matrix: the template keeps it
                else:
                    # Scratch memory (partial sums, row buffers): a new allocation of the same
                    # size per replay, at the same offset. The check replays with it filled with
                    # junk, so an op that needs it zeroed, or that reads values computed outside
                    # the log (a CuPy op), gets no plan.
                    mem = getattr(a.data, "mem", None)
                    if mem is None:
                        return None
                    got = temps.setdefault(id(mem), (len(temps), int(mem.size), int(mem.ptr)))
                    patches.append((i, 3, (got[0], p - got[2])))
                template[i] = None
            launches.append((fn, grid, block, smem, template, tuple(patches)))
        if not launches:
            return None
        sizes = tuple(size for _, size, _ in sorted(temps.values()))
        return cls(y.shape, y.dtype, y.device.id, tuple(launches), sizes)

    def run(self, x, out=None, fill=None, par=None, same_device=None, scratch=None):
        """Replay on CuPy's current stream (into ``out`` when given; scratch memory filled with
        the byte ``fill`` when given, for the check; ``par``: the parameter matrix of a run()
        plan; ``same_device``: the caller has checked the device; ``scratch``: the scratch
        arrays to use, from a parameter ring's slot, else new ones); None when the current
        device is not the plan's (the caller then runs the op normally)."""
        cu, cupy, get_device = _MODS or _mods()
        if same_device is None and get_device() != self.dev:
            return None
        if cu.RECORDING[0]:  # a replay's launches hold addresses, not arrays: no plan of them
            cu.log("dirty", "a plan replayed while recording")
        y = cupy.ndarray(self.shape, self.dtype) if out is None else out  # cupy.empty, less a call
        if self.temps and scratch is None:
            scratch = [cupy.empty(size, np.uint8) for size in self.temps]
            if fill is not None:
                for t in scratch:
                    t.fill(fill)
        bases = (x.data.ptr, y.data.ptr)
        consts = None
        bound = self.bound or self._bind()
        gos = None
        if type(par) is np.ndarray:  # host parameters: into this thread's block, by value
            gos = self.byval
            blk = cu.param_block()
            views = self.views
            if views is None or views[0] is not blk:
                views = self.views = (blk, blk[:par.size].reshape(par.shape))
            views[1][...] = par  # float64 -> float32, as the staged upload converts
        for j, (go, template, patches) in enumerate(bound):
            if gos is not None:
                go = gos[j]
            args = template.copy()
            for i, kind, v in patches:
                if kind < 2:
                    args[i] = bases[kind] + v
                elif kind == 2:
                    which, off, geo, old = v
                    addr = bases[which] + off
                    got = self.tables.get(addr * 64 + i)
                    if got is None:
                        if consts is None:
                            consts = cu.constants(self.dev)
                        got = _table(consts, addr, geo, old, self.tables, addr * 64 + i)
                    args[i] = got.data.ptr
                elif kind == 4:
                    args[i] = 0 if gos is not None else par.data.ptr
                else:
                    k, off = v
                    args[i] = scratch[k].data.ptr + off
            go(args)
        return y

    def start_check(self, func, x, args, kw, y, par=None):
        """Launch the check: the op again, and two replays into outputs filled with different
        bytes, all compared with ``y`` bit for bit on the device. A :class:`_Pending`, or None
        when the check fails on the host already. ``par``: the recorded call's parameters (a
        run() plan replays with them)."""
        import cupy

        again = func(x, *args, **kw)
        if type(again) is not type(y) or again.shape != y.shape or again.dtype != y.dtype:
            return None
        want = y.view(np.uint8).reshape(-1)
        flags = [(again.view(np.uint8).reshape(-1) == want).all()]
        for fill in (0xA5, 0x3C):
            out = cupy.empty(self.shape, self.dtype)
            out.view(np.uint8).fill(fill)
            if self.run(x, out, fill, par) is None:
                return None
            flags.append((out.view(np.uint8).reshape(-1) == want).all())
        event = cupy.cuda.Event(block=False, disable_timing=True)
        flags = cupy.stack(flags)
        event.record()
        return _Pending(self, flags, event)


# -- plans of run(): per-sample parameters ------------------------------------------------------
#
# A call with per-sample values (``gpuaug.flip(x, flags)``) cannot be planned by its arguments:
# the values change every call. Its host work splits in two: the op's own (argument checks, the
# per-sample parameter matrix), which depends on the values, and run()'s (the output, the
# kernel and its fast path, grids, descriptor tables, argument packing), which depends only on
# the geometry. run() keeps a plan per geometry key: the launches with the input, the output,
# the tables, the scratch memory and the parameter matrix as slots. Made, checked and refused
# as the op plans above (the check replays with the recorded call's own parameters).
#
# Host values reach the kernels one of two ways:
# - **by value** (where the matrix has at most 4096 values, every launch that reads it has a
#   by-value build, the GPU is 7.0+ and the driver 12.4+; ``GPUAUG_BYVAL=0`` turns it off): the values go
#   into this thread's parameter block and travel in the launches' own arguments (kernels/
#   common.cuh GPUAUG_BYVAL). Nothing is copied to the device and no event is recorded: on the
#   H200 a brightness call at 32 x 224 x 224 loops in about 21 us instead of 27;
# - through the plan's **pinned ring** (_Ring): one cudaMemcpyAsync per call.

_RUN_PLANS: dict = {}   # key -> (kernels, Plan, _Ring or None), _Pending or None (refused)
_RUN_SEEN: dict = {}


def run_key(batch, kernels, params, hw, extra, rest):
    """run()'s plan key, or None when the call cannot be planned (varshape, a stream, ...)."""
    cp = _CP[0]
    tp = type(params)
    if tp is np.ndarray:
        pk = params.shape
    elif tp is cp:
        pk = (params.shape, params.dtype.char, params.strides)
    else:
        return None
    if extra:
        ek = tuple(_arg_key(e) for e in extra)
        if _OFF in ek:
            return None
    else:
        ek = ()
    arrays = batch.arrays
    if len(arrays) != 1:
        return None
    x = arrays[0]
    if type(x) is not cp:
        return None
    mem = x.data
    return (id(kernels), x.shape, x.strides, x.dtype.char, mem.ptr % 16, mem.device_id, batch.layout,
            batch.single, hw, pk, ek, rest)


def launch(batch, kernels, params, extra, rest, normal, out=None):
    """The result of ``normal()`` (a launcher's CUDA C path, into ``out`` or a new output, on
    the current stream) for a dense CuPy batch, from run()'s plan of this geometry when there
    is one (see above); None when the call cannot be planned: the caller then runs it itself.
    ``extra``: scalar kernel arguments; ``rest``: whatever else decides the launches
    (hashable: output dtype, channels, layout, template...); ``out``: the caller's output, a
    CuPy array (its alignment is part of the key: fast paths choose by it)."""
    if not enabled():
        return None
    if not _CP:
        import cupy

        _CP.append(cupy.ndarray)
    if out is None:
        tail = -1
    elif type(out) is _CP[0]:
        tail = out.data.ptr % 16
    else:
        return None
    key = run_key(batch, kernels, params, getattr(batch.shapes, "hw", None), extra, rest)
    if key is None:
        return None
    return run_planned(key + (tail,), kernels, batch, params, normal, out)


def _fits(out, plan, x):
    """``out`` can take a replay of ``plan`` (or the array ``plan``): its shape, dtype, device,
    C order, and no byte shared with the input ``x`` (else the caller's own path checks it and
    says what is wrong)."""
    if out.shape != plan.shape or out.dtype != plan.dtype or not out._c_contiguous:
        return False
    dev = plan.dev if type(plan) is Plan else plan.data.device_id
    if out.data.device_id != dev:
        return False
    if x._c_contiguous:  # what extent gives for a C-contiguous array, without its loop
        lo = x.data.ptr
        hi = lo + x.nbytes
    else:
        from gpuaug._batch import extent

        lo, hi = extent(x, True)
    o = out.data.ptr
    return o + out.nbytes <= lo or hi <= o


def run_planned(key, kernels, batch, params, normal, out=None):
    """The result of run()'s launches for ``key`` from its plan, or None: the caller runs
    ``normal()`` (which this may call itself, recording it, to make the plan)."""
    mods = _MODS or _mods()
    cu = mods[0]
    if cu.RECORDING[0]:
        return None  # an op plan is being recorded: its log must see run()'s own launches
    got = _RUN_PLANS.get(key, _OFF)
    if type(got) is _Pending:
        got = got.settle(key, _RUN_PLANS, _RUN_SEEN)
    if type(got) is tuple:
        kern, plan, ring = got
        x = batch.arrays[0]
        if kern is kernels and mods[2]() == plan.dev and (out is None or _fits(out, plan, x)):
            if ring is None and plan.byval is not None:  # host values by value: no upload, no slot
                y = plan.run(x, out, None, params, True, _stream_scratch(plan) if plan.temps else None)
                stats["run_replays"] += 1
                stats["run_byval"] += 1
                return y
            slot = ring.take(params) if type(params) is np.ndarray else None
            par = _device_params(params, batch.n) if slot is None else slot[1]
            scratch = ring.scratch_of(slot, plan.temps) if plan.temps and slot is not None else None
            y = plan.run(x, out, None, par, True, scratch)  # (out, fill, par, same_device, scratch): no keywords
            if slot is not None:
                ring.sent(slot)
            stats["run_replays"] += 1
            return y
        return None
    if got is not _OFF:
        return None  # refused (or still being checked)
    if not _RUN_SEEN.get(key):
        if len(_RUN_SEEN) >= 4 * _LIMIT:
            _RUN_SEEN.clear()
        _RUN_SEEN[key] = 1
        return None
    with cu.record() as log:
        y = normal()
    par = next((e[1] for e in log if e[0] == "params"), None)
    plan = Plan.from_log(log, batch.arrays[0], y, params=True) if par is not None else None
    floats = cu.block_floats(params.size) if type(params) is np.ndarray else None
    # (the by-value builds are loaded on the current device: only when it is the plan's)
    byval = plan is not None and floats is not None and mods[2]() == plan.dev and plan.bind_byval(floats)
    if byval:  # the check replays by value, from the recorded call's own host values
        par = params
    pending = plan.start_check(lambda _x: normal(), batch.arrays[0], (), {}, y, par=par) if plan is not None else None
    if pending is None:
        _keep(_RUN_PLANS, _RUN_SEEN, key, None)
    else:
        ring = _Ring(par.shape) if type(params) is np.ndarray and not byval else None
        pending.plan = (kernels, plan, ring)
        _RUN_PLANS[key] = pending
    return y


def _stream_scratch(plan):
    """The scratch arrays of a by-value replay on the current stream: kept with the plan for the
    stream that used them last (the plan holds that stream, so its handle cannot be reused: the
    next replay on it is ordered after the last one's launches); new ones on another stream."""
    stream = _cupy().cuda.get_current_stream()
    kept = plan.kept
    if kept is not None and kept[0].ptr == stream.ptr:
        return kept[1]
    cupy = _cupy()
    scratch = [cupy.empty(size, np.uint8) for size in plan.temps]
    plan.kept = (stream, scratch)
    return scratch


class _Ring:
    """Pinned and device buffers for one run() plan's host parameters, up to ``SLOTS`` of each. A
    replay packs its parameters into the next slot as float32 (one NumPy copy), copies them
    with one cudaMemcpyAsync and records the slot's event behind its launches; the slot is
    free again once that event has completed. When the next slot is still in flight (the
    host is ahead of the device, so host time does not matter) the replay uses the staged
    upload instead: nothing waits. Saves the per-call device allocation and the staging
    area's bookkeeping."""

    SLOTS = 32            # at most; fewer for large matrices (BYTES pinned per ring)
    BYTES = 256 << 10
    SCRATCH = 1 << 20     # a plan's scratch memory up to this many bytes is kept per slot
    __slots__ = ("mem", "host", "dev", "ptrs", "events", "state", "i", "nbytes", "lock", "slots", "memcpy",
                 "stream", "streams", "last", "scratch")

    def __init__(self, shape):
        import threading

        cp = _cupy()
        self.nbytes = int(np.prod(shape)) * 4
        stride = (self.nbytes + 255) // 256 * 256
        k = self.slots = max(2, min(self.SLOTS, self.BYTES // stride))
        self.mem = cp.cuda.alloc_pinned_memory(stride * k)
        buf = np.frombuffer(self.mem, np.uint8, stride * k)
        self.host = [buf[i * stride:i * stride + self.nbytes].view(np.float32).reshape(shape)
                     for i in range(k)]
        dev = cp.empty((k, stride // 4), np.float32)  # one allocation, a row per slot
        self.dev = [dev[i, :self.nbytes // 4].reshape(shape) for i in range(k)]
        self.ptrs = [(h.ctypes.data, d.data.ptr) for h, d in zip(self.host, self.dev)]
        self.events = [_cuda().new_event() for _ in range(k)]
        self.state = [0] * k  # 0: free, 1: taken (being filled), 2: sent (free once its event is done)
        self.streams = [None] * k  # the stream each sent slot's event was recorded on
        self.scratch = [None] * k  # per slot: the plan's scratch arrays (see scratch_of())
        self.last = -1  # the slot sent last
        self.i = 0
        self.lock = threading.Lock()
        self.memcpy, self.stream = cp.cuda.runtime.memcpyAsync, cp.cuda.get_current_stream  # looked up once

    def take(self, params):
        """(slot index, device array, current stream) with ``params`` on their way to it (on
        that stream), or None when the slot is still in use."""
        with self.lock:
            i = self.i
            st = self.state[i]
            if st == 2:
                st = self._settle(i)
            if st:
                return None
            self.i = (i + 1) % self.slots
            self.state[i] = 1
        h = self.host[i]
        # an assignment casts as np.copyto(casting="unsafe") does, without its keyword call
        h[...] = params if params.shape == h.shape else params.reshape(h.shape)
        hp, dp = self.ptrs[i]
        stream = self.stream()
        self.memcpy(dp, hp, self.nbytes, 1, stream.ptr)
        return i, self.dev[i], stream

    def _settle(self, i):
        """The state of sent slot ``i`` now (call with the lock held): 0 once its event is done.
        The event of the slot sent last is asked first: when it is done, so is every slot sent
        before it on the same stream (a stream's events complete in order), and all of them are
        freed at once; a loop whose device keeps up (the host-bound case, where host time counts)
        then asks one event per round of the ring instead of one per call."""
        last = self.last
        if last >= 0 and self.state[last] == 2 and self.events[last].done:
            stream, state, streams = self.streams[last], self.state, self.streams
            for j in range(self.slots):
                if state[j] == 2 and streams[j] is stream:
                    state[j] = 0
                    streams[j] = None
            if state[i] == 0:
                return 0
        if self.events[i].done:
            self.state[i] = 0
            self.streams[i] = None
            return 0
        return 2

    def sent(self, slot):
        """Record slot ``slot``'s event behind the launches that read it (the current stream,
        which take() looked up: handed to record(), which would look it up again). The stream
        object is kept with the slot (so its address cannot be reused while the slot waits).
        The bookkeeping takes the lock: another thread's take() must not see the slot sent
        before it is the last one (it would free it behind an older event)."""
        i = slot[0]
        self.events[i].record(slot[2])
        with self.lock:
            self.streams[i] = slot[2]
            self.state[i] = 2
            self.last = i

    def scratch_of(self, slot, sizes):
        """Slot ``slot``'s scratch arrays of ``sizes`` bytes (made on its first use, then kept):
        the slot's event, recorded behind the launches that use them, guards their reuse as it
        guards the parameters'. None when they would take more than SCRATCH bytes (the caller
        allocates them per call)."""
        i = slot[0]
        got = self.scratch[i]
        if got is None:
            if sum(sizes) > self.SCRATCH:
                return None
            cupy = _cupy()
            got = self.scratch[i] = [cupy.empty(size, np.uint8) for size in sizes]
        return got

    def drain(self):
        """Wait for the slots in flight (before the buffers go back to CuPy's pool)."""
        for ev, st in zip(self.events, self.state):
            if st == 2:
                ev.synchronize()


def _device_params(params, n):
    """The float32 (n, P) device parameters of a replay: host values in one staged upload,
    converted while packed; device values in place when they are already float32 and
    contiguous (as gpuaug._run.device_params)."""
    if type(params) is np.ndarray:
        return _cuda().staging().upload_float32(params.reshape(n, -1))
    if params.dtype.char == "f" and params.ndim == 2 and params._c_contiguous and params.shape[0] == n:
        return params  # column_stack's gathered matrix: as it is (CuPy's calls cost a few us)
    cupy = _cupy()
    return cupy.ascontiguousarray(params, dtype=cupy.float32).reshape(n, -1)


_MODS: list = []  # [gpuaug.kernels._cuda, cupy, cupy.cuda.runtime.getDevice], once imported


def _mods():
    """_MODS, filled on first use (a from-import per replay costs a microsecond, and so does
    the attribute chain to getDevice)."""
    if not _MODS:
        import cupy

        from gpuaug.kernels import _cuda as cu

        _MODS.extend((cu, cupy, cupy.cuda.runtime.getDevice))
    return _MODS


def _cuda():
    """gpuaug.kernels._cuda (imported once)."""
    return (_MODS or _mods())[0]


def _cupy():
    return (_MODS or _mods())[1]


def _table(cache, ptr, geo, old, memo, slot):
    """The descriptor table of a dense batch at ``ptr`` (geometry as in the recorded key), from
    the constant cache; made from the recorded host table ``old`` by moving its addresses.
    Kept in ``memo[slot]`` (the plan's own) once its upload is known to be done: the memo holds
    the array, so the cache may drop it and the replay still reads valid memory."""
    key = ("table", ptr) + geo  # geo: (shape, strides, itemsize)
    got = cache.hit(key)
    if got is not None:
        if len(memo) >= 32:
            memo.clear()
        memo[slot] = got
        return got

    def make():
        t = old.copy()
        t[:, 0] += ptr - int(old[0, 0])
        return t
    return cache.get(key, make)


def _register_clear():
    from gpuaug.kernels import _cuda

    if clear_plans not in _cuda.ON_CLEAR:
        _cuda.ON_CLEAR.append(clear_plans)


_register_clear()
