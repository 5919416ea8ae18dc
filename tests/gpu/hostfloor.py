"""The host floor of one op call on this machine (us per call, median of 5 x n, from
hostmicro_t.t): ways to allocate an output and to launch a kernel, the copy and event calls a
pinned parameter upload needs, each with the device idle and behind a long spin kernel (a busy
stream), and PyTorch's own alloc + launch beside them.

    python3 tests/gpu/hostfloor.py
"""
import ctypes
import ctypes.util

import cupy as cp
import numpy as np

from gpuaug.kernels._cuda import get_function
from hostmicro_t import t

SPIN = r'''extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long t0, t1; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { __nanosleep(1000); asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1)); } while (t1 - t0 < ns); }'''
spin = cp.RawKernel(SPIN, "spin")
x = cp.zeros((256, 224, 224, 3), cp.uint8)
small = cp.zeros(64, cp.uint8)
par = cp.zeros((256, 2), cp.float32)
fn = get_function("flip.cu", "gpuaug_flip_groups<3>")
args9 = (small.data.ptr, small.data.ptr, par.data.ptr, 2, 1, 1, 16, 1, 0)
types9 = (int, int, int, np.int32, np.int32, np.uint32, np.uint32, np.uint32, np.uint32)
go = fn.prepared((1,), (32,), types9, 0)
a9 = [args9[0], args9[1], args9[2], np.int32(2), np.int32(1), np.uint32(1), np.uint32(16), np.uint32(1), np.uint32(0)]
pool = cp.get_default_memory_pool()
nb = x.nbytes
pinned = cp.cuda.alloc_pinned_memory(4096)
hp = pinned.ptr
dbuf = cp.empty(4096, cp.uint8)
ev = cp.cuda.Event(block=False, disable_timing=True)
ev.record()
ev.synchronize()
from cupy_backends.cuda.api import driver, runtime

# ctypes cuLaunchKernel with the same packed slots as gpuaug's Kernel
libcuda = ctypes.CDLL("libcuda.so.1")
cu_launch = libcuda.cuLaunchKernel
cu_launch.restype = ctypes.c_int
cu_launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
slots = np.zeros(9, np.uint64)
import struct
st = struct.Struct("=QQQi4xi4xI4xI4xI4xI4x")
st.pack_into(slots, 0, *args9)
ptrs = (ctypes.c_void_p * 9)(*[slots.ctypes.data + 8 * i for i in range(9)])
kptr = fn.raw.kernel.ptr
sptr = cp.cuda.get_current_stream().ptr


def tb(name, f, n=200):
    """As t(), each round of n calls behind a 50 ms spin (the stream busy all along)."""
    t(name, f, n, before=lambda: spin((1,), (1,), (np.uint64(50_000_000),)))


def rounds(label_suffix, t=t):
    t("cupy.empty(38.5 MB)" + label_suffix, lambda: cp.empty((256, 224, 224, 3), cp.uint8))
    t("cupy.ndarray(shape, dtype)" + label_suffix, lambda: cp.ndarray((256, 224, 224, 3), cp.uint8))
    t("pool.malloc + ndarray(memptr)" + label_suffix, lambda: cp.ndarray((256, 224, 224, 3), cp.uint8, pool.malloc(nb)))
    t("Kernel.prepared go (9 args)" + label_suffix, lambda: go(a9))
    t("driver.launchKernel bare" + label_suffix, lambda: driver.launchKernel(kptr, 1, 1, 1, 32, 1, 1, 0, sptr, ctypes.addressof(ptrs), 0))
    t("ctypes cuLaunchKernel bare" + label_suffix, lambda: cu_launch(kptr, 1, 1, 1, 32, 1, 1, 0, sptr, ptrs, None))
    t("runtime.memcpyAsync 2 KB pinned" + label_suffix, lambda: runtime.memcpyAsync(dbuf.data.ptr, hp, 2048, 1, sptr))
    t("event.record(stream)" + label_suffix, lambda: ev.record())
    t("event.done" + label_suffix, lambda: ev.done)
    t("get_current_stream().ptr" + label_suffix, lambda: cp.cuda.get_current_stream().ptr)


rounds(" [idle]")
try:
    from cuda.bindings import driver as cbd
    print("cuda.bindings", flush=True)
    f2 = cbd.CUfunction(kptr)
    s2 = cbd.CUstream(sptr)
    t("cuda.bindings cuLaunchKernel", lambda: cbd.cuLaunchKernel(f2, 1, 1, 1, 32, 1, 1, 0, s2, ctypes.addressof(ptrs), 0))
except Exception as e:  # noqa: BLE001
    print("cuda.bindings:", type(e).__name__, e)
# behind a spin: the stream holds work, as in a training loop where the host is ahead
rounds(" [busy]", tb)
import torch

tt = torch.zeros((256, 3, 224, 224), dtype=torch.uint8, device="cuda")
ts = torch.zeros(64, dtype=torch.uint8, device="cuda")
t("torch.empty_like(38.5 MB)", lambda: torch.empty_like(tt), 500)
t("torch small add_ (launch only)", lambda: ts.add_(1), 2000)
t("torch.flip(t, [-1])", lambda: torch.flip(tt, [-1]), 500)
