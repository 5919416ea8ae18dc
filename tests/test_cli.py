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
