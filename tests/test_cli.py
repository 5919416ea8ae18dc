"""The ``gpuaug`` command as a new user meets it: python -m gpuaug, the no-GPU message,
bench --help and the CPU bench table, demo --device gpu without a GPU."""
import ctypes
import ctypes.util
import subprocess
import sys

import pytest

from gpuaug import _util
from gpuaug.cli import main


class FakeLibcuda:
    """Stands in for libcuda: the driver's CUDA version and what cuInit / cuDeviceGetCount say."""

    def __init__(self, driver=12020, init_rc=0, count=1):
        self.driver, self.init_rc, self.count = driver, init_rc, count

    def cuDriverGetVersion(self, ref):
        ref._obj.value = self.driver
        return 0

    def cuInit(self, flags):
        return self.init_rc

    def cuDeviceGetCount(self, ref):
        ref._obj.value = self.count
        return 0


@pytest.fixture
def cupy_fails(monkeypatch):
    """CuPy installed, its runtime CUDA 12.9, but getDeviceCount raises (as with no GPU)."""
    cupy = pytest.importorskip("cupy")

    def boom():
        raise cupy.cuda.runtime.CUDARuntimeError(35)

    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", boom)
    monkeypatch.setattr(cupy.cuda.runtime, "runtimeGetVersion", lambda: 12090)


@pytest.mark.parametrize("lib, says", [
    (None, "no NVIDIA driver: libcuda.so.1 cannot be loaded"),
    (FakeLibcuda(init_rc=34), "no NVIDIA driver: only the CUDA toolkit's stub"),
    (FakeLibcuda(driver=11040, init_rc=35), "NVIDIA driver too old: it supports CUDA 11.4, CuPy's runtime is CUDA 12.9"),
    (FakeLibcuda(driver=11080, init_rc=0), "NVIDIA driver too old: it supports CUDA 11.8"),
    (FakeLibcuda(driver=12020, init_rc=100), "no CUDA device: the NVIDIA driver (CUDA 12.2) is installed but reports no GPU"),
    (FakeLibcuda(driver=12020, init_rc=0, count=0), "no CUDA device: the NVIDIA driver (CUDA 12.2)"),
    (FakeLibcuda(driver=12090, init_rc=999), "no usable CUDA device (driver CUDA 12.9, cuInit error 999"),
])
def test_why_no_gpu_says_what_is_missing(cupy_fails, lib, says):
    why = _util.why_no_gpu(load_libcuda=lambda: lib)
    assert why.startswith(says), why
    assert "insufficient" not in why.split("CuPy:")[0]


def test_why_no_gpu_here_is_true():
    """On this machine: None exactly when CuPy sees a device, else a reason."""
    why = _util.why_no_gpu()
    assert (why is None) == _util.gpu_available()
    if why is not None and ctypes.util.find_library("cuda") is None:
        assert why.startswith(("no NVIDIA driver", "CuPy is not installed")), why


def test_python_dash_m_gpuaug():
    r = subprocess.run([sys.executable, "-m", "gpuaug", "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("gpuaug "), (r.stdout, r.stderr)
    r = subprocess.run([sys.executable, "-m", "gpuaug", "demo", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--device" in r.stdout


def test_demo_device_gpu_without_a_gpu_is_a_clean_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(_util, "why_no_gpu", lambda: "no NVIDIA driver: libcuda.so.1 cannot be loaded")
    assert main(["demo", "--device", "gpu", "--out", str(tmp_path / "s.png")]) == 2
    err = capsys.readouterr().err
    assert err == ("gpuaug: demo: device 'gpu' was asked for but no NVIDIA driver: libcuda.so.1 cannot be "
                   "loaded; use --device cpu (or auto)\n")
    assert not (tmp_path / "s.png").exists()


def _bench_parser():
    from gpuaug.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices["bench"]


def test_bench_help_is_clean():
    p = _bench_parser()
    text = p.format_help()
    flat = " ".join(text.split())
    assert "%%" not in text and "% of a device copy" in flat
    assert "(default: None)" not in text and "(default: False)" not in text
    for line_start in ("--batch", "--repeat", "--channels", "--seed"):   # each default said once
        block = text.split(f"  {line_start}", 1)[1].split("\n  -", 1)[0]
        assert block.count("default") == 1, block
    for a in p._actions:
        if a.option_strings and a.dest != "help":
            assert a.help, f"{a.option_strings[0]} has no help text"


def _cpu_bench(monkeypatch, capsys, *argv):
    from gpuaug import bench

    monkeypatch.setattr(bench, "gpu_status", lambda: (False, "no NVIDIA driver: libcuda.so.1 cannot be loaded"))
    assert main(["bench", "flip", "crop_mirror_normalize", "--repeat", "1", "--warmup", "0", "--quiet",
                 *argv]) == 0
    return capsys.readouterr()


def test_bench_on_the_cpu_says_what_it_times(monkeypatch, capsys):
    io = _cpu_bench(monkeypatch, capsys, "--batch", "2", "--size", "16x16")
    assert "timing the CPU twins (--device cpu) on 2x16x16\n" in io.err and "small batch" not in io.err
    assert "no GPU (no NVIDIA driver: libcuda.so.1 cannot be loaded)" in io.err
    header = next(line for line in io.out.splitlines() if line.startswith("op "))
    assert "%copy" not in header and "no %copy column on the CPU" in io.out
    rows = [line.split()[0] for line in io.out.splitlines() if line.split()[:2][1:] == ["gpuaug"]]
    assert rows == ["flip", "crop_mirror_normalize"]           # names whole, not cut at 20
    io = _cpu_bench(monkeypatch, capsys, "--size", "8x8")
    assert "on 8x8x8\n" in io.err


def test_bench_default_cpu_batch_is_named(monkeypatch, capsys):
    io = _cpu_bench(monkeypatch, capsys)
    assert "on a small batch, 8x64x64 (--batch/--size/--case to change)" in io.err
