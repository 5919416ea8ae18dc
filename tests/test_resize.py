import numpy as np
import pytest

import gpuaug
import ref_resize as RR
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, quantize, random_images

MODES = ("nearest", "bilinear", "area")
SIZES = ((19, 29), (61, 70))  # from 37 x 53: shrink both axes, grow both axes


@pytest.mark.parametrize("interpolation", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_resize_cpu(interpolation, dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 3, 37, 53, channels, dtype)
    for size in SIZES + ((37, 20),):
        check_op(gpuaug.resize, lambda s, i: RR.resize(s, size, interpolation), x,
                 {"size": size, "interpolation": interpolation}, layout=layout)


@pytest.mark.parametrize("interpolation", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_resize_varshape_cpu(interpolation, dtype):
    """Per-sample source sizes (per-sample scales), one output size."""
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (40, 24)]]
    for size in ((19, 29), (6, 6)):
        check_op(gpuaug.resize, lambda s, i: RR.resize(s, size, interpolation), xs,
                 {"size": size, "interpolation": interpolation}, varshape=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_resize_int_size_single_image_noncontiguous(dtype):
    rng = np.random.default_rng(3)
    img = random_images(rng, 1, 9, 11, 3, dtype)[0]
    got = gpuaug.resize(img, 5)
    assert got.shape == (5, 5, 3) and got.dtype == img.dtype
    np.testing.assert_array_equal(got, gpuaug.resize(img[None], (5, 5))[0])
    big = random_images(rng, 4, 20, 30, 3, dtype)
    view = big[::2, 3:17, ::3]  # non-contiguous
    np.testing.assert_array_equal(gpuaug.resize(view, (7, 4), "area"),
                                  gpuaug.resize(np.ascontiguousarray(view), (7, 4), "area"))
    chw = np.ascontiguousarray(img.transpose(2, 0, 1))
    np.testing.assert_array_equal(gpuaug.resize(chw, (4, 6), layout="NCHW"),
                                  gpuaug.resize(img, (4, 6)).transpose(2, 0, 1))


@pytest.mark.parametrize("interpolation", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_resize_same_size_is_copy(interpolation, dtype):
    rng = np.random.default_rng(4)
    x = random_images(rng, 2, 37, 53, 3, dtype)
    np.testing.assert_array_equal(gpuaug.resize(x, (37, 53), interpolation), x)


def test_resize_constant_image_stays_constant():
    x = np.full((2, 37, 53, 3), 77, np.uint8)
    for m in MODES:
        for size in ((19, 29), (61, 70), (3, 100), (1, 1)):
            assert (gpuaug.resize(x, size, m) == 77).all(), (m, size)


def test_resize_area_integer_factor_is_block_mean():
    rng = np.random.default_rng(5)
    x = rng.random((2, 12, 18, 3))
    got = gpuaug.resize(x.astype(np.float32), (4, 6), "area")
    want = x.reshape(2, 4, 3, 6, 3, 3).mean(axis=(2, 4))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # 2x bilinear downscale is the same 2x2 mean (taps at 2y and 2y+1, weights 1/2)
    y = rng.random((1, 8, 10, 1)).astype(np.float32)
    np.testing.assert_allclose(gpuaug.resize(y, (4, 5)), gpuaug.resize(y, (4, 5), "area"), rtol=1e-6)


def test_resize_strong_downscale_area():
    """Footprints of many pixels (1080p-like to tiny) and fractional footprints."""
    rng = np.random.default_rng(6)
    x = random_images(rng, 2, 97, 131, 3, "float32")
    for size in ((3, 5), (1, 1), (10, 13)):
        check_op(gpuaug.resize, lambda s, i: RR.resize(s, size, "area"), x,
                 {"size": size, "interpolation": "area"})


@pytest.mark.parametrize("dtype", ("uint8", "float32"))
def test_resize_matches_opencv(dtype):
    cv2 = pytest.importorskip("cv2")
    flags = {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR, "area": cv2.INTER_AREA}
    rng = np.random.default_rng(7)
    x = random_images(rng, 2, 37, 53, 3, dtype)
    big = random_images(rng, 2, 224, 224, 3, dtype)
    cases = [(x, s) for s in SIZES + ((37, 53), (5, 8))] + [(big, (112, 112)), (big, (99, 157))]
    for src, (h, w) in cases:
        for m, flag in flags.items():
            got = gpuaug.resize(src, (h, w), m)
            want = np.stack([cv2.resize(s, (w, h), interpolation=flag) for s in src])
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64)).max()
            assert diff <= (1 if dtype == "uint8" else 1e-4), (m, src.shape, (h, w), diff)


def test_resize_bad_params():
    x = np.zeros((2, 8, 8, 3), np.uint8)
    for bad in (0, (0, 4), (4, -1), (4, 4, 4), (2.5, 3), "big", None):
        with pytest.raises((ValueError, TypeError), match="size: got"):
            gpuaug.resize(x, bad)
    with pytest.raises(ValueError, match="interpolation: got 'cubic'"):
        gpuaug.resize(x, (4, 4), "cubic")
    out = np.full((2, 4, 5, 3), 7, np.uint8)
    with pytest.raises(ValueError, match="out: got shape"):
        gpuaug.resize(x, (4, 4), out=out)
    assert (out == 7).all()


def test_resize_registry_spec():
    spec = gpuaug.registry["resize"]
    assert spec.changes_shape and spec.param_names == ("size", "interpolation")
    assert spec.kernels.kind == "value"


def test_resize_cuda_c_compiles_every_mode():
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not available here ({type(e).__name__})")
    from gpuaug.kernels._cuda import check_compile, kernel_name

    names = [kernel_name("gpuaug_resize", d, c, m) for d in DTYPES for c in (1, 3, 4) for m in range(3)]
    assert check_compile("resize.cu", names).count(".entry") == len(names)


def test_resize_simulator():
    """The Numba CUDA twin (in the simulator without a GPU; test_resize_gpu otherwise)."""
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_resize_gpu")
    rng = np.random.default_rng(8)
    for dtype in DTYPES:
        x = random_images(rng, 2, 5, 7, 3, dtype)
        for m in MODES:
            for size in ((3, 4), (6, 9)):
                check_op(gpuaug.resize, lambda s, i: RR.resize(s, size, m), x,
                         {"size": size, "interpolation": m}, backend="numba-sim", layout="NCHW")
    xs = [random_images(rng, 1, h, w, 1, "uint8")[0] for h, w in [(3, 4), (6, 2)]]
    check_op(gpuaug.resize, lambda s, i: RR.resize(s, (4, 3), "area"), xs,
             {"size": (4, 3), "interpolation": "area"}, backend="numba-sim", varshape=True)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_resize_gpu(backend, dtype, layout):
    rng = np.random.default_rng(9)
    for c in (1, 3, 4):
        x = random_images(rng, 3, 37, 53, c, dtype)
        for m in MODES:
            for size in SIZES:
                check_op(gpuaug.resize, lambda s, i: RR.resize(s, size, m), x,
                         {"size": size, "interpolation": m}, layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9)]]
    for m in MODES:
        check_op(gpuaug.resize, lambda s, i: RR.resize(s, (19, 29), m), xs,
                 {"size": (19, 29), "interpolation": m}, varshape=True, backend=backend)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_resize_gpu_identity_and_large(backend):
    import cupy

    rng = np.random.default_rng(10)
    x = random_images(rng, 4, 224, 224, 3, "uint8")
    xd = cupy.asarray(x)
    for m in ("nearest", "bilinear"):
        np.testing.assert_array_equal(cupy.asnumpy(gpuaug.resize(xd, (224, 224), m, backend=backend)), x)
    for m in MODES:
        got = cupy.asnumpy(gpuaug.resize(xd, (112, 112), m, backend=backend))
        ref = np.stack([RR.resize(s.astype(np.float64), (112, 112), m) for s in x])
        assert np.abs(got.astype(int) - quantize(ref, np.uint8).astype(int)).max() <= 1


# -- the CUDA C source, run on the host ---------------------------------------------------
# Without a GPU, NVRTC only proves the CUDA C compiles. This builds resize.cu and
# resized_crop.cu with the host C++ compiler behind a few shims (__ldg is a load, the grid
# is a loop, float16 converts through _Float16) and checks what they compute.

_SHIM = r"""
#include <cmath>
#include <cstring>
#include <algorithm>
struct dim3_ { unsigned x, y, z; };
static dim3_ blockIdx, threadIdx, blockDim, gridDim;
#define __device__
#define __forceinline__ inline
#define __global__
using std::min; using std::max; using std::floor; using std::fmin; using std::fmax;
struct longlong2 { long long x, y; };
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
template <typename T> static inline T __ldg(const T* p) { return *p; }
static inline int __float2int_rd(float f) { return (int)floorf(f); }
static inline int __float2int_ru(float f) { return (int)ceilf(f); }
#include "resize.cu"
#include "resized_crop.cu"
template <typename T, int C, int MODE, bool CROP>
static void launch(const long long* s, const long long* d, const float* p, int P, int n, int H, int W) {
  blockDim = {32, 8, 1};
  gridDim = {(unsigned)(W + 31) / 32, (unsigned)(H + 7) / 8, (unsigned)n};
  for (unsigned bz = 0; bz < gridDim.z; ++bz)
    for (unsigned by = 0; by < gridDim.y; ++by)
      for (unsigned bx = 0; bx < gridDim.x; ++bx)
        for (unsigned ty = 0; ty < 8; ++ty)
          for (unsigned tx = 0; tx < 32; ++tx) {
            blockIdx = {bx, by, bz};
            threadIdx = {tx, ty, 0};
            if (CROP) gpuaug_resized_crop<T, C, MODE>(s, d, p, P, n);
            else gpuaug_resize<T, C, MODE>(s, d, p, P, n);
          }
}
#define INST(T, TN, C) \
  extern "C" void run_##TN##_##C(int crop, int mode, const long long* s, const long long* d, \
                                 const float* p, int P, int n, int H, int W) { \
    if (crop) { \
      if (mode == 0) launch<T, C, 0, true>(s, d, p, P, n, H, W); \
      else if (mode == 1) launch<T, C, 1, true>(s, d, p, P, n, H, W); \
      else launch<T, C, 2, true>(s, d, p, P, n, H, W); \
    } else { \
      if (mode == 0) launch<T, C, 0, false>(s, d, p, P, n, H, W); \
      else if (mode == 1) launch<T, C, 1, false>(s, d, p, P, n, H, W); \
      else launch<T, C, 2, false>(s, d, p, P, n, H, W); \
    } }
INST(unsigned char, uint8, 1) INST(unsigned char, uint8, 3) INST(unsigned char, uint8, 4)
INST(float, float32, 1) INST(float, float32, 3) INST(float, float32, 4)
INST(gpuaug::half, float16, 1) INST(gpuaug::half, float16, 3) INST(gpuaug::half, float16, 4)
"""

_ASM = {  # common.cuh's PTX float16 conversions -> host _Float16
    'asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));':
        "{ _Float16 t; memcpy(&t, &v.bits, 2); f = (float)t; }",
    'asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));':
        "{ _Float16 t = (_Float16)v; memcpy(&h.bits, &t, 2); }",
}


@pytest.fixture(scope="module")
def host_cuda_c(tmp_path_factory):
    import ctypes
    import shutil
    import subprocess

    from gpuaug.kernels._cuda import KERNEL_DIR, source

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler (g++/clang++) to run the CUDA C source on the CPU")
    d = tmp_path_factory.mktemp("host_cuda_c")
    common = source("common.cuh")
    for k, v in _ASM.items():
        if k not in common:
            pytest.skip("common.cuh's float16 conversions changed; update _ASM")
        common = common.replace(k, v)
    (d / "common.cuh").write_text(common)
    for f in ("interp.cuh", "resize.cuh", "resize.cu", "resized_crop.cu"):
        (d / f).write_text(source(f))
    (d / "host.cpp").write_text(_SHIM)
    r = subprocess.run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-w", "-o", str(d / "host.so"),
                        str(d / "host.cpp")], capture_output=True, text=True)
    if r.returncode != 0 and "_Float16" in r.stderr:
        pytest.skip(f"{cxx} lacks _Float16")
    assert r.returncode == 0, r.stderr[-3000:]
    assert KERNEL_DIR
    return ctypes.CDLL(str(d / "host.so"))


def _host_run(lib, crop):
    import ctypes

    def table(views):
        t = np.empty((len(views), 6), np.int64)
        for i, v in enumerate(views):
            it = v.itemsize
            t[i] = (v.__array_interface__["data"][0], v.shape[0], v.shape[1],
                    v.strides[0] // it, v.strides[1] // it, v.strides[2] // it)
        return t

    def fake_run(batch, kernels, params, *, shapes, out, backend, stream, template=None, **kw):
        result, dst = batch.alloc(out, shapes)
        views = (lambda b: b.views if b.varshape else [b.nhwc[i] for i in range(b.n)])
        st, dt = table(views(batch)), table(views(dst))
        p = np.ascontiguousarray(params, np.float32)
        name, c, mode = template
        vp = ctypes.c_void_p
        getattr(lib, f"run_{name}_{c}")(
            ctypes.c_int(crop), ctypes.c_int(mode), vp(st.ctypes.data), vp(dt.ctypes.data),
            vp(p.ctypes.data), ctypes.c_int(p.shape[1]), ctypes.c_int(batch.n),
            ctypes.c_int(max(h for h, _ in shapes)), ctypes.c_int(max(w for _, w in shapes)))
        return result
    return fake_run


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_c_logic_on_host(host_cuda_c, dtype, monkeypatch):
    import gpuaug.ops.resize as op_resize
    import gpuaug.ops.resized_crop as op_crop

    monkeypatch.setattr(op_resize, "run", _host_run(host_cuda_c, 0))
    monkeypatch.setattr(op_crop, "run", _host_run(host_cuda_c, 1))
    rng = np.random.default_rng(11)
    boxes = np.array([(3, 5, 20, 31), (34.5, -6.75, 9.5, 0.5), (-20, 56.25, 4, 7.75)])
    for c, layout in ((1, "NHWC"), (3, "NCHW"), (4, "NHWC"), (3, "NHWC")):
        x = random_images(rng, 3, 37, 53, c, dtype)
        for m in MODES:
            for size in SIZES + ((37, 53),):
                check_op(gpuaug.resize, lambda s, i: RR.resize(s, size, m), x,
                         {"size": size, "interpolation": m}, layout=layout)
                check_op(gpuaug.resized_crop, lambda s, i: RR.resized_crop(s, boxes[i], size, m), x,
                         {"boxes": boxes, "size": size, "interpolation": m}, layout=layout)
    xs = [x[0], x[1, :5, 3:10], x[2, ::2, ::3]]  # varshape and strided
    vb = [(0, 0, 37, 53), (1.25, 0.5, 3, 4), (-1, 2, 30, 9)]
    for m in MODES:
        check_op(gpuaug.resized_crop, lambda s, i: RR.resized_crop(s, vb[i], (11, 13), m), xs,
                 {"boxes": vb, "size": (11, 13), "interpolation": m}, varshape=True)
    big = random_images(rng, 1, 224, 224, 3, dtype)
    for m in MODES:
        check_op(gpuaug.resize, lambda s, i: RR.resize(s, (112, 112), m), big,
                 {"size": (112, 112), "interpolation": m})
