"""Compose's eager device-draw call (``Compose._run_device_eager``) run on the CPU.

kernels/fused.cu runs as host C++ (the emulation of tests/test_policy_cuda_host.py); CuPy's
buffer, the constant stage and the draw launch are host stand-ins: the draw writes the NumPy
twin's values and the host build's float32 rows where the device draw writes them. What is
under test is the host side of a device-drawn call: one buffer holding the values, the rows
and every contrast stage's partial sums (their offsets), the rows' addresses per stage, the
stage order and the outputs. Its result must equal the host-rows path (``launch_cuda`` with
uploaded rows, separate partials) given the same parameters, bit for bit. On a GPU,
tests/gpu/compose_host.py checks the real draw kernel against the host path.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import types

import numpy as np
import pytest

import gpuaug
from gpuaug._batch import as_batch
from gpuaug.policy import _draw as D
from gpuaug.policy import _fused as F
from gpuaug.policy import compose as C
from gpuaug.policy.compose import plan_stages

import test_policy_cuda_host as H

CASES = {
    # name: (policy factory, input layout)
    "one-stage-contrast-nhwc": (lambda: gpuaug.Compose([
        gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1), shear=5),
        gpuaug.ColorJitter(0.4, 0.4, 0.4, 0.1), gpuaug.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]),
        "NHWC"),
    "one-stage-contrast-nchw": (lambda: gpuaug.Compose([
        gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10), gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05),
        gpuaug.Normalize(0.5, 0.25)]), "NCHW"),
    "two-stages-two-contrasts": (lambda: gpuaug.Compose([
        gpuaug.RandomRotation(20), gpuaug.ColorJitter(0.3, 0.3), gpuaug.RandomAffine(5),
        gpuaug.ColorJitter(0, 0.4), gpuaug.Normalize(0.5, 0.5)]), "NHWC"),
    "no-contrast": (lambda: gpuaug.Compose([
        gpuaug.RandomVerticalFlip(), gpuaug.RandomRotation(30), gpuaug.RandomGrayscale(0.5),
        gpuaug.ToDtype("float32", scale=True)]), "NHWC"),
}


def _input(layout, seed):
    x = np.random.default_rng(seed).integers(0, 256, (3, 9, 13, 3), dtype=np.uint8)
    return x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def _stages(policy, x, layout, params):
    """(spec, built, src batch, dst batch, result) per stage of the host-rows path."""
    out, cur, lay = [], x, layout
    for kind, spec in plan_stages(policy.transforms, "uint8"):
        assert kind == "fused"
        b = as_batch(cur, lay)
        built = F.build(spec, policy.transforms, params.values, b, lay)
        result, dst = F.allocate(b, None, built)
        out.append((spec, built, b, dst, result))
        cur, lay = result, built.out_layout
    return out


def _names():
    names = set()
    for name, (make, layout) in CASES.items():
        policy = make()
        x = _input(layout, 0)
        for spec, built, b, dst, _ in _stages(policy, x, layout, policy.sample(x, seed=1, layout=layout)):
            dense, planar = F._dense(b, dst, spec)
            for nm in F.kernel_names(spec, built, b.dtype, b.channels, dense, planar):
                names |= {nm.format(packed=""), nm.format(packed="_packed")}
    return sorted(names)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ here to build the host emulation of the CUDA C kernels")
    from gpuaug.kernels._cuda import KERNEL_DIR

    d = tmp_path_factory.mktemp("fused_device_host")
    for f in ("common.cuh", "interp.cuh", "warp_common.cuh", "colour.cuh", "fused.cuh", "fused.cu"):
        src = open(os.path.join(KERNEL_DIR, f)).read()
        for a, b in H._ASM.items():
            src = src.replace(a, b)
        (d / f).write_text(src)
    lines = [H._HARNESS, 'extern "C" {', "#define EMU_API __attribute__((visibility(\"default\")))"]
    table = {}
    for j, nm in enumerate(_names()):
        runner = "run_seq" if "_sum" in nm else "run"
        lines.append(f"EMU_API void k{j}(const unsigned* g, const unsigned* b, const uint64_t* s) "
                     f"{{ {runner}(&{nm}, g, b, s); }}")
        table[nm] = f"k{j}"
    lines.append("}")
    (d / "shim.h").write_text(H._SHIM)
    (d / "harness.cpp").write_text("\n".join(lines))
    r = subprocess.run([cxx, "-O1", "-std=c++20", "-pthread", "-shared", "-fPIC", "-w", "-fno-gnu-unique",
                        "-fvisibility=hidden", "-include", "shim.h", f"-I{d}", "harness.cpp", "-o", "harness.so"],
                       cwd=d, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"the host build of fused.cu failed:\n{r.stderr[-3000:]}")
    return ctypes.CDLL(str(d / "harness.so")), table


class _HostBuffer:
    """A host array where _run_device_eager wants a CuPy one (``.data.ptr``); records its size."""

    made = []

    def __init__(self, size, dtype):
        self.a = np.zeros(size, dtype)  # zeros: the emulated reductions add into their partial sums
        self.data = types.SimpleNamespace(ptr=self.a.ctypes.data)
        _HostBuffer.made.append(self)


@pytest.fixture
def device_on_host(emulator, monkeypatch):
    """launch_cuda and the device draw on the host; returns the list of kernels launched."""
    import gpuaug.kernels._cuda as K

    lib, table = emulator
    launched = []

    def get_function(filename, name):
        assert filename == "fused.cu", filename
        fn = getattr(lib, table[name])

        def launch(grid, block, args, shared_mem=0):
            launched.append(name.split("<")[0])
            g = (ctypes.c_uint * 3)(*(tuple(grid) + (1, 1, 1))[:3])
            b = (ctypes.c_uint * 3)(*(tuple(block) + (1, 1, 1))[:3])
            s = (ctypes.c_uint64 * len(args))(*[H._slot(a) for a in args])
            fn(g, b, s)
        return launch

    fake_cp = types.SimpleNamespace(
        float64=np.float64, empty=lambda shape, dtype: _HostBuffer(shape, dtype) if np.ndim(shape) == 0
        else np.zeros(shape, dtype),
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
            getDevice=lambda: 0, getDeviceProperties=lambda d: {"multiProcessorCount": 1})))
    monkeypatch.setattr(K, "get_function", get_function)
    monkeypatch.setattr(K, "upload", lambda *arrays: [np.array(a) for a in arrays])
    monkeypatch.setattr(K, "stage", lambda *items: [np.array(h) for _, h in items])
    monkeypatch.setattr(F, "cupy_module", lambda: fake_cp)
    monkeypatch.setattr(C, "cupy_module", lambda: fake_cp)
    monkeypatch.setattr(F, "descriptor_table", H._host_table)
    monkeypatch.setattr(F, "_sms", {})
    _HostBuffer.made.clear()
    return launched


def _host_draw(policy, channels):
    """A stand-in for the draw launch: the twin's values and the host build's float32 rows."""

    def launch_draw(plan, n, key, counter, values, rows, counter_dev=None, launcher=None):
        assert counter_dev is None and launcher == ("draw", n)
        vals = np.ascontiguousarray(D.twin_values(plan, key, counter, n))
        ctypes.memmove(values, vals.ctypes.data, vals.nbytes)
        sizes = np.broadcast_to(np.asarray(plan.stages[0].in_hw, np.int64), (n, 2))
        tparams = D.to_params(plan, vals, sizes)
        r = np.zeros((n, plan.P), np.float32)
        for sp in plan.stages:
            b = as_batch(np.zeros((n,) + tuple(sp.in_hw) + (channels,), np.uint8))
            r[:, sp.col:sp.col + sp.width] = F._build_full(sp.spec, policy.transforms, tparams, b, "NHWC")[0].rows
        ctypes.memmove(rows, r.ctypes.data, r.nbytes)
    return launch_draw


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_device_call_equals_host_rows_path(device_on_host, monkeypatch, name):
    make, layout = CASES[name]
    policy = make()
    x = _input(layout, sorted(CASES).index(name))
    b = as_batch(x, layout)
    monkeypatch.setattr(D, "launch_draw", _host_draw(policy, b.channels))
    monkeypatch.setattr(D, "draw_launcher", lambda plan, n: ("draw", n))
    plan = policy._device_plan(b, "draws")
    got, drawn = policy._run_device_eager(x, b, None, 5, plan, None)
    launched = list(device_on_host)

    params = C._twin_params(plan, *policy._draw_key(5), b.n, b)
    device_on_host.clear()
    stages = _stages(policy, x, layout, params)
    for spec, built, src, dst, result in stages:
        F.launch_cuda(spec, built, src, dst)
    want = stages[-1][4]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), "the device-rows call differs from the host-rows path"
    assert launched == list(device_on_host)  # the same kernels in the same order
    # one buffer: (n, V) values, (n, P) float32 rows, then n * nparts sums per contrast stage
    (buf,) = _HostBuffer.made
    n, contrast = b.n, sum(1 for _, spec in plan_stages(policy.transforms, "uint8") if spec.contrast)
    assert drawn.buf is buf and drawn.rows == buf.data.ptr + 8 * n * plan.V
    rows_words = (n * plan.P + 1) // 2
    extra = buf.a.size - n * plan.V - rows_words
    assert (extra > 0) == (contrast > 0) and extra % n == 0
    assert (buf.a[n * plan.V + rows_words:] > 0).all(), "a contrast sum was not written"
    assert np.array_equal(buf.a[:n * plan.V].reshape(n, plan.V), D.twin_values(plan, *policy._draw_key(5), n))
