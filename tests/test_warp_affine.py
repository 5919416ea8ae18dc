import numpy as np
import pytest

import gpuaug
import ref_warp as R
from gpuaug import geometry as G
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

INTERPS = ("nearest", "bilinear")
BORDERS = ("constant", "replicate", "reflect")
SIZES = [(5, 7), (37, 53), (1, 9), (6, 1), (16, 16)]


def _fills(rng, n, dtype, channels=None):
    hi = 300.0 if np.dtype(dtype) == np.uint8 else 1.0  # uint8: also saturating fills
    return rng.uniform(0, hi, n if channels is None else (n, channels))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
@pytest.mark.parametrize("interpolation", INTERPS)
def test_warp_affine_cpu(dtype, layout, channels, interpolation):
    """Random matrices keep nearest-neighbour ties (u exactly x.5) away with probability 1."""
    rng = np.random.default_rng(1)
    n = 5
    x = random_images(rng, n, 37, 53, channels, dtype)
    m = R.random_affine(rng, n, 37, 53)
    for border in BORDERS:
        fill = _fills(rng, n, dtype)
        fr = R.fill_in_dtype(fill, dtype)
        check_op(gpuaug.warp_affine,
                 lambda s, i: R.warp_affine(s, m[i], (29, 61), interpolation, border, fr[i]), x,
                 {"matrix": m, "size": (29, 61), "interpolation": interpolation, "border": border,
                  "fill": fill}, layout=layout)
    # one matrix for the batch, default size / border / fill
    check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[2], None, interpolation), x,
             {"matrix": m[2], "interpolation": interpolation}, layout=layout)
    # per-sample, per-channel fill
    fill = _fills(rng, n, dtype, channels)
    fr = R.fill_in_dtype(fill, dtype)
    check_op(gpuaug.warp_affine,
             lambda s, i: R.warp_affine(s, m[i], (41, 47), interpolation, "constant", fr[i]), x,
             {"matrix": m, "size": [41, 47], "interpolation": interpolation, "fill": fill}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interpolation", INTERPS)
def test_warp_affine_varshape_cpu(dtype, interpolation):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    m = np.stack([R.random_affine(rng, 1, h, w)[0] for h, w in SIZES])
    for border in BORDERS:
        check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[i], None, interpolation, border, 7), xs,
                 {"matrix": m, "interpolation": interpolation, "border": border, "fill": 7}, varshape=True)
    check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[i], (8, 11), interpolation, "reflect"), xs,
             {"matrix": m, "interpolation": interpolation, "border": "reflect", "size": (8, 11)}, varshape=True)


def test_warp_affine_inverse_map():
    rng = np.random.default_rng(3)
    x = random_images(rng, 4, 37, 53, 3, "uint8")
    m = R.random_affine(rng, 4, 37, 53)
    inv = np.stack([np.linalg.inv(np.vstack([k, [0, 0, 1]]))[:2] for k in m])
    for interp in INTERPS:
        check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, inv[i], None, interp, "replicate",
                                                                inverse_map=True), x,
                 {"matrix": inv, "interpolation": interp, "border": "replicate", "inverse_map": True})
        a = gpuaug.warp_affine(x, inv, interpolation=interp, inverse_map=True)
        b = gpuaug.warp_affine(x, m, interpolation=interp)
        assert np.abs(a.astype(int) - b).max() <= 1
    # a singular destination -> source map is fine (every output pixel reads one column)
    proj = np.array([[0.0, 0.0, 3.0], [0.0, 1.0, 0.0]])
    y = gpuaug.warp_affine(x, proj, inverse_map=True)
    np.testing.assert_array_equal(y, np.broadcast_to(x[:, :, 3:4], x.shape))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_warp_affine_identities(dtype, layout):
    rng = np.random.default_rng(4)
    x = random_images(rng, 3, 13, 17, 4, dtype)
    xl = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    eye = [[1, 0, 0], [0, 1, 0]]
    for interp in INTERPS:
        for border in BORDERS:
            np.testing.assert_array_equal(
                gpuaug.warp_affine(xl, eye, interpolation=interp, border=border, fill=5, layout=layout), xl)
        # integer shifts move pixels exactly; flips through geometry equal gpuaug.flip
        shift = G.to_affine(G.translation(3, -2))
        want = np.full_like(x, 0)
        want[:, :-2, 3:] = x[:, 2:, :-3]
        np.testing.assert_array_equal(gpuaug.warp_affine(x, shift, interpolation=interp), want)
        fl = G.to_affine(G.flip([True, False, True], [False, True, True], size=(13, 17)))
        np.testing.assert_array_equal(gpuaug.warp_affine(x, fl, interpolation=interp),
                                      gpuaug.flip(x, [True, False, True], [False, True, True]))
    # a 2x upscale crop with bilinear: exact averages of neighbours
    up = gpuaug.warp_affine(x.astype(np.float32), G.to_affine(G.scale(2.0)), size=(25, 33))
    np.testing.assert_allclose(up[:, ::2, ::2], x.astype(np.float32))
    np.testing.assert_allclose(up[:, 1::2, ::2], (x[:, :-1] + x[:, 1:].astype(np.float32)) / 2, rtol=1e-6)


def test_warp_affine_single_image_and_noncontiguous():
    rng = np.random.default_rng(5)
    img = random_images(rng, 1, 19, 23, 3, "uint8")[0]
    m = R.random_affine(rng, 1, 19, 23)[0]
    y = gpuaug.warp_affine(img, m)
    assert y.shape == img.shape
    np.testing.assert_array_equal(y, gpuaug.warp_affine(img[None], m)[0])
    big = random_images(rng, 4, 40, 60, 3, "uint8")
    view = big[::2, 3:37, ::3]  # non-contiguous
    ref = [R.warp_affine(view[i].astype(float), m, (20, 30)) for i in range(2)]
    got = gpuaug.warp_affine(view, m, size=(20, 30))
    assert np.abs(got.astype(int) - np.clip(np.floor(np.stack(ref) + 0.5), 0, 255)).max() <= 1


def test_warp_affine_bad_params():
    x = np.zeros((2, 8, 9, 3), np.uint8)
    eye = np.eye(3)[:2]
    with pytest.raises(ValueError, match="matrix: got .*finite"):
        gpuaug.warp_affine(x, [[1, 0, np.nan], [0, 1, 0]])
    with pytest.raises(ValueError, match="matrix: got .*finite"):
        gpuaug.warp_affine(x, np.stack([eye, np.where(eye == 1, np.inf, 0)]))
    with pytest.raises(ValueError, match="matrix: sample 1 is singular"):
        gpuaug.warp_affine(x, np.stack([eye, [[1, 2, 0], [2, 4, 0]]]))
    with pytest.raises(ValueError, match="matrix: sample 0 is singular"):
        gpuaug.warp_affine(x, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="matrix: got shape"):
        gpuaug.warp_affine(x, np.eye(3))
    with pytest.raises(ValueError, match="matrix: got shape"):
        gpuaug.warp_affine(x, np.stack([eye] * 3))
    with pytest.raises(TypeError, match="matrix: got None"):
        gpuaug.warp_affine(x, None)
    with pytest.raises(ValueError, match="interpolation: got 'cubic'"):
        gpuaug.warp_affine(x, eye, interpolation="cubic")
    with pytest.raises(ValueError, match="border: got 'wrap'"):
        gpuaug.warp_affine(x, eye, border="wrap")
    with pytest.raises(ValueError, match="size: got"):
        gpuaug.warp_affine(x, eye, size=(0, 4))
    with pytest.raises(ValueError, match="size: got"):
        gpuaug.warp_affine(x, eye, size=(2, 3, 4))
    with pytest.raises(ValueError, match="fill: .*finite"):
        gpuaug.warp_affine(x, eye, fill=np.nan)
    with pytest.raises(ValueError, match="fill: got shape"):
        gpuaug.warp_affine(x, eye, fill=[1, 2, 3])
    with pytest.raises(ValueError, match="fill: got shape"):
        gpuaug.warp_affine(x, eye, fill=np.zeros((2, 4)))
    with pytest.raises(TypeError, match="inverse_map: got"):
        gpuaug.warp_affine(x, eye, inverse_map="yes")


def test_warp_affine_matches_opencv():
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (optional cross-check)")
    rng = np.random.default_rng(6)
    h, w = 37, 53
    yy, xx = np.mgrid[0:h, 0:w]
    # smooth content: OpenCV versions that quantise coordinates to 1/32 pixel then differ
    # from exact maths by a fraction of a level
    img = np.stack([127 + 100 * np.sin(xx / 7 + yy / 11), 127 + 100 * np.cos(xx / 5 - yy / 9),
                    127 + 120 * np.sin((xx + yy) / 13)], -1).astype(np.uint8)
    m = R.random_affine(rng, 3, h, w)
    modes = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE,
             "reflect": cv2.BORDER_REFLECT_101}
    flags = {"nearest": cv2.INTER_NEAREST, "bilinear": cv2.INTER_LINEAR}
    for interp, fl in flags.items():
        for border, bm in modes.items():
            got = gpuaug.warp_affine(np.stack([img] * 3), m, size=(31, 59), interpolation=interp,
                                     border=border, fill=40)
            for i in range(3):
                cv = cv2.warpAffine(img, m[i], (59, 31), flags=fl, borderMode=bm, borderValue=(40, 40, 40))
                d = np.abs(got[i].astype(int) - cv)
                if interp == "bilinear":
                    assert d.max() <= 2, (interp, border, d.max())
                else:  # a coordinate within OpenCV's rounding of x.5 may pick the neighbour
                    assert (d > 2).mean() < 0.01, (interp, border, (d > 2).mean())


def test_warp_affine_simulator():
    """The Numba CUDA twin (in the simulator without a GPU)."""
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_warp_affine_gpu")
    rng = np.random.default_rng(7)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        m = R.random_affine(rng, 2, 3, 5)
        for interp, border in (("bilinear", "constant"), ("nearest", "reflect")):
            check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[i], (4, 6), interp, border, 9), x,
                     {"matrix": m, "size": (4, 6), "interpolation": interp, "border": border, "fill": 9},
                     backend="numba-sim", layout="NCHW", rtol=1e-4)


def test_warp_cuda_c_compiles_every_specialisation():
    """NVRTC compiles the interpolation x border instances of both kernels (table-driven and
    dense) for every channel count of uint8 (its own load/store code) and for float16 /
    float32 with 3 channels (no GPU needed). rotate.cu runs warp_affine's driver."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not available here ({type(e).__name__})")
    from gpuaug.kernels._cuda import check_compile, kernel_name

    cases = [("uint8", c) for c in (1, 3, 4)] + [("float16", 3), ("float32", 3)]
    for op in ("warp_affine", "warp_perspective"):
        k = gpuaug.registry[op].kernels
        names = [kernel_name(base, d, c, i, b) for base in (k.cu[1], k.cu[1] + "_dense")
                 for d, c in cases for i in (0, 1) for b in (0, 1, 3)]
        assert check_compile(k.cu[0], names).count(".entry") == len(names)


def test_rotation_inverse_kernel_compiles():
    """kernels/rotation_inverse.cu (rotate's matrices, or its whole parameter rows, from device
    angles) with the options its caller uses: both entries, and --fmad=false leaves no contracted multiply-add in the matrix
    maths (an fma.rn.f64 outside libdevice's cos/sin would round differently from the host)."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not available here ({type(e).__name__})")
    from gpuaug.kernels import _cuda

    names = ["gpuaug_rotation_inverse", "gpuaug_rotation_rows"]
    ptx = _cuda.check_compile("rotation_inverse.cu", names)
    assert ptx.count(".entry") == 2
    opts = _cuda.NVRTC_OPTIONS
    try:
        _cuda.NVRTC_OPTIONS = opts + ("--fmad=false",)
        strict = _cuda.check_compile("rotation_inverse.cu", names)
    finally:
        _cuda.NVRTC_OPTIONS = opts
    assert strict.count("fma.rn.f64") < ptx.count("fma.rn.f64")


# -- GPU ------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_warp_affine_gpu(backend, dtype, layout):
    """float32 maths on the device: bilinear within 1 (uint8) / 1e-4; nearest on dyadic
    destination -> source maps (exact in float32, no ties), so it must match exactly."""
    rng = np.random.default_rng(8)
    n = 5
    for c in (1, 3, 4):
        x = random_images(rng, n, 37, 53, c, dtype)
        m = R.random_affine(rng, n, 37, 53)
        d = R.dyadic_inverse_affine(rng, n)
        for border in BORDERS:
            fill = _fills(rng, n, dtype)
            fr = R.fill_in_dtype(fill, dtype)
            check_op(gpuaug.warp_affine,
                     lambda s, i: R.warp_affine(s, m[i], (29, 61), "bilinear", border, fr[i]), x,
                     {"matrix": m, "size": (29, 61), "border": border, "fill": fill},
                     layout=layout, backend=backend, rtol=1e-4)
            # width % 4 == 0: the dense kernel stores uint8 x 3 rows as words
            check_op(gpuaug.warp_affine,
                     lambda s, i: R.warp_affine(s, m[i], (36, 64), "bilinear", border, fr[i]), x,
                     {"matrix": m, "size": (36, 64), "border": border, "fill": fill},
                     layout=layout, backend=backend, rtol=1e-4)
            check_op(gpuaug.warp_affine,
                     lambda s, i: R.warp_affine(s, d[i], (29, 61), "nearest", border, fr[i], inverse_map=True),
                     x, {"matrix": d, "size": (29, 61), "interpolation": "nearest", "border": border,
                         "fill": fill, "inverse_map": True},
                     layout=layout, backend=backend, atol_u8=0, rtol=1e-6)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    m = np.stack([R.random_affine(rng, 1, h, w)[0] for h, w in SIZES])
    check_op(gpuaug.warp_affine, lambda s, i: R.warp_affine(s, m[i], None, "bilinear", "reflect"), xs,
             {"matrix": m, "border": "reflect"}, varshape=True, backend=backend, rtol=1e-4)


@gpu
def test_warp_affine_gpu_device_params_stream_and_views():
    import cupy as cp

    rng = np.random.default_rng(9)
    x = random_images(rng, 6, 45, 67, 3, "uint8")
    m = R.random_affine(rng, 6, 45, 67)
    fill = rng.uniform(0, 255, 6)
    want = gpuaug.warp_affine(x, m, fill=fill)
    xd = cp.asarray(x)
    s = cp.cuda.Stream(non_blocking=True)
    out = cp.full(x.shape, 3, cp.uint8)
    got = gpuaug.warp_affine(xd, cp.asarray(m), fill=cp.asarray(fill), out=out, stream=s)
    assert got is out
    s.synchronize()
    assert np.abs(cp.asnumpy(got).astype(int) - want).max() <= 1
    # device matrices given as the inverse map, and misaligned / strided views
    inv = np.stack([np.linalg.inv(np.vstack([k, [0, 0, 1]]))[:2] for k in m])
    got = gpuaug.warp_affine(xd, cp.asarray(inv), fill=fill, inverse_map=True)
    assert np.abs(cp.asnumpy(got).astype(int) - want).max() <= 1
    # views: rows starting at odd addresses (uint8 word loads at every alignment), strided
    for sl in (np.s_[:, :, 1:], np.s_[:, 1:, :-1], np.s_[::2, :, ::2]):
        k = m[: x[sl].shape[0]]
        got = cp.asnumpy(gpuaug.warp_affine(xd[sl], k))
        assert np.abs(got.astype(int) - gpuaug.warp_affine(x[sl], k)).max() <= 1


@gpu
def test_warp_affine_gpu_large_batch():
    """The benchmark shape: 224x224x3 uint8, one bilinear matrix per sample."""
    import cupy as cp

    rng = np.random.default_rng(10)
    x = random_images(rng, 32, 224, 224, 3, "uint8")
    m = R.random_affine(rng, 32, 224, 224)
    got = cp.asnumpy(gpuaug.warp_affine(cp.asarray(x), m))
    assert np.abs(got.astype(int) - gpuaug.warp_affine(x, m)).max() <= 1


# -- the CUDA C kernels, run on the host --------------------------------------------------
# Without a GPU, NVRTC proves the CUDA C compiles but not that it computes the right thing.
# Here the kernel bodies (warp_common.cuh + interp.cuh + common.cuh) are compiled as host
# C++ against a small emulation of the CUDA built-ins they use, and every block and thread
# of a launch is run in loops, for the table-driven and the dense driver.

_SHIM = r"""
#pragma once
#include <cstdint>
#include <cstddef>
#include <cmath>
#include <cstring>
#include <cfenv>
#include <algorithm>
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(x)
#include <barrier>
struct dim3i { unsigned x, y, z; };
extern thread_local dim3i threadIdx, blockIdx;
extern dim3i blockDim, gridDim;
// A warp's 32 lanes run as 32 host threads; shuffles meet at a barrier.
struct WarpX {
  std::barrier<> bar{32};
  unsigned slot[32];
};
extern thread_local WarpX* warp_x;
inline unsigned __shfl_sync(unsigned, unsigned v, int src) {
  const int lane = (int)((threadIdx.y * blockDim.x + threadIdx.x) & 31);
  warp_x->slot[lane] = v;
  warp_x->bar.arrive_and_wait();
  const unsigned r = warp_x->slot[src & 31];
  warp_x->bar.arrive_and_wait();
  return r;
}
template <class T> inline T __ldg(const T* p) { return *p; }
struct uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned char b[8];
  std::memcpy(b, &x, 4); std::memcpy(b + 4, &y, 4);
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)b[(s >> (4 * i)) & 7] << (8 * i);
  return r;
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {
  return (unsigned)(((((uint64_t)hi) << 32) | lo) >> (sh & 31));
}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline float __fadd_rd(float a, float b) {
  std::fesetround(FE_DOWNWARD); volatile float r = a + b; std::fesetround(FE_TONEAREST); return r;
}
inline int __float2int_rd(float f) { return (int)std::floor(f); }
inline float __frcp_rn(float w) { return 1.0f / w; }
using std::min; using std::max;
"""

_HARNESS = r"""
#include <thread>
#include <vector>
#include "warp_common.cuh"
thread_local dim3i threadIdx, blockIdx;
thread_local WarpX* warp_x;
dim3i blockDim, gridDim;
using gpuaug::i64;
template <typename T, int C, int I, int B, bool P>
int go(int dense, void* a, void* b, const float* par, int Pn, int n, int h, int w, int H, int W, int gy) {
  if (dense) {
    blockDim = {256, 1, 1};
    gridDim = {(unsigned)(W + 31) / 32, (unsigned)(H + 31) / 32, (unsigned)n};
  } else {
    blockDim = {32, 8, 1};
    gridDim = {(unsigned)(W + 31) / 32, gy ? (unsigned)gy : (unsigned)(H + 7) / 8, (unsigned)n};
  }
  const unsigned nt = blockDim.x * blockDim.y;
  for (unsigned bz = 0; bz < gridDim.z; ++bz)
    for (unsigned by = 0; by < gridDim.y; ++by)
      for (unsigned bx = 0; bx < gridDim.x; ++bx)
        for (unsigned w0 = 0; w0 < nt; w0 += 32) {  // one warp: 32 lanes in lockstep at shuffles
          WarpX wx;
          std::vector<std::thread> lanes;
          for (unsigned t = w0; t < w0 + 32; ++t)
            lanes.emplace_back([&, t] {
              blockIdx = {bx, by, bz};
              threadIdx = {t % blockDim.x, t / blockDim.x, 0};
              warp_x = &wx;
              if (dense)
                gpuaug::warp::warp_dense<T, C, I, B, P, 4>((const T*)a, (T*)b, par, Pn, n, h, w, H, W);
              else
                gpuaug::warp::warp_driver<T, C, I, B, P>((const i64*)a, (const i64*)b, par, Pn, n);
            });
          for (auto& l : lanes) l.join();
        }
  return 0;
}
#define CASE(T, TC, C, I, B, P) \
  if (dt == TC && c == C && in == I && bo == B && p == P) return go<T, C, I, B, P>(dense, a, b, par, Pn, n, h, w, H, W, gy);
extern "C" __attribute__((visibility("default"))) int run(int dt, int c, int in, int bo, int p, int dense, void* a, void* b, const float* par, int Pn,
                   int n, int h, int w, int H, int W, int gy) {
  CASE(unsigned char, 0, 1, 1, 0, false) CASE(unsigned char, 0, 3, 1, 0, false) CASE(unsigned char, 0, 4, 1, 0, false)
  CASE(unsigned char, 0, 3, 0, 0, false) CASE(unsigned char, 0, 4, 0, 3, false) CASE(unsigned char, 0, 3, 1, 3, false)
  CASE(unsigned char, 0, 1, 0, 1, false) CASE(unsigned char, 0, 3, 1, 1, true) CASE(unsigned char, 0, 4, 0, 0, true)
  CASE(float, 1, 3, 1, 0, false) CASE(float, 1, 1, 0, 3, false) CASE(float, 1, 4, 1, 1, true)
  return -1;
}
"""

_HOST_CASES = [("uint8", 1, 1, "constant", False), ("uint8", 3, 1, "constant", False),
               ("uint8", 4, 1, "constant", False), ("uint8", 3, 0, "constant", False),
               ("uint8", 4, 0, "reflect", False), ("uint8", 3, 1, "reflect", False),
               ("uint8", 1, 0, "replicate", False), ("uint8", 3, 1, "replicate", True),
               ("uint8", 4, 0, "constant", True), ("float32", 3, 1, "constant", False),
               ("float32", 1, 0, "reflect", False), ("float32", 4, 1, "replicate", True)]


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    import ctypes
    import os
    import shutil
    import subprocess

    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ here to build the host emulation of the CUDA C kernels")
    from gpuaug.kernels._cuda import KERNEL_DIR

    d = tmp_path_factory.mktemp("warp_host")
    common = open(os.path.join(KERNEL_DIR, "common.cuh")).read()
    # float16 conversions are inline PTX; the host build does not exercise float16
    common = common.replace('asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));', "f = 0.f; (void)v;")
    common = common.replace('asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(v));', "h.bits = 0; (void)v;")
    (d / "common.cuh").write_text(common)
    for f in ("interp.cuh", "warp_common.cuh"):
        shutil.copy(os.path.join(KERNEL_DIR, f), d / f)
    (d / "shim.h").write_text(_SHIM)
    (d / "harness.cpp").write_text(_HARNESS)
    # hidden, non-unique symbols: other host emulations in this process define the same names
    r = subprocess.run([cxx, "-O1", "-frounding-math", "-std=c++20", "-pthread", "-shared", "-fPIC",
                        "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-fno-gnu-unique", "-Wl,-Bsymbolic",
                        "-include", "shim.h",
                        f"-I{d}", "harness.cpp", "-o", "harness.so"], cwd=d, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"the host emulation does not build here: {r.stderr[-400:]}")
    lib = ctypes.CDLL(str(d / "harness.so"))
    lib.run.argtypes = [ctypes.c_int] * 6 + [ctypes.c_void_p] * 3 + [ctypes.c_int] * 7
    return lib


def _table(views):
    t = np.empty((len(views), 6), np.int64)
    for i, v in enumerate(views):
        it = v.itemsize
        t[i] = (v.ctypes.data, v.shape[0], v.shape[1], v.strides[0] // it, v.strides[1] // it, v.strides[2] // it)
    return t


@pytest.mark.parametrize("case", _HOST_CASES, ids=lambda c: "-".join(map(str, c)))
def test_warp_cuda_c_on_host(host_kernels, case):
    """Dense, NHWC/NCHW through tables, misaligned rows + strided output, varshape with a
    short grid (rows walked by the grid stride): all against the float64 reference."""
    from gpuaug._batch import as_batch
    from gpuaug.ops import _warp

    dtype, c, interp, border, persp = case
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(_HOST_CASES.index(case))
    n, h, w, hh, ww = 3, 37, 53, 29, 61
    x = random_images(rng, n, h, w, c, dtype)
    names = ("nearest", "bilinear")
    if persp:
        m = R.random_homography(rng, n, h, w)
        inv = np.linalg.inv(m).reshape(n, 9)
        ref = lambda s, i, size: R.warp_perspective(s, m[i], size, names[interp], border, fr[i])  # noqa: E731
    else:
        m = R.random_affine(rng, n, h, w)
        inv = np.stack([np.linalg.inv(np.vstack([k, [0, 0, 1]]))[:2].reshape(6) for k in m])
        ref = lambda s, i, size: R.warp_affine(s, m[i], size, names[interp], border, fr[i])  # noqa: E731
    fill = rng.uniform(0, 255 if dtype == np.uint8 else 1, n)
    fr = R.fill_in_dtype(fill, dtype)
    params = np.ascontiguousarray(_warp.params_matrix(as_batch(x), interp, _warp.BORDERS[border], inv, fill),
                                  np.float32)
    code = (0 if dtype == np.uint8 else 1, c, interp, _warp.BORDERS[border], int(persp))

    def launch(dense, a, b, hw_in, hw_out, gy=0):
        r = host_kernels.run(*code, dense, a, b, params.ctypes.data, params.shape[1], n, *hw_in, *hw_out, gy)
        assert r == 0, "case not compiled into the host harness"

    def check(got, x_samples, sizes, what):
        for i in range(n):
            want = ref(x_samples[i].astype(np.float64), i, sizes[i])
            want = np.clip(np.floor(want + 0.5), 0, 255) if dtype == np.uint8 else want
            d = np.abs(np.asarray(got[i], np.float64) - want)
            tol = 1 if dtype == np.uint8 else 1e-4
            if interp == 0:  # float32 coordinates may pick the other pixel within ~1e-5 of x.5
                assert (d > tol).any(-1).mean() < 0.002, what
            else:
                assert d.max() <= tol, (what, d.max())

    out = np.full((n, hh, ww, c), 77, dtype)
    launch(1, x.ctypes.data, out.ctypes.data, (h, w), (hh, ww))
    check(out, x, [(hh, ww)] * n, "dense")
    out = np.full((n, 36, 64, c), 77, dtype)  # width % 4 == 0: uint8 x 3 rows stored as words
    launch(1, x.ctypes.data, out.ctypes.data, (h, w), (36, 64))
    check(out, x, [(36, 64)] * n, "dense, width 64")
    # tables: NCHW arrays seen as NHWC
    xc = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    oc = np.full((n, c, hh, ww), 77, dtype)
    ts, td = _table(list(xc.transpose(0, 2, 3, 1))), _table(list(oc.transpose(0, 2, 3, 1)))
    launch(0, ts.ctypes.data, td.ctypes.data, (0, 0), (hh, ww))
    check(oc.transpose(0, 2, 3, 1), x, [(hh, ww)] * n, "nchw")
    # tables: rows starting one pixel in (odd addresses), every other output column
    big = np.zeros((n, h, w + 1, c), dtype)
    big[:, :, 1:] = x
    obig = np.full((n, hh, 2 * ww, c), 77, dtype)
    ts, td = _table([big[i, :, 1:] for i in range(n)]), _table(list(obig[:, :, ::2]))
    launch(0, ts.ctypes.data, td.ctypes.data, (0, 0), (hh, ww))
    check(obig[:, :, ::2], x, [(hh, ww)] * n, "offset")
    # varshape, and a grid one block tall: rows walked with the grid stride
    sizes = [(37, 53), (5, 7), (1, 9)]
    xs = [np.ascontiguousarray(x[i, :a, :b]) for i, (a, b) in enumerate(sizes)]
    osz = [(a + 2, b + 3) for a, b in sizes]
    outs = [np.full(s + (c,), 77, dtype) for s in osz]
    ts, td = _table(xs), _table(outs)
    launch(0, ts.ctypes.data, td.ctypes.data, (0, 0), (max(s[0] for s in osz), max(s[1] for s in osz)), gy=1)
    check(outs, xs, osz, "varshape")
