"""Launch plans (gpuaug._plan): a repeated op call with the same shapes and scalar arguments
replays its recorded launches. GPU tests check every op's planned calls against the op itself
(same input, new input, new addresses), that the common ops do get plans, and that calls which
are not a pure function of their key (seed=None noise) never do. CPU tests drive the log
analysis and the replay with stand-ins for CuPy arrays and kernels."""
import sys
import types

import numpy as np
import pytest

import gpuaug
from gpuaug import _plan
from tests.test_determinism import example

OPS = sorted(gpuaug.registry)


def scalar_kwargs(kw, n):
    """The example's per-sample arrays as one value for the batch (sample 0's)."""
    out = {}
    for k, v in kw.items():
        a = np.asarray(v) if isinstance(v, (np.ndarray, list)) else None
        if a is not None and a.ndim >= 1 and a.shape[0] == n:
            v = a[0].item() if a.ndim == 1 else tuple(map(tuple, a[0].tolist())) if a.ndim == 3 else tuple(a[0].tolist())
        out[k] = v
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("name", OPS)
def test_planned_calls_equal_the_op(name):
    import cupy as cp
    rng = np.random.default_rng(7)
    n, h, w = 6, 20, 28
    x = cp.asarray(rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8))
    kw = scalar_kwargs(example(name, rng, n, h, w), n)
    raw = gpuaug.registry[name].func
    try:
        want = raw(x, **kw)
    except (TypeError, ValueError) as e:
        pytest.skip(f"{name} takes no scalar form of its example: {e}")
    fn = getattr(gpuaug, name)
    keep = []
    for _ in range(4):  # seen, made (and checked), replayed, replayed
        got = fn(x, **kw)
        keep.append(got)  # kept: each call gets a new output address
        cp.testing.assert_array_equal(got, want)
    x2 = cp.asarray(rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8))
    cp.testing.assert_array_equal(fn(x2, **kw), raw(x2, **kw))  # other pixels, other address


@pytest.mark.gpu
def test_common_ops_are_replayed():
    import cupy as cp
    rng = np.random.default_rng(8)
    x = cp.asarray(rng.integers(0, 256, (8, 32, 48, 3), dtype=np.uint8))
    mean, std = (120.0, 110.0, 100.0), (50.0, 60.0, 70.0)
    calls = {"flip": lambda: gpuaug.flip(x),
             "center_crop": lambda: gpuaug.center_crop(x, (16, 24)),
             "resize": lambda: gpuaug.resize(x, (16, 16)),
             "rotate": lambda: gpuaug.rotate(x, 10.0),
             "brightness": lambda: gpuaug.brightness(x, 1.2),
             "normalize": lambda: gpuaug.normalize(x, mean, std),
             "crop_mirror_normalize": lambda: gpuaug.crop_mirror_normalize(x, (16, 16), mean=mean, std=std),
             "color_jitter": lambda: gpuaug.color_jitter(x, 1.1, 0.9, 1.2, 0.05),  # scratch partial sums
             "contrast": lambda: gpuaug.contrast(x, 0.8)}
    not_replayed = []
    for name, call in calls.items():
        call(), call()
        before = _plan.stats["replays"]
        call()
        if _plan.stats["replays"] != before + 1:
            not_replayed.append(name)
    assert not_replayed == []


@pytest.mark.gpu
def test_the_seed_is_part_of_the_key():
    import cupy as cp
    x = cp.zeros((4, 16, 16, 3), cp.uint8) + 128
    raw = gpuaug.registry["gaussian_noise"].func
    for _ in range(4):
        for seed in (1, 2):
            cp.testing.assert_array_equal(gpuaug.gaussian_noise(x, std=20.0, seed=seed),
                                          raw(x, std=20.0, seed=seed))
    assert not bool((gpuaug.gaussian_noise(x, std=20.0, seed=1) == gpuaug.gaussian_noise(x, std=20.0, seed=2)).all())


@pytest.mark.gpu
def test_making_a_plan_never_waits_for_the_device():
    """A key seen for the second time behind a 0.5 s spin kernel: the plan is made and its check
    launched without the host waiting; the plan is used once the check has completed."""
    import cupy as cp
    spin = cp.RawKernel(r'''extern "C" __global__ void spin(unsigned long long ns) {
        unsigned long long t0 = clock64(); while (clock64() - t0 < ns) {} }''', "spin")
    x = cp.zeros((4, 24, 40, 3), cp.uint8)
    gpuaug.resize(x, (12, 19))  # seen once
    cp.cuda.Device().synchronize()
    spin((1,), (1,), (np.uint64(1_000_000_000),))
    done = cp.cuda.Event()
    done.record()
    gpuaug.resize(x, (12, 19))  # made and checked, on the device
    gpuaug.resize(x, (12, 19))  # the check is still queued: the op itself
    assert not done.done, "the host waited for the spin kernel"
    cp.cuda.Device().synchronize()
    before = _plan.stats["replays"]
    gpuaug.resize(x, (12, 19))
    assert _plan.stats["replays"] == before + 1


@pytest.mark.gpu
def test_stream_and_numpy_inputs_take_the_op_itself_and_aligned_out_replays():
    """No op plan for stream= or NumPy calls; out= at a fresh allocation's alignment gets the
    plan (made from an out= call, replayed into out: the result is out, equal to the op's);
    an out= off that alignment, or one the result does not fit, runs the op itself."""
    import cupy as cp
    x = cp.asarray(np.random.default_rng(9).integers(0, 256, (4, 8, 8, 3), dtype=np.uint8))
    op_keys = ("replays", "made", "refused")
    before = {k: _plan.stats[k] for k in op_keys}
    run_before = _plan.stats["run_made"] + _plan.stats["run_replays"]
    for _ in range(3):
        gpuaug.flip(x, stream=cp.cuda.Stream())
        gpuaug.flip(cp.asnumpy(x))
    assert {k: _plan.stats[k] for k in op_keys} == before
    assert _plan.stats["run_made"] + _plan.stats["run_replays"] == run_before  # stream= and NumPy: none
    _plan.clear_plans()
    want = gpuaug.flip.unplanned(x, vertical=True)
    outs = [cp.empty_like(x) for _ in range(5)]
    made, replays = _plan.stats["made"], _plan.stats["replays"]
    for o in outs:  # seen, made (the result copied into out), then replayed into out once checked
        assert gpuaug.flip(x, vertical=True, out=o) is o
        cp.cuda.Device().synchronize()
        cp.testing.assert_array_equal(o, want)
    assert _plan.stats["made"] == made + 1 and _plan.stats["replays"] >= replays + 2
    buf = cp.zeros(x.nbytes + 16, cp.uint8)
    off = buf[16:].reshape(x.shape)  # 16 bytes past a boundary: the op itself
    replays = _plan.stats["replays"]
    assert gpuaug.flip(x, vertical=True, out=off) is off
    cp.testing.assert_array_equal(off, want)
    with pytest.raises(ValueError):  # the wrong shape: the op's own error, not a replay
        gpuaug.flip(x, vertical=True, out=cp.empty((4, 8, 8, 4), cp.uint8))
    with pytest.raises((ValueError, TypeError)):  # the wrong dtype
        gpuaug.flip(x, vertical=True, out=cp.empty(x.shape, cp.float32))
    assert _plan.stats["replays"] == replays


@pytest.mark.gpu
def test_per_sample_arrays_get_no_op_plan_but_a_run_plan():
    """Per-sample values change every call: the op's checks and parameter matrix run each time,
    then run()'s plan replays the launches with that call's parameters."""
    import cupy as cp
    rng = np.random.default_rng(3)
    x = cp.asarray(rng.integers(0, 256, (4, 8, 16, 3), dtype=np.uint8))
    before = dict(_plan.stats)
    for i in range(6):
        flags = rng.random(4) < 0.5
        got = gpuaug.flip(x, horizontal=flags)
        want = cp.asarray(cp.asnumpy(x)[:, :, ::-1])
        cp.testing.assert_array_equal(got[flags], want[flags])
        cp.testing.assert_array_equal(got[~flags], x[~flags])
        cp.cuda.Device().synchronize()  # the check settles before the next call
    assert _plan.stats["replays"] == before["replays"] and _plan.stats["made"] == before["made"]
    assert _plan.stats["run_made"] == before["run_made"] + 1
    assert _plan.stats["run_replays"] >= before["run_replays"] + 3


@pytest.mark.gpu
@pytest.mark.parametrize("byval", ["1", "0"])
def test_run_plan_parameters_are_not_reused_while_in_flight(byval, monkeypatch):
    """Behind a 0.3 s spin kernel, more calls than the plan's ring has slots, each with other
    flags. By value (GPUAUG_BYVAL=1): every call's flags travel in its own launch arguments,
    copied when the launch is queued, so the host block is refilled at once. Through the ring
    (GPUAUG_BYVAL=0): the first calls take ring slots, the rest the staged upload (never a
    wait). Every output must match its own flags once the device catches up."""
    import cupy as cp
    from gpuaug.kernels import _cuda
    monkeypatch.setenv("GPUAUG_BYVAL", byval)
    _plan.clear_plans()
    if byval == "1" and not _cuda.byval_supported():
        pytest.skip("by-value parameter blocks need compute capability 7.0 and a 12.4+ driver")
    spin = cp.RawKernel(r'''extern "C" __global__ void spin(unsigned long long ns) {
        unsigned long long t0 = clock64(); while (clock64() - t0 < ns) {} }''', "spin")
    rng = np.random.default_rng(5)
    n = 8
    x = cp.asarray(rng.integers(0, 256, (n, 4, 16, 1), dtype=np.uint8))
    xh = cp.asnumpy(x)
    for _ in range(3):  # seen, made, checked
        gpuaug.flip(x, horizontal=rng.random(n) < 0.5)
        cp.cuda.Device().synchronize()
    calls = 3 * _plan._Ring.SLOTS
    flags = [rng.random(n) < 0.5 for _ in range(calls)]
    spin((1,), (1,), (np.uint64(600_000_000),))
    before, byval_before = _plan.stats["run_replays"], _plan.stats["run_byval"]
    outs = [gpuaug.flip(x, horizontal=f) for f in flags]
    assert _plan.stats["run_replays"] == before + calls
    assert _plan.stats["run_byval"] == byval_before + (calls if byval == "1" else 0)
    for f, y in zip(flags, outs):
        want = np.where(f[:, None, None, None], xh[:, :, ::-1], xh)
        np.testing.assert_array_equal(cp.asnumpy(y), want)


@pytest.mark.gpu
def test_run_plans_write_into_out_aligned_or_not_and_out_is_still_checked():
    """out= with per-sample values: replays write into the caller's array (a plan per output
    alignment, since fast paths choose by it); a wrong or overlapping out= still raises."""
    import cupy as cp
    rng = np.random.default_rng(9)
    n, h, w = 6, 8, 32
    x = cp.asarray(rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8))
    xh = cp.asnumpy(x)
    buf = cp.empty(x.size + 1, cp.uint8)
    outs = {"aligned": cp.empty_like(x), "misaligned": buf[1:].reshape(x.shape)}
    assert outs["misaligned"].data.ptr % 16 == (buf.data.ptr + 1) % 16 != 0
    before = _plan.stats["run_replays"]
    for _ in range(5):
        for name, o in outs.items():
            f = rng.random(n) < 0.5
            got = gpuaug.flip(x, horizontal=f, out=o)
            assert got is o, name
            want = np.where(f[:, None, None, None], xh[:, :, ::-1], xh)
            np.testing.assert_array_equal(cp.asnumpy(o), want, err_msg=name)
            cp.cuda.Device().synchronize()
    assert _plan.stats["run_replays"] >= before + 4  # both alignments replayed
    with pytest.raises(ValueError, match="overlaps"):
        gpuaug.flip(x, horizontal=rng.random(n) < 0.5, out=x)
    with pytest.raises(ValueError, match="shape"):
        gpuaug.flip(x, horizontal=rng.random(n) < 0.5, out=cp.empty((n, h, w + 1, 3), cp.uint8))


def per_sample_kwargs(name, rng, n, h, w):
    """The registry example's arguments, drawn anew (per-sample arrays with new values)."""
    return example(name, rng, n, h, w)


@pytest.mark.gpu
@pytest.mark.parametrize("byval", ["1", "0"])
@pytest.mark.parametrize("name", OPS)
def test_run_plans_equal_the_op_with_new_per_sample_values_each_call(name, byval, monkeypatch):
    """Every op with per-sample values drawn anew per call: run()'s plan (made on the second
    call, replayed after) gives what the op gives with plans off, bit for bit, with the values
    passed by value (GPUAUG_BYVAL=1, the default where the GPU allows it) and through the
    pinned ring (0)."""
    import cupy as cp
    from gpuaug.kernels import _cuda
    monkeypatch.setenv("GPUAUG_BYVAL", byval)
    rng = np.random.default_rng(11)
    n, h, w = 6, 20, 28
    x = cp.asarray(rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8))
    fn = getattr(gpuaug, name)
    calls = [per_sample_kwargs(name, np.random.default_rng(100 + i), n, h, w) for i in range(5)]
    monkeypatch.setenv("GPUAUG_PLAN", "0")
    try:
        want = [cp.asnumpy(fn(x, **kw)) for kw in calls]
    except (TypeError, ValueError) as e:
        pytest.skip(f"{name}: its example does not run on this batch: {e}")
    monkeypatch.setenv("GPUAUG_PLAN", "1")
    _plan.clear_plans()
    before, byval_before = _plan.stats["run_replays"], _plan.stats["run_byval"]
    for kw, ref in zip(calls, want):
        got = fn(x, **kw)
        np.testing.assert_array_equal(cp.asnumpy(got), ref)
        cp.cuda.Device().synchronize()
    replayed = _plan.stats["run_replays"] - before
    by_value = _plan.stats["run_byval"] - byval_before
    print(f"{name}: {replayed} run-plan replays of 5 calls, {by_value} by value")
    if byval == "0":
        assert by_value == 0
    elif name in BYVAL_OPS and _cuda.byval_supported():
        assert by_value == replayed >= 3, f"{name}: {by_value} of {replayed} replays by value"


#: ops whose per-sample calls (the registry's example at 6 x 20 x 28) replay by value on any GPU
#: of compute capability 7.0+ (every run() plan of a kernel declared with GPUAUG_PARAMS)
BYVAL_OPS = ("flip", "brightness", "contrast", "saturation", "hue", "color_jitter", "rotate", "warp_affine",
             "normalize", "crop_mirror_normalize", "erase", "grid_mask", "gaussian_blur", "gamma", "solarize")


# -- CPU: the log analysis and the replay, with stand-ins ---------------------------------------

class FakeArray:
    """Just what the plan reads of a CuPy array."""

    def __init__(self, ptr, shape=(2, 4, 4, 3), dtype=np.uint8, contiguous=True):
        self.data = types.SimpleNamespace(ptr=ptr, device_id=0)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.size = int(np.prod(shape))
        self.nbytes = self.size * self.dtype.itemsize
        self.itemsize = self.dtype.itemsize
        self.strides = tuple(int(np.prod(shape[i + 1:])) * self.itemsize for i in range(len(shape)))
        self.flags = types.SimpleNamespace(c_contiguous=contiguous)
        self.device = types.SimpleNamespace(id=0)
        self.host = None

    def get(self):
        return self.host


@pytest.fixture()
def fake(monkeypatch):
    monkeypatch.setattr(_plan, "_CP", [FakeArray])
    launched = []

    class Kern:
        def __call__(self, grid, block, args, shared_mem=0):
            launched.append((grid, block, args, shared_mem))
    made = []

    class Cache:  # hands out a stand-in device table at 0xA00000 + 0x1000 * (tables made so far)
        def hit(self, key):  # never known done: every lookup goes through get
            return None

        def get(self, key, make):
            made.append((key, make() if callable(make) else make))
            return FakeArray(0xA00000 + 0x1000 * len(made), (2, 6), np.int64)
    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0))
    cp.empty = cp.ndarray = lambda shape, dtype: FakeArray(0x900000, shape, dtype)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    from gpuaug.kernels import _cuda
    monkeypatch.setattr(_cuda, "constants", lambda dev=None: Cache())
    # what the plans import, for this test only
    monkeypatch.setattr(_plan, "_MODS", [_cuda, cp, cp.cuda.runtime.getDevice])
    return Kern(), launched, made


def test_plan_patches_input_output_and_their_tables(fake):
    kern, launched, made = fake
    x, y = FakeArray(0x100000), FakeArray(0x200000)
    par = FakeArray(0x300000, (2, 3), np.float32)
    xt = FakeArray(0x400000, (2, 6), np.int64)
    xt.host = np.array([[0x100000, 4, 4, 12, 3, 1], [0x100000 + 48, 4, 4, 12, 3, 1]], np.int64)
    geo = ((2, 4, 4, 3), (48, 12, 3, 1), 1)
    log = [("const", ("table", 0x100000) + geo, xt, xt.host), ("const", ("params", (2, 3), "f", b""), par, None),
           ("launch", kern, (1,), (256,), 0, (xt, y, par, np.int32(3), x))]
    plan = _plan.Plan.from_log(log, x, y)
    assert plan is not None
    (fn, grid, block, smem, template, patches), = plan.launches
    assert template[2] is par and template[0] is None and template[1] is None and template[4] is None
    x2 = FakeArray(0x500000)
    out = plan.run(x2)
    (g, b, args, s), = launched
    assert args[1] == out.data.ptr and args[4] == 0x500000 and args[2] == par.data.ptr and args[3] == 3
    assert args[0] == 0xA01000  # the moved table, from the constant cache
    (key, table), = made
    assert key == ("table", 0x500000) + geo
    np.testing.assert_array_equal(table[:, 0], [0x500000, 0x500000 + 48])  # addresses moved
    np.testing.assert_array_equal(table[:, 1:], xt.host[:, 1:])
    assert plan.tables == {}  # a table from get() (its upload maybe in flight) is not kept


def test_plan_keeps_tables_known_uploaded(fake, monkeypatch):
    """A table the constant cache hands out as done (hit) is kept by the plan, per address and
    argument: the next replay for that input reads it without asking the cache; another
    input's address asks again."""
    kern, launched, _ = fake
    from gpuaug.kernels import _cuda
    hits = []

    class Cache:
        def hit(self, key):
            hits.append(key[1])
            return FakeArray(0xB00000 + key[1] // 0x100000, (2, 6), np.int64)

        def get(self, key, make):  # pragma: no cover - every lookup hits
            raise AssertionError("get")
    monkeypatch.setattr(_cuda, "constants", lambda dev=None: Cache())
    x, y = FakeArray(0x100000), FakeArray(0x200000)
    xt = FakeArray(0x400000, (2, 6), np.int64)
    xt.host = np.array([[0x100000, 4, 4, 12, 3, 1], [0x100000 + 48, 4, 4, 12, 3, 1]], np.int64)
    geo = ((2, 4, 4, 3), (48, 12, 3, 1), 1)
    log = [("const", ("table", 0x100000) + geo, xt, xt.host), ("launch", kern, (1,), (256,), 0, (xt, y, x))]
    plan = _plan.Plan.from_log(log, x, y)
    for addr in (0x500000, 0x500000, 0x600000, 0x500000):
        plan.run(FakeArray(addr))
    assert hits == [0x500000, 0x600000]  # asked once per input address
    assert [a[2][0] for a in launched] == [0xB00005, 0xB00005, 0xB00006, 0xB00005]


@pytest.mark.parametrize("why", ["dirty", "temporary", "overlap", "foreign table", "no launch", "not contiguous"])
def test_plan_refuses_what_it_cannot_replay(fake, why):
    kern, _, _ = fake
    x, y = FakeArray(0x100000), FakeArray(0x200000)
    args = (x, y)
    log = [("launch", kern, (1,), (32,), 0, args)]
    if why == "dirty":
        log.append(("dirty", "upload"))
    elif why == "temporary":
        log = [("launch", kern, (1,), (32,), 0, (x, y, FakeArray(0x700000)))]
    elif why == "overlap":
        y = FakeArray(0x100000 + 8)
    elif why == "foreign table":
        t = FakeArray(0x400000, (2, 6), np.int64)
        log = [("const", ("table", 0x800000, (2, 4, 4, 3), (48, 12, 3, 1), 1), t, None),
               ("launch", kern, (1,), (32,), 0, (t, x, y))]
    elif why == "no launch":
        log = []
    elif why == "not contiguous":
        y = FakeArray(0x200000, contiguous=False)
    assert _plan.Plan.from_log(log, x, y) is None


def test_arg_keys_take_scalars_strings_and_tuples_only():
    k = _plan._arg_key
    assert k(1) != k(1.0) != k(True)  # the type is in the key
    assert k((0.5, (1, 2))) == k((0.5, (1, 2)))
    assert k(np.float32(1.5)) == k(np.float32(1.5)) != k(np.float64(1.5))
    assert k(0.0) != k(-0.0) and k(np.float32(0.0)) != k(np.float32(-0.0))  # by bits, not ==
    for bad in (np.zeros(3), [1, 2], {"a": 1}, (1, np.zeros(2)), tuple(range(17))):
        assert k(bad) is _plan._OFF
        # a call's keys: None as soon as one argument (positional or keyword) has none
        assert _plan._parts((1, bad), ()) is None and _plan._parts((1,), (("b", 2), ("a", bad))) is None
    assert _plan._parts((1, "s"), (("b", 2), ("a", 0.5))) == (k(1), k("s"), ("a", k(0.5)), ("b", k(2)))


def test_numpy_inputs_go_straight_to_the_op(monkeypatch):
    calls = []

    def op(x, a=1, *, out=None, stream=None, backend=None):
        calls.append((x.shape, a, out, stream, backend))
        return x
    f = _plan.planned("op", op)
    x = np.zeros((2, 2, 2, 3), np.uint8)
    assert f(x, 2) is x and f(x, a=3, backend="cpu") is x
    assert calls == [((2, 2, 2, 3), 2, None, None, None), ((2, 2, 2, 3), 3, None, None, "cpu")]
    assert f.__name__ == "op" and f.unplanned is op
    monkeypatch.setenv("GPUAUG_PLAN", "0")
    assert _plan.planned("op", op) is op


def test_repeated_argument_objects_give_the_keys_computed_afresh(monkeypatch):
    """The wrapper's memo of the last call's arguments (the same mean/std tuple objects every
    call skip their per-element keys): every call's plan key equals the key computed without it,
    and arguments of other values (or other keywords) get their own keys."""
    class Arr:  # a stand-in CUDA array: what the key reads
        shape, strides, dtype = (2, 4, 4, 3), (48, 12, 3, 1), np.dtype(np.uint8)
        data = types.SimpleNamespace(ptr=0x1000, device_id=0)

    class Keys(dict):
        def __init__(self):
            super().__init__()
            self.seen = []

        def get(self, key, default=None):
            self.seen.append(key)
            return None  # "refused": the call runs the op itself

    keys = Keys()
    monkeypatch.setattr(_plan, "_PLANS", keys)
    monkeypatch.setattr(_plan, "_CP", [Arr])
    calls = []

    def op(x, mean, std=None, *, out=None, stream=None, backend=None, dtype="uint8"):
        calls.append((mean, std, dtype))
        return x
    f = _plan.planned("op", op)
    x, a, b = Arr(), (0.5, 0.25, 1.0), (0.5, 0.25, 1.5)
    same_a = tuple(list(a))  # equal values, another object
    args = [((a, b), {}), ((a, b), {}), ((b, a), {}), ((same_a, b), {}), ((a, b), {"dtype": "float32"}),
            ((a, b), {"dtype": "float32"}), ((a,), {"std": b}), ((a, -0.0), {}), ((a, 0.0), {})]
    for pos, kw in args:
        f(x, *pos, **kw)
    assert len(calls) == len(args)
    fresh = []
    for pos, kw in args:
        parts = tuple(_plan._arg_key(v) for v in pos) + tuple((k, _plan._arg_key(v)) for k, v in sorted(kw.items()))
        fresh.append(("op", Arr.shape, Arr.strides, Arr.dtype, 0, 0, parts))
    assert keys.seen == fresh
    assert fresh[0] == fresh[1] == fresh[3] and len({fresh[0], fresh[2], fresh[4], fresh[6], fresh[7], fresh[8]}) == 6
    assert _plan._same_args(((a, b), (), None), (a, b), ()) and not _plan._same_args(((a, b), (), None), (same_a, b), ())


def test_constant_cache_hit_only_once_the_upload_is_done():
    from gpuaug.kernels._cuda import _Constants

    class Ev:
        def __init__(self, done):
            self.done = done

    c = _Constants()
    arr = object()
    assert c.hit("k") is None
    c._d["k"] = (arr, Ev(False), 7)
    assert c.hit("k") is None and c.stats["hits"] == 0  # get() decides (same stream, or wait)
    c._d["k"] = (arr, Ev(True), 7)
    assert c.hit("k") is arr and c._d["k"] == (arr, None, 7) and c.stats["hits"] == 1
    assert c.hit("k") is arr and c.stats["hits"] == 2


def test_pending_plans_settle_only_once_their_check_is_done():
    class Flags:
        def __init__(self, ok):
            self.ok = ok

        def all(self):
            return self.ok
    ev = types.SimpleNamespace(done=False)
    plan = _plan.Plan((1,), np.uint8, 0, ())
    p = _plan._Pending(plan, Flags(True), ev)
    assert p.settle("k1") is p and "k1" not in _plan._PLANS  # still running: not read
    ev.done = True
    assert p.settle("k1") is plan and _plan._PLANS["k1"] is plan
    bad = _plan._Pending(plan, Flags(False), types.SimpleNamespace(done=True))
    assert bad.settle("k2") is None and _plan._PLANS["k2"] is None
    _plan.clear_plans()


def test_scratch_memory_gets_a_new_allocation_per_replay_views_share_it(fake):
    kern, launched, _ = fake
    x, y = FakeArray(0x100000), FakeArray(0x200000)
    mem = types.SimpleNamespace(ptr=0x600000, size=4096)
    part_a, part_b = FakeArray(0x600000, (8,), np.float64), FakeArray(0x600000 + 64, (8,), np.float64)
    part_a.data.mem = part_b.data.mem = mem  # two views of one scratch allocation
    log = [("launch", kern, (1,), (32,), 0, (x, part_a)), ("launch", kern, (1,), (32,), 0, (part_b, y))]
    plan = _plan.Plan.from_log(log, x, y)
    assert plan is not None and plan.temps == (4096,)
    out = plan.run(FakeArray(0x500000))
    (_, _, a1, _), (_, _, a2, _) = launched
    assert a1[0] == 0x500000 and a2[1] == out.data.ptr
    assert a2[0] - a1[1] == 64  # one new allocation, the views at their offsets


def test_run_plan_patches_the_parameter_matrix_even_when_it_came_from_the_constant_cache(fake):
    """A recorded call whose parameters were uniform (a constant) still gets them as a slot:
    the next call's parameters differ."""
    kern, launched, _ = fake
    x, y = FakeArray(0x100000), FakeArray(0x200000)
    par = FakeArray(0x300000, (2, 3), np.float32)
    log = [("const", ("params", (2, 3), "f", b"row"), par, None), ("params", par),
           ("launch", kern, (1,), (256,), 0, (x, y, par, np.int32(3)))]
    assert _plan.Plan.from_log(log, x, y) is not None  # an op plan keeps the constant
    plan = _plan.Plan.from_log(log, x, y, params=True)
    (_, _, _, _, template, patches), = plan.launches
    assert template[2] is None and (2, 4, 0) in patches
    new = FakeArray(0x380000, (2, 3), np.float32)
    out = plan.run(FakeArray(0x500000), par=new)
    (_, _, args, _), = launched
    assert args[:3] == (0x500000, out.data.ptr, 0x380000) and args[3] == 3


@pytest.mark.parametrize("why", ["other upload", "no params", "two params"])
def test_run_plan_refuses_uploads_other_than_the_parameters(fake, why):
    kern, _, _ = fake
    x, y = FakeArray(0x100000), FakeArray(0x200000)
    par, other = FakeArray(0x300000, (2, 3), np.float32), FakeArray(0x310000, (2, 3), np.float32)
    log = [("upload", [par]), ("params", par), ("launch", kern, (1,), (256,), 0, (x, y, par))]
    assert _plan.Plan.from_log(log, x, y, params=True) is not None
    assert _plan.Plan.from_log(log, x, y) is None  # an op plan refuses any fresh upload
    if why == "other upload":
        log.insert(0, ("upload", [other]))
        log.append(("launch", kern, (1,), (256,), 0, (x, y, other)))
    elif why == "no params":
        log = [e for e in log if e[0] != "params"]
    else:
        log.insert(0, ("params", other))
    assert _plan.Plan.from_log(log, x, y, params=True) is None


def _checks_pass_at_once(monkeypatch):
    """Plan checks that pass at once (their event done, their flags true); the list of the
    parameters each check was started with."""
    checks = []

    def start_check(self, func, x_, args, kw, y, par=None):
        checks.append(par)
        return _plan._Pending(self, types.SimpleNamespace(all=lambda: True), types.SimpleNamespace(done=True))
    monkeypatch.setattr(_plan.Plan, "start_check", start_check)
    return checks


def test_run_plans_are_made_on_the_second_sighting_and_checked_before_use(fake, monkeypatch):
    """run_planned: first call runs normally, the second records and starts the check, replays
    start once the check has settled; a plan for other kernels is not used."""
    kern, launched, _ = fake
    from gpuaug.kernels import _cuda

    _plan.clear_plans()
    x = FakeArray(0x100000)
    batch = types.SimpleNamespace(arrays=[x], n=2)
    calls = []

    def normal():
        calls.append("normal")
        y = FakeArray(0x200000 + 0x1000 * len(calls))
        par = FakeArray(0x300000, (2, 3), np.float32)
        if _cuda.RECORDING[0]:
            _cuda.log("upload", [par])
            _cuda.log("params", par)
            _cuda.log("launch", kern, (1,), (256,), 0, (x, y, par))
        return y

    checks = _checks_pass_at_once(monkeypatch)
    sent = []

    class Ring:  # the parameter ring: slot 0 free on the first replay, in flight on the next
        def __init__(self, shape):
            self.shape, self.busy = shape, False

        def take(self, params):
            if self.busy:
                return None
            self.busy = True
            return 0, FakeArray(0x390000, self.shape, np.float32)

        def sent(self, slot):
            sent.append(slot[0])

        def drain(self):
            sent.append("drained")
    monkeypatch.setattr(_plan, "_Ring", Ring)
    monkeypatch.setattr(_plan, "_device_params", lambda params, n: FakeArray(0x3A0000, (2, 3), np.float32))
    key, kernels = ("k",), object()
    params = np.zeros((2, 3))
    assert _plan.run_planned(key, kernels, batch, params, normal) is None  # seen once: caller runs it
    y = _plan.run_planned(key, kernels, batch, params, normal)  # recorded, check started
    assert y is not None and calls == ["normal"] and checks[0].data.ptr == 0x300000
    before = _plan.stats["run_replays"]
    out = _plan.run_planned(key, kernels, batch, params, normal)
    assert out is not None and calls == ["normal"] and _plan.stats["run_replays"] == before + 1
    (_, _, args, _), = launched
    assert args == (0x100000, out.data.ptr, 0x390000) and sent == [0]  # from the ring's slot
    out = _plan.run_planned(key, kernels, batch, params, normal)  # the slot is in flight: staged instead
    assert launched[1][2] == (0x100000, out.data.ptr, 0x3A0000) and sent == [0]
    assert _plan.run_planned(key, object(), batch, params, normal) is None  # other kernels: not this plan
    _plan.clear_plans()
    assert sent == [0, "drained"]  # dropping a plan waits for its parameter copies in flight


class _DevArray(np.ndarray):
    """A NumPy array posing as a device array (``.data.ptr``), for the ring's CPU test."""

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.ctypes.data)


def test_parameter_ring_slots_rotate_and_wait_for_their_events(monkeypatch):
    """_Ring on stand-ins (pinned memory = a bytearray, device = NumPy, memcpyAsync = memmove):
    parameters land converted to float32 in the slot handed out; a slot taken but not sent, or
    sent with its event still pending, is never handed out again (take() returns None: the
    caller uses the staged upload); slots follow one another round the ring."""
    import ctypes

    from gpuaug.kernels import _cuda

    class Event:
        def __init__(self):
            self.done, self.records = True, 0

        def record(self, stream=None):
            self.done, self.records = False, self.records + 1

    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(
        alloc_pinned_memory=lambda n: bytearray(n),
        get_current_stream=lambda: types.SimpleNamespace(ptr=0),
        runtime=types.SimpleNamespace(memcpyAsync=lambda dst, src, n, kind, stream: ctypes.memmove(dst, src, n)))
    cp.empty = lambda shape, dtype: np.zeros(shape, dtype).view(_DevArray)
    monkeypatch.setattr(_plan, "_MODS", [_cuda, cp, lambda: 0])
    monkeypatch.setattr(_cuda, "new_event", Event)
    monkeypatch.setattr(_plan._Ring, "SLOTS", 3)
    ring = _plan._Ring((4, 3))
    assert ring.slots == 3
    rng = np.random.default_rng(0)
    p0 = rng.random((4, 3))
    s0 = ring.take(p0)
    assert s0[0] == 0 and s0[1].dtype == np.float32
    np.testing.assert_array_equal(np.asarray(s0[1]), p0.astype(np.float32))
    s1, s2 = ring.take(rng.random((4, 3))), ring.take(rng.random(12))  # any shape of 12 values
    assert (s1[0], s2[0]) == (1, 2)
    assert ring.take(p0) is None  # slot 0 taken, not sent yet
    ring.sent(s0)
    assert ring.events[0].records == 1 and ring.take(p0) is None  # sent, its event pending
    ring.events[0].done = True
    again = ring.take(p0 * 2)
    assert again[0] == 0 and np.array_equal(np.asarray(again[1]), (p0 * 2).astype(np.float32))
    assert ring.take(p0) is None  # slot 1: taken, never sent
    big = _plan._Ring((256, 400))  # 400 KiB a slot: more than BYTES, still two slots
    assert big.slots == 2


def test_parameter_ring_frees_every_slot_behind_the_last_done_event(monkeypatch):
    """When the slot sent last has completed, every slot sent before it on the same stream has
    too (a stream's events complete in order): one event query frees them all, and the next
    takes ask no event at all; slots sent on another stream keep waiting for their own event;
    a slot's scratch arrays are made once and handed out again with it."""
    from gpuaug.kernels import _cuda

    queries = []

    class Event:
        def __init__(self):
            self._done = True

        @property
        def done(self):
            queries.append(self)
            return self._done

        def record(self, stream=None):
            self._done = False

    main, other = types.SimpleNamespace(ptr=1), types.SimpleNamespace(ptr=2)
    current = [main]
    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(
        alloc_pinned_memory=lambda n: bytearray(n), get_current_stream=lambda: current[0],
        runtime=types.SimpleNamespace(memcpyAsync=lambda *a: None))
    cp.empty = lambda shape, dtype: np.zeros(shape, dtype).view(_DevArray)
    monkeypatch.setattr(_plan, "_MODS", [_cuda, cp, lambda: 0])
    monkeypatch.setattr(_cuda, "new_event", Event)
    monkeypatch.setattr(_plan._Ring, "SLOTS", 4)
    ring = _plan._Ring((2, 2))
    p = np.ones((2, 2))
    slots = []
    for i in range(4):  # slots 0, 1, 3 on the main stream, slot 2 on another
        current[0] = other if i == 2 else main
        slots.append(ring.take(p))
        ring.sent(slots[-1])
    scratch = ring.scratch_of(slots[0], (16, 8))
    assert [a.nbytes for a in scratch] == [16, 8] and ring.scratch_of(slots[0], (16, 8)) is scratch
    assert ring.scratch_of(slots[1], (_plan._Ring.SCRATCH + 1,)) is None  # too large: per call
    current[0] = main
    assert ring.take(p) is None and ring.state == [2, 2, 2, 2]  # nothing done yet
    queries.clear()
    ring.events[3]._done = True  # the last slot sent: 0 and 1 (same stream, before it) are done too
    got = ring.take(p)
    assert got[0] == 0 and queries == [ring.events[3]]  # one query, not slot 0's own
    assert ring.state == [1, 0, 2, 0]  # slot 2 (the other stream) still waits
    ring.sent(got)
    queries.clear()
    assert ring.take(p)[0] == 1 and queries == []  # freed already: no query
    assert ring.take(p) is None  # slot 2: its own event (other stream) pending
    ring.events[2]._done = True
    assert ring.take(p)[0] == 2


def test_fast_hooks_key_their_kernel_constants(monkeypatch):
    """Fast hooks whose launches hold call values as kernel constants (pad's border mode and
    sign, rot90's k column) carry them as ``key``, and run() puts that key in its plan key: a
    plan recorded for one mode never replays for another (pad in constant mode, then edge)."""
    from gpuaug._run import run
    from gpuaug.ops.crop import rows_fast
    from gpuaug.ops.transpose import tiles_fast
    keys = {rows_fast().key, rows_fast(sign=-1, fill_col=3, mode=0).key, rows_fast(sign=-1, fill_col=3, mode=1).key,
            rows_fast(sign=-1, fill_col=3, mode=3).key, tiles_fast().key, tiles_fast(kcol=0).key}
    assert len(keys) == 6
    seen = []

    def launch(batch, kernels, params, extra, rest, normal, out=None):
        seen.append(rest)
        return "planned"
    monkeypatch.setattr(_plan, "launch", launch)
    b = types.SimpleNamespace(device=True, varshape=False, n=2, shapes=types.SimpleNamespace(hw=(4, 4)))
    for mode in (0, 1):
        assert run(b, object(), np.zeros((2, 4)), shapes=b.shapes, out=None, backend="cuda", stream=None,
                   fast=rows_fast(sign=-1, fill_col=3, mode=mode)) == "planned"
    assert seen[0] != seen[1] and seen[0][-1] == ("window_rows", -1, 3, 0)


@pytest.mark.parametrize("every_launch, other_device", [(True, False), (False, False), (True, True)])
def test_run_plans_pass_host_values_by_value_where_every_launch_has_a_block_build(fake, monkeypatch, every_launch,
                                                                                  other_device):
    """A run() plan whose launches that read the parameter matrix all have a by-value build
    (``Kernel.byval``) replays with the call's host values in this thread's parameter block
    (as float32, refilled per call, no ring and no upload; the check replays the same way, with
    the recorded call's values), keeps its scratch memory for the stream; launches that do not
    read the matrix stay as they are. One launch without such a build, or a plan made while
    another device is current (the builds would load there): the ring, as before."""
    kern, launched, _ = fake
    from gpuaug.kernels import _cuda

    blocks = []

    class Built:  # the by-value build: records each launch's arguments and its block's values
        def prepared(self, grid, block, types, smem=0, block_index=None):
            assert block_index == 1 and types[1] is int and self.floats == 512

            def go(args):
                blocks.append((tuple(args), _cuda.param_block()[:6].copy()))
            return go

    class Kern:
        def __init__(self, has):
            self.has = has

        def __call__(self, grid, block, args, shared_mem=0):
            launched.append(args)

        def byval(self, index, floats):
            built = Built()
            built.floats = floats
            return built if self.has and index == 1 else None

    sum_k, map_k = Kern(True), Kern(every_launch)
    cp = _plan._MODS[1]
    stream = types.SimpleNamespace(ptr=7)
    cp.cuda.get_current_stream = lambda: stream
    allocs = []

    def empty(shape, dtype):
        allocs.append(shape)
        return FakeArray(0x900000 + 0x1000 * len(allocs), shape, dtype)
    cp.empty = empty
    _plan.clear_plans()
    x = FakeArray(0x100000)
    batch = types.SimpleNamespace(arrays=[x], n=2)
    mem = types.SimpleNamespace(ptr=0x600000, size=256)
    calls = []

    def normal():
        calls.append("normal")
        y = FakeArray(0x200000 + 0x1000 * len(calls))
        par = FakeArray(0x300000, (2, 3), np.float32)
        part = FakeArray(0x600000, (2, 4), np.float64)
        part.data.mem = mem
        if _cuda.RECORDING[0]:
            _cuda.log("upload", [par])
            _cuda.log("params", par)
            _cuda.log("launch", sum_k, (1,), (256,), 0, (x, par, part))
            _cuda.log("launch", map_k, (1,), (256,), 0, (y, par, part, np.int32(3)))
        return y

    checks = _checks_pass_at_once(monkeypatch)
    rings = []

    class Ring:
        def __init__(self, shape):
            rings.append(shape)

        def take(self, params):
            return 0, FakeArray(0x390000, (2, 3), np.float32)

        def sent(self, slot):
            pass

        def scratch_of(self, slot, sizes):
            return None

        def drain(self):
            pass
    monkeypatch.setattr(_plan, "_Ring", Ring)
    key, kernels = ("kb", every_launch, other_device), object()
    rng = np.random.default_rng(4)
    first = rng.random((2, 3))
    mods = _plan._MODS
    assert _plan.run_planned(key, kernels, batch, first, normal) is None
    if other_device:  # recorded while device 1 is current (the batch is on device 0)
        monkeypatch.setattr(_plan, "_MODS", [mods[0], mods[1], lambda: 1])
    assert _plan.run_planned(key, kernels, batch, first, normal) is not None  # recorded, checked
    monkeypatch.setattr(_plan, "_MODS", mods)
    every_launch = every_launch and not other_device
    before = dict(_plan.stats)
    values = [rng.random((2, 3)) for _ in range(3)]
    outs = [_plan.run_planned(key, kernels, batch, v, normal) for v in values]
    assert calls == ["normal"] and _plan.stats["run_replays"] == before["run_replays"] + 3
    if not every_launch:
        assert rings == [(2, 3)] and not blocks and _plan.stats["run_byval"] == before["run_byval"]
        assert checks[0].data.ptr == 0x300000  # the check replays the recorded device matrix
        _plan.clear_plans()
        return
    assert rings == [] and checks[0] is first  # no ring; the check replays the call's host values
    assert _plan.stats["run_byval"] == before["run_byval"] + 3
    assert len(blocks) == 6 and launched == []  # both launches by value, none through a pointer
    scratch = {b[0][2] for b in blocks}
    assert len(scratch) == 1 and allocs == [256]  # one scratch allocation, kept for the stream
    for k, (v, out) in enumerate(zip(values, outs)):
        (sum_args, sum_blk), (map_args, map_blk) = blocks[2 * k], blocks[2 * k + 1]
        np.testing.assert_array_equal(sum_blk, v.astype(np.float32).ravel())
        np.testing.assert_array_equal(map_blk, v.astype(np.float32).ravel())
        assert sum_args[0] == 0x100000 and sum_args[1] == 0 and map_args[0] == out.data.ptr
        assert map_args[2] == sum_args[2] and map_args[3] == 3
    other = types.SimpleNamespace(ptr=8)
    cp.cuda.get_current_stream = lambda: other
    _plan.run_planned(key, kernels, batch, values[0], normal)
    assert allocs == [256, 256]  # another stream: its own scratch
    _plan.clear_plans()


def test_block_sizes_take_the_smallest_that_holds_the_matrix():
    from gpuaug.kernels import _cuda
    assert _cuda.BLOCK_SIZES == (512, 4096) and _cuda.PARAM_BLOCK_FLOATS == 4096
    assert [_cuda.block_floats(s) for s in (1, 512, 513, 4096, 4097)] == [512, 512, 4096, 4096, None]
    assert _cuda.byval_options(512) == ("-DGPUAUG_BYVAL=512",)
    assert _cuda.param_block().shape == (4096,) and _cuda.param_block() is _cuda.param_block()


@pytest.mark.gpu
@pytest.mark.parametrize("n, by_value", [(700, True), (2100, False)])
def test_large_batches_replay_by_value_up_to_the_16kb_block(n, by_value, monkeypatch):
    """brightness's (n, 2) matrix: 1,400 values go in the 16 KB block, 4,200 through the ring;
    both replay what the op gives with plans off, bit for bit."""
    import cupy as cp
    from gpuaug.kernels import _cuda
    if not _cuda.byval_supported():
        pytest.skip("by-value parameter blocks need compute capability 7.0 and a 12.4+ driver")
    rng = np.random.default_rng(12)
    x = cp.asarray(rng.integers(0, 256, (n, 4, 8, 3), dtype=np.uint8))
    factors = [rng.uniform(0.2, 1.8, n) for _ in range(5)]
    monkeypatch.setenv("GPUAUG_PLAN", "0")
    want = [cp.asnumpy(gpuaug.brightness(x, f)) for f in factors]
    monkeypatch.setenv("GPUAUG_PLAN", "1")
    _plan.clear_plans()
    before = dict(_plan.stats)
    for f, ref in zip(factors, want):
        np.testing.assert_array_equal(cp.asnumpy(gpuaug.brightness(x, f)), ref)
        cp.cuda.Device().synchronize()
    assert _plan.stats["run_replays"] - before["run_replays"] >= 3
    assert (_plan.stats["run_byval"] - before["run_byval"] >= 3) == by_value
