"""Host cost of a Compose call's draws and parameter rows (issues 13 and 12), on the CPU alone.

The policy of tests/gpu/kprof.py's ``targets`` workload and of a training loader (issue 12):
``Compose([RandomHorizontalFlip(), RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
RandomResizedCrop(224)])`` with host draws, for n = 256 images of 224 x 224. Nothing is
allocated on or launched to a GPU: the rows time the pieces a call runs on the host before its
launch, by calling them directly. NumPy only (plus Numba for ``compose3_cpu_tiny``).

Rows (median and best us per call):

- ``draw``: ``Compose._sample`` (the three transforms' draws, PolicyParams);
- ``flip_sample``, ``affine_sample``, ``rrc_sample``: each transform's ``sample`` as Compose calls
  it (sizes an (n, 2) int64 array);
- ``resized_crop_boxes``: the public, checked ``gpuaug.random.resized_crop_boxes``;
- ``perspective_corners``, ``erasing_boxes``, ``crop_offsets``: the other samplers with integer
  draws (RandomPerspective, RandomErasing, RandomCrop(200, padding=4));
- ``build``: ``policy._fused.build`` of the stage (its memoised template: ``_build_fast``);
- ``flip_matrices``, ``affine_matrices``, ``rrc_matrices``: each transform's (n, 3, 3) maps;
- ``compose_maps``: the two matmuls that fold them; ``inverse``: ``_fused._inverse``;
  ``integer_maps``: ``_fused._integer_maps``;
- ``draw_build``: ``draw`` then ``build``, the host work of a call before allocate/launch;
- ``compose3_cpu_tiny``: the same policy (RandomResizedCrop(4)) called on an (8, 4, 4, 3) uint8
  NumPy batch, backend="cpu" (the whole call, kernel included: a few us).

Device draws (issue 13: a ``draws="device"`` call's host cost), the policy of
tests/gpu/compose_host.py (flip + RandomAffine(10) + ColorJitter(0.2, 0.2, 0.2, 0.05) +
Normalize, uint8 NHWC in, float32 NCHW out: one stage, the contrast reduction, three launches
with the draw) on a stand-in CuPy (:func:`standins`: bench/host_policies.py's arrays with
strides, real ``gpuaug.kernels._cuda.Kernel`` packing with a no-op driver launch, the real
constant cache for the descriptor table):

- ``device_call``: a warm ``policy(x)`` (its memo, ``compose._Eager``);
- ``device_call_general``: the same call through the general path (as while launches are
  recorded, ``gpuaug.kernels._cuda.RECORDING``): batch parsing, plan lookups, output Batch,
  launch plans, ``launch_cuda``. On the tree before the memo both rows time this path.

The stand-in's allocations are Python objects (about 2 us each here): on the GPU machine CuPy's
allocations and the driver's launches come on top (tests/gpu/compose_host.py times those).

    python bench/host_compose.py [--n 256] [--size 224] [--number 1000] [--repeat 7] [--only ROW ...]
"""
from __future__ import annotations

import math

import numpy as np

import _hostbench as HB  # noqa: E402  (bench/, the script's own folder)


def policy(size):
    import gpuaug

    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(),
                           gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                           gpuaug.RandomResizedCrop(size)], seed=0, draws="host")


# -- device draws on a stand-in CuPy -----------------------------------------------------------
def _patcher():
    """(setattr, setitem) that change for good (the bench process); tests pass monkeypatch's."""
    def setitem(d, k, v):
        d[k] = v
    return setattr, setitem


def standins(setattr_=None, setitem_=None):
    """Route a device-drawn Compose call to a stand-in CuPy (bench/host_policies.py's FakeArray
    with strides and transpose; allocations are address counters, no memory) and the real
    ``gpuaug.kernels._cuda.Kernel`` with a recording no-op in place of ``cuLaunchKernel``.
    The module state the GPU path caches (CuPy's array type, batch and table memos, the constant
    cache and pinned staging) is replaced by fresh containers through ``setattr_`` /
    ``setitem_`` (monkeypatch's in tests). Returns a namespace: ``Array`` (the array class:
    ``Array(shape, dtype)``, ``Array.at(addr)`` to set the next address), ``launches`` (one
    ``(kernel name, grid, block, shared_mem, stream, packed argument bytes)`` per launch when
    ``record`` is true)."""
    import os
    import sys
    import types

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import host_policies as HP
    finally:
        sys.path.pop(0)
    import gpuaug._batch as B
    import gpuaug._stream as st
    import gpuaug.kernels._cuda as kc
    from gpuaug.policy import _fused as F

    if setattr_ is None:
        setattr_, setitem_ = _patcher()

    class Mem(HP._Mem):
        __slots__ = ()

        def __add__(self, k):
            return Mem(self.ptr + int(k))

        def copy_from_host_async(self, *a):
            pass

    class Array(HP.FakeArray):
        """A stand-in CuPy array: shape, dtype, strides, an address; no memory."""

        def __init__(self, shape, dtype=np.float32, memptr=None, strides=None, **_):
            if memptr is None:
                memptr = Mem(HP.FakeArray._next[0])
                nbytes = math.prod((shape,) if isinstance(shape, int) else shape) * np.dtype(dtype).itemsize
                HP.FakeArray._next[0] += (nbytes + 511) // 512 * 512 + 512  # CuPy's pool: 512-byte aligned
            super().__init__(shape, dtype, memptr)
            self._strides = strides  # None: C-contiguous (HP.FakeArray.strides)

        @property
        def strides(self):
            return HP.FakeArray.strides.fget(self) if self._strides is None else self._strides

        @staticmethod
        def at(addr):
            HP.FakeArray._next[0] = addr

        def transpose(self, *axes):
            return Array(tuple(self.shape[i] for i in axes), self.dtype, self.data,
                         tuple(self.strides[i] for i in axes))

        def __getitem__(self, key):
            if key is None:
                return Array((1,) + self.shape, self.dtype, self.data, (0,) + self.strides)
            return super().__getitem__(key)

    class Event:
        done = True

        def __init__(self, **_):
            pass

        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

    class Pinned(bytearray):
        def __init__(self, size):
            super().__init__(size)
            self.ptr = np.frombuffer(self, np.uint8).ctypes.data

    cp = HP.fake_cupy()
    cp.ndarray = Array
    cp.float64 = np.float64
    cp.empty = lambda shape, dtype=np.float32: Array(shape, dtype)
    cp.cuda.Event = Event
    cp.cuda.alloc_pinned_memory = Pinned
    cp.cuda.runtime.getDeviceProperties = lambda d: {"multiProcessorCount": 132}
    cp.cuda.Device.synchronize = lambda self: None
    cp.asarray = lambda a, dtype=None: a if isinstance(a, Array) else Array(np.shape(a), dtype or np.asarray(a).dtype)

    ns = types.SimpleNamespace(Array=Array, launches=[], record=False, names={})

    class Raw:
        def __init__(self, name):
            self.kernel = types.SimpleNamespace(ptr=0x1000 + 16 * len(ns.names))
            ns.names[self.kernel.ptr] = name

    def launch(ptr, g0, g1, g2, b0, b1, b2, shm, stream, params, extra):
        if not ns.record:
            return
        spec = next(s for s in kc._SPECS.values() if getattr(s.local, "bufs", (0, 0, -1))[2] == params)
        ns.launches.append((ns.names[ptr], (g0, g1, g2), (b0, b1, b2), shm, stream,
                            spec.local.bufs[0][:spec.n].tobytes()))

    kernels = {}
    setitem_(sys.modules, "cupy", cp)
    setattr_(st, "_GET_DEVICE", lambda: 0)
    setattr_(kc, "get_function", lambda f, name: kernels.setdefault(name, kc.Kernel(Raw(name))))
    setattr_(kc, "_LAUNCH", launch)
    setattr_(kc, "_STREAM", cp.cuda.get_current_stream)
    setattr_(kc, "_ARRAY", Array)
    for mod, name, fresh in ((kc, "_staging", {}), (kc, "_constants", {}), (B, "_CP_NDARRAY", []), (B, "_SEEN", {}),
                             (B, "_ALLOCS", {}), (B, "_TABLES", {}), (B, "_PLANS", {}), (F, "_sms", {})):
        setattr_(mod, name, fresh)
    return ns


def device_policy(seed=0):
    """tests/gpu/compose_host.py's policy, drawing on the device."""
    import gpuaug

    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10),
                           gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05),
                           gpuaug.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))], seed=seed, draws="device")


def device_cases(n, size):
    """The device-draw rows (``device_call``, ``device_call_general``) on the stand-ins."""
    from gpuaug.kernels._cuda import RECORDING

    ns = standins()
    x = ns.Array((n, size, size, 3), np.uint8)
    warm = device_policy()
    warm(x)

    def general():
        # while launches are recorded (here: by nobody) a call takes the general path
        RECORDING[0] += 1
        try:
            return warm(x)
        finally:
            RECORDING[0] -= 1
    return {"device_call": lambda: warm(x), "device_call_general": general}


def cases(n, size):
    """name -> a zero-argument callable timing one piece for ``n`` images of ``size`` x ``size``."""
    from gpuaug import random as R
    from gpuaug._batch import as_batch
    from gpuaug.policy import _fused as F
    from gpuaug.policy.compose import batch_sizes

    pol = policy(size)
    # a zero-strided batch of the right shape: as_batch only reads its shape and dtype here
    x = np.lib.stride_tricks.as_strided(np.zeros(3, np.uint8), (n, size, size, 3), (0, 0, 0, 1))
    b = as_batch(x, "NHWC")
    sizes = batch_sizes(b)
    (kind, spec), = pol._items("uint8")
    flip, aff, rrc = pol.transforms
    rng = np.random.default_rng(1)
    p = pol._sample(n, sizes, None)
    F.build(spec, pol.transforms, p.values, b, "NHWC")  # the template
    fv, av, rv = p.values
    mf = flip.matrices(fv, sizes)
    ma = aff.matrices(av, sizes)
    mr = rrc.matrices(rv, sizes)
    m = np.matmul(mr, np.matmul(ma, mf))
    inv, _ = F._inverse(m)

    def draw_build():
        q = pol._sample(n, sizes, None)
        return F.build(spec, pol.transforms, q.values, b, "NHWC")

    tiny = policy(4)
    xt = np.random.default_rng(0).integers(0, 256, (8, 4, 4, 3), dtype=np.uint8)
    return {
        "draw": lambda: pol._sample(n, sizes, None),
        "flip_sample": lambda: flip.sample(rng, n, sizes),
        "affine_sample": lambda: aff.sample(rng, n, sizes),
        "rrc_sample": lambda: rrc.sample(rng, n, sizes),
        "resized_crop_boxes": lambda: R.resized_crop_boxes(rng, sizes, rrc.scale, rrc.ratio),
        "perspective_corners": lambda: R.perspective_corners(rng, sizes, 0.5),
        "erasing_boxes": lambda: R.erasing_boxes(rng, sizes),
        "crop_offsets": lambda: R.crop_offsets(rng, sizes, (200, 200), (4, 4, 4, 4)),
        "build": lambda: F.build(spec, pol.transforms, p.values, b, "NHWC"),
        "flip_matrices": lambda: flip.matrices(fv, sizes),
        "affine_matrices": lambda: aff.matrices(av, sizes),
        "rrc_matrices": lambda: rrc.matrices(rv, sizes),
        "compose_maps": lambda: np.matmul(mr, np.matmul(ma, mf)),
        "inverse": lambda: F._inverse(m),
        "integer_maps": lambda: F._integer_maps(inv),
        "draw_build": draw_build,
        "compose3_cpu_tiny": lambda: tiny(xt, backend="cpu"),
    }


def main(argv=None):
    ap = HB.parser(__doc__, 1000)
    ap.add_argument("--size", type=int, default=224)
    a = ap.parse_args(argv)
    rows = {}
    print(f"Compose host draws and rows, n={a.n}, {a.size}x{a.size}, {HB.machine()}")
    todo = dict(cases(a.n, a.size))
    if not a.only or any(r.startswith("device_call") for r in a.only):
        todo.update(device_cases(a.n, a.size))  # last: it installs the stand-in CuPy for good
    for name, f in todo.items():
        if a.only and name not in a.only:
            continue
        rows[name] = HB.time_us(f, a.number, a.repeat, warmup=20)  # imports, memos, compiles
        print(f"  {name:20s} {rows[name]['median_us']:8.2f} us (best {rows[name]['best_us']:.2f})", flush=True)
    HB.write_json(a.json, {"n": a.n, "size": a.size, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
