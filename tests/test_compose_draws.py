"""Compose's device draws (draws="device"): the Philox twin, the draw contract, the CUDA C draw
kernel (kernels/fused_draw.cu) run on the host against the twin, and on the GPU the device
draws, the fused output and CUDA graph replay.

The kernel runs here as host C++ (g++, the CUDA built-ins it uses emulated, as
tests/cuda_emu.py does for other kernels): its drawn values must equal the NumPy twin's bit for
bit, its rows the host path's (gpuaug.policy._fused.build from the same values) to float32
rounding.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import gpuaug
from gpuaug import random as R
from gpuaug._batch import as_batch
from gpuaug.policy import _draw as D
from gpuaug.policy import _fused as F

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


# ------------------------------------------------------------------------------ Philox twin
def test_philox_known_answers():
    """Random123's known-answer vectors for Philox4x32-10."""
    cases = [((0, 0, 0, 0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 6, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for args, want in cases:
        assert tuple(int(w) for w in R.philox4x32_10(*args)) == want


def test_uniforms_range_distribution_and_determinism():
    key = R.philox_key(1)
    u = R.philox_uniforms(key, 3, np.arange(4000), 5, 6)
    assert u.shape == (4000, 6) and u.dtype == np.float64
    assert ((u >= 0) & (u < 1)).all()
    # uniform: mean 1/2, variance 1/12, deciles within a few standard errors
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    counts = np.histogram(u, bins=10, range=(0, 1))[0]
    assert np.all(np.abs(counts - u.size / 10) < 5 * np.sqrt(u.size / 10))
    # 53-bit values: multiples of 2**-53, and not all multiples of 2**-32
    assert np.all(u * 2.0 ** 53 == np.floor(u * 2.0 ** 53))
    assert np.any(u * 2.0 ** 32 != np.floor(u * 2.0 ** 32))
    # deterministic by (key, counter), and each of key / counter / stream changes everything
    np.testing.assert_array_equal(u, R.philox_uniforms(R.philox_key(1), 3, np.arange(4000), 5, 6))
    for other in (R.philox_uniforms(R.philox_key(2), 3, np.arange(4000), 5, 6),
                  R.philox_uniforms(key, 4, np.arange(4000), 5, 6),
                  R.philox_uniforms(key, 3 + (1 << 32), np.arange(4000), 5, 6),
                  R.philox_uniforms(key, 3, np.arange(4000), 6, 6)):
        assert np.mean(other == u) < 1e-3


def test_uniforms_independent_across_samples_and_columns():
    u = R.philox_uniforms(R.philox_key(9), 0, np.arange(5000), 0, 4)
    c = np.corrcoef(np.concatenate([u[:-1], u[1:]], axis=1).T)  # columns, and neighbouring samples
    off = c - np.eye(len(c))
    assert np.abs(off).max() < 0.06
    # a sample's draws depend on its index only: any subset, any order, any batch size
    idx = np.array([4999, 7, 123, 0])
    np.testing.assert_array_equal(R.philox_uniforms(R.philox_key(9), 0, idx, 0, 4), u[idx])


def test_philox_key():
    assert R.philox_key(3) == R.philox_key(3) != R.philox_key(4)
    assert R.philox_key(np.random.SeedSequence(3)) == R.philox_key(3)
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    assert R.philox_key(g1) == R.philox_key(g2) and R.philox_key(g1) != R.philox_key(np.random.default_rng(5))
    assert all(0 <= k < 2 ** 32 for k in R.philox_key(None))
    with pytest.raises(ValueError, match="seed: got -1"):
        R.philox_key(-1)
    with pytest.raises(TypeError, match="seed: got 1.5"):
        R.philox_key(1.5)


# ------------------------------------------------------------------------------ the twin's draws
def _all_transforms():
    return [gpuaug.RandomHorizontalFlip(0.3), gpuaug.RandomVerticalFlip(0.7), gpuaug.RandomRotation((-20, 40)),
            gpuaug.RandomAffine(15, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(-5, 5, -3, 3)),
            gpuaug.RandomResizedCrop(12, scale=(0.2, 1.0)), gpuaug.RandomCrop(10, padding=2),
            gpuaug.Resize(11), gpuaug.CenterCrop(9), gpuaug.RandomPerspective(0.6, p=0.7),
            gpuaug.ColorJitter(0.4, 0.3, 0.2, 0.1, p=0.8), gpuaug.RandomGrayscale(0.4),
            gpuaug.RandomChannelPermutation(), gpuaug.RandomGamma((70, 130), p=0.6), gpuaug.RandomSolarize(100, p=0.5),
            gpuaug.RandomPosterize(3, p=0.5), gpuaug.RandomInvert(0.2), gpuaug.Normalize(*IMAGENET)]


def _plan(policy, x, layout="NHWC"):
    return policy._device_plan(as_batch(x, layout), "draws")


def test_twin_draws_follow_the_transforms_ranges():
    ts = _all_transforms()
    policy = gpuaug.Compose(ts, draws="device")
    n = 4000
    x = np.zeros((1, 20, 24, 3), np.uint8)
    plan = _plan(policy, x)
    vals = D.twin_values(plan, R.philox_key(0), 0, n)
    sizes = np.broadcast_to(np.array([20, 24]), (n, 2))
    p = D.to_params(plan, vals, sizes)
    # the host samplers' keys and dtypes
    host = gpuaug.Compose(ts).sample(np.broadcast_to(np.array([[20, 24]]), (3, 2)).copy(), seed=0)
    for i, (d, h) in enumerate(zip(p, host.values)):
        assert sorted(d) == sorted(h), ts[i]
        for k in d:
            assert d[k].dtype == h[k].dtype and d[k].shape[1:] == h[k].shape[1:], (ts[i], k)
    se = 4 / np.sqrt(n)
    assert abs(p[0]["apply"].mean() - 0.3) < se and abs(p[1]["apply"].mean() - 0.7) < se
    a = p[2]["angle"]
    assert a.min() >= -20 and a.max() < 40 and abs(a.mean() - 10) < 1.5
    af = p[3]
    assert np.abs(af["angle"]).max() <= 15 and np.all(af["tx"] == np.rint(af["tx"]))
    assert np.abs(af["tx"]).max() <= round(0.1 * 24) and np.abs(af["ty"]).max() <= round(0.2 * 20)
    assert af["scale"].min() >= 0.8 and af["scale"].max() < 1.2
    assert np.abs(af["shear_x"]).max() <= 5 and np.abs(af["shear_y"]).max() <= 3 and af["shear_y"].std() > 1
    # RandomResizedCrop on the 20 x 24 image (its output 12 x 12 feeds RandomCrop)
    top, left, bh, bw = p[4]["boxes"].T
    assert np.all((top >= 0) & (left >= 0) & (top + bh <= 20) & (left + bw <= 24) & (bh > 0) & (bw > 0))
    area = bh * bw / (20 * 24)
    assert area.min() >= 0.15 and area.max() <= 1.0 and len(np.unique(p[4]["boxes"], axis=0)) > n // 4
    assert np.all(np.abs(np.log(bw / bh)) <= np.log(4 / 3) + 0.25)
    # RandomCrop(10, padding 2) of a 12 x 12 image: corners in [-2, 4]
    cr = p[5]["corner"]
    assert cr.min() == -2 and cr.max() == 4 and len(np.unique(cr[:, 0])) == 7
    # RandomPerspective(0.6) of the 9 x 9 crop: corners moved inwards by up to 2 whole pixels
    pc, on = p[8]["corners"], p[8]["apply"]
    assert pc.shape == (n, 4, 2) and abs(on.mean() - 0.7) < se and np.all(pc == np.rint(pc))
    lo = np.array([[0, 0], [6, 0], [6, 6], [0, 6]])
    assert np.all((pc >= lo) & (pc <= lo + 2)) and np.all(pc.min(axis=0) == lo) and np.all(pc.max(axis=0) == lo + 2)
    j = p[9]
    on = j["apply"]
    assert abs(on.mean() - 0.8) < se
    assert np.all(j["brightness"][~on] == 1) and np.all(j["hue"][~on] == 0)
    assert j["brightness"][on].min() >= 0.6 and j["brightness"][on].max() < 1.4
    assert np.abs(j["hue"]).max() <= 0.1 and j["saturation"][on].min() >= 0.8
    assert abs(p[10]["apply"].mean() - 0.4) < se
    perm = p[11]["permutation"]
    assert np.all(np.sort(perm, axis=1) == [0, 1, 2])
    assert len(np.unique(perm, axis=0)) == 6
    assert np.all(np.abs(np.unique(perm, axis=0, return_counts=True)[1] - n / 6) < 4 * np.sqrt(n / 6))
    g = p[12]
    assert np.all(g["gamma"][~g["apply"]] == 1) and g["gamma"][g["apply"]].min() >= 0.7
    assert g["gamma"].max() < 1.3
    for k, prob in ((13, 0.5), (14, 0.5), (15, 0.2)):
        assert abs(p[k]["apply"].mean() - prob) < se
    assert p[16] == {}


def test_twin_draws_independent_of_batch_and_transform_streams():
    policy = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomHorizontalFlip()], draws="device")
    plan = _plan(policy, np.zeros((1, 8, 8, 3), np.uint8))
    v = D.twin_values(plan, R.philox_key(4), 2, 3000)
    assert np.mean(v[:, 0] == v[:, 1]) < 0.55  # two transforms: two streams
    np.testing.assert_array_equal(D.twin_values(plan, R.philox_key(4), 2, 10), v[:10])
    np.testing.assert_array_equal(D.twin_values(plan, R.philox_key(4), 2, [2999, 5]), v[[2999, 5]])


# ------------------------------------------------------------------------------ the contract
def _images(n=4, h=16, w=18, c=3, dtype=np.uint8, seed=0):
    x = np.random.default_rng(seed).integers(0, 256, (n, h, w, c), dtype=np.uint8)
    return x if dtype == np.uint8 else (x / 255).astype(dtype)


def _policy(draws="device", seed=None):
    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(10, translate=(0.1, 0.1)),
                           gpuaug.ColorJitter(0.3, 0.3, 0.3, 0.05), gpuaug.Normalize(*IMAGENET)],
                          seed=seed, draws=draws)


def _same(a, b):
    assert a.n == b.n and np.array_equal(a.sizes, b.sizes)
    for da, db in zip(a.values, b.values):
        assert sorted(da) == sorted(db)
        for k in da:
            np.testing.assert_array_equal(da[k], db[k])


def test_draw_contract_seed_counter_and_sample():
    x = _images()
    pol = _policy(seed=7)
    ya = pol(x, seed=3)
    pa = pol.last_params
    _same(pa, pol.sample(x, seed=3))
    np.testing.assert_array_equal(pol(x, seed=3), ya)
    # a fresh policy: the same seed, the same parameters and output
    np.testing.assert_array_equal(_policy()(x, seed=3), ya)
    # without a seed: the policy's key and counter; sample() predicts the next call
    nxt = pol.sample(x)
    y0 = pol(x)
    _same(pol.last_params, nxt)
    y1 = pol(x)
    assert pol._counter == 2 and not np.array_equal(y0, y1)
    # the same policy seed: the same sequence of calls
    other = _policy(seed=7)
    np.testing.assert_array_equal(other(x), y0)
    np.testing.assert_array_equal(other(x), y1)
    assert not np.array_equal(_policy(seed=8)(x), y0)
    # the twin's values, through the plan
    plan = _plan(pol, x)
    np.testing.assert_array_equal(D.twin_values(plan, R.philox_key(3), 0, 4)[:, 0] != 0, pa[0]["apply"])
    # replay and params from the device draws replay through the host path
    np.testing.assert_array_equal(pol(x, params=pa), ya)
    np.testing.assert_array_equal(pol.replay(x, pa), ya)


def test_draws_device_per_sample_not_per_batch():
    """Sample i's parameters depend on (seed, counter, i), not on the batch size."""
    pol = _policy()
    x = _images(6)
    pol(x, seed=5)
    big = pol.last_params
    pol(x[:2], seed=5)
    small = pol.last_params
    for db, ds in zip(big.values, small.values):
        for k in db:
            np.testing.assert_array_equal(db[k][:2], ds[k])


def test_draws_auto_is_the_default_and_draws_on_the_host_for_numpy_input():
    x = _images()
    host = gpuaug.Compose(_policy().transforms, draws="host")
    auto = gpuaug.Compose(_policy().transforms)
    assert auto.draws == "auto" and "draws" not in repr(auto) and repr(host).endswith("draws='host')")
    np.testing.assert_array_equal(host(x, seed=2), auto(x, seed=2))
    _same(host.last_params, auto.last_params)
    _same(auto.last_params, auto.sample(x, seed=2))


def test_draws_device_errors_name_the_argument():
    x = _images()
    with pytest.raises(ValueError, match="draws: got 'gpu'"):
        gpuaug.Compose([gpuaug.RandomHorizontalFlip()], draws="gpu")
    with pytest.raises(ValueError, match="draws: transforms: GaussianBlur cannot be drawn"):
        gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.GaussianBlur(3)], draws="device")(x)
    with pytest.raises(ValueError, match="draws: transforms: RandAugment, RandomErasing cannot be drawn"):
        gpuaug.Compose([gpuaug.RandomErasing(), gpuaug.RandAugment()], draws="device")(x)
    with pytest.raises(ValueError, match="draws: device draws need a batch of one image size"):
        gpuaug.Compose([gpuaug.RandomHorizontalFlip()], draws="device")([x[0], x[1, :8]])
    with pytest.raises(ValueError, match="draws: targets"):
        gpuaug.Compose([gpuaug.RandomHorizontalFlip()], draws="device")(x, boxes=np.zeros((4, 1, 4)))
    # "auto" falls back to host draws for all of those
    gpuaug.Compose([gpuaug.RandomPerspective(), gpuaug.GaussianBlur(3)], draws="auto")(x, seed=0)
    with pytest.raises(ValueError, match="capture: transforms: GaussianBlur cannot be drawn"):
        gpuaug.Compose([gpuaug.GaussianBlur(3)])._device_plan(as_batch(x), "capture")


def test_pickle_with_device_draws():
    import pickle

    pol = _policy(seed=1)
    x = _images()
    pol(x)
    q = pickle.loads(pickle.dumps(pol))
    np.testing.assert_array_equal(q(x), pol(x))  # the key and counter travel
    _same(q.last_params, pol.last_params)


# ------------------------------------------------------------------------------ the CUDA C draw, on the host
_EXTRA = r"""
#define __launch_bounds__(...)
#define __host__
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline float __double2float_rn(double a) { return (float)a; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline void __threadfence() {}
static std::mutex emu_atomic;
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  std::lock_guard<std::mutex> g(emu_atomic); const unsigned long long o = *p; *p = o + v; return o;
}
static inline int __clz(unsigned v) { return v ? __builtin_clz(v) : 32; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fadd_rd(float a, float b) {
  const double e = (double)a + (double)b; float r = (float)e;
  return (double)r > e ? std::nextafter(r, -INFINITY) : r;
}
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
static inline float __int2float_rn(int v) { return (float)v; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
"""


@pytest.fixture(scope="module")
def draw_kernel(tmp_path_factory):
    import cuda_emu

    if cuda_emu.available() or shutil.which("g++") is None:
        pytest.skip("no g++ here to build the host emulation of kernels/fused_draw.cu")
    d = tmp_path_factory.mktemp("draw_emu")
    for f in ("common.cuh", "rowvec.cuh", "philox.cuh", "fused_draw.cu"):
        src = open(os.path.join(cuda_emu.KERNEL_DIR, f)).read()
        for a, b in cuda_emu._ASM.items():
            src = src.replace(a, b)
        (d / f).write_text(src)
    (d / "emu.cpp").write_text(
        "#include <mutex>\n" + cuda_emu.PRELUDE + _EXTRA + '#include "common.cuh"\n#include "fused_draw.cu"\n'
        'extern "C" __attribute__((visibility("default"))) void draw(const unsigned* g, const unsigned* b, '
        "const uint64_t* s) { emu_run(&gpuaug_policy_draw, g, b, s); }\n")
    r = subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
                        "-fno-gnu-unique", f"-I{d}", "-o", str(d / "libdraw.so"), str(d / "emu.cpp")],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"the host build of fused_draw.cu failed:\n{r.stderr[-3000:]}"
    lib = ctypes.CDLL(str(d / "libdraw.so"))

    def run(plan, n, key, counter, counter_dev=None, threads=32, blocks=None):
        values = np.full((n, plan.V), np.nan)
        rows = np.full((n, plan.P), np.nan, np.float32)
        prog = np.ascontiguousarray(plan.prog)
        cst = np.ascontiguousarray(plan.consts)
        args = [prog.ctypes.data, len(plan.prog), cst.ctypes.data, n, key[0], key[1], counter,
                0 if counter_dev is None else counter_dev.ctypes.data, values.ctypes.data, plan.V,
                rows.ctypes.data, plan.P]
        g = (ctypes.c_uint * 3)(blocks or 1, 1, 1)
        b = (ctypes.c_uint * 3)(threads, 1, 1)
        lib.draw(g, b, (ctypes.c_uint64 * len(args))(*[int(a) & 0xFFFFFFFFFFFFFFFF for a in args]))
        return values, rows
    return run


def _host_rows(policy, plan, params, x, layout):
    """Every stage's rows as the host path builds them from ``params``."""
    from gpuaug.policy.compose import plan_stages

    out = np.zeros((params.n, plan.P))
    cur = x
    lay = layout
    for (kind, spec), sp in zip(plan_stages(policy.transforms, x.dtype.name), plan.stages):
        b = as_batch(cur, lay)
        built = F.build(spec, policy.transforms, params.values, b, lay)
        out[:, sp.col:sp.col + sp.width] = built.rows
        cur = np.zeros((params.n,) + ((tuple(built.shapes[0]) + (b.channels,)) if built.out_layout == "NHWC"
                                      else (b.channels,) + tuple(built.shapes[0])), built.out_dtype)
        lay = built.out_layout
    return out


DRAW_CASES = {
    "all-u8": (lambda: _all_transforms()[:-1] + [gpuaug.ToDtype("float32", scale=True), gpuaug.RandomGrayscale(0.5),
                                                 gpuaug.RandomChannelPermutation(), gpuaug.Normalize(*IMAGENET)],
               np.uint8, 3, "NHWC"),
    "bench-f32-nchw": (lambda: _policy().transforms, np.float32, 3, "NCHW"),
    "float-sem-runs-f16": (lambda: [gpuaug.RandomGrayscale(0.5), gpuaug.RandomChannelPermutation(),
                                    gpuaug.ColorJitter(0.2, 0.2), gpuaug.RandomChannelPermutation(),
                                    gpuaug.RandomRotation(90), gpuaug.RandomVerticalFlip()], np.float16, 3, "NHWC"),
    "rotate-quarter-turns-rgba": (lambda: [gpuaug.RandomRotation((90, 90)), gpuaug.RandomHorizontalFlip(),
                                           gpuaug.RandomCrop(7, padding=1, fill=0.25), gpuaug.RandomInvert()],
                                  np.float32, 4, "NHWC"),
    "rrc-fallback-one-channel": (lambda: [gpuaug.RandomResizedCrop(5, scale=(0.9, 1.0), ratio=(3.0, 4.0)),
                                          gpuaug.RandomAffine(5, scale=(0.5, 0.6), shear=8),
                                          gpuaug.RandomGamma(p=0.5)], np.uint8, 1, "NHWC"),
}


@pytest.mark.parametrize("name", sorted(DRAW_CASES))
def test_cuda_c_draw_on_host_equals_twin_and_host_rows(draw_kernel, name):
    make, dtype, c, layout = DRAW_CASES[name]
    policy = gpuaug.Compose(make(), draws="device")
    x = _images(1, 13, 17, c, dtype)
    if layout == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    plan = _plan(policy, x, layout)
    n = 37  # more samples than threads: the stride loop
    key = R.philox_key(11)
    values, rows = draw_kernel(plan, n, key, 5 + (3 << 32))
    twin = D.twin_values(plan, key, 5 + (3 << 32), n)
    np.testing.assert_array_equal(values[:, :plan.V], twin)
    sizes = np.broadcast_to(np.array(x.shape[1:3] if layout == "NHWC" else x.shape[2:4]), (n, 2))
    params = gpuaug.policy.PolicyParams(n, np.array(sizes), D.to_params(plan, twin, sizes))
    xn = np.broadcast_to(x, (n,) + x.shape[1:])
    want = _host_rows(policy, plan, params, np.ascontiguousarray(xn), layout)
    assert not np.isnan(rows).any()
    np.testing.assert_allclose(rows, want.astype(np.float32), rtol=2e-6, atol=2e-6)
    if name == "rotate-quarter-turns-rgba":
        assert np.all(rows[:, F.P_INTERP] == 0)  # exact maps: nearest, as the host decides


def test_cuda_c_draw_device_counter(draw_kernel):
    """counter_dev: every block reads the counter there; the last block to finish advances it
    by one and resets the ticket."""
    policy = _policy()
    plan = _plan(policy, _images(1))
    key = R.philox_key(2)
    ctr = np.array([41, 0], np.uint64)
    v1, _ = draw_kernel(plan, 5, key, 0, ctr)
    n = 70
    blocks, threads = D.draw_grid(n)
    assert (blocks, threads) == (1, 96)
    v2, _ = draw_kernel(plan, n, key, 0, ctr, threads=32, blocks=3)  # several blocks, a grid stride
    assert ctr.tolist() == [43, 0]
    np.testing.assert_array_equal(v1, D.twin_values(plan, key, 41, 5))
    np.testing.assert_array_equal(v2, D.twin_values(plan, key, 42, n))
    assert D.draw_grid(1000) == (4, 256) and D.draw_grid(10 ** 6) == (256, 256)


def test_cuda_c_draw_compiles():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from gpuaug.kernels._cuda import check_compile

    try:
        ptx = check_compile("fused_draw.cu", ["gpuaug_policy_draw"])
    except RuntimeError as e:
        if "NVRTC failed" in str(e):
            raise
        pytest.skip(f"NVRTC is not usable here: {e}")
    except Exception as e:  # noqa: BLE001 - no NVRTC library on this machine
        pytest.skip(f"NVRTC is not usable here: {type(e).__name__}: {e}")
    assert "gpuaug_policy_draw" in ptx


# ------------------------------------------------------------------------------ on the GPU
def _gpu_x(n=8, h=20, w=22, c=3):
    import cupy as cp

    return cp.asarray(_images(n, h, w, c))


@pytest.mark.gpu
def test_gpu_device_draws_equal_the_twin():
    pol = _policy(seed=3)
    x = _gpu_x()
    pol(x, seed=4)
    got = pol.last_params
    _same(got, pol.sample(x.get(), seed=4))
    pol(x)
    _same(pol.last_params, _policy(seed=3).sample(x.get()))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(DRAW_CASES))
def test_gpu_device_output_equals_the_host_path_with_the_same_params(name):
    """The device-drawn call equals the host path (host-built rows) and the CPU twin, given the
    same parameters; replaying its own params on the GPU reuses its rows: bit for bit."""
    import cupy as cp

    from test_policy import _gpu_compare

    make, dtype, c, layout = DRAW_CASES[name]
    pol = gpuaug.Compose(make(), draws="device")
    xh = _images(6, 21, 19, c, dtype)
    if layout == "NCHW":
        xh = np.ascontiguousarray(xh.transpose(0, 3, 1, 2))
    x = cp.asarray(xh)
    y = pol(x, seed=9, layout=layout)
    p = pol.last_params
    assert p.drawn is not None
    again = pol(x, params=p, layout=layout)
    assert bool((again == y).all())
    host_rows = gpuaug.Compose(pol.transforms, draws="host")(x, params=gpuaug.policy.PolicyParams(
        p.n, p.sizes, p.values), layout=layout)
    _gpu_compare(cp.asnumpy(y), cp.asnumpy(host_rows), f"{name} device vs host rows", frac=2e-3)
    cpu = pol(xh, seed=9, layout=layout)  # the CPU backend draws the same values (NumPy twin)
    _same(pol.last_params, gpuaug.policy.PolicyParams(p.n, p.sizes, p.values))
    _gpu_compare(cp.asnumpy(y), cpu, f"{name} device vs cpu", frac=2e-3)


@pytest.mark.gpu
def test_gpu_auto_uses_device_draws_for_cuda_input():
    pol = gpuaug.Compose(_policy().transforms)  # draws="auto", the default
    x = _gpu_x()
    pol(x)
    assert pol._counter == 1 and pol.last_params.drawn is not None
    pol(x.get())  # NumPy: host draws
    assert pol._counter == 1 and pol.last_params.drawn is None
    # the default's CUDA call is draws="device"'s, bit for bit; with targets it draws on the host
    y = pol(x, seed=4)
    assert bool((y == _policy()(x, seed=4)).all())
    _same(pol.last_params, _policy().sample(x.get(), seed=4))
    yb, _ = pol(x, seed=4, boxes=np.zeros((x.shape[0], 1, 4), np.float32))
    assert pol.last_params.drawn is None
    assert bool((yb == gpuaug.Compose(_policy().transforms, draws="host")(x, seed=4)).all())


@pytest.mark.gpu
def test_gpu_graph_replay_equals_eager_calls():
    import cupy as cp

    pol = gpuaug.Compose([gpuaug.RandomResizedCrop(16), gpuaug.RandomHorizontalFlip(),
                          gpuaug.ColorJitter(0.4, 0.4, 0.4, 0.1), gpuaug.Normalize(*IMAGENET)], seed=1)
    x = _gpu_x(8, 24, 26)
    g = pol.capture(x.shape)
    outs, params = [], []
    for k in range(3):
        y = g(x + k)
        outs.append(y.copy())
        params.append(g.last_params)
    assert not bool((outs[0] == outs[1]).all())  # the device counter advanced
    for k in range(3):
        eager = pol(x + k, params=params[k])  # host path, the replay's parameters
        from test_policy import _gpu_compare
        _gpu_compare(cp.asnumpy(outs[k]), cp.asnumpy(eager), f"replay {k}", frac=2e-3)
    # a fresh capture of a policy with the same seed replays the same sequence
    g2 = gpuaug.Compose(pol.transforms, seed=1).capture(x.shape)
    assert bool((g2(x) == outs[0]).all())
    # the input buffer filled by the caller; another stream
    s = cp.cuda.Stream(non_blocking=True)
    g.input[...] = x
    cp.cuda.Device().synchronize()  # filled on the current stream; the replay runs on s
    y = g(stream=s)
    s.synchronize()
    assert y is g.output and y.shape == (8, 3, 16, 16)
    with pytest.raises(ValueError, match="x: got uint8"):
        g(x[:4])
    # capture on the caller's buffer: the graph reads it as it is at each replay
    mine = cp.zeros_like(x)
    g3 = gpuaug.Compose(pol.transforms, seed=1).capture(input=mine)
    assert g3.input is mine
    mine[...] = x
    assert bool((g3() == outs[0]).all())


# ------------------------------------------------------------------------------ the device path, on the host
class _Dev(np.ndarray):
    """A host array standing in for a CuPy array: ``.data.ptr`` and ``.get()``."""

    @property
    def data(self):
        import types

        return types.SimpleNamespace(ptr=self.ctypes.data)

    def get(self, stream=None):
        return np.array(self)


E2E = {
    "bench-u8": (lambda: _policy().transforms, np.uint8, 3, "NHWC"),
    "two-stages-nchw-f32": (lambda: [gpuaug.RandomResizedCrop(9), gpuaug.ColorJitter(0.2, 0.3, 0.2, 0.1),
                                     gpuaug.RandomGrayscale(0.5), gpuaug.Normalize(0.5, 0.25, layout="NHWC"),
                                     gpuaug.RandomRotation(20), gpuaug.ToDtype("float16")],
                            np.float32, 3, "NCHW"),
}


def _e2e_batch(name, n=5, seed=0):
    make, dtype, c, layout = E2E[name]
    x = _images(n, 13, 17, c, dtype, seed)
    if layout == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    return gpuaug.Compose(make(), draws="device"), x, layout


@pytest.fixture(scope="module")
def device_path(tmp_path_factory, draw_kernel):
    """Compose's device path (_run_device: the draw launch, then launch_cuda on the drawn rows)
    with both CUDA C files run on the host: fused.cu as tests/test_policy_cuda_host.py builds
    it, fused_draw.cu as above."""
    import test_policy_cuda_host as H

    from gpuaug.kernels._cuda import KERNEL_DIR

    names = set()
    for name in E2E:
        pol, x, layout = _e2e_batch(name)
        plan = _plan(pol, x, layout)
        for sp in plan.stages:
            for dtype in (x.dtype, np.float32, np.float16):
                for dense, planar in ((True, False), (True, True), (False, False)):
                    for nm in F.kernel_names(sp.spec, sp.built, np.dtype(dtype), x.shape[-1] if layout == "NHWC"
                                             else x.shape[1], dense, planar):
                        names |= {nm.format(packed=""), nm.format(packed="_packed")}
    d = tmp_path_factory.mktemp("fused_e2e")
    for f in ("common.cuh", "interp.cuh", "warp_common.cuh", "colour.cuh", "fused.cuh", "fused.cu"):
        src = open(os.path.join(KERNEL_DIR, f)).read()
        for a, b in H._ASM.items():
            src = src.replace(a, b)
        (d / f).write_text(src)
    lines = [H._HARNESS, 'extern "C" {', "#define EMU_API __attribute__((visibility(\"default\")))"]
    table = {}
    for j, nm in enumerate(sorted(names)):
        runner = "run_seq" if "_sum" in nm else "run"
        lines.append(f"EMU_API void k{j}(const unsigned* g, const unsigned* b, const uint64_t* s) "
                     f"{{ {runner}(&{nm}, g, b, s); }}")
        table[nm] = f"k{j}"
    lines.append("}")
    (d / "shim.h").write_text(H._SHIM)
    (d / "harness.cpp").write_text("\n".join(lines))
    r = subprocess.run(["g++", "-O1", "-std=c++20", "-pthread", "-shared", "-fPIC", "-w", "-fno-gnu-unique",
                        "-fvisibility=hidden", "-include", "shim.h", f"-I{d}", "harness.cpp", "-o", "harness.so"],
                       cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, f"the host build of fused.cu failed:\n{r.stderr[-3000:]}"
    return ctypes.CDLL(str(d / "harness.so")), table, draw_kernel


@pytest.fixture
def host_device_path(device_path, monkeypatch):
    import types

    import test_policy_cuda_host as H

    import gpuaug.kernels._cuda as K
    from gpuaug.policy import compose as C

    lib, table, draw = device_path
    launched = []

    def slot(a):
        return 0 if a is None else H._slot(a)

    def get_function(filename, name):
        launched.append(name.split("<")[0])
        if filename == "fused_draw.cu":
            def launch_draw(grid, block, args, shared_mem=0):
                prog, nrec, cst, n, k0, k1, counter, cdev, values, V, rows, P = args
                plan = types.SimpleNamespace(prog=np.asarray(prog).reshape(-1, D.REC), consts=np.asarray(cst),
                                             V=int(V), P=int(P))
                v, r = draw(plan, int(n), (int(k0), int(k1)), int(counter), cdev, threads=block[0], blocks=grid[0])
                for dst, a in ((values, v), (rows, r)):  # device addresses (ints) or arrays
                    to = dst if isinstance(dst, int) else dst.ctypes.data
                    ctypes.memmove(to, np.ascontiguousarray(a).ctypes.data, a.nbytes)
            return launch_draw
        fn = getattr(lib, table[name])

        def launch(grid, block, args, shared_mem=0):
            g = (ctypes.c_uint * 3)(*(tuple(grid) + (1, 1, 1))[:3])
            b = (ctypes.c_uint * 3)(*(tuple(block) + (1, 1, 1))[:3])
            fn(g, b, (ctypes.c_uint64 * len(args))(*[slot(a) for a in args]))
        return launch

    fake_cp = types.SimpleNamespace(
        float64=np.float64, float32=np.float32, empty=lambda shape, dtype: np.zeros(shape, dtype).view(_Dev),
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
            getDevice=lambda: 0, getDeviceProperties=lambda d: {"multiProcessorCount": 1})))
    monkeypatch.setattr(K, "get_function", get_function)
    monkeypatch.setattr(K, "stage", lambda *items: [np.array(h) for _, h in items])
    monkeypatch.setattr(F, "cupy_module", lambda: fake_cp)
    monkeypatch.setattr(C, "cupy_module", lambda: fake_cp)
    monkeypatch.setattr(F, "descriptor_table", H._host_table)
    monkeypatch.setattr(F, "_sms", {})
    monkeypatch.setattr(D, "device_program", lambda plan: (plan.prog, plan.consts))
    return launched


@pytest.mark.parametrize("name", sorted(E2E))
def test_device_path_on_host_equals_the_host_path(host_device_path, name):
    """The draw launch writes the rows; every stage's launch reads them at its column and
    stride: the output equals the CPU twin run with the drawn parameters."""
    from test_policy import _gpu_compare

    pol, x, layout = _e2e_batch(name)
    b = as_batch(x, layout)
    y, drawn = pol._run_device(x, b, None, 7, None, None)
    p = drawn.params()
    want_values = D.twin_values(_plan(pol, x, layout), R.philox_key(7), 0, b.n)
    _same(p, gpuaug.policy.PolicyParams(b.n, p.sizes, D.to_params(_plan(pol, x, layout), want_values, p.sizes)))
    want = gpuaug.Compose(pol.transforms)(x, params=gpuaug.policy.PolicyParams(p.n, p.sizes, p.values),
                                          layout=layout, backend="cpu")
    _gpu_compare(np.asarray(y), want, name, frac=2e-3)
    assert host_device_path[0] == "gpuaug_policy_draw"
    assert len(host_device_path) == 1 + sum(len(s.launches) for s in pol.plan(x, layout=layout))
    # replaying the drawn params reuses the rows: no draw, the same output
    host_device_path.clear()
    y2, _ = pol._run_device(x, b, None, None, p, None)
    assert "gpuaug_policy_draw" not in host_device_path
    np.testing.assert_array_equal(np.asarray(y2), np.asarray(y))


def test_device_path_on_host_capture_buffers_and_counter(host_device_path):
    """As a capture runs it: buffers kept in ``ws`` and reused, the counter read and advanced
    on the device, each run equal to the host path with its own parameters."""
    from test_policy import _gpu_compare

    pol, x, layout = _e2e_batch("bench-u8")
    b = as_batch(x, layout)
    ws = {}
    ctr = np.array([(1 << 48) + 3, 0], np.uint64)
    y1, d1 = pol._run_device(x, b, None, None, None, None, ws, ctr)
    p1 = d1.params(keep_rows=False)
    out1 = np.array(y1)
    for key, v in ws.items():  # the emulated reduction adds into its partial sums (the GPU stores them)
        if isinstance(key, tuple) and v[2] is not None:
            v[2][...] = 0
    y2, d2 = pol._run_device(x, b, None, None, None, None, ws, ctr)
    assert y2 is y1 and d2.buf is d1.buf and ctr.tolist() == [(1 << 48) + 5, 0]
    p2 = d2.params(keep_rows=False)
    assert not np.array_equal(p1[1]["angle"], p2[1]["angle"])
    plan = _plan(pol, x, layout)
    np.testing.assert_array_equal(D.twin_values(plan, pol._key, (1 << 48) + 4, b.n)[:, :plan.V],
                                  np.asarray(d2.values))
    for y, p in ((out1, p1), (np.asarray(y2), p2)):
        want = gpuaug.Compose(pol.transforms)(x, params=p, layout=layout, backend="cpu")
        _gpu_compare(y, want, "capture-like run", frac=2e-3)


def test_device_call_does_no_per_sample_host_work(monkeypatch):
    """Once the plan is made, a device-drawn call never samples, builds rows or runs the twin on
    the host: whatever the batch size, it allocates and launches (here recorded, not run)."""
    import types

    import gpuaug.kernels._cuda as K
    from gpuaug.policy import compose as C
    from gpuaug.policy import transforms as TF

    launched = []
    fake_cp = types.SimpleNamespace(
        float64=np.float64, float32=np.float32, empty=lambda shape, dtype: np.empty(shape, dtype).view(_Dev),
        cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
            getDevice=lambda: 0, getDeviceProperties=lambda d: {"multiProcessorCount": 132})))
    monkeypatch.setattr(K, "get_function", lambda f, name: lambda g, b, a, shared_mem=0: launched.append(name))
    monkeypatch.setattr(K, "stage", lambda *items: [np.array(h) for _, h in items])
    monkeypatch.setattr(F, "cupy_module", lambda: fake_cp)
    monkeypatch.setattr(C, "cupy_module", lambda: fake_cp)
    monkeypatch.setattr(D, "device_program", lambda plan: (plan.prog, plan.consts))
    pol = _policy()
    small = np.zeros((2, 6, 6, 3), np.uint8)
    pol._run_device(small, as_batch(small), None, None, None, None)  # makes the plan
    x = np.zeros((512, 6, 6, 3), np.uint8)
    pol._run_device(x, as_batch(x), None, None, None, None)  # another n: the same plan

    def boom(*a, **k):
        raise AssertionError("per-sample host work in a device-drawn call")
    for cls in (TF.RandomHorizontalFlip, TF.RandomAffine, TF.ColorJitter, TF.Normalize):
        monkeypatch.setattr(cls, "sample", boom)
    monkeypatch.setattr(TF.RandomAffine, "matrices", boom)
    monkeypatch.setattr(F, "build", boom)
    monkeypatch.setattr(F, "colour_program", boom)
    monkeypatch.setattr(D, "twin_values", boom)
    monkeypatch.setattr(D, "compile_plan", boom)
    launched.clear()
    b = as_batch(x)
    y, drawn = pol._run_device(x, b, None, None, None, None)
    assert y.shape == (512, 3, 6, 6) and drawn.values.shape == (512, _plan(pol, x).V)
    assert launched[0] == "gpuaug_policy_draw" and len(launched) == 3  # draw, contrast's sum, the fused stage
    assert pol._counter == 3


@pytest.mark.gpu
def test_gpu_device_draws_equal_the_op_chain():
    """With device-drawn parameters the fused call still computes the ops' chain: colour steps
    as gpuaug's colour ops (uint8 within one level), flips and whole-pixel crops exactly."""
    import cupy as cp

    from test_policy import _gpu_compare

    xh = np.random.default_rng(6).integers(0, 256, (8, 19, 23, 3), dtype=np.uint8)
    x = cp.asarray(xh)
    pol = gpuaug.Compose([gpuaug.ColorJitter(0.5, 0.5, 0.5, 0.2), gpuaug.RandomGrayscale(0.5),
                          gpuaug.RandomSolarize(100, p=0.5)], draws="device")
    y = pol(x, seed=7)
    p = pol.last_params
    j = p[0]
    want = gpuaug.color_jitter(x, j["brightness"], j["contrast"], j["saturation"], j["hue"])
    gray = gpuaug.grayscale(want, num_output_channels=3)
    want = cp.where(cp.asarray(p[1]["apply"])[:, None, None, None], gray, want)
    sol = gpuaug.solarize(want, 100)
    want = cp.where(cp.asarray(p[2]["apply"])[:, None, None, None], sol, want)
    _gpu_compare(cp.asnumpy(y), cp.asnumpy(want), "colour chain")
    geo = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomVerticalFlip(),
                          gpuaug.RandomCrop(15, padding=2)], draws="device")
    y = cp.asnumpy(geo(x, seed=3))
    q = geo.last_params
    for i in range(8):
        a = xh[i]
        a = a[:, ::-1] if q[0]["apply"][i] else a
        a = a[::-1] if q[1]["apply"][i] else a
        a = np.pad(a, ((2, 2), (2, 2), (0, 0)))
        top, left = q[2]["corner"][i] + 2
        np.testing.assert_array_equal(y[i], a[top:top + 15, left:left + 15])
