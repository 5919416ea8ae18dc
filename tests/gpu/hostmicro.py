"""Micro-timings of the host path's pieces on the GPU machine (us per call, median of 5 x 2000)."""

import cupy as cp
import numpy as np

import gpuaug
from gpuaug._batch import as_batch
from gpuaug._params import column_stack, per_sample
from gpuaug._stream import on_stream
from gpuaug.kernels._cuda import get_function, upload
from hostmicro_t import t


x = cp.zeros((256, 224, 224, 3), cp.uint8)
flags = np.random.default_rng(0).random(256) < 0.5
tab = np.zeros((256, 6), np.int64)
k = cp.ElementwiseKernel("T x", "T y", "y = x", "gpuaug_copy_probe")
raw = cp.RawKernel('extern "C" __global__ void nop(const unsigned char* a, unsigned char* b, const float* p, int P, int n) {}', "nop")
small = cp.zeros(16, cp.uint8)
par = cp.zeros((256, 2), cp.float32)
fn = get_function("flip.cu", "gpuaug_flip_groups<3>")
t("python loop overhead (lambda)", lambda: None)
t("cp.empty(38.5 MB)", lambda: cp.empty((256, 224, 224, 3), cp.uint8))
t("cp.empty(2 KB)", lambda: cp.empty(2048, cp.uint8))
t("raw kernel launch (5 args)", lambda: raw((1,), (32,), (small, small, par, np.int32(2), np.int32(256))))
args9 = (small, small, par, np.int32(2), np.int32(1), np.uint32(1), np.uint32(16), np.uint32(1), np.uint32(0))
t("flip_groups launch, gpuaug Kernel (9 args)", lambda: fn((1,), (32,), args9))
t("flip_groups launch, CuPy RawKernel (9 args)", lambda: fn.raw((1,), (32,), args9))
t("cp.cuda.Device(0) ctx", lambda: cp.cuda.Device(0).__enter__() and None)
t("runtime.getDevice", cp.cuda.runtime.getDevice)
t("get_current_stream", cp.cuda.get_current_stream)


def ctx():
    with cp.cuda.Device(0), on_stream(None):
        pass
t("Device ctx + on_stream(None)", ctx)
from gpuaug._stream import on_device
t("on_device(0, None)", lambda: on_device(0, None).__enter__())
t("cp.cuda.Event() + record", lambda: cp.cuda.Event(block=False, disable_timing=True).record())
t("upload(table 256x6 + params 256x2)", lambda: upload(tab, np.zeros((256, 2), np.float32)))
from gpuaug.kernels._cuda import stage
from gpuaug._params import param_item
t("stage(keyed table + uniform params)", lambda: stage((("t", 1), tab), param_item(np.ones((256, 2)), 256)))
t("param_item(per-sample 256x2)", lambda: param_item(np.random.default_rng(0).random((256, 2)), 256))
t("as_batch(cupy 4-D)", lambda: as_batch(x))
t("per_sample(flags, boolean)", lambda: per_sample(flags, 256, "h", boolean=True, device=True))
t("per_sample(False scalar)", lambda: per_sample(False, 256, "v", boolean=True, device=True))
h = per_sample(flags, 256, "h", boolean=True)
t("column_stack 2 host cols", lambda: column_stack([h, h], 256))
t("np.ascontiguousarray(params, f32)", lambda: np.ascontiguousarray(np.zeros((256, 2)), np.float32))
from gpuaug._run import choose_backend, contiguous_rows, run, _run_cuda
from gpuaug._batch import descriptor_table
from gpuaug.ops import flip as F
b = as_batch(x)
t("choose_backend", lambda: choose_backend(b, None))
t("b.alloc(None, shapes)", lambda: b.alloc(None, b.shapes))
_, dst = b.alloc(None, b.shapes)
t("contiguous_rows", lambda: contiguous_rows(b, dst))
t("flip._fast(src, dst)", lambda: F._fast(b, dst))
t("get_function", lambda: get_function("flip.cu", "gpuaug_flip_groups<3>"))
t("descriptor_table", lambda: descriptor_table(b))
params = column_stack([h, h], 256)
t("_run_cuda (fast flip)", lambda: _run_cuda(b, dst, F.KERNELS, params, (), None, F._fast))
t("run(...) flip", lambda: run(b, F.KERNELS, params, shapes=b.shapes, out=None, backend="cuda", stream=None, fast=F._fast))
t("gpuaug.flip(x, flags) full", lambda: gpuaug.flip(x, horizontal=flags))
t("gpuaug.flip(x) scalar", lambda: gpuaug.flip(x))
t("gpuaug.brightness(x, 1.1)", lambda: gpuaug.brightness(x, 1.1))
t("gpuaug.normalize(x, mean, std)", lambda: gpuaug.normalize(x, (120.0, 110.0, 100.0), (50.0, 60.0, 70.0)))
t("gpuaug.center_crop(x, 200)", lambda: gpuaug.center_crop(x, 200))
t("gpuaug.rotate(x, 10.0)", lambda: gpuaug.rotate(x, 10.0), 500)
t("gpuaug.rotate(x, device angles)", lambda: gpuaug.rotate(x, cp.zeros(256)), 500)
import torch
tt = torch.zeros((256, 3, 224, 224), dtype=torch.uint8, device="cuda")
t("torch.flip(t, [-1])", lambda: torch.flip(tt, [-1]), 500)
