"""The fused stage's CUDA C (kernels/fused.cu) run on the CPU, against the Numba CPU twin.

Without a GPU, NVRTC proves the kernels compile but not that they compute the right thing.
Here kernels/fused.cu is compiled as host C++ (g++, C++20) against a small emulation of the
CUDA built-ins it uses; every block of a launch runs warp by warp, a warp's 32 lanes as
threads that meet at a barrier for shuffles (so the uint8 x 3 word stores, which shuffle, run
as on the GPU). The real launcher, gpuaug.policy._fused.launch_cuda, drives it: CuPy, the
uploads and get_function are replaced by host stand-ins, so its kernel choice (dense / table /
reduction), grids and argument order are exercised too. The emulation checks indexing,
conversions and maths (float32, as on the GPU), not timing or memory ordering.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import types

import numpy as np
import pytest

import gpuaug
from gpuaug._batch import as_batch
from gpuaug.policy import _fused as F
from gpuaug.policy.compose import plan_stages

import test_policy as TP

_SHIM = r"""
#pragma once
#define GPUAUG_HOST_EMULATION 1
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <type_traits>
#include <utility>
#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
// Internal linkage (and -fno-gnu-unique below): other host emulations loaded into the same
// process define globals of these names, and GNU "unique" symbols would be shared with them.
struct dim3i { unsigned x = 1, y = 1, z = 1; };
static thread_local dim3i threadIdx, blockIdx;
static dim3i blockDim, gridDim;
struct WarpX { std::barrier<> bar{32}; unsigned long long slot[32]; };
static thread_local WarpX* warp_x;
template <class T> inline T shfl_idx(T v, int src) {
  const int lane = (int)((threadIdx.y * blockDim.x + threadIdx.x) & 31);
  unsigned long long b = 0; std::memcpy(&b, &v, sizeof(T));
  warp_x->slot[lane] = b;
  warp_x->bar.arrive_and_wait();
  unsigned long long r = warp_x->slot[src & 31];
  warp_x->bar.arrive_and_wait();
  T out; std::memcpy(&out, &r, sizeof(T)); return out;
}
template <class T> inline T __shfl_sync(unsigned, T v, int src) { return shfl_idx(v, src); }
template <class T> inline T __shfl_down_sync(unsigned, T v, int d) {
  const int lane = (int)((threadIdx.y * blockDim.x + threadIdx.x) & 31);
  return shfl_idx(v, lane + d < 32 ? lane + d : lane);
}
inline void __syncthreads() {}
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __saturatef(float x) { return x > 0.f ? (x < 1.f ? x : 1.f) : 0.f; }
inline int __float2int_rd(float x) {
  double d = std::floor((double)x);
  return d < -2147483648.0 ? INT32_MIN : d > 2147483647.0 ? INT32_MAX : (int)d;
}
inline float __fadd_rd(float a, float b) {  // exact in double for the operands the kernels add
  const double d = (double)a + (double)b;
  float f = (float)d;
  if ((double)f > d) f = std::nextafter(f, -INFINITY);
  return f;
}
inline float __frcp_rn(float w) { return 1.0f / w; }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t pool = (uint64_t)x | ((uint64_t)y << 32);
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= (unsigned)((pool >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
  return r;
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
  return (unsigned)(((((uint64_t)hi) << 32) | lo) >> (sh & 31));
}
inline unsigned short emu_f2h(float v) { _Float16 h = (_Float16)v; unsigned short b; std::memcpy(&b, &h, 2); return b; }
inline float emu_h2f(unsigned short b) { _Float16 h; std::memcpy(&h, &b, 2); return (float)h; }
"""

_HARNESS = r"""
#include <thread>
#include <vector>
#include "fused.cu"
template <class T> static T slot(uint64_t v) {
  if constexpr (std::is_pointer_v<T>) return reinterpret_cast<T>(v);
  else if constexpr (std::is_floating_point_v<T>) { double d; std::memcpy(&d, &v, 8); return (T)d; }
  else return (T)(int64_t)v;
}
template <class... A, size_t... I>
static void call(void (*k)(A...), const uint64_t* s, std::index_sequence<I...>) { k(slot<A>(s[I])...); }
// Every block, warp by warp; a warp's 32 lanes run as threads (shuffles meet at a barrier).
template <class... A>
static void run(void (*k)(A...), const unsigned* g, const unsigned* b, const uint64_t* s) {
  gridDim = {g[0], g[1], g[2]};
  blockDim = {b[0], b[1], b[2]};
  const unsigned nt = b[0] * b[1] * b[2];
  for (unsigned bz = 0; bz < g[2]; ++bz)
    for (unsigned by = 0; by < g[1]; ++by)
      for (unsigned bx = 0; bx < g[0]; ++bx)
        for (unsigned w0 = 0; w0 < nt; w0 += 32) {
          WarpX wx;
          std::vector<std::thread> lanes;
          for (unsigned t = w0; t < w0 + 32; ++t)
            lanes.emplace_back([&, t] {
              blockIdx = {bx, by, bz};
              threadIdx = {t % b[0], (t / b[0]) % b[1], t / (b[0] * b[1])};
              warp_x = &wx;
              call(k, s, std::index_sequence_for<A...>{});
            });
          for (auto& l : lanes) l.join();
        }
}
// One thread at a time (the reductions: under GPUAUG_HOST_EMULATION they add into zeroed
// partial sums instead of shuffling, so their threads must not run at once).
template <class... A>
static void run_seq(void (*k)(A...), const unsigned* g, const unsigned* b, const uint64_t* s) {
  gridDim = {g[0], g[1], g[2]};
  blockDim = {b[0], b[1], b[2]};
  for (unsigned bz = 0; bz < g[2]; ++bz)
    for (unsigned by = 0; by < g[1]; ++by)
      for (unsigned bx = 0; bx < g[0]; ++bx)
        for (unsigned t = 0; t < b[0] * b[1] * b[2]; ++t) {
          blockIdx = {bx, by, bz};
          threadIdx = {t % b[0], (t / b[0]) % b[1], t / (b[0] * b[1])};
          call(k, s, std::index_sequence_for<A...>{});
        }
}
"""

_ASM = {
    'asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));': "f = emu_h2f(v.bits);",
    'asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));': "h.bits = emu_f2h(v);",
}

# policy case (test_policy.CASES) x input layout x batch kind: dense, table-driven, varshape
RUNS = [("bench-u8", "NHWC"), ("bench-u8", "NCHW"), ("rrc-gray-solarize-u8", "NHWC"),
        ("rrc-gray-solarize-u8", "NCHW"), ("perspective-rotation-tail-f32-rgba", "NHWC"),
        ("colour-first-u8", "NHWC"), ("todtype-crop-jitter-normalize-f16", "NHWC"),
        ("gray-u8-one-channel", "NHWC"), ("nearest-f16", "NHWC")]


def _prepare(name, layout, rng):
    make, dtype, c, _ = TP.CASES[name]
    policy = make()
    x = TP._images(rng, 2, 13, 21, c, dtype)
    xin = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    return policy, xin


def _varshape():
    rng = np.random.default_rng(7)
    xs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((11, 14), (9, 9), (16, 7))]
    policies = (gpuaug.Compose([gpuaug.RandomResizedCrop(8), gpuaug.ColorJitter(0.3, 0.3),
                                gpuaug.Normalize(*TP.IMAGENET)], draws="host"),
                gpuaug.Compose([gpuaug.RandomRotation(15), gpuaug.RandomGrayscale(0.5),
                                gpuaug.Normalize(0.5, 0.5, layout="NHWC")], draws="host"))
    return xs, policies


def _kernel_names():
    """Every kernel the runs launch (through launch_cuda's own choices)."""
    names = set()
    xs, policies = _varshape()
    for name, layout in RUNS + [(p, "NHWC") for p in policies]:
        policy, x = _prepare(name, layout, np.random.default_rng(0)) if isinstance(name, str) else (name, xs)
        params = policy.sample(x, seed=1, layout=layout)
        b = as_batch(x, layout)
        for kind, spec in plan_stages(policy.transforms, b.dtype.name):
            built = F.build(spec, policy.transforms, params.values, b, layout)
            _, dst = F.allocate(b, None, built)
            dense, planar = F._dense(b, dst, spec)
            for nm in F.kernel_names(spec, built, b.dtype, b.channels, dense, planar):
                names |= {nm.format(packed=""), nm.format(packed="_packed")}
            for nm in F.kernel_names(spec, built, b.dtype, b.channels, False):  # table-driven too
                names.add(nm.format(packed=""))
    return sorted(names)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ here to build the host emulation of the CUDA C kernels")
    from gpuaug.kernels._cuda import KERNEL_DIR

    d = tmp_path_factory.mktemp("fused_host")
    for f in ("common.cuh", "interp.cuh", "warp_common.cuh", "colour.cuh", "fused.cuh", "fused.cu"):
        src = open(os.path.join(KERNEL_DIR, f)).read()
        for a, b in _ASM.items():
            src = src.replace(a, b)
        (d / f).write_text(src)
    names = _kernel_names()
    lines = [_HARNESS, 'extern "C" {', "#define EMU_API __attribute__((visibility(\"default\")))"]
    table = {}
    for j, nm in enumerate(names):
        runner = "run_seq" if "_sum" in nm else "run"
        lines.append(f"EMU_API void k{j}(const unsigned* g, const unsigned* b, const uint64_t* s) "
                     f"{{ {runner}(&{nm}, g, b, s); }}")
        table[nm] = f"k{j}"
    lines.append("}")
    (d / "shim.h").write_text(_SHIM)
    (d / "harness.cpp").write_text("\n".join(lines))
    r = subprocess.run([cxx, "-O1", "-std=c++20", "-pthread", "-shared", "-fPIC", "-w", "-fno-gnu-unique",
                        "-fvisibility=hidden", "-include", "shim.h",
                        f"-I{d}", "harness.cpp", "-o", "harness.so"], cwd=d, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"the host build of fused.cu failed:\n{r.stderr[-3000:]}")
    lib = ctypes.CDLL(str(d / "harness.so"))
    return lib, table


def _slot(a):
    if isinstance(a, np.ndarray):
        return a.ctypes.data
    if isinstance(a, (float, np.floating)):
        return int(np.array(float(a), np.float64).view(np.uint64))
    return int(a) & 0xFFFFFFFFFFFFFFFF


def _host_table(batch):
    t = np.empty((batch.n, 6), np.int64)
    for i in range(batch.n):
        v = batch.sample(i)
        it = v.itemsize
        t[i] = (v.ctypes.data, v.shape[0], v.shape[1], v.strides[0] // it, v.strides[1] // it, v.strides[2] // it)
    return t


@pytest.fixture
def host_cuda(emulator, monkeypatch):
    """launch_cuda with CuPy, uploads and get_function on the host (the emulated kernels)."""
    import gpuaug.kernels._cuda as K

    lib, table = emulator
    launched = []

    def get_function(filename, name):
        assert filename == "fused.cu", filename
        fn = getattr(lib, table[name])
        launched.append(re.match(r"\w+", name).group(0))

        def launch(grid, block, args, shared_mem=0):
            g = (ctypes.c_uint * 3)(*(tuple(grid) + (1, 1, 1))[:3])
            b = (ctypes.c_uint * 3)(*(tuple(block) + (1, 1, 1))[:3])
            s = (ctypes.c_uint64 * len(args))(*[_slot(a) for a in args])
            fn(g, b, s)
        return launch

    fake_cp = types.SimpleNamespace(
        float64=np.float64, empty=lambda shape, dtype: np.zeros(shape, dtype),
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
            getDevice=lambda: 0, getDeviceProperties=lambda d: {"multiProcessorCount": 1})))
    monkeypatch.setattr(K, "get_function", get_function)
    monkeypatch.setattr(K, "upload", lambda *arrays: [np.array(a) for a in arrays])
    monkeypatch.setattr(F, "cupy_module", lambda: fake_cp)
    monkeypatch.setattr(F, "descriptor_table", _host_table)
    monkeypatch.setattr(F, "_sms", {})
    return launched


def _run_host(policy, x, layout, params, varshape=False):
    """Every stage through launch_cuda on the host; returns the final output."""
    cur, lay = x, layout
    for kind, spec in plan_stages(policy.transforms, np.asarray(x[0] if varshape else x).dtype.name):
        assert kind == "fused"
        b = as_batch(cur, lay)
        built = F.build(spec, policy.transforms, params.values, b, lay)
        result, dst = F.allocate(b, None, built)
        for a in (result if isinstance(result, list) else [result]):
            a[...] = np.nan if a.dtype != np.uint8 else 0xAB  # poison: every element must be written
        F.launch_cuda(spec, built, b, dst)
        cur, lay = result, built.out_layout
    return cur


def _compare(got, want, what):
    """Emulated CUDA C (float32) vs the CPU twin (float64): uint8 within 1, floats within
    1e-4 relative (float16: its precision), except a few elements where a uint8-grid rounding
    or a floored gray went the other way."""
    TP._gpu_compare(got, want, what, frac=2e-3)


@pytest.mark.parametrize("name,layout", RUNS, ids=[f"{n}-{lay}" for n, lay in RUNS])
def test_fused_cuda_c_on_host(host_cuda, name, layout):
    policy, x = _prepare(name, layout, np.random.default_rng(RUNS.index((name, layout))))
    want = policy(x, seed=3, layout=layout)
    got = _run_host(policy, x, layout, policy.last_params)
    _compare(got, want, f"{name} {layout}")
    specs = [spec for _, spec in plan_stages(policy.transforms, x.dtype.name)]
    assert host_cuda[-1] == ("gpuaug_fused_dense" if layout == "NHWC" and not specs[-1].pre else "gpuaug_fused")
    assert len(host_cuda) == sum(1 + s.contrast for s in specs) == sum(len(s.launches) for s in policy.plan(x, layout=layout))


def test_fused_cuda_c_varshape_on_host(host_cuda):
    xs, policies = _varshape()
    for policy in policies:
        want = policy(xs, seed=2)
        got = _run_host(policy, xs, "NHWC", policy.last_params, varshape=True)
        if isinstance(want, list):
            for i, (g, w) in enumerate(zip(got, want)):
                _compare(g, w, f"varshape sample {i}")
        else:
            _compare(got, want, "varshape")
