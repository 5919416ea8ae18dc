"""Host cost of the automatic policies and of MixUp/CutMix (issues 13 and 16), on the CPU alone:
median us per call.

The policies are host-bound on the GPU (RandAugment(2, 9) at 256x224x224x3: 0.38 ms of kernels,
over 1 ms of host time per call on the H100's host), so their loop time is this host time. Each
row times one piece for ``--n`` samples of 224 x 224:

- ``<policy>.draw``: ``policy.draw(n, (224, 224))``, the per-sample draws;
- ``<policy>.step_rows``: the generic (K, N, 9) kernel rows of one drawn call, as a replay
  (``params=``) or a Compose step builds them (``gpuaug.policy.auto.step_rows``);
- ``<policy>.call`` / ``<policy>.replay``: a whole ``policy(x)`` / ``policy(x,
  params=policy.last_params)`` on a stand-in CuPy batch (``replay_edited``: params that are
  not the policy's last draw, whose rows are built as ``step_rows`` does): draws, rows, the
  reductions each step needs, buffer and launch logic; the stand-in allocates nothing, its
  kernels do nothing and its upload is one host copy, so the row is gpuaug's own Python and
  NumPy work per call (CuPy's allocations and the launches themselves come on top, on the GPU
  machine);
- ``mixup.*`` / ``cutmix.*``: the draws (Beta lambdas, cyclic partners, CutMix boxes), the
  kernel records, and the whole call on stand-in images with device int labels.

policies: RandAugment(2, 9) ``ra``, TrivialAugmentWide ``ta``, AutoAugment("imagenet") ``aa``,
AugMix() ``augmix``; MixUp(0.8), CutMix(1.0), 1000 classes.

    python bench/host_policies.py [--n 256] [--number 300] [--repeat 7] [--only ra.call ...] [--json out.json]

On the GPU machine, device ms / host us / loop ms of the real calls:
``python3 tests/gpu/kprof.py ra ta mixup cutmix``.
"""
from __future__ import annotations

import math
import sys
import types

import numpy as np

import _hostbench as HB  # noqa: E402  (bench/, the script's own folder)

SIZE = 224


# -- a stand-in CuPy: arrays with a shape, a dtype and an address, no memory -----------------

class _Mem:
    __slots__ = ("ptr",)
    device_id = 0

    def __init__(self, ptr):
        self.ptr = ptr

    def __add__(self, k):
        return _Mem(self.ptr + int(k))

    def memset_async(self, value, size, stream=None):
        pass


class _Flags:
    c_contiguous = True


class _Device:
    id = 0

    def __init__(self, *a):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeArray:
    """What gpuaug's GPU paths read of a CuPy array (shape, dtype, address, flags, device)."""

    __cuda_array_interface__ = {"version": 3}
    flags = _Flags()
    device = _Device()
    _next = [1 << 20]

    def __init__(self, shape, dtype=np.float32, memptr=None, **_):
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        if memptr is None:
            memptr = _Mem(FakeArray._next[0])
            FakeArray._next[0] += (self.nbytes + 511) // 256 * 256
        self.data = memptr

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def strides(self):  # C-contiguous
        out, step = [], self.dtype.itemsize
        for d in reversed(self.shape):
            out.append(step)
            step *= d
        return tuple(reversed(out))

    def __getitem__(self, key):
        return FakeArray(self.shape[1:] if isinstance(key, int) else self.shape, self.dtype, self.data)

    def __setitem__(self, key, value):
        pass

    def view(self, dtype):
        return FakeArray(self.shape, dtype, self.data)

    def reshape(self, *shape):
        return FakeArray(shape[0] if len(shape) == 1 else shape, self.dtype, self.data)

    def astype(self, dtype, **_):
        return FakeArray(self.shape, dtype)

    def fill(self, v):
        pass


class FakeStream:
    """A CuPy stream's stand-in: what gpuaug._stream (on_stream, Fork) calls."""

    def __init__(self, null=False, non_blocking=False, ptr=0, priority=None):
        self.ptr = ptr

    def is_capturing(self):
        return False

    def wait_event(self, event):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def fake_cupy():
    """A module object standing in for ``cupy`` (what the policies' GPU paths call)."""
    cp = types.ModuleType("cupy")
    cp.ndarray = FakeArray
    for t in ("uint8", "uint16", "uint32", "uint64", "int32", "int64", "float32", "float16"):
        setattr(cp, t, getattr(np, t))
    cp.empty = lambda shape, dtype=np.float32: FakeArray(shape, dtype)
    cp.zeros = cp.empty
    cp.empty_like = lambda a: FakeArray(a.shape, a.dtype)
    cp.asarray = lambda a, dtype=None: a if isinstance(a, FakeArray) else \
        FakeArray(np.shape(a), dtype or np.asarray(a).dtype)
    cp.ascontiguousarray = lambda a, dtype=None: FakeArray(a.shape, dtype or a.dtype)
    stream = FakeStream()
    cp.cuda = types.SimpleNamespace(Device=_Device, Stream=FakeStream,
                                    runtime=types.SimpleNamespace(getDevice=lambda: 0,
                                                           getDeviceProperties=lambda d: {"multiProcessorCount": 132}),
                                    get_current_stream=lambda: stream)
    return cp


def install_fakes():
    """Route gpuaug's GPU paths to the stand-ins: ``cupy``, the staged upload (one host copy
    into a reused buffer, as the real one packs pinned memory) and get_function (no-op kernels)."""
    sys.modules["cupy"] = fake_cupy()
    import gpuaug._stream as st
    import gpuaug.kernels._cuda as kc

    st._GET_DEVICE = lambda: 0
    host = np.empty(1 << 22, np.uint8)

    def upload(*arrays):
        out, off = [], 0
        for a in arrays:
            a = np.ascontiguousarray(a)
            host[off:off + a.nbytes] = a.reshape(-1).view(np.uint8)
            off += (a.nbytes + 255) // 256 * 256
            out.append(FakeArray(a.shape, a.dtype))
        return out

    def noop(grid, block, args, **kw):
        return None

    kc.upload = upload
    kc.get_function = lambda filename, name: noop


# -- the rows -----------------------------------------------------------------------------

def cases(n):
    """name -> a zero-argument callable timing one piece for ``n`` samples."""
    install_fakes()
    import gpuaug
    from gpuaug.policy import auto as A
    from gpuaug.policy import mixing as M

    x = FakeArray((n, SIZE, SIZE, 3), np.uint8)
    out = {}
    pols = {"ra": gpuaug.RandAugment(2, 9, seed=0), "ta": gpuaug.TrivialAugmentWide(seed=0),
            "aa": gpuaug.AutoAugment("imagenet", seed=0), "augmix": gpuaug.AugMix(seed=0)}
    for name, pol in pols.items():
        p = pol.draw(n, (SIZE, SIZE))
        k = p.ops.shape[1]
        bil = pol.interpolation == "bilinear"
        ot, mt = p.ops.T.ravel(), p.magnitudes.T.ravel()
        pol(x)
        out[f"{name}.draw"] = lambda pol=pol: pol.draw(n, (SIZE, SIZE))
        out[f"{name}.step_rows"] = lambda ot=ot, mt=mt, k=k, bil=bil: \
            A.step_rows(ot, mt, SIZE, SIZE, bil).reshape(k, n, -1)
        out[f"{name}.call"] = lambda pol=pol: pol(x)
        out[f"{name}.replay"] = lambda pol=pol: pol(x, params=pol.last_params)
        out[f"{name}.replay_edited"] = lambda pol=pol, p=p: pol(x, params=p)
    labels = FakeArray((n,), np.int64)
    mixes = {"mixup": M.MixUp(0.8, num_classes=1000, seed=0), "cutmix": M.CutMix(1.0, num_classes=1000, seed=0)}
    for name, mix in mixes.items():
        p = mix.draw(n, (SIZE, SIZE))
        lam = np.asarray(p.lam, np.float32)
        mix(x, labels)
        out[f"{name}.draw"] = lambda mix=mix: mix.draw(n, (SIZE, SIZE))
        out[f"{name}.records"] = lambda p=p, lam=lam: M._records(p.partner, lam, p.boxes, p.order)
        out[f"{name}.call"] = lambda mix=mix: mix(x, labels)
        out[f"{name}.replay"] = lambda mix=mix, p=p: mix(x, labels, params=p)
    return out


def main(argv=None):
    ap = HB.parser(__doc__, 300)
    a = ap.parse_args(argv)
    rows = {}
    print(f"policy host work, n={a.n}, {SIZE}x{SIZE}, stand-in CuPy; {HB.machine()}")
    for name, f in cases(a.n).items():
        if a.only and name not in a.only:
            continue
        rows[name] = HB.time_us(f, a.number, a.repeat)
        print(f"  {name:18s} {rows[name]['median_us']:8.1f} us (best {rows[name]['best_us']:.1f})", flush=True)
    HB.write_json(a.json, {"n": a.n, "size": SIZE, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
