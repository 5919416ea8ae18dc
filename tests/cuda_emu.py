"""Run CUDA C kernels on the CPU, for CI machines without a GPU (needs g++ with C++20).

The kernel sources are compiled as host C++ with the CUDA built-ins they use emulated:
blocks run one after another, the threads of a block run as ``std::thread`` s and
``__syncthreads`` is a ``std::barrier``. It checks index maths, vector widths and border
handling of the fast paths, not timing, warp-level behaviour or races. Limits: static
``__shared__`` only, no warp intrinsics, no dynamic shared memory; common.cuh's two PTX
conversions are replaced by host float16 conversions.

    emu = Emulator(["crop.cu"], ["gpuaug_window_rows<float, 16>"])
    fn = emu.get_function("crop.cu", "gpuaug_window_rows<float, 16>")
    fn(grid, block, args)   # args: DeviceView/NumPy arrays (pointers), ints, floats

``run_fast(fast, x, layout, shapes, params)`` drives an op's ``run(fast=...)`` hook with
host arrays that stand in for device arrays (at chosen address offsets).
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

KERNEL_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")

PRELUDE = r"""
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
struct dim3 { unsigned x = 1, y = 1, z = 1; };
static dim3 gridDim, blockDim;
static thread_local dim3 threadIdx, blockIdx;
static std::barrier<>* emu_bar;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __syncthreads() emu_bar->arrive_and_wait()
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline int __float2int_rn(float v) { return (int)std::nearbyint(v); }
static inline int __float2int_rd(float v) { return (int)std::floor(v); }
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  s &= 31; uint64_t x = ((uint64_t)hi << 32) | lo; return (unsigned)(x >> s);
}
static inline unsigned emu_bytewise(unsigned a, unsigned b, bool take_min) {
  unsigned r = 0;
  for (int k = 0; k < 32; k += 8) {
    const unsigned x = (a >> k) & 0xFFu, y = (b >> k) & 0xFFu;
    r |= (take_min ? std::min(x, y) : std::max(x, y)) << k;
  }
  return r;
}
static inline unsigned __vminu4(unsigned a, unsigned b) { return emu_bytewise(a, b, true); }
static inline unsigned __vmaxu4(unsigned a, unsigned b) { return emu_bytewise(a, b, false); }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
static inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
using std::max;
using std::min;
static inline unsigned short emu_f2h(float v) {
  _Float16 h = (_Float16)v; unsigned short b; std::memcpy(&b, &h, 2); return b;
}
static inline float emu_h2f(unsigned short b) { _Float16 h; std::memcpy(&h, &b, 2); return (float)h; }

template <class F> static void emu_launch(const unsigned* g, const unsigned* b, F body) {
  gridDim = {g[0], g[1], g[2]}; blockDim = {b[0], b[1], b[2]};
  const unsigned nt = b[0] * b[1] * b[2];
  std::barrier<> bar(nt);
  emu_bar = &bar;
  std::vector<std::thread> ths;
  for (unsigned t = 0; t < nt; ++t)
    ths.emplace_back([&, t] {
      threadIdx = {t % b[0], (t / b[0]) % b[1], t / (b[0] * b[1])};
      for (unsigned z = 0; z < g[2]; ++z)
        for (unsigned y = 0; y < g[1]; ++y)
          for (unsigned x = 0; x < g[0]; ++x) {
            blockIdx = {x, y, z};
            body();
            bar.arrive_and_wait();  // a block ends before the next reuses __shared__
          }
    });
  for (auto& th : ths) th.join();
}
template <class T> static T emu_slot(uint64_t v) {
  if constexpr (std::is_pointer_v<T>) return reinterpret_cast<T>(v);
  else if constexpr (std::is_floating_point_v<T>) { double d; std::memcpy(&d, &v, 8); return (T)d; }
  else return (T)(int64_t)v;
}
template <class... A, size_t... I>
static void emu_call(void (*k)(A...), const uint64_t* s, std::index_sequence<I...>) {
  k(emu_slot<A>(s[I])...);
}
template <class... A>
static void emu_run(void (*k)(A...), const unsigned* g, const unsigned* b, const uint64_t* s) {
  emu_launch(g, b, [&] { emu_call(k, s, std::index_sequence_for<A...>{}); });
}
"""

_ASM = {
    'asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));': "f = emu_h2f(v.bits);",
    'asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));': "h.bits = emu_f2h(v);",
}


def available():
    """None if the emulator can be built here, else why not."""
    if shutil.which("g++") is None:
        return "g++ is not installed"
    return None


class Emulator:
    """Compile ``files`` (under kernels/) for the host; expose the kernels ``names``."""

    def __init__(self, files, names, workdir=None):
        self.dir = workdir or tempfile.mkdtemp(prefix="gpuaug_emu_")
        common = open(os.path.join(KERNEL_DIR, "common.cuh")).read()
        for a, b in _ASM.items():
            common = common.replace(a, b)
        if "asm(" in common:
            raise RuntimeError("common.cuh has inline PTX the emulator does not know")
        with open(os.path.join(self.dir, "common.cuh"), "w") as f:
            f.write(common)
        src = [PRELUDE, '#include "common.cuh"']
        for i, fn in enumerate(files):
            # Each file in its own namespace (their anonymous helpers may share names).
            src.append(f"namespace emu_f{i} {{\n{open(os.path.join(KERNEL_DIR, fn)).read()}\n}}")
        self.names = {}
        src.append('extern "C" {')
        for j, name in enumerate(names):
            fi = next(i for i, fn in enumerate(files) if re.match(r"\w+", name).group(0) in
                      open(os.path.join(KERNEL_DIR, fn)).read())
            src.append(f"__attribute__((visibility(\"default\"))) "
                       f"void emu_k{j}(const unsigned* g, const unsigned* b, const uint64_t* s) "
                       f"{{ emu_run(&emu_f{fi}::{name}, g, b, s); }}")
            self.names[(files[fi], name)] = f"emu_k{j}"
        src.append("}")
        cpp = os.path.join(self.dir, "emu.cpp")
        with open(cpp, "w") as f:
            f.write("\n".join(src))
        so = os.path.join(self.dir, "libemu.so")
        # Hidden, non-unique symbols: other host-emulation libraries loaded into the same
        # process define the same names (gridDim, template instances, thread_locals).
        r = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-shared", "-fPIC", "-pthread",
                            "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-fno-gnu-unique",
                            f"-I{self.dir}", "-o", so, cpp], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"g++ failed:\n{r.stderr[-4000:]}")
        self.lib = ctypes.CDLL(so)

    def get_function(self, filename, name):
        fn = getattr(self.lib, self.names[(filename, name)])

        def launch(grid, block, args, shared_mem=0):
            assert not shared_mem, "the emulator has no dynamic shared memory"
            g = (ctypes.c_uint * 3)(*(tuple(grid) + (1, 1, 1))[:3])
            b = (ctypes.c_uint * 3)(*(tuple(block) + (1, 1, 1))[:3])
            slots = (ctypes.c_uint64 * max(1, len(args)))(*[_slot(a) for a in args])
            fn(g, b, slots)
        return launch


def _slot(a):
    if a is None:  # a null pointer, as gpuaug.kernels._cuda.Kernel passes None
        return 0
    if isinstance(a, DeviceView):
        return a.data.ptr
    if isinstance(a, np.ndarray):
        return a.ctypes.data
    if isinstance(a, (float, np.floating)):
        return int(np.array(float(a), np.float64).view(np.uint64))
    return int(a) & 0xFFFFFFFFFFFFFFFF


class _Ptr:
    def __init__(self, ptr):
        self.ptr = ptr


class DeviceView:
    """A host copy of ``a`` standing in for a device array, at ``offset`` bytes past a
    64-byte boundary (to exercise alignment checks); ``.view`` is the NumPy array."""

    def __init__(self, a, offset=0):
        self._buf = np.zeros(a.nbytes + 128, np.uint8)
        base = (-self._buf.ctypes.data) % 64 + offset
        self.view = self._buf[base:base + a.nbytes].view(a.dtype).reshape(a.shape)
        self.view[...] = a
        self.flags, self.itemsize, self.shape = self.view.flags, a.itemsize, a.shape
        self.data = _Ptr(self.view.ctypes.data)


def run_fast(fast, x, layout, shapes, params, *, src_offset=0, dst_offset=0):
    """Call an op's fast hook ``fast(src, dst)`` on host stand-ins and launch it.

    Returns the output as NHWC NumPy, or None when the hook declined (generic kernel).
    The hook must load kernels through ``gpuaug.kernels._cuda.get_function`` (patch it to
    an Emulator's first). The output starts poisoned.
    """
    from gpuaug._batch import as_batch

    b = as_batch(x, layout)
    _, dst = b.alloc(None, shapes)
    src_v, dst_v = DeviceView(b.arrays[0], src_offset), DeviceView(dst.arrays[0], dst_offset)
    dst_v.view[...] = 0xAB if dst_v.view.dtype == np.uint8 else np.nan
    b.arrays[0], dst.arrays[0] = src_v, dst_v
    launch = fast(b, dst)
    if launch is None:
        return None
    launch(np.ascontiguousarray(params, np.float32))
    out = dst_v.view
    if out.ndim == 3:
        out = out[None]
    return out if layout == "NHWC" else out.transpose(0, 2, 3, 1)


_built: dict = {}


def patch(monkeypatch, files, names):
    """Build (once per process) an Emulator for ``files``/``names`` and route
    ``gpuaug.kernels._cuda.get_function`` to it; skip the test where it cannot be built."""
    import pytest

    why = available()
    if why:
        pytest.skip(f"CUDA C emulation needs g++ with C++20: {why}")
    key = (tuple(files), tuple(names))
    emu = _built.get(key)
    if emu is None:
        emu = _built[key] = Emulator(list(files), list(names))
    import gpuaug.kernels._cuda as cuda_mod

    monkeypatch.setattr(cuda_mod, "get_function", emu.get_function)
    return emu
