"""pycuda interop: GPUArray inputs and outputs, pycuda streams, page-locked host buffers and
pycuda's contexts (issue 21).

GPU tests (marked `gpu`) need pycuda, which has no wheels: tests/gpu/pycuda_build.sh builds
it from its sdist on the GPU machine. Without pycuda they skip, saying so. What they check:

- every registered op on a ``pycuda.gpuarray.GPUArray`` gives the bits it gives on the same
  data in CuPy; with ``out=`` a GPUArray the result *is* that GPUArray, written on a pycuda
  ``Stream`` in that stream's order (the input is uploaded on the stream behind a busy kernel,
  so work on any other stream would read the stale data);
- zero copies both ways, by pointer: the op's view of a GPUArray is at ``gpudata``, and a
  GPUArray made over a CuPy result (``GPUArray(..., gpudata=y.data.ptr, base=y)``) is at
  ``y.data.ptr``;
- the Scheduler with a pycuda stream and GPUArray outputs, and with a page-locked
  ``pagelocked_empty`` source copied straight from it (no staging: no worker fills a slot);
- contexts: ``pycuda.autoprimaryctx`` (the runtime's primary context, which CuPy and gpuaug
  use) works; ``pycuda.autoinit`` makes a context of its own (not the primary one): what
  gpuaug does there is run in a fresh process and written to
  ``$OUT/pycuda_context.json``.

CPU tests: the stream and array adapters on fake pycuda objects (``.handle``,
``__cuda_array_interface__`` over a pinned-looking host pointer is not needed: nothing is
dereferenced), and that .pycuda/ holds everything pycuda needs to install offline.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import zipfile

import numpy as np
import pytest

import gpuaug
from gpuaug._batch import as_batch
from gpuaug._stream import check_stream, stream_ptr
from gpuaug._util import is_cuda_array

OPS = sorted(gpuaug.registry)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KIT = os.path.join(REPO, ".pycuda")

SPIN = r"""
extern "C" __global__ void gpuaug_test_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


# ---------------------------------------------------------------------------------------
# CPU: adapters on fake pycuda objects
# ---------------------------------------------------------------------------------------
class FakePycudaStream:
    """What gpuaug reads of a ``pycuda.driver.Stream``: ``.handle``, the CUstream as an int."""

    def __init__(self, handle):
        self.handle = handle


class FakeGPUArray:
    """What gpuaug reads of a ``pycuda.gpuarray.GPUArray``: its CUDA array interface (v3,
    ``stream`` None, as pycuda 2026.1 exports it)."""

    def __init__(self, shape, dtype, ptr):
        self.shape, self.dtype, self.gpudata = tuple(shape), np.dtype(dtype), ptr

    @property
    def __cuda_array_interface__(self):
        strides = tuple(int(s) for s in np.empty(self.shape, self.dtype).strides)
        return {"shape": self.shape, "strides": strides, "data": (int(self.gpudata), False),
                "typestr": self.dtype.str, "stream": None, "version": 3}


def test_pycuda_stream_handle_is_the_raw_stream():
    assert stream_ptr(FakePycudaStream(0x7F00_1234_5000)) == 0x7F00_1234_5000
    assert stream_ptr(FakePycudaStream(0)) == 0  # pycuda's Stream for the default stream
    check_stream(FakePycudaStream(12345))
    with pytest.raises(TypeError, match=r"FakePycudaStream\.handle is 'x'"):
        stream_ptr(FakePycudaStream("x"))


def test_pycuda_stream_is_checked_and_ignored_on_the_cpu_backend():
    x = np.random.default_rng(0).integers(0, 256, (3, 5, 7, 3), dtype=np.uint8)
    y = gpuaug.flip(x, stream=FakePycudaStream(4096), backend="cpu")
    np.testing.assert_array_equal(y, x[:, :, ::-1])
    with pytest.raises(TypeError, match="stream"):
        gpuaug.flip(x, stream=FakePycudaStream(1.5), backend="cpu")


def test_gpuarray_is_seen_as_a_cuda_array():
    g = FakeGPUArray((2, 4, 4, 3), np.uint8, 0x7F00_0000_0000)
    assert is_cuda_array(g)
    assert not is_cuda_array(np.zeros((2, 4, 4, 3), np.uint8))


def _requires(meta: str):
    """Requirement names (no extras, no environment markers) of a METADATA / PKG-INFO text."""
    names = []
    for line in meta.splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            names.append(re.split(r"[\s;<>=!~\[(]", line.split(":", 1)[1].strip())[0])
    return names


def _norm(name):
    return re.sub(r"[-_.]+", "_", name).lower()


@pytest.mark.skipif(not glob.glob(os.path.join(KIT, "pycuda-*.tar.gz")),
                    reason=".pycuda/ (ignored by git) holds no pycuda sdist here; see the README's pycuda paragraph")
def test_pycuda_kit_installs_offline():
    """.pycuda/ has the sdist and a wheel for every run-time requirement, recursively, one
    version each, for CPython 3.12 on x86-64 (the GPU machine)."""
    sdist = sorted(glob.glob(os.path.join(KIT, "pycuda-*.tar.gz")))[-1]
    with tarfile.open(sdist) as t:
        pkg = next(m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        want = _requires(t.extractfile(pkg).read().decode())
    wheels = {}
    for w in glob.glob(os.path.join(KIT, "*.whl")):
        name, _, rest = os.path.basename(w)[:-len(".whl")].partition("-")
        assert _norm(name) not in wheels, f"two wheels of {name} in .pycuda: pip --no-index would refuse"
        tags = rest.rsplit("-", 3)[-3:]
        assert tags[0] in ("py3", "cp312", "py2.py3") and (tags[2].endswith("any") or "x86_64" in tags[2]), w
        with zipfile.ZipFile(w) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            wheels[_norm(name)] = _requires(z.read(meta).decode())
    assert {"pytools", "mako"} <= {_norm(n) for n in want}
    seen, todo = set(), [_norm(n) for n in want]
    while todo:
        n = todo.pop()
        if n in seen or n == "numpy":  # numpy: the kit's (NumPy 2.4) on the GPU machine
            continue
        seen.add(n)
        assert n in wheels, f"{n} (needed by pycuda) has no wheel in .pycuda"
        todo += [_norm(r) for r in wheels[n]]
    assert sum(os.path.getsize(f) for f in glob.glob(os.path.join(KIT, "*"))) < 20 * 2 ** 20


def test_build_script_is_valid_bash():
    subprocess.run(["bash", "-n", os.path.join(REPO, "tests", "gpu", "pycuda_build.sh")], check=True)


def test_build_steps_build_a_wheel_with_parallel_compiles(tmp_path):
    """tests/gpu/pycuda_build.py's wheel step (what pycuda_build.sh runs in pycuda's source)
    on a tiny package whose setup.py imports a helper from its own folder, as pycuda's does."""
    import shutil
    import sysconfig

    if not shutil.which("gcc") or not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("needs gcc and the Python headers")
    (tmp_path / "helper.py").write_text('NAME = "gpuaug_pcb_try"\n')
    (tmp_path / "setup.py").write_text(
        "from setuptools import Extension, setup\nfrom helper import NAME\n"
        "setup(name=NAME, version='0.1', ext_modules=[Extension('gpuaug_pcb_ext', ['a.c', 'b.c'])])\n")
    (tmp_path / "a.c").write_text("int gpuaug_pcb_a(void) { return 1; }\n")
    (tmp_path / "b.c").write_text(
        "#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"gpuaug_pcb_ext\", 0, -1, 0};\n"
        "PyMODINIT_FUNC PyInit_gpuaug_pcb_ext(void) { return PyModule_Create(&m); }\n")
    script = os.path.join(REPO, "tests", "gpu", "pycuda_build.py")
    r = subprocess.run([sys.executable, script, "wheel", "2", str(tmp_path / "dist")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "parallel compile: 2 jobs" in r.stdout
    assert len(list((tmp_path / "dist").glob("gpuaug_pcb_try-0.1-*.whl"))) == 1
    bad = subprocess.run([sys.executable, script, "nonsense"], capture_output=True, text=True)
    assert bad.returncode != 0 and "usage" in bad.stderr


# ---------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------
def _pycuda_reason():
    try:
        import pycuda.driver  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return (f"needs pycuda ({type(e).__name__}: {str(e)[:80]}); it has no wheels: "
                "bash tests/gpu/pycuda_build.sh builds it on the GPU machine")
    return None


@pytest.fixture(scope="module")
def pc():
    """pycuda on the runtime's primary context (the one CuPy uses), as a namespace."""
    reason = _pycuda_reason()
    if reason:
        pytest.skip(reason)
    import cupy

    cupy.cuda.Device(0).use()  # the runtime (CuPy) initialises the primary context first
    import pycuda.autoprimaryctx as apc
    import pycuda.driver as drv
    import pycuda.gpuarray as gpuarray

    class NS:
        pass

    ns = NS()
    ns.drv, ns.gpuarray, ns.ctx, ns.cp = drv, gpuarray, apc.context, cupy
    return ns


def _spin_on(pc, stream, cycles=40_000_000):
    """Keep ``stream`` (a pycuda Stream) busy for ``cycles`` GPU clocks (~20 ms on an H100)."""
    cp = pc.cp
    k = cp.RawKernel(SPIN, "gpuaug_test_spin")
    with cp.cuda.ExternalStream(stream.handle):
        k((1,), (1,), (np.int64(cycles),))


def _gpu_case(name, n=4, h=33, w=29):
    spec = gpuaug.registry[name]
    rng = np.random.default_rng(100 + OPS.index(name))
    c = 3 if 3 in spec.channels else spec.channels[0]
    x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    kw = spec.example(rng, n, h, w) if spec.example else {}
    if name == "crop_mirror_normalize":
        kw["output_layout"] = "NHWC"
    return spec, x, kw


def _bits(a):
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


@pytest.mark.gpu
@pytest.mark.parametrize("name", OPS)
def test_op_on_gpuarray_equals_cupy(pc, name):
    cp, drv, gpuarray = pc.cp, pc.drv, pc.gpuarray
    spec, x, kw = _gpu_case(name)
    ref = spec.func(cp.asarray(x), **kw)
    want = cp.asnumpy(ref)

    # input: a GPUArray, viewed in place (pointer equality), result equal to CuPy's
    xg = gpuarray.to_gpu(x)
    view = as_batch(xg).arrays[0]
    assert view.data.ptr == int(xg.gpudata), "the op's view of a GPUArray must be the GPUArray's memory"
    y = spec.func(xg, **kw)
    assert isinstance(y, cp.ndarray)
    assert _bits(cp.asnumpy(y)) == _bits(want), f"{name}: GPUArray input differs from CuPy input"

    # output the other way: a GPUArray over the CuPy result, no copy
    yg = gpuarray.GPUArray(y.shape, y.dtype, gpudata=y.data.ptr, strides=y.strides, base=y)
    assert int(yg.gpudata) == y.data.ptr
    assert _bits(yg.get()) == _bits(want)

    # out= a GPUArray, on a pycuda stream, ordered behind the stream's earlier work: the input
    # arrives by an async upload queued after a ~20 ms kernel; work on another stream would see
    # the poison instead
    s = drv.Stream()
    xg.set(np.full_like(x, 77))  # poison (synchronous)
    out = gpuarray.empty(want.shape, want.dtype)
    out.set(np.full(want.shape, 13, want.dtype))
    host = drv.pagelocked_empty(x.shape, x.dtype)
    host[...] = x
    _spin_on(pc, s)
    drv.memcpy_htod_async(xg.gpudata, host, s)
    r = spec.func(xg, out=out, stream=s, **kw)
    assert r is out, "with out= the op returns the caller's GPUArray"
    got = out.get_async(stream=s)
    s.synchronize()
    assert _bits(got) == _bits(want), f"{name}: out= GPUArray on a pycuda Stream"

    # on the pycuda stream, allocating (CuPy result on that stream's order)
    xg.set(np.full_like(x, 77))
    _spin_on(pc, s)
    drv.memcpy_htod_async(xg.gpudata, host, s)
    y2 = spec.func(xg, stream=s, **kw)
    yg2 = gpuarray.GPUArray(y2.shape, y2.dtype, gpudata=y2.data.ptr, strides=y2.strides, base=y2)
    got2 = yg2.get_async(stream=s)
    s.synchronize()
    assert _bits(got2) == _bits(want), f"{name}: allocating call on a pycuda Stream"


@pytest.mark.gpu
def test_varshape_list_of_gpuarrays(pc):
    gpuarray, drv = pc.gpuarray, pc.drv
    rng = np.random.default_rng(5)
    xs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((9, 17), (31, 4), (16, 16))]
    xg = [gpuarray.to_gpu(a) for a in xs]
    b = as_batch(xg)
    assert [v.data.ptr for v in b.views] == [int(g.gpudata) for g in xg]
    outs = [gpuarray.empty(a.shape, a.dtype) for a in xs]
    s = drv.Stream()
    r = gpuaug.flip(xg, out=outs, horizontal=False, vertical=True, stream=s)
    assert all(a is o for a, o in zip(r, outs))
    s.synchronize()
    for a, o in zip(xs, outs):
        np.testing.assert_array_equal(o.get(), a[::-1])


@pytest.mark.gpu
def test_scheduler_all_pycuda_streams_and_gpuarray_outputs(pc):
    """Copy, compute and consumer streams all pycuda ones, GPUArray outputs handed back as
    themselves, batches released on the consumer's pycuda stream behind a busy kernel (an
    early reuse of a buffer would overwrite a batch before the consumer's copy of it)."""
    drv, gpuarray = pc.drv, pc.gpuarray
    x = np.random.default_rng(1).integers(0, 256, (48, 8, 8, 3), dtype=np.uint8)
    copy_s, comp_s, consumer = drv.Stream(), drv.Stream(), drv.Stream()
    outs = [gpuarray.empty((8, 8, 8, 3), np.uint8) for _ in range(2)]
    s = gpuaug.Scheduler(x, gpuaug.flip, batch_size=8, stream=consumer, copy_stream=copy_s,
                         compute_stream=comp_s, out=outs, recycle="manual")
    got = []
    for i, batch in enumerate(s):
        assert batch.images is outs[i % 2]
        _spin_on(pc, consumer, 4_000_000)
        host = drv.pagelocked_empty(batch.images.shape, np.uint8)
        batch.images.get_async(stream=consumer, ary=host)
        batch.release(consumer)
        got.append(host)
    consumer.synchronize()
    assert i == 5
    for i, host in enumerate(got):
        np.testing.assert_array_equal(host, x[8 * i:8 * i + 8, :, ::-1], err_msg=f"batch {i}")


@pytest.mark.gpu
def test_scheduler_copies_straight_from_a_pagelocked_source(pc):
    """A ``pagelocked_empty`` array is already pinned: with ``pin_source=True`` the Scheduler
    copies from it directly (no worker fills a staging slot), and the batches are right."""
    drv, cp = pc.drv, pc.cp
    src = drv.pagelocked_empty((64, 16, 16, 3), np.uint8)
    src[...] = np.random.default_rng(2).integers(0, 256, src.shape, dtype=np.uint8)
    s = gpuaug.Scheduler(src, gpuaug.flip, batch_size=16, pin_source=True, depth=2)
    for i, (images, _) in enumerate(s):
        np.testing.assert_array_equal(cp.asnumpy(images), src[16 * i:16 * i + 16, :, ::-1])
    assert i == 3
    t = s.timings()
    assert len(t) == 4 and all(b.fill == [] for b in t), "a page-locked source needs no staging copy"
    s.close()
    # the pages are pycuda's: the Scheduler must leave them page-locked (not unregister them)
    attrs = cp.cuda.runtime.pointerGetAttributes(src.ctypes.data)
    assert attrs.type == cp.cuda.runtime.memoryTypeHost, "pycuda's page-locked source lost its pinning"


@pytest.mark.gpu
def test_autoprimaryctx_is_the_runtime_context(pc):
    """pycuda.autoprimaryctx pushes the device's primary context, the one the CUDA runtime
    (CuPy, gpuaug) uses: pointers and streams pass freely both ways, also from the
    Scheduler's threads."""
    drv, cp = pc.drv, pc.cp
    assert drv.Context.get_current() == pc.ctx
    assert cp.cuda.driver.ctxGetCurrent() == pc.ctx.handle, "CuPy and pycuda must share one context"
    a = cp.arange(10, dtype=cp.float32)
    attrs = cp.cuda.runtime.pointerGetAttributes(a.data.ptr)
    assert attrs.device == 0
    host = np.empty(10, np.float32)
    drv.memcpy_dtoh(host, a.data.ptr)  # a CuPy pointer used through pycuda's context
    np.testing.assert_array_equal(host, np.arange(10, dtype=np.float32))


CONTEXT_PROBE = textwrap.dedent(r"""
    import json, sys, traceback
    import numpy as np
    import pycuda.autoinit as ai          # a context of pycuda's own, current on this thread
    import pycuda.driver as drv
    import pycuda.gpuarray as gpuarray

    res = {}
    def err(e):
        return f"{type(e).__name__}: {str(e)[:300]}"
    prim = ai.device.retain_primary_context()
    res["pycuda_context_is_primary"] = ai.context == prim
    x = np.random.default_rng(0).integers(0, 256, (4, 16, 16, 3), dtype=np.uint8)
    want = x[:, :, ::-1]
    xg = gpuarray.to_gpu(x)
    try:
        import cupy, gpuaug
        y = gpuaug.flip(xg)
        res["op"] = "ok" if np.array_equal(cupy.asnumpy(y), want) else "wrong result"
        res["op_result_context"] = "pycuda" if drv.Context.get_current() == ai.context else "other"
    except Exception as e:
        res["op"] = err(e)
    try:
        s = drv.Stream()
        out = gpuarray.empty(x.shape, x.dtype)
        r = gpuaug.flip(xg, out=out, stream=s)
        s.synchronize()
        res["op_out_stream"] = "ok" if np.array_equal(out.get(), want) else "wrong result"
    except Exception as e:
        res["op_out_stream"] = err(e)
    try:
        s = drv.Stream()
        outs = [gpuarray.empty((4, 16, 16, 3), np.uint8) for _ in range(2)]
        sched = gpuaug.Scheduler(np.concatenate([x, x]), gpuaug.flip, batch_size=4, stream=s, out=outs)
        ok = True
        for images, _ in sched:
            ok &= np.array_equal(images.get_async(stream=s), want)
            s.synchronize()
        res["scheduler"] = "ok" if ok else "wrong result"
    except Exception as e:
        res["scheduler"] = err(e)
    res["context_current_at_end"] = "pycuda" if drv.Context.get_current() == ai.context else "other"
    print("RESULT " + json.dumps(res), flush=True)
""")


@pytest.mark.gpu
def test_pycuda_created_context_behaviour_is_recorded(pc):
    """pycuda.autoinit creates a context of its own (cuCtxCreate), not the primary one that
    the CUDA runtime and CuPy use. Run in a fresh process (a second context in this one would
    disturb the other tests); the outcome of an op, an op with out= on a pycuda stream, and a
    Scheduler run is written to $OUT/pycuda_context.json for the README. Required: the process
    neither crashes nor gives wrong pixels silently (each step is "ok" or a raised error)."""
    p = subprocess.run([sys.executable, "-c", CONTEXT_PROBE], capture_output=True, text=True, timeout=90)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, f"the probe died (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    res = json.loads(line[len("RESULT "):])
    out_dir = os.environ.get("OUT")
    if out_dir:
        with open(os.path.join(out_dir, "pycuda_context.json"), "w") as f:
            json.dump(res, f, indent=1)
    print("pycuda.autoinit context:", json.dumps(res))
    assert res["pycuda_context_is_primary"] is False
    for step in ("op", "op_out_stream", "scheduler"):
        assert res[step] != "wrong result", f"{step}: wrong pixels without an error in a pycuda context: {res}"


# ---------------------------------------------------------------------------------------
# CPU: the example's timing maths and dataset
# ---------------------------------------------------------------------------------------
def _example():
    import importlib.util

    path = os.path.join(REPO, "examples", "pycuda_prefetch.py")
    spec = importlib.util.spec_from_file_location("pycuda_prefetch", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports NumPy only; pycuda/CuPy are imported in main()
    return mod


def test_example_busy_and_overlap_match_a_fine_grid():
    ex = _example()
    rng = np.random.default_rng(3)
    grid = np.linspace(0, 10, 100_001)[:-1] + 5e-5  # midpoints of 1e-4-wide cells
    for _ in range(20):
        a = [tuple(sorted(rng.uniform(0, 10, 2))) for _ in range(rng.integers(1, 6))]
        b = [tuple(sorted(rng.uniform(0, 10, 2))) for _ in range(rng.integers(1, 6))]
        ina = np.zeros_like(grid, bool)
        inb = np.zeros_like(grid, bool)
        for s, e in a:
            ina |= (grid >= s) & (grid < e)
        for s, e in b:
            inb |= (grid >= s) & (grid < e)
        assert abs(ex.busy(a) - ina.sum() * 1e-4) < 2e-3 * len(a)
        assert abs(ex.both(a, b) - (ina & inb).sum() * 1e-4) < 2e-3 * (len(a) + len(b))


def test_example_dataset_is_a_readonly_memmap(tmp_path):
    ex = _example()
    d = ex.make_dataset(str(tmp_path / "d.npy"), 5, 6, 7)
    assert isinstance(d, np.memmap) and d.shape == (5, 6, 7, 3) and d.dtype == np.uint8
    assert not d.flags.writeable
    again = ex.make_dataset(str(tmp_path / "d.npy"), 5, 6, 7)
    np.testing.assert_array_equal(d, again)
    assert len(np.unique(d)) > 100  # random bytes, not zeros


class _FakeEvent:
    def record(self, stream):
        self.t = len(_FakeEvent.log)
        _FakeEvent.log.append((stream, self))

    def synchronize(self):
        assert hasattr(self, "t"), "waited for an event that was never recorded"

    def time_since(self, other):
        return float(self.t - other.t)


class _FakeStream:
    def wait_for_event(self, ev):
        assert hasattr(ev, "t"), "a stream waits for an event that was never recorded"


class _FakeDrv:
    """pycuda.driver on NumPy: work runs at once, in the order it is queued."""
    Stream, Event = _FakeStream, _FakeEvent

    @staticmethod
    def pagelocked_empty(shape, dtype):
        return np.empty(shape, dtype)

    @staticmethod
    def memcpy_htod_async(dst, src, stream):
        dst[...] = src


class _FakeGPUArrayModule:
    class GPUArray:
        def __init__(self, shape, dtype):
            self.gpudata = np.full(shape, 0xEE, dtype)  # "device" memory: a NumPy array

        def get(self):
            return self.gpudata.copy()

    @staticmethod
    def empty(shape, dtype):
        return _FakeGPUArrayModule.GPUArray(shape, dtype)


@pytest.mark.parametrize("batch,threads,nbuf", [(8, 3, 2), (7, 16, 2), (6, 2, 3)])
def test_example_recipe_feeds_every_batch_in_order(tmp_path, batch, threads, nbuf):
    """The example's pipeline on a NumPy stand-in for pycuda: each batch is filled from its own
    rows of the memmap (thread chunks that need not divide the batch), copied into its slot
    and augmented from there into its output, with its own parameters."""
    ex = _example()
    data = ex.make_dataset(str(tmp_path / "d.npy"), 5 * batch + 3, 4, 5)
    n = len(data) // batch
    angles = [np.random.default_rng(i).integers(0, 256, batch).astype(np.uint8) for i in range(n)]
    seen = []

    class Aug:
        @staticmethod
        def rotate(x, angle, out, stream):
            out.gpudata[...] = x.gpudata[:, ::-1] ^ angle[:, None, None, None]
            seen.append(out.get())

    _FakeEvent.log = []
    res, last = ex.recipe(_FakeDrv, _FakeGPUArrayModule, Aug, data, batch, nbuf, threads, angles)
    assert res["batches"] == n == len(seen) and res["bytes"] == n * batch * 4 * 5 * 3
    for i, got in enumerate(seen):
        want = data[i * batch:(i + 1) * batch, ::-1] ^ angles[i][:, None, None, None]
        np.testing.assert_array_equal(got, want, err_msg=f"batch {i}")
    assert sorted(last) == list(range(n - nbuf, n))
    for i, out in last.items():
        np.testing.assert_array_equal(out.get(), seen[i])
    assert 0 <= res["overlap"] <= 1
