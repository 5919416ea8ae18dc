"""Determinism: the same inputs and seed give the same bits, run after run, twin after twin,
and a sample's result does not depend on the batch it sits in (beyond what is documented).

The documented contracts tested here:

- **Noise ops** (gaussian_noise, salt_and_pepper) are pure functions of ``(seed, sample index
  n, row y, element/pixel position)``: the Philox counter is ``(position // 4, y, n, domain)``
  and the key the seed. So the *index within the batch* keys a sample's noise: the first k
  samples of a batch get the same noise whatever the batch size N and whatever the other
  samples hold; the same image at another index gets other noise; a varshape list keeps each
  sample's index; a single image is sample 0. Every backend gives the same bits.
- **Deterministic ops**: sample i's output depends only on sample i and its own parameters:
  the same whether it runs in a batch of N, alone, or in a varshape list.
- **gpuaug.random** samplers draw one vectorised block of n numbers per quantity, in a fixed
  order ("the stream of numbers a sampler consumes depends only on n and its arguments"). So
  a sample's parameters are a function of ``(seed, n, sizes)``, not of i alone: sample 0 of a
  batch of 4 and of a batch of 8 generally get different parameters (the second quantity's
  block starts at draw n). That is the documented contract and ``Compose`` enforces it (its
  ``PolicyParams`` replay only on a batch of the same n and sizes); the tests below pin the
  draw order against the docstrings and check that parameters depend on nothing else (not on
  the pixels, dtype, layout or backend).
- **Twins**: the Numba CUDA twin (in the simulator here) gives the CPU twin's bits for the
  noise ops and agrees within the documented rounding (uint8 within 1; floats to float32
  rounding) for the others. The ``gpu`` tests compare the CUDA C kernels the same way and
  check run-to-run bit-identity on the GPU.
"""
from __future__ import annotations

import numpy as np
import pytest

import gpuaug
import refs
from gpuaug import random as GR
from helpers import DTYPES, LAYOUTS, SIM, assert_close, from_layout, gpu, random_images, to_layout

OPS = sorted(gpuaug.registry)
#: the noise ops: every op with a ``seed`` parameter (pure functions of seed and position)
NOISE = tuple(n for n in OPS if "seed" in gpuaug.registry[n].param_names)


def noise_kw(name, n, dtype, seed, rng):
    """Per-sample parameters of a noise op (in the dtype's units), as its tests/refs module
    draws them (``noise_kw``)."""
    draw = refs.get(name, "noise_kw")
    assert draw is not None, f"noise op {name!r}: declare noise_kw(rng, n, dtype, seed) in tests/refs/{name}.py"
    return draw(rng, n, dtype, seed)


def slice_params(name, kw, n, idx):
    """The per-sample entries ``idx`` of an op's keyword arguments (registry: per_sample params
    given as arrays of length n); scalars and host-only values are kept."""
    spec = gpuaug.registry[name]
    per = {p.name for p in spec.params if p.per_sample}
    out = {}
    for k, v in kw.items():
        if k in per and isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == n:
            out[k] = v[idx]
        else:
            out[k] = v
    return out


def example(name, rng, n, h, w, dtype="uint8"):
    """The registry's example parameters (given in uint8 units), with the overrides the op's
    tests/refs module declares (``EXAMPLE``), rescaled for float images where the op checks
    the range (``FLOAT_UNITS``)."""
    spec = gpuaug.registry[name]
    kw = spec.example(rng, n, h, w) if spec.example else {}
    kw.update(refs.get(name, "EXAMPLE", {}))
    if np.dtype(dtype) != np.uint8:
        for k in refs.get(name, "FLOAT_UNITS", ()):
            if k in kw:
                kw[k] = np.asarray(kw[k]) / 255.0
    return kw


def bits(a):
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


# -- noise: repeated runs, seeds, batch position ---------------------------------------------

@pytest.mark.parametrize("name", NOISE)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_noise_same_seed_same_bits(name, dtype, layout):
    rng = np.random.default_rng(1)
    x = to_layout(random_images(rng, 4, 7, 9, 3, dtype), layout)
    fn = gpuaug.registry[name].func
    kw = noise_kw(name, 4, dtype, 2 ** 63 + 12345, rng)
    a = fn(x, layout=layout, **kw)
    for _ in range(2):
        assert bits(fn(x, layout=layout, **kw)) == bits(a)
    # a fresh copy of the input and of the parameters: still the same bits
    kw2 = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    assert bits(fn(x.copy(), layout=layout, **kw2)) == bits(a)
    # another seed: other noise (in every sample)
    b = from_layout(fn(x, layout=layout, **{**kw, "seed": kw["seed"] + 1}), layout)
    a = from_layout(a, layout)
    for i in range(4):
        assert not np.array_equal(a[i], b[i]), i


@pytest.mark.parametrize("name", NOISE)
@pytest.mark.parametrize("dtype", ("uint8", "float32"))
def test_noise_sample_is_keyed_by_seed_and_index_not_batch(name, dtype):
    """Same (seed, index) -> same output whatever the batch size N and the other samples."""
    rng = np.random.default_rng(2)
    n = 5
    x = random_images(rng, n, 6, 10, 3, dtype)
    fn = gpuaug.registry[name].func
    kw = noise_kw(name, n, dtype, 77, rng)
    full = fn(x, **kw)
    for k in range(1, n + 1):  # prefixes: batch size k
        got = fn(x[:k], **slice_params(name, kw, n, slice(0, k)))
        assert bits(got) == bits(full[:k]), k
    # other samples' pixels and parameters do not matter
    y = random_images(rng, n, 6, 10, 3, dtype)
    y[2] = x[2]
    kw_other = noise_kw(name, n, dtype, 77, rng)
    for key in kw_other:
        if isinstance(kw_other[key], np.ndarray):
            kw_other[key][2] = kw[key][2]
    assert bits(fn(y, **kw_other)[2]) == bits(full[2])
    # varshape: the list keeps each sample's index; a single image is sample 0
    assert all(bits(a) == bits(b) for a, b in zip(fn(list(x), **kw), full))
    assert bits(fn(x[0], **slice_params(name, kw, n, 0))) == bits(full[0])
    # the same image at another index gets other noise (the index, not the content, keys it)
    same = np.repeat(x[:1], 3, axis=0)
    z = fn(same, **slice_params(name, kw, n, [0, 0, 0]))
    assert bits(z[0]) == bits(full[0])
    assert not np.array_equal(z[0], z[1]) and not np.array_equal(z[1], z[2])


@pytest.mark.parametrize("name", NOISE)
def test_noise_does_not_depend_on_layout_or_strides(name):
    rng = np.random.default_rng(3)
    x = random_images(rng, 3, 5, 7, 4, "float16")
    fn = gpuaug.registry[name].func
    kw = noise_kw(name, 3, "float16", 5, rng)
    a = fn(x, **kw)
    b = fn(to_layout(x, "NCHW"), layout="NCHW", **kw)
    big = random_images(rng, 3, 9, 12, 4, "float16")
    big[:, 1:6, 2:9] = x
    c = fn(big[:, 1:6, 2:9], **kw)
    assert bits(a) == bits(np.ascontiguousarray(from_layout(b, "NCHW"))) == bits(c)


# -- every op: a sample's output does not depend on its batch --------------------------------

@pytest.mark.parametrize("name", OPS)
def test_sample_output_does_not_depend_on_its_batch(name):
    """Deterministic ops: each sample of a batch of 5 equals the same sample run alone, run in
    the reversed batch, and run in a varshape list; noise ops: prefixes (index-keyed, above)."""
    spec = gpuaug.registry[name]
    rng = np.random.default_rng(OPS.index(name))
    n, h, w = 5, 7, 7  # square: any rot90 k
    c = 3 if 3 in spec.channels else spec.channels[0]
    x = random_images(rng, n, h, w, c, "uint8")
    kw = example(name, rng, n, h, w)
    full = spec.func(x, **kw)
    listed = spec.func(list(x), **kw)
    if isinstance(listed, list):
        listed = np.stack(listed)
    assert bits(listed) == bits(full), "varshape list vs uniform batch"
    if name in NOISE:
        assert bits(spec.func(x[:2], **slice_params(name, kw, n, slice(0, 2)))) == bits(full[:2])
        return
    for i in range(n):
        alone = spec.func(x[i:i + 1], **slice_params(name, kw, n, slice(i, i + 1)))
        assert bits(alone[0]) == bits(full[i]), f"sample {i} alone"
    rev = spec.func(x[::-1].copy(), **slice_params(name, kw, n, slice(None, None, -1)))
    assert bits(rev[::-1]) == bits(full), "reversed batch"
    again = spec.func(x, **kw)
    assert bits(again) == bits(full), "a second run"


# -- twins: CPU (njit) vs Numba CUDA (simulator) ---------------------------------------------

# float32 coordinate maths of the warps (FMA-contracted on the GPU): the per-op twin tests' 1e-4,
# declared in each op's tests/refs module
TWIN_RTOL = {n: refs.get(n, "TWIN_RTOL") for n in OPS if refs.get(n, "TWIN_RTOL") is not None}


def _twin_tol(got, want, dtype, name, what):
    """The documented agreement of twins: uint8 within 1, floats to float32 rounding."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, what
    assert_close(got, want.astype(np.float64), dtype, rtol=TWIN_RTOL.get(name, 1e-5), what=what)


@pytest.mark.skipif(not SIM, reason="a GPU is present: the twins are compared by the gpu tests")
@pytest.mark.parametrize("name", OPS)
def test_cpu_and_numba_twins_agree(name):
    """Noise ops bit for bit (every dtype); every other op within the documented rounding;
    the simulator itself is deterministic (two runs, same bits)."""
    spec = gpuaug.registry[name]
    rng = np.random.default_rng(100 + OPS.index(name))
    n, h, w = 2, 3, 4
    c = 3 if 3 in spec.channels else spec.channels[0]
    dtypes = DTYPES if name in NOISE else ("uint8", "float32")
    for dtype in dtypes:
        x = random_images(rng, n, h, w, c, dtype)
        kw = example(name, rng, n, h, w, dtype)
        kw.update(refs.get(name, "SMALL", {}))  # sizes for 3x4 images
        cpu = spec.func(x, backend="cpu", **kw)
        sim = spec.func(x, backend="numba", **kw)
        if name in NOISE:
            assert bits(sim) == bits(cpu), dtype
        else:
            _twin_tol(sim, cpu, np.asarray(cpu).dtype, name, f"{name} {dtype}")
        assert bits(spec.func(x, backend="numba", **kw)) == bits(sim), f"{name} {dtype}: simulator rerun"


@pytest.mark.skipif(not SIM, reason="a GPU is present: the twins are compared by the gpu tests")
@pytest.mark.parametrize("name", NOISE)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_noise_twins_bit_identical_varshape_and_layouts(name, layout):
    rng = np.random.default_rng(7)
    fn = gpuaug.registry[name].func
    for c in (1, 3, 4):
        x = to_layout(random_images(rng, 2, 3, 5, c, "uint8"), layout)
        kw = noise_kw(name, 2, "uint8", 2 ** 64 - 1, rng)
        assert bits(fn(x, layout=layout, backend="numba", **kw)) == bits(fn(x, layout=layout, backend="cpu", **kw))
    xs = [random_images(rng, 1, h, w, 3, "float32")[0] for h, w in [(2, 3), (4, 1), (1, 5)]]
    kw = noise_kw(name, 3, "float32", 9, rng)
    for a, b in zip(fn(xs, backend="numba", **kw), fn(xs, backend="cpu", **kw)):
        assert bits(a) == bits(b)


# -- gpuaug.random: the documented draw order; what parameters depend on ---------------------

SIZES = np.array([[20, 30], [31, 17], [8, 8], [64, 40]])
SAMPLERS = [
    lambda g: GR.bernoulli(g, 0.3, 4),
    lambda g: GR.uniform(g, -1.0, 2.0, 4),
    lambda g: GR.integers(g, 0, SIZES[:, 0], 4),
    lambda g: GR.seed64(g),
    lambda g: GR.affine(g, 4, SIZES, (-30, 30), (0.1, 0.2), (0.8, 1.2), (-5, 5, -3, 3)),
    lambda g: GR.resized_crop_boxes(g, SIZES),
    lambda g: GR.perspective_corners(g, SIZES, 0.4),
    lambda g: GR.erasing_boxes(g, SIZES),
    lambda g: GR.crop_offsets(g, SIZES, (8, 8), (2, 2, 2, 2)),
    lambda g: GR.permutations(g, 4, 3),
]


def test_samplers_same_seed_same_parameters():
    for seed in (0, 1, 2 ** 40):
        a, b = GR.generator(seed), GR.generator(seed)
        for draw in SAMPLERS:
            ra, rb = draw(a), draw(b)
            if isinstance(ra, dict):
                assert ra.keys() == rb.keys() and all(np.array_equal(ra[k], rb[k]) for k in ra)
            else:
                assert np.array_equal(ra, rb)
        # both generators consumed the same numbers: they are still in step
        assert a.bit_generator.state == b.bit_generator.state


def test_affine_draw_order_is_the_documented_block():
    """RandomAffine's parameters: one (k, n) block of uniforms, quantity-major, as documented.
    Hence sample i's parameters depend on n (the tx block starts at draw n): the contract is
    (seed, n, sizes) -> parameters, and the angle (first block) alone is prefix-stable."""
    n, sizes = 6, np.array([[20, 30]] * 6)
    got = GR.affine(GR.generator(3), n, sizes, (-30, 30), (0.1, 0.2), (0.8, 1.2), (-5, 5))
    u = np.random.default_rng(3).random((5, n))
    np.testing.assert_array_equal(got["angle"], -30 + 60 * u[0])
    np.testing.assert_array_equal(got["tx"], np.rint(0.1 * 30 * (2 * u[1] - 1)))
    np.testing.assert_array_equal(got["ty"], np.rint(0.2 * 20 * (2 * u[2] - 1)))
    np.testing.assert_array_equal(got["scale"], 0.8 + (1.2 - 0.8) * u[3])
    np.testing.assert_array_equal(got["shear_x"], -5 + 10 * u[4])
    small = GR.affine(GR.generator(3), 4, sizes[:4], (-30, 30), (0.1, 0.2), (0.8, 1.2), (-5, 5))
    np.testing.assert_array_equal(small["angle"], got["angle"][:4])
    assert not np.array_equal(small["scale"], got["scale"][:4])  # the documented n-dependence


def test_samplers_consume_a_fixed_amount_per_n():
    """"The stream of numbers a sampler consumes depends only on n and its arguments": for any
    seed a sampler consumes the same number of draws, so what a later transform of a policy
    draws never shifts with the values an earlier one drew (counted by stepping a second
    generator of the same seed one double at a time until it is in step)."""
    for sampler in SAMPLERS:
        ends = set()
        for seed in range(5):
            g = GR.generator(seed)
            sampler(g)
            # the number of 64-bit draws consumed: advance a copy step by step until it matches
            h = GR.generator(seed)
            for k in range(1000):
                if h.bit_generator.state == g.bit_generator.state:
                    break
                h.random()
            else:
                pytest.fail("could not count the draws")
            ends.add(k)
        assert len(ends) == 1, ends


# -- Compose: parameters depend on the seed, n and sizes only ---------------------------------

def _policy():
    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomResizedCrop(6),
                           gpuaug.ColorJitter(0.3, 0.3, 0.3, 0.05), gpuaug.GaussianNoise(sigma=0.05),
                           gpuaug.RandomErasing(p=0.7)], draws="host")


def _same_params(p, q):
    assert p.n == q.n and np.array_equal(p.sizes, q.sizes) and len(p) == len(q)
    for a, b in zip(p.values, q.values):
        assert a.keys() == b.keys()
        for k in a:
            assert np.array_equal(a[k], b[k]), k


def test_compose_same_seed_same_bits_and_parameters():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (3, 9, 11, 3), dtype=np.uint8)
    policy = _policy()
    y = policy(x, seed=2024)
    p = policy.last_params
    for _ in range(2):
        assert bits(policy(x, seed=2024)) == bits(y)
        _same_params(policy.last_params, p)
    # a fresh Compose of the same transforms, the same seed: the same
    other = gpuaug.Compose(policy.transforms, draws="host")
    assert bits(other(x, seed=2024)) == bits(y)
    # sample() draws what the call draws, from sizes alone
    _same_params(policy.sample(np.array([[9, 11]] * 3), seed=2024), p)


def test_compose_parameters_do_not_depend_on_pixels_dtype_layout_or_backend():
    rng = np.random.default_rng(6)
    x = rng.integers(0, 256, (3, 9, 11, 3), dtype=np.uint8)
    policy = _policy()
    ref = policy.sample(x, seed=11)
    _same_params(policy.sample(255 - x, seed=11), ref)
    _same_params(policy.sample(x.astype(np.float32) / 255, seed=11), ref)
    _same_params(policy.sample(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), seed=11, layout="NCHW"), ref)
    policy(x.astype(np.float32) / 255, seed=11)
    _same_params(policy.last_params, ref)


@pytest.mark.skipif(not SIM, reason="a GPU is present: the twins are compared by the gpu tests")
def test_compose_twins_draw_the_same_and_agree():
    """The numba backend (simulator) draws the same parameters and gives the CPU twin's noise;
    a geometry-free uint8 policy with noise gives the same bits on both twins."""
    rng = np.random.default_rng(8)
    x = rng.integers(0, 256, (2, 4, 5, 3), dtype=np.uint8)
    policy = gpuaug.Compose([gpuaug.GaussianNoise(sigma=0.1), gpuaug.RandomErasing(p=1.0)], draws="host")
    a = policy(x, seed=3, backend="cpu")
    pa = policy.last_params
    b = policy(x, seed=3, backend="numba")
    _same_params(policy.last_params, pa)
    assert bits(a) == bits(b)


# -- GPU: CUDA C vs the CPU twin, and run-to-run on the device ---------------------------------

@gpu
@pytest.mark.parametrize("name", NOISE)
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_gpu_noise_bits_equal_cpu_and_are_index_keyed(name, backend):
    import cupy

    rng = np.random.default_rng(9)
    fn = gpuaug.registry[name].func
    for dtype in DTYPES:
        for layout in LAYOUTS:
            x = to_layout(random_images(rng, 6, 37, 61, 3, dtype), layout)
            kw = noise_kw(name, 6, dtype, 2 ** 63 + 99, rng)
            cpu = fn(x, layout=layout, **kw)
            xd = cupy.asarray(x)
            dev = fn(xd, layout=layout, backend=backend, **kw)
            assert bits(cupy.asnumpy(dev)) == bits(cpu), (dtype, layout)
            assert bits(cupy.asnumpy(fn(xd, layout=layout, backend=backend, **kw))) == bits(cpu)
            pre = fn(xd[:2], layout=layout, backend=backend, **slice_params(name, kw, 6, slice(0, 2)))
            assert bits(cupy.asnumpy(pre)) == bits(cpu[:2]), "prefix batch"


@gpu
@pytest.mark.parametrize("name", OPS)
def test_gpu_runs_are_bit_identical_and_match_cpu(name):
    """Every op on the CUDA C backend: two runs give the same bits (no order-dependent
    reductions), each sample alone gives its in-batch bits, and the CPU twin agrees within the
    documented rounding (noise: bit for bit)."""
    import cupy

    spec = gpuaug.registry[name]
    rng = np.random.default_rng(200 + OPS.index(name))
    n, h, w = 5, 33, 33
    c = 3 if 3 in spec.channels else spec.channels[0]
    for dtype in ("uint8", "float32"):
        x = random_images(rng, n, h, w, c, dtype)
        kw = example(name, rng, n, h, w, dtype)
        xd = cupy.asarray(x)
        a = cupy.asnumpy(spec.func(xd, backend="cuda", **kw))
        b = cupy.asnumpy(spec.func(xd, backend="cuda", **kw))
        assert bits(a) == bits(b), f"{name} {dtype}: run to run"
        cpu = spec.func(x, backend="cpu", **kw)
        if name in NOISE:
            assert bits(a) == bits(cpu)
        else:
            _twin_tol(a, cpu, cpu.dtype, name, f"{name} {dtype}")
            # batch size and position: sample i's parameters for every sample (so the launch
            # plan, which may depend on the batch's largest kernel, is the same), run in the
            # batch of n and alone
            i = 3
            one = slice_params(name, kw, n, slice(i, i + 1))
            every = slice_params(name, kw, n, [i] * n)
            batch = cupy.asnumpy(spec.func(xd, backend="cuda", **every))
            alone = cupy.asnumpy(spec.func(xd[i:i + 1], backend="cuda", **one))
            assert bits(alone[0]) == bits(batch[i]), f"{name} {dtype}: sample alone"


@gpu
def test_gpu_compose_same_parameters_and_repeatable():
    import cupy

    rng = np.random.default_rng(10)
    x = rng.integers(0, 256, (4, 40, 48, 3), dtype=np.uint8)
    policy = _policy()
    want = policy(x, seed=5)
    p = policy.last_params
    xd = cupy.asarray(x)
    got = cupy.asnumpy(policy(xd, seed=5))
    _same_params(policy.last_params, p)
    assert bits(cupy.asnumpy(policy(xd, seed=5))) == bits(got), "run to run on the GPU"
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.abs(got.astype(np.int64) - want).max() <= 1


# -- regressions: parameters the twins used to read differently ------------------------------
# The CPU twin reads its parameters as float64, the CUDA kernels (CUDA C and the Numba CUDA
# twin) as float32. Where a parameter decides a comparison or a stored value, a value that is
# not a float32 number made the backends disagree:
# - solarize: a threshold just above a pixel value (100.000001) rounded down to it in float32,
#   so the GPU inverted pixels the CPU kept (a difference of 155 levels for uint8);
# - erase / pad: a fill value stored as float16 (or rounded for uint8) from its float32
#   rounding on the GPU (double rounding: 0.8322754063453663 -> 0.83227539 -> 0.83203125
#   instead of 0.83251953; 2.4999999999 -> 2.5 -> 3 instead of 2) but from float64 on the CPU.
# Fixed on the host: the threshold is rounded up to float32 (x >= t <=> x >= up32(t) for
# every uint8/float16/float32 x), fill values are converted to the output dtype first (as the
# warps' fills always were), so every backend sees the same float32-exact value.

import ref_intensity as RI  # noqa: E402
from helpers import check_op  # noqa: E402

EDGE_THRESHOLDS = {"uint8": [100.000001, 99.9999999, 254.5], "float16": [0.250000001, 0.2499999999],
                   "float32": [0.25000001, 0.2499999999]}


def _edge_images(dtype):
    """Pixels equal to float32(threshold) and its neighbours."""
    vals = {"uint8": [99, 100, 101, 254, 255], "float16": [0.25, 0.2498, 0.2502],
            "float32": [0.25, np.nextafter(np.float32(0.25), np.float32(0)),
                        np.nextafter(np.float32(0.25), np.float32(1))]}
    v = np.array(vals[dtype], dtype)
    return np.broadcast_to(v[None, :, None, None], (len(EDGE_THRESHOLDS[dtype]), len(v), 2, 3)).copy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ["cpu", "numba-sim"])
def test_solarize_threshold_not_a_float32_number(dtype, backend):
    if backend == "numba-sim" and not SIM:
        pytest.skip("a GPU is present: see test_gpu_solarize_threshold_not_a_float32_number")
    t = np.array(EDGE_THRESHOLDS[dtype])
    x = _edge_images(dtype)
    m = RI.top(dtype)
    # uint8 exactly; floats to their rounding of m - x (a wrong decision is off by ~0.5)
    check_op(gpuaug.solarize, lambda s, i: RI.solarize(s, t[i], m), x, {"threshold": t}, backend=backend,
             atol_u8=0)


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_gpu_solarize_threshold_not_a_float32_number(dtype, backend):
    t = np.array(EDGE_THRESHOLDS[dtype])
    x = _edge_images(dtype)
    m = RI.top(dtype)
    for layout in LAYOUTS:  # NHWC uint8: the SIMD fast path; NCHW: the generic kernel
        check_op(gpuaug.solarize, lambda s, i: RI.solarize(s, t[i], m), x, {"threshold": t}, backend=backend,
                 layout=layout, atol_u8=0)


EDGE_FILLS = {"uint8": [2.4999999999, 127.49999999, 254.4999999999], "float16": [0.8322754063453663, 0.5, -1.0],
              "float32": [0.1, 1 / 3, 2.0]}


def _stored(v, dtype):
    v = np.asarray(v, np.float64)
    if np.dtype(dtype) == np.uint8:
        return np.clip(np.floor(v + 0.5), 0, 255)
    return v.astype(dtype).astype(np.float64)


def _captured_params(monkeypatch, module, fn, *args, **kw):
    """The (N, P) parameter table ``module.run`` receives (what the CUDA C kernel reads, as float32)."""
    got = {}
    monkeypatch.setattr(module, "run", lambda b, kernels, params, **k: got.update(params=params, batch=b))
    fn(*args, **kw)
    monkeypatch.undo()
    return np.asarray(got["params"], np.float64), got["batch"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_values_reach_every_backend_as_stored(dtype, monkeypatch):
    """pad's value and erase's value enter the kernels' parameter table as the output dtype stores
    them (float32-exact): the CUDA C kernels' float32 read then stores exactly the CPU twin's value."""
    import gpuaug.ops.erase as E
    import gpuaug.ops.pad as P

    v = np.array(EDGE_FILLS[dtype])
    x = random_images(np.random.default_rng(12), 3, 4, 5, 3, dtype)
    want = _stored(v, dtype)
    params, _ = _captured_params(monkeypatch, P, gpuaug.pad, x, 1, value=v)
    assert np.array_equal(params[:, 3], want)
    assert np.array_equal(params[:, 3].astype(np.float32).astype(np.float64), want)
    params, _ = _captured_params(monkeypatch, E, gpuaug.erase, x, [[1, 1, 2, 2]], value=v)
    assert np.array_equal(params[:, 0], want) and np.array_equal(params[:, 2], want)
    # and the CPU twin stores the same values
    y = gpuaug.pad(x, 1, value=v)
    assert np.array_equal(y[:, 0, 0, 0].astype(np.float64), want)
    y = gpuaug.erase(x, [[1, 1, 2, 2]], value=v)
    assert np.array_equal(y[:, 1, 1, 0].astype(np.float64), want)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pad_fill_cuda_c_emulated_matches_cpu(layout, monkeypatch):
    """The CUDA C pad kernel (crop.cu's window rows, run on the CPU by tests/cuda_emu.py) with
    the parameters the op builds: the CPU twin's bits at the rounding edges."""
    import cuda_emu
    import gpuaug.ops.pad as P
    from gpuaug.ops.crop import KERNELS, rows_fast

    for dtype in ("uint8", "float16"):
        v = np.array(EDGE_FILLS[dtype])
        x = random_images(np.random.default_rng(13), 3, 4, 16, 3, dtype)
        xin = to_layout(x, layout)
        params, _ = _captured_params(monkeypatch, P, gpuaug.pad, xin, (1, 0, 0, 0), value=v, layout=layout)
        cuda_emu.patch(monkeypatch, ["crop.cu"], KERNELS.variants)
        got = cuda_emu.run_fast(rows_fast(-1, 3, P.MODES["constant"]), xin, layout, [(5, 16)] * 3, params)
        monkeypatch.undo()
        assert got is not None, "the fast path declined"
        want = from_layout(gpuaug.pad(xin, (1, 0, 0, 0), value=v, layout=layout), layout)
        assert bits(np.ascontiguousarray(got)) == bits(np.ascontiguousarray(want)), dtype


@pytest.mark.parametrize("dtype, threshold, pixels", [
    ("uint8", 100.000001, [99, 100, 101]),   # float32(t) = 100 < t: the GPU inverted 100
    ("float32", 0.7, [0.7, 0.69, 0.71]),    # float32(0.7) < 0.7: the GPU inverted float32(0.7)
])
def test_compose_solarize_threshold_not_a_float32_number(dtype, threshold, pixels):
    """RandomSolarize in a fused stage: the CPU twin keeps what ``x >= threshold`` keeps, and the
    Numba CUDA twin (simulator; float32 parameters, as the CUDA C kernel) decides the same."""
    x = np.broadcast_to(np.array(pixels, dtype)[None, None, :, None], (1, 1, len(pixels), 3)).copy()
    policy = gpuaug.Compose([gpuaug.RandomSolarize(threshold, p=1.0)], draws="host")
    m = RI.top(dtype)
    want = RI.solarize(x.astype(np.float64), threshold, m)
    got = policy(x, seed=0, backend="cpu")
    assert_close(got, want, dtype, atol_u8=0, what="cpu")
    if SIM:
        sim = policy(x, seed=0, backend="numba")
        assert_close(sim, want, dtype, atol_u8=0, what="numba (simulator)")
