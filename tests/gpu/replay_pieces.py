"""What one run()-plan replay costs on the host, piece by piece (us per call, median of 5 x n):
flip with host flags at 32x224x224x3 (bench's call shape) against invert's op-plan replay, and
the CUDA runtime calls a replay makes. Run on the GPU machine from the repository root with
tests/gpu on sys.path."""
import sys

import cupy as cp
import numpy as np

import gpuaug
import gpuaug._plan as P
from gpuaug._batch import as_batch
from gpuaug._run import choose_backend
from gpuaug.ops import flip as F
from hostmicro_t import t

n = int(sys.argv[1]) if len(sys.argv) > 1 else 32
side = int(sys.argv[2]) if len(sys.argv) > 2 else 224  # 16: kernels of a few us, so the host is what is timed
rng = np.random.default_rng(0)
x = cp.asarray(rng.integers(0, 256, (n, side, side, 3), dtype=np.uint8))
flags = rng.random(n) < 0.5
print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()} n={n} {side}x{side}x3")
t("python loop overhead (lambda)", lambda: None)
t("gpuaug.invert(x) (op plan)", lambda: gpuaug.invert(x))
t("gpuaug.flip(x, flags) (run plan)", lambda: gpuaug.flip(x, horizontal=flags))
t("gpuaug.flip.unplanned(x, flags)", lambda: gpuaug.flip.unplanned(x, horizontal=flags))
t("as_batch(x)", lambda: as_batch(x))
b = as_batch(x)
t("choose_backend", lambda: choose_backend(b, None))
t("flip_params(flags, False)", lambda: F.flip_params(flags, False, n, True))
params = F.flip_params(flags, False, n, True)
key = [k for k, v in P._RUN_PLANS.items() if type(v) is tuple and v[0] is F.KERNELS][0]
kern, plan, ring = P._RUN_PLANS[key]
shapes = b.shapes
t("run(b, ...) (the whole replay)", lambda: F.run(b, F.KERNELS, params, shapes=shapes, out=None, backend="cuda",
                                                  stream=None, fast=F._fast))
t("_plan.launch(...)", lambda: P.launch(b, F.KERNELS, params, (), (shapes.hw, None, None, None, None, True),
                                        None, None))
t("run_key", lambda: P.run_key(b, F.KERNELS, params, shapes.hw, (), (shapes.hw, None, None, None, None, True)))
t("run_planned", lambda: P.run_planned(key, F.KERNELS, b, params, None))


def take_sent():
    slot = ring.take(params)
    if slot is not None:
        ring.sent(slot)
t("ring.take + ring.sent (pack, memcpyAsync, event)", take_sent)


def take_only():
    slot = ring.take(params)
    ring.state[slot[0]] = 0
t("ring.take alone (slot freed by hand)", take_only)
slot0 = ring.take(params)
t("ring.sent alone (same slot)", lambda: ring.sent(slot0))
ring.state[slot0[0]] = 2
slot = ring.take(params)
par = slot[1]
ring.sent(slot)
t("plan.run(x, par) (alloc, patch, launch)", lambda: plan.run(x, None, None, par, True, None))
t("cupy.ndarray(shape, uint8) (the output)", lambda: cp.ndarray(x.shape, np.uint8))
go, vals, patches = (plan.bound or plan._bind())[0]
y = cp.empty_like(x)
args = vals.copy()
for i, kind, v in patches:
    args[i] = (x.data.ptr, y.data.ptr)[kind] + v if kind < 2 else par.data.ptr
t("go(args) (the prepared launch)", lambda: go(args))
h = ring.host[0]
t("memcpyAsync alone (pinned, P x N f32)", lambda: ring.memcpy(ring.ptrs[1][1], ring.ptrs[1][0], ring.nbytes, 1,
                                                               ring.stream().ptr))
ev = ring.events[0]
s = cp.cuda.get_current_stream()
t("event.record(stream) alone", lambda: ev.record(s))
t("event.done alone", lambda: ev.done)
t("h[...] = params (f64 -> f32 pack)", lambda: h.__setitem__(Ellipsis, params))
t("get_current_stream", cp.cuda.get_current_stream)
t("runtime.getDevice", cp.cuda.runtime.getDevice)
fd = cp.asarray(flags)
t("gpuaug.flip(x, device flags)", lambda: gpuaug.flip(x, horizontal=fd))
t("per_sample(device flags, boolean)", lambda: F.per_sample(fd, n, "h", boolean=True, device=True))
t("flip_params(device flags, False)", lambda: F.flip_params(fd, False, n, True))
h, v = F._column(fd, n), F._column(0.0, n)
t("column_stack([device col, host col])", lambda: F.column_stack([h, v], n))
import gpuaug._params as PP
t("_gather_key", lambda: PP._gather_key([h, v], cp.cuda.get_current_stream().ptr))
dpar = F.flip_params(fd, False, n, True)
t("run(b, ..., device params)", lambda: F.run(b, F.KERNELS, dpar, shapes=shapes, out=None, backend="cuda",
                                              stream=None, fast=F._fast))
try:
    import torch

    tt = torch.zeros((n, 3, 224, 224), dtype=torch.uint8, device="cuda")
    t("torch.flip(t, [-1])", lambda: torch.flip(tt, [-1]))
except ImportError:
    pass
