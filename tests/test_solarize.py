import numpy as np
import pytest

import gpuaug
import ref_intensity as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


def _thresholds(rng, n, m):
    t = rng.uniform(0, m, n)
    t[0] = 0.0
    if n > 2:
        t[1], t[2] = m, (np.floor(m / 2) + 0.5 if m > 1 else 0.5)  # top of range, a half-integer
    return t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_solarize_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    m = R.top(dtype)
    t = _thresholds(rng, 5, m)
    check_op(gpuaug.solarize, lambda s, i: R.solarize(s, t[i], m), x, {"threshold": t}, layout=layout, atol_u8=0)
    check_op(gpuaug.solarize, lambda s, i: R.solarize(s, m / 2, m), x, {"threshold": m / 2}, layout=layout,
             atol_u8=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solarize_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    m = R.top(dtype)
    t = _thresholds(rng, 3, m)
    check_op(gpuaug.solarize, lambda s, i: R.solarize(s, t[i], m), xs, {"threshold": t}, varshape=True, atol_u8=0)


def test_solarize_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="threshold: .*<= 255"):
        gpuaug.solarize(x, 256)
    with pytest.raises(ValueError, match="threshold: .*<= 1"):
        gpuaug.solarize(x.astype(np.float32), 2.0)
    with pytest.raises(ValueError, match="threshold: .*>= 0"):
        gpuaug.solarize(x, -1)
    with pytest.raises(ValueError, match="threshold: .*finite"):
        gpuaug.solarize(x, [np.nan, 1])
    with pytest.raises(ValueError, match="threshold: got shape"):
        gpuaug.solarize(x, [1, 2, 3])


def test_solarize_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    for dtype, t in (("uint8", 100), ("uint8", 127.5), ("float32", 0.3)):
        x = random_images(rng, 2, 9, 11, 3, dtype)
        tv = F.solarize(torch.from_numpy(x).permute(0, 3, 1, 2), t).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(gpuaug.solarize(x, t), tv, rtol=1e-6)


def test_solarize_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_solarize_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        m = R.top(dtype)
        t = [m / 3, m / 2]
        check_op(gpuaug.solarize, lambda s, i: R.solarize(s, t[i], m), x, {"threshold": t},
                 backend="numba-sim", layout="NCHW", atol_u8=0)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_solarize_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    m = R.top(dtype)
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:
            x = random_images(rng, 5, h, w, c, dtype)
            t = _thresholds(rng, 5, m)
            check_op(gpuaug.solarize, lambda s, i: R.solarize(s, t[i], m), x, {"threshold": t},
                     layout=layout, backend=backend, atol_u8=0)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.solarize, lambda s, i: R.solarize(s, m / 2, m), xs, {"threshold": m / 2}, varshape=True,
             backend=backend, atol_u8=0)


def test_solarize_compiled_rows_equal_float32_at_least():
    """Host thresholds take one compiled loop (issue 13): the rows equal [float32_at_least(t),
    max] bit for bit, on random values and float32 rounding edges (subnormals, values just
    above a float32, the range's ends)."""
    from gpuaug._run import describe
    from gpuaug.ops._launch import float32_at_least

    rng = np.random.default_rng(5)
    f32 = np.float32(0.1).astype(np.float64)
    edges = [0.0, 1.0, 1e-40, 1e-46, f32, np.nextafter(f32, 1.0), np.nextafter(f32, 0.0), 1 / 3, 0.5]
    for dtype, top, values in (("uint8", 255.0, np.concatenate([rng.uniform(0, 255, 200), [0.0, 255.0, 127.5]])),
                               ("float32", 1.0, np.concatenate([rng.uniform(0, 1, 200), edges]))):
        x = np.zeros((values.size, 2, 2, 1), dtype)
        got = describe(gpuaug.ops.solarize.solarize, x, threshold=values).params
        want = np.column_stack([float32_at_least(values), np.full(values.size, top)])
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), dtype
