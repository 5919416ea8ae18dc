"""The intensity ops' CUDA C kernels (generic and fast paths) compiled for the host with
g++ and a small CUDA emulation (tests/cuda_host_emu.h), run on tiny batches and compared
with the NumPy references: coverage of the CUDA C logic on machines without a GPU. The
launch geometry comes from the same Python helpers the GPU path uses."""
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import ref_intensity as R
from helpers import quantize

KDIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels")
HERE = os.path.dirname(os.path.abspath(__file__))

WRAPPERS = r'''
#include "gamma.cu"
#include "invert.cu"
#include "solarize.cu"
#include "posterize.cu"
#include "equalize.cu"
#include "crop_mirror_normalize.cu"
#include "autocontrast.cu"
using gpuaug::i64;
#define G dim3{(unsigned)gx, (unsigned)gy, (unsigned)gz}
#define B dim3{(unsigned)bx, (unsigned)by, (unsigned)bz}
#define LA int gx, int gy, int gz, int bx, int by, int bz
#define EXPORT __attribute__((visibility("default")))
extern "C" {
#define VEC(NAME, K) EXPORT void NAME(LA, const void* s, void* d, int nvec, const float* p, int P, int n) { \
  launch(G, B, [=] { K((const uint4*)s, (uint4*)d, nvec, p, P, n); }); }
VEC(gamma_u8, gpuaug_gamma_u8) VEC(invert_u8, gpuaug_invert_u8) VEC(solarize_u8, gpuaug_solarize_u8)
VEC(posterize_u8, gpuaug_posterize_u8)
VEC(equalize_u8_1, gpuaug_equalize_u8<1>) VEC(equalize_u8_3, gpuaug_equalize_u8<3>) VEC(equalize_u8_4, gpuaug_equalize_u8<4>)
#define HIST(NAME, C) EXPORT void NAME(LA, const void* s, int nvec, unsigned* h, int n) { \
  launch(G, B, [=] { gpuaug_equalize_hist_u8<C>((const uint4*)s, nvec, h, n); }); }
HIST(hist_u8_1, 1) HIST(hist_u8_3, 3) HIST(hist_u8_4, 4)
#define GHIST(NAME, T, C) EXPORT void NAME(LA, const i64* t, unsigned* h, int n) { \
  launch(G, B, [=] { gpuaug_equalize_hist<T, C>(t, h, n); }); }
GHIST(ghist_u8_3, unsigned char, 3) GHIST(ghist_f32_3, float, 3)
EXPORT void eq_lut(LA, const unsigned* h, float* lut, int P, int C, int f) {
  launch(G, B, [=] { gpuaug_equalize_lut(h, lut, P, C, f); }); }
EXPORT void eq_lut_parts(LA, const unsigned* h, int parts, float* lut, int P, int C, int f) {
  launch(G, B, [=] { gpuaug_equalize_lut_parts(h, parts, lut, P, C, f); }); }
VEC(ac_u8_1, gpuaug_autocontrast_u8<1>) VEC(ac_u8_3, gpuaug_autocontrast_u8<3>) VEC(ac_u8_4, gpuaug_autocontrast_u8<4>)
#define ACP(NAME, C) EXPORT void NAME(LA, const void* s, int nvec, float* parts, int n) { \
  launch(G, B, [=] { gpuaug_autocontrast_parts_u8<C>((const uint4*)s, nvec, parts, n); }); }
ACP(ac_parts_u8_1, 1) ACP(ac_parts_u8_3, 3) ACP(ac_parts_u8_4, 4)
#define ACR(NAME, C) EXPORT void NAME(LA, const float* parts, int np, float* rows, int P, int n) { \
  launch(G, B, [=] { gpuaug_autocontrast_rows<unsigned char, C>(parts, np, rows, P, n); }); }
ACR(ac_rows_1, 1) ACR(ac_rows_3, 3) ACR(ac_rows_4, 4)
#define ACG(NAME, T, C) EXPORT void NAME(LA, const i64* t, float* parts, int np, int n) { \
  launch(G, B, [=] { gpuaug_autocontrast_parts<T, C>(t, parts, np, n); }); }
ACG(ac_gparts_u8_3, unsigned char, 3) ACG(ac_gparts_f32_4, float, 4)
#define GEN(NAME, K) EXPORT void NAME(LA, const i64* s, const i64* d, const float* p, int P, int n) { \
  launch(G, B, [=] { K(s, d, p, P, n); }); }
GEN(gamma_g_u8_3, (gpuaug_gamma<unsigned char, 3>)) GEN(gamma_g_f32_3, (gpuaug_gamma<float, 3>))
GEN(posterize_g_u8_3, (gpuaug_posterize<unsigned char, 3>)) GEN(posterize_g_f32_3, (gpuaug_posterize<float, 3>))
GEN(solarize_g_u8_3, (gpuaug_solarize<unsigned char, 3>)) GEN(invert_g_f32_3, (gpuaug_invert<float, 3>))
GEN(eq_g_u8_3, (gpuaug_equalize<unsigned char, 3>)) GEN(eq_g_f32_3, (gpuaug_equalize<float, 3>))
GEN(ac_g_1, (gpuaug_autocontrast<unsigned char, 1>)) GEN(ac_g_3, (gpuaug_autocontrast<unsigned char, 3>))
GEN(ac_g_4, (gpuaug_autocontrast<unsigned char, 4>))
GEN(cmn_g_3_3, (gpuaug_crop_mirror_normalize<unsigned char, 3, float, 3>))
GEN(cmn_g_3_4, (gpuaug_crop_mirror_normalize<unsigned char, 3, float, 4>))
GEN(cmn_v_3_3_p, (gpuaug_crop_mirror_normalize_vec<unsigned char, 3, float, 3, true>))
GEN(cmn_v_3_4_p, (gpuaug_crop_mirror_normalize_vec<unsigned char, 3, float, 4, true>))
GEN(cmn_v_3_3_i, (gpuaug_crop_mirror_normalize_vec<unsigned char, 3, float, 3, false>))
GEN(cmn_v_3_4_i, (gpuaug_crop_mirror_normalize_vec<unsigned char, 3, float, 4, false>))
GEN(cmn_v_1_1_i, (gpuaug_crop_mirror_normalize_vec<unsigned char, 1, float, 1, false>))
GEN(cmn_v_4_4_p, (gpuaug_crop_mirror_normalize_vec<unsigned char, 4, float, 4, true>))
GEN(cmn_v_f_3_3_p, (gpuaug_crop_mirror_normalize_vec<float, 3, float, 3, true>))
GEN(cmn_v_3_3_p_r1, (gpuaug_crop_mirror_normalize_vec<unsigned char, 3, float, 3, true, 1>))
GEN(cmn_v_3_4_p_r1, (gpuaug_crop_mirror_normalize_vec<unsigned char, 3, float, 4, true, 1>))
GEN(cmn_v_3_3_i_r1, (gpuaug_crop_mirror_normalize_vec<unsigned char, 3, float, 3, false, 1>))
GEN(cmn_v_3_4_i_r1, (gpuaug_crop_mirror_normalize_vec<unsigned char, 3, float, 4, false, 1>))
GEN(cmn_v_1_1_i_r1, (gpuaug_crop_mirror_normalize_vec<unsigned char, 1, float, 1, false, 1>))
GEN(cmn_v_4_4_p_r1, (gpuaug_crop_mirror_normalize_vec<unsigned char, 4, float, 4, true, 1>))
GEN(cmn_v_f_3_3_p_r1, (gpuaug_crop_mirror_normalize_vec<float, 3, float, 3, true, 1>))
}
'''


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed: the host emulation of the CUDA C kernels needs it")
    d = tmp_path_factory.mktemp("cuda_host")
    src = d / "kernels.cpp"
    src.write_text(WRAPPERS)
    so = d / "libk.so"
    # Hidden symbols and no GNU unique symbols: other tests load host-emulation libraries
    # with the same C++ names into this process.
    r = subprocess.run([gxx, "-std=c++20", "-O1", "-fPIC", "-shared", "-fvisibility=hidden",
                        "-fvisibility-inlines-hidden", "-fno-gnu-unique", f"-I{KDIR}", "-include",
                        os.path.join(HERE, "cuda_host_emu.h"), str(src), "-o", str(so), "-lpthread"],
                       capture_output=True, text=True)
    if r.returncode != 0 and "c++20" in r.stderr:
        pytest.skip(f"this g++ lacks C++20 (std::barrier): {r.stderr[:200]}")
    assert r.returncode == 0, r.stderr[-3000:]
    return ctypes.CDLL(str(so))


I = ctypes.c_int


def _p(a):
    return ctypes.c_void_p(a.ctypes.data)


def _close(got, want, tol=0.0):
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert not np.isnan(d).any(), "unwritten (NaN) outputs"
    assert d.max() <= tol, d.max()


def _vec(lib, fn, x, params):
    from gpuaug.ops._intensity import VEC_THREADS, vec_grid

    n, nvec = x.shape[0], x[0].size // 16
    out = np.full_like(x, 13)
    g = vec_grid(n, nvec)
    p = np.ascontiguousarray(params, np.float32)
    getattr(lib, fn)(I(g[0]), I(g[1]), I(1), I(VEC_THREADS), I(1), I(1), _p(x), _p(out), I(nvec), _p(p),
                     I(p.shape[1]), I(n))
    return out


def _table(views):
    t = np.zeros((len(views), 6), np.int64)
    for i, v in enumerate(views):
        it = v.itemsize
        t[i] = (v.ctypes.data, v.shape[0], v.shape[1], v.strides[0] // it, v.strides[1] // it, v.strides[2] // it)
    return t


def _gen(lib, fn, src_views, dst_views, params, vec=False, rows=4):
    """``rows``: rows per thread of the vector kernels (the ROWS template argument: 4, the
    default, or 1 on the 4x taller grid gpuaug launches for small batches)."""
    st, dt = _table(src_views), _table(dst_views)
    p = np.ascontiguousarray(params, np.float32)
    n = len(src_views)
    hmax, wmax = int(dt[:, 1].max()), int(dt[:, 2].max())
    grid = (-(-wmax // 128), -(-hmax // (8 * rows)), n) if vec else (-(-wmax // 32), -(-hmax // 8), n)
    getattr(lib, fn)(I(grid[0]), I(grid[1]), I(grid[2]), I(32), I(8), I(1), _p(st), _p(dt), _p(p), I(p.shape[1]),
                     I(n))


@pytest.mark.parametrize("h, w, c", [(16, 16, 3), (8, 8, 4), (4, 4, 1)])
def test_u8_fast_paths_host(lib, h, w, c):
    rng = np.random.default_rng(0)
    n = 5
    x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    g, k = rng.uniform(0.3, 3, n), rng.uniform(0.5, 1.5, n)
    out = _vec(lib, "gamma_u8", x, np.stack([g, k, np.full(n, 255.0)], 1))
    _close(out, quantize(np.stack([R.gamma(x[i].astype(float), g[i], k[i], 255) for i in range(n)]), np.uint8), 1)
    _close(_vec(lib, "invert_u8", x, np.full((n, 1), 255.0)), 255 - x)
    t = np.array([0, 255, 127.5, 100, 256.0])
    _close(_vec(lib, "solarize_u8", x, np.stack([t, np.full(n, 255.0)], 1)),
           np.stack([R.solarize(x[i].astype(float), t[i], 255) for i in range(n)]))
    b = np.array([1, 3, 5, 8, 2])
    _close(_vec(lib, "posterize_u8", x, np.stack([b, np.zeros(n)], 1)),
           np.stack([R.posterize(x[i].astype(float), b[i], True) for i in range(n)]))


@pytest.mark.parametrize("h, w, c", [(16, 16, 3), (8, 8, 4), (16, 32, 1)])
def test_equalize_fast_path_host(lib, h, w, c):
    from gpuaug.ops._intensity import VEC_THREADS, vec_grid

    rng = np.random.default_rng(1)
    n = 4
    x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    x[0] = (x[0] // 64) * 40 + 30
    x[1] = 77
    x[2] = (x[2].astype(float) ** 2 / 255).astype(np.uint8)
    nvec = x[0].size // 16
    g = vec_grid(n, nvec)
    parts = g[0] + 1  # a block past the last vectors too: its partial histogram is zeros
    hist = np.full((n, parts, c, 256), 0xDEADBEEF, np.uint32)  # every partial bin is written
    getattr(lib, f"hist_u8_{c}")(I(parts), I(g[1]), I(1), I(VEC_THREADS), I(1), I(1), _p(x), I(nvec), _p(hist), I(n))
    want = np.stack([[np.bincount(x[i, ..., j].ravel(), minlength=256) for j in range(c)] for i in range(n)])
    _close(hist.sum(axis=1, dtype=np.int64), want)
    lut = np.full((n, c * 256 + 1), np.nan, np.float32)
    lib.eq_lut_parts(I(n * c), I(1), I(1), I(256), I(1), I(1), _p(hist), I(parts), _p(lut), I(c * 256 + 1), I(c), I(0))
    _close(lut[:, :-1].reshape(n, c, 256), np.stack([[R.equalize_table(want[i, j]) for j in range(c)]
                                                     for i in range(n)]))
    out = _vec(lib, f"equalize_u8_{c}", x, lut)
    _close(out, np.stack([R.equalize(x[i].astype(float), True) for i in range(n)]))


def test_generic_kernels_host(lib):
    rng = np.random.default_rng(2)
    n, h, w = 3, 13, 11
    x = rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    xf = rng.random((n, h, w, 3)).astype(np.float32)
    for fn, xx, row, ref in [
        ("gamma_g_u8_3", x, [0.5, 1.2, 255], lambda s: R.gamma(s, 0.5, 1.2, 255)),
        ("gamma_g_f32_3", xf, [2.0, 0.9, 1], lambda s: R.gamma(s, 2.0, 0.9, 1)),
        ("posterize_g_u8_3", x, [3, 0], lambda s: R.posterize(s, 3, True)),
        ("posterize_g_f32_3", xf, [3, 1], lambda s: R.posterize(s, 3, False)),
        ("solarize_g_u8_3", x, [127.5, 255], lambda s: R.solarize(s, 127.5, 255)),
        ("invert_g_f32_3", xf, [1.0], lambda s: R.invert(s, 1)),
    ]:
        o = np.full(xx.shape, 13, xx.dtype)
        _gen(lib, fn, list(xx), list(o), np.stack([row] * n))
        want = np.stack([ref(s.astype(float)) for s in xx])
        _close(o, quantize(want, xx.dtype) if xx.dtype == np.uint8 else want, 1 if xx.dtype == np.uint8 else 1e-6)


@pytest.mark.parametrize("name, f", [("u8", 0), ("f32", 1)])
def test_equalize_generic_host(lib, name, f):
    """Generic histogram, table and apply kernels, through NCHW (strided) views."""
    rng = np.random.default_rng(3)
    n, h, w = 3, 40, 11
    xx = rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8) if f == 0 else rng.random((n, h, w, 3)).astype(np.float32)
    xx[0] = xx[0] // 2 if f == 0 else xx[0] ** 2
    nchw = np.ascontiguousarray(xx.transpose(0, 3, 1, 2))
    views = [v.transpose(1, 2, 0) for v in nchw]
    hist = np.zeros((n, 3, 256), np.uint32)
    t = _table(views)
    getattr(lib, f"ghist_{name}_3")(I(-(-w // 32)), I(-(-h // 8)), I(n), I(32), I(8), I(1), _p(t), _p(hist), I(n))
    lut = np.full((n, 3 * 256 + 1), np.nan, np.float32)
    lib.eq_lut(I(n * 3), I(1), I(1), I(256), I(1), I(1), _p(hist), _p(lut), I(3 * 256 + 1), I(3), I(f))
    o = np.full(nchw.shape, 13, xx.dtype)
    _gen(lib, f"eq_g_{name}_3", views, [v.transpose(1, 2, 0) for v in o], lut)
    want = np.stack([R.equalize(s.astype(float), f == 0) for s in xx])
    _close(o.transpose(0, 2, 3, 1), want, 0 if f == 0 else 1e-6)


@pytest.mark.parametrize("shape, crop", [((37, 53), (20, 32)), ((16, 24), (16, 24))])
@pytest.mark.parametrize("planar", [True, False])
def test_crop_mirror_normalize_host(lib, shape, crop, planar):
    rng = np.random.default_rng(4)
    n = 4
    cases = [(3, 3, ["cmn_g_3_3", f"cmn_v_3_3_{'p' if planar else 'i'}"]),
             (3, 4, ["cmn_g_3_4", f"cmn_v_3_4_{'p' if planar else 'i'}"]),
             (1, 1, ["cmn_v_1_1_i"]), (4, 4, ["cmn_v_4_4_p"])]
    for c, co, fns in cases:
        for dtype in ("uint8", "float32"):
            x = (rng.integers(0, 256, (n,) + shape + (c,), dtype=np.uint8) if dtype == "uint8"
                 else rng.random((n,) + shape + (c,)).astype(np.float32))
            if dtype == "float32":
                if (c, co) != (3, 3):
                    continue
                fns = [f"cmn_v_f_3_3_p"]
            pos = rng.random((n, 2))
            pos[0], pos[1] = (0, 1), (0.5, 0.5)
            mir = (rng.random(n) < 0.5).astype(float)
            mir[0], mir[1] = 1, 0
            mean, std = rng.uniform(0, 255, (n, c)), rng.uniform(20, 255, (n, c))
            params = np.concatenate([pos, mir[:, None], np.tile(crop, (n, 1)), mean, std], 1)
            want = np.stack([R.crop_mirror_normalize(x[i].astype(float), crop, pos[i], mir[i], mean[i], std[i],
                                                     co == 4) for i in range(n)])
            for fn in fns:
                for rows in ((4, 1) if "_v_" in fn else (4,)):
                    pl = planar if "_v_" not in fn else fn.endswith("_p")
                    out = np.full((n, co) + crop if pl else (n,) + crop + (co,), np.nan, np.float32)
                    views = [v.transpose(1, 2, 0) for v in out] if pl else list(out)
                    _gen(lib, fn + ("_r1" if rows == 1 else ""), list(x), views, params, vec="_v_" in fn, rows=rows)
                    _close(out.transpose(0, 2, 3, 1) if pl else out, want, 1e-4)


@pytest.mark.parametrize("h, w, c", [(16, 16, 3), (8, 8, 4), (16, 32, 1), (4, 12, 3)])
def test_autocontrast_fast_path_host(lib, h, w, c):
    """The dense uint8 kernels: gpuaug_autocontrast_parts_u8's parts give each sample's channel
    minima and maxima (a block past the last units too: identities), and gpuaug_autocontrast_u8,
    which combines them itself, writes the bytes the generic map writes from step 1b's rows."""
    from gpuaug.ops._intensity import VEC_THREADS
    from test_autocontrast import _ref

    rng = np.random.default_rng(2)
    n = 5
    x = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    x[0] = x[0] // 4 + 60          # narrow range: stretched
    x[1] = 77                      # flat image: left as it is
    x[2, ..., 0] = 9               # one flat channel
    x[3] = np.where(x[3] > 128, 200, 50).astype(np.uint8)  # two levels
    nvec = x[0].size // 16
    unit = 3 if c == 3 else 1
    assert nvec % unit == 0
    parts_n = min(nvec // unit + 1, 9)  # up to one unit a block, and the last blocks with none
    parts = np.full((n, parts_n, 2 * c), np.nan, np.float32)  # every part is written
    getattr(lib, f"ac_parts_u8_{c}")(I(parts_n), I(n), I(1), I(VEC_THREADS), I(1), I(1), _p(x), I(nvec),
                                     _p(parts), I(n))
    assert not np.isnan(parts).any()
    _close(parts[:, :, :c].min(axis=1), x.reshape(n, -1, c).min(axis=1))
    _close(parts[:, :, c:].max(axis=1), x.reshape(n, -1, c).max(axis=1))
    if nvec // unit < parts_n:
        _close(parts[:, -1], np.array([255.0] * c + [0.0] * c)[None].repeat(n, 0))  # the empty block
    out = _vec(lib, f"ac_u8_{c}", x, parts.reshape(n, -1))
    rows = np.full((n, 2 * c + 1), np.nan, np.float32)
    getattr(lib, f"ac_rows_{c}")(I(1), I(1), I(1), I(128), I(1), I(1), _p(parts), I(parts_n), _p(rows),
                                 I(2 * c + 1), I(n))
    want = np.full_like(x, 13)
    _gen(lib, f"ac_g_{c}", list(x), list(want), rows)
    np.testing.assert_array_equal(out, want)  # bit for bit the generic path's bytes
    ref = np.stack([_ref(x[i].astype(np.float64), True) for i in range(n)])
    _close(out, np.floor(ref + 0.5), 1)


@pytest.mark.parametrize("fn, dtype, c", [("ac_gparts_u8_3", np.uint8, 3), ("ac_gparts_f32_4", np.float32, 4)])
def test_autocontrast_generic_parts_host(lib, fn, dtype, c):
    """gpuaug_autocontrast_parts (any batch, through the descriptor tables): every block writes
    its part, and the parts give each sample's channel minima and maxima (strided views)."""
    rng = np.random.default_rng(4)
    big = rng.integers(0, 256, (3, 9, 14, c + 1)).astype(dtype)
    if dtype == np.float32:
        big /= 255
    views = list(big[:, :, 1:13, :c])  # 12 pixels a row, pixels c + 1 elements apart
    nparts = 5  # 108 pixels: 22 a block, the last block 20
    parts = np.full((3, nparts, 2 * c), np.nan, np.float32)
    getattr(lib, fn)(I(nparts), I(3), I(1), I(256), I(1), I(1), _p(_table(views)), _p(parts), I(nparts), I(3))
    want_lo = np.stack([v.reshape(-1, c).min(axis=0) for v in views])
    want_hi = np.stack([v.reshape(-1, c).max(axis=0) for v in views])
    _close(parts[:, :, :c].min(axis=1), want_lo)
    _close(parts[:, :, c:].max(axis=1), want_hi)
