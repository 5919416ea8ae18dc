"""The CUDA C kernels of the filter, noise and occlusion ops, compiled for the host with
g++ (tests/cuda_emu.py) and run on the CPU, so that their indexing, tiling, vector paths
and float maths are checked on machines without a GPU.

The noise kernels must give the same bits as the Numba CPU twin: the emulation runs
their float32 operations as written (__fmaf_rn -> fmaf, no contraction: g++ targets
x86-64 without FMA here), which is what the reproducibility rules in kernels/philox.cuh
promise on the GPU. Dynamic shared memory (separable.cuh) becomes a static array.
"""
import functools
import os
import re
import shutil

import numpy as np
import pytest

import cuda_emu
import gpuaug
import ref_filters as R
from gpuaug.kernels._cuda import KERNEL_DIR, kernel_name
from helpers import random_images

FILES = ["gaussian_noise.cu", "salt_and_pepper.cu", "gaussian_blur.cu", "box_blur.cu", "median_blur.cu",
         "sharpen.cu", "erase.cu", "grid_mask.cu"]
HEADERS = ["philox.cuh", "rowvec.cuh", "separable.cuh"]
CASES = [("uint8", 1), ("uint8", 3), ("uint8", 4), ("float16", 3), ("float32", 3), ("float32", 4)]

EXTRA = r"""
// CUDA built-ins used by the filter and noise kernels, as host functions.
#pragma once
#include <cmath>
#define __launch_bounds__(n)
#define __host__
struct float4 { float x, y, z, w; };
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
static inline int __clz(unsigned v) { return v ? __builtin_clz(v) : 32; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fadd_rd(float a, float b) {  // round toward -inf (exact in double here)
  const double e = (double)a + (double)b;
  float r = (float)e;
  return (double)r > e ? std::nextafter(r, -INFINITY) : r;
}
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
static inline float __int2float_rn(int v) { return (float)v; }
static inline float __uint2float_rn(unsigned v) { return (float)v; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t v = ((uint64_t)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 255) << (8 * i);
  return r;
}
"""


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    why = cuda_emu.available()
    if why:
        pytest.skip(f"CUDA C emulation needs g++ with C++20: {why}")
    d = str(tmp_path_factory.mktemp("filters_emu"))
    for f in FILES + HEADERS + ["common.cuh"]:
        shutil.copy(os.path.join(KERNEL_DIR, f), d)
    with open(os.path.join(d, "emu_extra.h"), "w") as f:
        f.write(EXTRA)
    sep = os.path.join(d, "separable.cuh")
    src = open(sep).read()
    src, k = re.subn(r"extern __shared__ float4 sep_smem\[\];", "static float4 sep_smem[96 * 1024 / 16];", src)
    assert k == 2
    open(sep, "w").write(src)
    with open(os.path.join(d, "common.cuh"), "a") as f:  # my headers at global scope, once
        f.write('\n#include "emu_extra.h"\n#include "rowvec.cuh"\n#include "philox.cuh"\n#include "separable.cuh"\n')
    names = []
    for base in ("gpuaug_gaussian_noise", "gpuaug_salt_and_pepper", "gpuaug_gaussian_blur", "gpuaug_gaussian_blur_1",
                 "gpuaug_box_blur", "gpuaug_median_blur", "gpuaug_sharpen", "gpuaug_erase", "gpuaug_grid_mask"):
        names += [kernel_name(base, dt, c) for dt, c in CASES]
    names += [kernel_name("gpuaug_median_blur_3", dt, c) for dt, c in CASES]
    names += [kernel_name("gpuaug_erase_packed", dt, c) for dt, c in CASES]
    names += [kernel_name("gpuaug_median_blur_3_packed", pb) for pb in (1, 2, 3, 4)]
    names += [kernel_name("gpuaug_sharpen_packed", pb) for pb in (1, 2, 3, 4)]
    names += [kernel_name("gpuaug_box_blur_packed", pb) for pb in (1, 2, 3, 4)]
    for base in ("gpuaug_gaussian_blur_k", "gpuaug_box_blur_k"):  # the unrolled kernels the CALLS use
        names += [kernel_name(base, dt, c, k) for dt, c in CASES for k in (3, 5, 13, 15)]
    old = cuda_emu.KERNEL_DIR
    cuda_emu.KERNEL_DIR = d
    try:
        return cuda_emu.Emulator(FILES, names, workdir=d)
    finally:
        cuda_emu.KERNEL_DIR = old


def _table(views):
    t = np.empty((len(views), 6), np.int64)
    for i, v in enumerate(views):
        it = v.itemsize
        t[i] = (v.ctypes.data, v.shape[0], v.shape[1], v.strides[0] // it, v.strides[1] // it, v.strides[2] // it)
    return t


def _capture(monkeypatch, module, name):
    """Make ``module.<name>`` (run or run_custom) record its arguments instead of running."""
    got = {}

    def fake(batch, *args, **kw):  # run(batch, kernels, params, ...) / run_custom(batch, params, ...)
        got.update(kw, batch=batch, params=args[-1])

    monkeypatch.setattr(module, name, fake)
    return got


def _emulated(emu, monkeypatch, op, x, layout="NHWC", out_pad=(0, 0), **kw):
    """Run op's CUDA C kernel on the host with the params and launch shape the op makes
    (``out_pad``: (columns, channels) more in the NHWC array the output is a view of)."""
    import importlib

    from gpuaug.ops._launch import rows_grid

    mod = importlib.import_module(f"gpuaug.ops.{op}")
    custom = hasattr(mod, "run_custom")
    got = _capture(monkeypatch, mod, "run_custom" if custom else "run")
    getattr(gpuaug, op)(x, layout=layout, **kw)
    monkeypatch.undo()
    b = got["batch"]
    params = np.ascontiguousarray(got["params"], np.float32).reshape(b.n, -1)
    if b.varshape:
        outs = [np.full(v.shape, 0xAB if v.dtype == np.uint8 else np.nan, v.dtype) for v in b.views]
        src_views, dst_views = list(b.views), outs
    else:
        shape = b.arrays[0].shape
        out = np.full(shape[:-2] + (shape[-2] + out_pad[0], shape[-1] + out_pad[1]),
                      0xAB if b.dtype == np.uint8 else np.nan, b.dtype)
        out = out[..., :shape[-2], :shape[-1]]
        o4 = out[None] if b.single else out
        o4 = o4 if layout == "NHWC" else o4.transpose(0, 2, 3, 1)
        src_views, dst_views = list(b.nhwc), list(o4)
        outs = out
    if custom:
        plan = got["plan"](b)  # the output has the input's shape and dtype
        name, grid, block = kernel_name(plan.name, b.dtype.name, b.channels, *plan.template), plan.grid, plan.block
        cu = got["cu_file"]
    else:  # run(..., fast=rows_fast(...)): the replace_rows kernel
        assert got.get("fast") is not None
        name = kernel_name(mod.KERNELS.cu[1], b.dtype.name, b.channels)
        grid, block = rows_grid(b)
        cu = mod.KERNELS.cu[0]
    fn = emu.get_function(cu, name)
    fn(grid, block, (_table(src_views), _table(dst_views), params, np.int32(params.shape[1]), np.int32(b.n)))
    return outs


CALLS = [
    ("gaussian_noise", {"mean": [1.5, -2.0, 0.0], "std": [3.0, 0.25, 10.0], "seed": 0x0123456789ABCDEF}),
    ("salt_and_pepper", {"prob": [0.3, 0.6, 1.0], "salt_vs_pepper": [0.5, 0.1, 0.9], "seed": 77}),
    ("gaussian_blur", {"sigma": [1.5, 0.7, 2.4]}),
    ("gaussian_blur", {"sigma": 9.0, "kernel_size": [3, 101, 255]}),  # the one-channel variant for C >= 3
    ("box_blur", {"kernel_size": [3, 5, 1]}),
    ("box_blur", {"kernel_size": [3, 13, 1]}),
    ("gaussian_blur", {"sigma": [1.5, 1.1, 0.3], "kernel_size": [13, 5, 1]}),
    ("median_blur", {"kernel_size": [3, 5, 3]}),
    ("median_blur", {"kernel_size": 3}),
    ("sharpen", {"factor": [0.0, 0.6, 3.0]}),
    ("erase", {"boxes": [[[1, 2, 5, 70]], [[-3, -3, 8, 8]], [[30, 40, 20, 20]]], "value": [7.0, 250.0, 0.5]}),
    ("grid_mask", {"tile": [5, 9.5, 16], "ratio": [0.4, 0.5, 0.7], "angle": [0.0, 30.0, -77.0],
                   "shift": [[1, 2], [0, 0], [-3.5, 4]]}),
]


def _compare(op, got, want, dtype):
    if isinstance(want, list):
        for g, w in zip(got, want):
            _compare(op, g, w, dtype)
        return
    exact = op in ("gaussian_noise", "salt_and_pepper", "median_blur", "erase", "grid_mask")
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert not np.isnan(got).any() or np.isnan(want).any(), f"{op}: unwritten elements"
    if exact:
        np.testing.assert_array_equal(got, want, err_msg=op)
    elif dtype == "uint8":
        assert np.abs(got - want).max() <= 1, op
    else:
        tol = 2e-3 if dtype == "float16" else 2e-5
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=op)


@pytest.mark.parametrize("dtype, channels", CASES)
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("op, kw", CALLS, ids=[f"{c[0]}{i}" for i, c in enumerate(CALLS)])
def test_cuda_c_on_host_matches_cpu_twin(emu, monkeypatch, op, kw, dtype, channels, layout):
    """CUDA C (emulated) == Numba CPU twin: bit for bit where the op promises it."""
    if op == "gaussian_noise" and dtype != "uint8":
        kw = {**kw, "std": [0.05, 0.25, 1.0]}
    rng = np.random.default_rng(1)
    x = random_images(rng, 3, 37, 75, channels, dtype)  # 75 columns: partial vectors and tiles
    xl = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    got = _emulated(emu, monkeypatch, op, xl, layout=layout, **kw)
    want = getattr(gpuaug, op)(xl, layout=layout, **kw)
    _compare(op, got, want, dtype)


@pytest.mark.parametrize("op, kw", [CALLS[i] for i in (0, 1, 2, 6, 7, 8, 9, 10, 11)],
                         ids=["noise", "salt", "gauss", "gauss_k", "median", "median3", "sharpen", "erase", "grid"])
def test_cuda_c_on_host_varshape_and_strided(emu, monkeypatch, op, kw):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, "uint8")[0] for h, w in [(5, 7), (37, 75), (1, 33)]]
    _compare(op, _emulated(emu, monkeypatch, op, xs, **kw), getattr(gpuaug, op)(xs, **kw), "uint8")
    big = random_images(rng, 3, 40, 90, 4, "uint8")
    view = big[:, 1:38, 3:80, :3]  # strided rows, 4-byte pixels of 3 channels: the scalar paths
    _compare(op, _emulated(emu, monkeypatch, op, view, **kw), getattr(gpuaug, op)(view, **kw), "uint8")


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("op, kw", [("gaussian_blur", {"sigma": [1.5, 2.4, 0.6]}),
                                    ("box_blur", {"kernel_size": [13, 5, 3]}),
                                    ("sharpen", {"factor": [0.0, 0.6, 3.0]})])
def test_cuda_c_on_host_uint8_word_tiles(emu, monkeypatch, op, kw, channels):
    """The shared-memory tile kernels move dense uint8 rows as 32-bit words (load_tile,
    store_tile, the separable kernels' horizontal pass): bit for bit what the element path
    gives for the same values in strided views (pixels 5 bytes apart, in and out). Rows start at every
    alignment (75 pixels a row; tiles at columns 32 and 64 are inside the image)."""
    rng = np.random.default_rng(9)
    big = rng.integers(0, 256, (3, 37, 75, 5), dtype=np.uint8)
    view = big[..., :channels]
    dense = np.ascontiguousarray(view)
    got = _emulated(emu, monkeypatch, op, dense, **kw)
    np.testing.assert_array_equal(got, _emulated(emu, monkeypatch, op, view, out_pad=(0, 1), **kw))
    # word-aligned output rows (76 pixels) whose last tile ends inside a word: its bytes one by one
    np.testing.assert_array_equal(got, _emulated(emu, monkeypatch, op, dense, out_pad=(1, 0), **kw))
    _compare(op, got, getattr(gpuaug, op)(dense, **kw), "uint8")


def test_cuda_c_on_host_blur_matches_reference(emu, monkeypatch):
    rng = np.random.default_rng(3)
    x = random_images(rng, 2, 70, 97, 4, "float32")
    got = _emulated(emu, monkeypatch, "gaussian_blur", x, sigma=[1.5, 20.0], kernel_size=[11, 161])
    for i, (s, k) in enumerate([(1.5, 11), (20.0, 161)]):
        np.testing.assert_allclose(got[i], R.gaussian_blur(x[i].astype(np.float64), s, k), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, channels", CASES)
def test_erase_packed_on_host_matches_cpu_twin(emu, monkeypatch, dtype, channels):
    """gpuaug_erase_packed (dense NHWC rows of whole 16-byte vectors) == the Numba CPU twin, bit
    for bit: boxes across vector and row ends, partly or wholly outside, overlapping, empty; the
    hook declines misaligned batches and rows that are no whole vectors (replace_rows then)."""
    import gpuaug.kernels._cuda as cuda_mod
    import gpuaug.ops.erase as E

    rng = np.random.default_rng(5)
    x = random_images(rng, 3, 9, 32, channels, dtype)  # 32 pixels: whole vectors for every case
    boxes = np.array([[[1, 3, 4, 9], [0, 30, 9, 5], [2, 5, 2, 1]],     # a box past the right edge
                      [[-2, -4, 5, 7], [3, 0, 0, 32], [8, 0, 3, 32]],  # outside corner, empty, last row
                      [[0, 0, 9, 32], [4, 10, 1, 1], [0, 0, 0, 0]]])   # the whole image
    more = np.array([[[5, 20, 3, 6], [0, 0, 0, 0], [7, 1, 1, 2]]] * 3)  # boxes past the kernel's 4 in registers
    more[2] = 0
    boxes = np.concatenate([boxes, more], axis=1)
    value = [7.0, 250.0, 0.5] if dtype == "uint8" else [0.25, 1.0, 0.5]
    got = _capture(monkeypatch, E, "run")
    E.erase(x, boxes, value)
    monkeypatch.undo()
    assert got["fast"] is E._fast
    want = E.erase(x, boxes, value)
    assert (want != x).any()  # the boxes changed something
    names = []

    def get_function(cu, name):
        names.append(name)
        return emu.get_function(cu, name)

    monkeypatch.setattr(cuda_mod, "get_function", get_function)
    out = cuda_emu.run_fast(E._fast, x, "NHWC", got["shapes"], got["params"])
    assert names == [kernel_name("gpuaug_erase_packed", dtype, channels)]
    np.testing.assert_array_equal(out, want)
    for so, do in ((4, 0), (0, 8)):  # misaligned: the hook declines the packed kernel
        names.clear()
        E._fast.__globals__["_ROWS"] = lambda src, dst: names.append("rows")
        try:
            cuda_emu.run_fast(E._fast, x, "NHWC", got["shapes"], got["params"], src_offset=so, dst_offset=do)
        finally:
            E._fast.__globals__["_ROWS"] = E.rows_fast(*E.KERNELS.cu)
        assert names == ["rows"]


PACKED_SHAPES = [("NHWC", 3, 9, 32), ("NHWC", 1, 7, 16), ("NHWC", 4, 5, 8), ("NHWC", 3, 1, 16), ("NHWC", 1, 2, 48),
                 ("NHWC", 3, 3, 16), ("NCHW", 3, 6, 16), ("NCHW", 4, 3, 32)]


def _launch_packed(emu, cu, plan, x, layout, params, so=0, do=0):
    """Run ``plan(dst, src)``'s kernel on the host when it is a dense (``arrays``) one, with x
    and the output at ``so`` / ``do`` bytes past a 64-byte boundary; None when it is not."""
    from gpuaug._batch import as_batch

    b = as_batch(x, layout)
    _, dst = b.alloc(None, b.shapes)
    sv, dv = cuda_emu.DeviceView(b.arrays[0], so), cuda_emu.DeviceView(dst.arrays[0], do)
    dv.view[...] = 0xAB
    b.arrays[0], dst.arrays[0] = sv, dv
    cp = plan(dst, b)
    if not cp.arrays:
        return None
    fn = emu.get_function(cu, kernel_name(cp.name, *cp.template))
    fn(cp.grid, cp.block, (sv, dv, params, np.int32(params.shape[1]), np.int32(b.n)) + tuple(cp.extra))
    return dv.view


@pytest.mark.parametrize("layout, channels, h, w", PACKED_SHAPES)
def test_median_blur_3_packed_on_host_matches_cpu_twin(emu, monkeypatch, layout, channels, h, w):
    """gpuaug_median_blur_3_packed (uint8, k = 3, rows of whole 16-byte vectors; bytes compared
    four at a time) == the Numba CPU twin, bit for bit: one-vector rows (both borders in one
    vector), one- and two-row images, NCHW planes; the plan declines misaligned batches, other
    dtypes and k = 5."""
    import gpuaug.ops.median_blur as M

    rng = np.random.default_rng(8)
    x = random_images(rng, 3, h, w, channels, "uint8")
    xl = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    got = _capture(monkeypatch, M, "run_custom")
    M.median_blur(xl, 3, layout=layout)
    monkeypatch.undo()
    params = np.ascontiguousarray(got["params"], np.float32)
    run = functools.partial(_launch_packed, emu, "median_blur.cu", got["plan"], xl, layout, params)
    np.testing.assert_array_equal(run(), M.median_blur(xl, 3, layout=layout))
    assert run(so=4) is None and run(do=8) is None  # misaligned: the tile kernel
    assert _launch_packed(emu, "median_blur.cu", M._plan(False), xl, layout, params) is None  # some k = 5
    assert _launch_packed(emu, "median_blur.cu", got["plan"], xl.astype(np.float32), layout, params) is None


@pytest.mark.parametrize("layout, channels, h, w", PACKED_SHAPES)
def test_sharpen_packed_on_host_matches_the_tile_kernel(emu, monkeypatch, layout, channels, h, w):
    """gpuaug_sharpen_packed (uint8, integer window sums in 16-bit lanes) == gpuaug_sharpen (the
    tile kernel) bit for bit, and the CPU twin within 1 (as the tile kernel); factors that smooth,
    keep and sharpen (clamped both ways); the plan declines misaligned batches and floats."""
    import gpuaug.ops.sharpen as S

    rng = np.random.default_rng(9)
    x = random_images(rng, 3, h, w, channels, "uint8")
    x[0, h // 2] = 255  # a bright row beside the random ones: sharpening saturates
    xl = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    factor = [0.0, 1.0, 2.7]
    got = _capture(monkeypatch, S, "run_custom")
    S.sharpen(xl, factor, layout=layout)
    monkeypatch.undo()
    params = np.ascontiguousarray(got["params"], np.float32)
    packed = _launch_packed(emu, "sharpen.cu", got["plan"], xl, layout, params)
    tiles = _emulated(emu, monkeypatch, "sharpen", xl, layout=layout, factor=factor)
    np.testing.assert_array_equal(packed, tiles)
    want = S.sharpen(xl, factor, layout=layout)
    assert np.abs(packed.astype(int) - want).max() <= 1
    if h > 2 and w > 2:
        assert (packed != xl).any()  # the inner pixels changed
    run = functools.partial(_launch_packed, emu, "sharpen.cu", got["plan"], layout=layout, params=params)
    assert run(xl, so=4) is None and run(xl, do=8) is None
    assert run(xl.astype(np.float32)) is None


BOX_SHAPES = PACKED_SHAPES + [("NHWC", 3, 11, 48), ("NHWC", 4, 9, 12), ("NHWC", 1, 4, 16), ("NHWC", 3, 3, 16),
                              ("NHWC", 4, 6, 4)]


@pytest.mark.parametrize("layout, channels, h, w", BOX_SHAPES)
@pytest.mark.parametrize("sizes", [[3, 5, 1], [5, 5, 5], [1, 3, 3]])
def test_box_blur_packed_on_host_matches_the_tile_kernel(emu, monkeypatch, layout, channels, h, w, sizes):
    """gpuaug_box_blur_packed (uint8, every k <= 5, integer window sums) == the separable tile
    kernel bit for bit, on inner vectors and on the reflect-101 borders (one-vector rows, images
    of 3 to 5 rows: the 5 x 5 window reflects across the image); the plan declines misaligned
    batches, floats, a k of 7 and images of fewer than 3 rows."""
    import gpuaug.ops.box_blur as B

    rng = np.random.default_rng(10)
    x = random_images(rng, 3, h, w, channels, "uint8")
    xl = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    got = _capture(monkeypatch, B, "run_custom")
    B.box_blur(xl, sizes, layout=layout)
    monkeypatch.undo()
    params = np.ascontiguousarray(got["params"], np.float32)
    packed = _launch_packed(emu, "box_blur.cu", got["plan"], xl, layout, params)
    if h < 3:  # fewer rows than its reflections need: the tile kernel
        assert packed is None
        return
    tiles = _emulated(emu, monkeypatch, "box_blur", xl, layout=layout, kernel_size=sizes)
    np.testing.assert_array_equal(packed, tiles)
    want = B.box_blur(xl, sizes, layout=layout)
    np.testing.assert_array_equal(packed, want)
    run = functools.partial(_launch_packed, emu, "box_blur.cu", got["plan"], layout=layout, params=params)
    assert run(xl, so=4) is None and run(xl.astype(np.float32)) is None
    assert _launch_packed(emu, "box_blur.cu", B._plan(7), xl, layout, params) is None
