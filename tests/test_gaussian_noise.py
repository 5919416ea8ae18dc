import os
import re

import numpy as np
import pytest

import gpuaug
import ref_filters as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images, to_layout

# Random123's kat_vectors for philox4x32 10: counter, key -> output
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
SEED = 0x0123456789ABCDEF


def test_philox_known_answers():
    """The Numba CPU twin, its plain-Python (simulator) form and the test reference."""
    from gpuaug.kernels.numba._dual import specialize
    from gpuaug.kernels.numba._philox import philox4x32_10, philox_host

    cpu = specialize(philox4x32_10, "cpu")
    u = np.uint64
    for ctr, key, want in PHILOX_KAT:
        assert tuple(int(v) for v in cpu(*(u(c) for c in ctr), *(u(k) for k in key))) == want
        assert tuple(philox_host(ctr, key)) == want
        assert tuple(int(v) for v in R.philox4x32_10([np.array(c) for c in ctr], key)) == want


def test_philox_cuh_constants_match_the_numba_twin():
    """kernels/philox.cuh spells the float32 constants of _philox.py bit for bit."""
    from gpuaug.kernels.numba import _philox as P

    src = open(os.path.join(os.path.dirname(P.__file__), "..", "philox.cuh")).read()
    consts = dict(re.findall(r"constexpr float (\w+) = (-?0x[0-9a-fp.+-]+)f;", src))
    assert len(consts) == 19
    for name, lit in consts.items():
        assert float.fromhex(lit) == float(getattr(P, name)), name
        assert np.float32(float.fromhex(lit)) == getattr(P, name)


def test_box_muller_accuracy_and_twins_agree():
    import numba

    from gpuaug.kernels.numba._dual import specialize
    from gpuaug.kernels.numba._philox import box_muller

    bm = specialize(box_muller, "cpu")

    @numba.njit
    def many(a, b, out):
        for i in range(a.size):
            out[i, 0], out[i, 1] = bm(a[i], b[i])

    rng = np.random.default_rng(0)
    a = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64)
    b = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64)
    a[:6] = [0, 1, 2 ** 32 - 1, 2 ** 32 - 2, 0xB504F333, 0xB504F334]
    b[:8] = [0, 0x1FFFFFFF, 0x20000000, 0x3FFFFFFF, 0xE0000000, 2 ** 32 - 1, 0x7FFFFFFF, 0x80000000]
    out = np.empty((a.size, 2), np.float32)
    many(a, b, out)
    r = np.sqrt(-2 * np.log((a.astype(np.float64) + 1) / 2 ** 32))
    t = 2 * np.pi * (b >> np.uint64(5)).astype(np.float64) / 2 ** 27
    np.testing.assert_allclose(out, np.stack([r * np.cos(t), r * np.sin(t)], 1), rtol=0, atol=2e-6)
    for i in list(range(8)) + list(rng.integers(0, a.size, 300)):  # the simulator's Python == njit
        assert tuple(box_muller(a[i], b[i])) == tuple(out[i])


def _case(rng, n, dtype, c, h=37, w=53):
    x = random_images(rng, n, h, w, c, dtype)
    scale = 255.0 if dtype == "uint8" else 1.0
    mean = rng.uniform(-0.05, 0.05, n) * scale
    std = rng.uniform(0.0, 0.2, n) * scale
    std[0] = 0.0
    return x, mean, std


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_gaussian_noise_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x, mean, std = _case(rng, 5, dtype, channels)
    # the reference computes with the float32-rounded parameters, as the op documents
    m32, s32 = mean.astype(np.float32).astype(float), std.astype(np.float32).astype(float)
    check_op(gpuaug.gaussian_noise, lambda s, i: R.gaussian_noise(s, i, m32[i], s32[i], SEED), x,
             {"mean": mean, "std": std, "seed": SEED}, layout=layout)
    sd = 3.0 if dtype == "uint8" else 0.0625
    check_op(gpuaug.gaussian_noise, lambda s, i: R.gaussian_noise(s, i, 0.0, sd, 5), x,
             {"std": sd, "seed": 5}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gaussian_noise_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (2, 1)]]
    std = [2.0, 5.0, 0.0, 9.0] if dtype == "uint8" else [0.01, 0.1, 0.0, 0.25]
    check_op(gpuaug.gaussian_noise, lambda s, i: R.gaussian_noise(s, i, 0.0, np.float32(std[i]), 77), xs,
             {"std": std, "seed": 77}, varshape=True)


def test_noise_does_not_depend_on_layout_strides_or_batching():
    rng = np.random.default_rng(3)
    x = random_images(rng, 3, 9, 13, 3, "float32")
    kw = {"std": 0.1, "seed": 9}
    a = gpuaug.gaussian_noise(x, **kw)
    b = gpuaug.gaussian_noise(to_layout(x, "NCHW"), layout="NCHW", **kw).transpose(0, 2, 3, 1)
    big = random_images(rng, 3, 20, 30, 3, "float32")
    big[:, 2:11, 5:18] = x
    c = gpuaug.gaussian_noise(big[:, 2:11, 5:18], **kw)  # a strided view
    d = gpuaug.gaussian_noise(list(x), **kw)  # varshape: sample i keeps its index
    assert a.tobytes() == np.ascontiguousarray(b).tobytes() == c.tobytes() == np.stack(d).tobytes()
    single = gpuaug.gaussian_noise(x[0], **kw)  # one image = sample 0
    assert single.tobytes() == a[0].tobytes()


def test_noise_statistics_and_seeds():
    from scipy import stats

    x = np.zeros((4, 64, 80, 3), np.float32)
    z = gpuaug.gaussian_noise(x, std=1.0, seed=2024).ravel()
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert stats.kstest(z[:20000], "norm").pvalue > 1e-3
    assert np.abs(np.corrcoef(z[:-1], z[1:])[0, 1]) < 0.02  # neighbouring elements independent
    z2 = gpuaug.gaussian_noise(x, std=1.0, seed=2025).ravel()
    assert np.abs(np.corrcoef(z, z2)[0, 1]) < 0.02
    assert gpuaug.gaussian_noise(x, std=1.0, seed=2024).ravel().tobytes() == z.tobytes()
    top = gpuaug.gaussian_noise(x[:1], std=1.0, seed=2 ** 64 - 1)
    assert np.isfinite(top).all() and top.std() > 0.9
    u8 = gpuaug.gaussian_noise(np.full((1, 50, 50, 1), 250, np.uint8), std=20.0, seed=1)
    assert u8.max() == 255 and u8.min() < 230  # saturates


@pytest.mark.parametrize("kw, exc, match", [
    ({"std": 1.0}, TypeError, "seed: got None"),
    ({"std": 1.0, "seed": -1}, ValueError, "seed: got -1; expected an int in \\[0, 2\\*\\*64\\)"),
    ({"std": 1.0, "seed": 2 ** 64}, ValueError, "seed: got"),
    ({"std": 1.0, "seed": 1.5}, TypeError, "seed: got 1.5"),
    ({"seed": 1}, TypeError, "std: missing"),
    ({"std": -0.1, "seed": 1}, ValueError, "std: got -0.1; expected values >= 0"),
    ({"std": [1.0, np.nan, 1.0], "seed": 1}, ValueError, "std: .*finite"),
    ({"std": 1.0, "mean": [0.0, 1.0], "seed": 1}, ValueError, "mean: got shape"),
    ({"std": 1.0, "mean": np.inf, "seed": 1}, ValueError, "mean: .*finite"),
])
def test_gaussian_noise_bad_parameters(kw, exc, match):
    with pytest.raises(exc, match=match):
        gpuaug.gaussian_noise(np.zeros((3, 8, 8, 3), np.uint8), **kw)


def test_gaussian_noise_simulator_is_bit_identical():
    """Same seed -> the same bits from the Numba CPU twin and the Numba CUDA twin (simulator)."""
    if not SIM:
        pytest.skip("a GPU is present: the twins are compared by test_gaussian_noise_gpu")
    rng = np.random.default_rng(4)
    for dtype in DTYPES:
        for c in (1, 3, 4):
            x, mean, std = _case(rng, 2, dtype, c, 3, 5)
            kw = {"mean": mean, "std": std + 0.5, "seed": SEED}
            a = gpuaug.gaussian_noise(x, backend="cpu", **kw)
            b = gpuaug.gaussian_noise(x, backend="numba", **kw)
            assert a.tobytes() == b.tobytes(), (dtype, c)
    x, mean, std = _case(rng, 2, "float32", 3, 3, 5)
    check_op(gpuaug.gaussian_noise, lambda s, i: R.gaussian_noise(s, i, 0.0, 0.25, 3), x,
             {"std": 0.25, "seed": 3}, backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gaussian_noise_gpu(backend, dtype, layout):
    """Reference within tolerance, and the same bits as the CPU twin."""
    import cupy

    rng = np.random.default_rng(5)
    for c in (1, 3, 4):
        x, mean, std = _case(rng, 5, dtype, c, 37, 61)
        m32, s32 = mean.astype(np.float32).astype(float), std.astype(np.float32).astype(float)
        kw = {"mean": mean, "std": std, "seed": SEED}
        check_op(gpuaug.gaussian_noise, lambda s, i: R.gaussian_noise(s, i, m32[i], s32[i], SEED), x, kw,
                 layout=layout, backend=backend)
        xl = to_layout(x, layout)
        cpu = gpuaug.gaussian_noise(xl, layout=layout, **kw)
        dev = gpuaug.gaussian_noise(cupy.asarray(xl), layout=layout, backend=backend, **kw)
        assert cpu.tobytes() == cupy.asnumpy(dev).tobytes(), (backend, dtype, c)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (64, 64)]]
    cpu = gpuaug.gaussian_noise(xs, std=0.5, seed=11)
    dev = gpuaug.gaussian_noise([cupy.asarray(a) for a in xs], std=0.5, seed=11, backend=backend)
    for a, b in zip(cpu, dev):
        assert a.tobytes() == cupy.asnumpy(b).tobytes()


@gpu
def test_noise_parameters_on_the_gpu():
    """Per-sample parameters given as CUDA arrays (no host round trip): the same bits."""
    import cupy

    rng = np.random.default_rng(6)
    x = random_images(rng, 4, 33, 47, 3, "uint8")
    std, mean = rng.uniform(0, 20, 4), rng.uniform(-3, 3, 4)
    want = gpuaug.gaussian_noise(x, mean=mean, std=std, seed=5)
    for backend in ("cuda", "numba"):
        got = gpuaug.gaussian_noise(cupy.asarray(x), mean=cupy.asarray(mean), std=cupy.asarray(std), seed=5,
                                    backend=backend)
        assert cupy.asnumpy(got).tobytes() == want.tobytes()
    prob = rng.uniform(0, 0.5, 4)
    want = gpuaug.salt_and_pepper(x, prob, seed=5)
    got = gpuaug.salt_and_pepper(cupy.asarray(x), cupy.asarray(prob), seed=5)
    np.testing.assert_array_equal(cupy.asnumpy(got), want)
