import numpy as np
import pytest

import gpuaug
import ref_filters as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images, to_layout

EXACT = {"atol_u8": 0, "rtol": 0.0}  # integer decisions: every backend matches the reference exactly


def _white(dtype):
    return 255.0 if dtype == "uint8" else 1.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_salt_and_pepper_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    prob = np.array([0.0, 0.05, 0.3, 1.0, 0.5])
    svp = np.array([0.5, 0.0, 0.7, 1.0, 0.25])
    w = _white(dtype)
    check_op(gpuaug.salt_and_pepper, lambda s, i: R.salt_and_pepper(s, i, prob[i], svp[i], 42, w), x,
             {"prob": prob, "salt_vs_pepper": svp, "seed": 42}, layout=layout, **EXACT)
    check_op(gpuaug.salt_and_pepper, lambda s, i: R.salt_and_pepper(s, i, 0.1, 0.5, 2 ** 64 - 5, w), x,
             {"prob": 0.1, "seed": 2 ** 64 - 5}, layout=layout, **EXACT)


@pytest.mark.parametrize("dtype", DTYPES)
def test_salt_and_pepper_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (2, 1)]]
    prob = [0.5, 0.2, 0.9, 1.0]
    w = _white(dtype)
    check_op(gpuaug.salt_and_pepper, lambda s, i: R.salt_and_pepper(s, i, prob[i], 0.5, 7, w), xs,
             {"prob": prob, "seed": 7}, varshape=True, **EXACT)


def test_salt_and_pepper_statistics_and_layouts():
    x = np.full((4, 100, 120, 3), 77, np.uint8)
    y = gpuaug.salt_and_pepper(x, prob=[0.1, 0.3, 0.0, 1.0], salt_vs_pepper=[0.5, 0.2, 0.5, 1.0], seed=3)
    assert (y.min(-1) == y.max(-1)).all()  # whole pixels
    px = y[..., 0]
    assert abs((px[0] != 77).mean() - 0.1) < 0.01 and abs((px[0] == 255).mean() - 0.05) < 0.01
    assert abs((px[1] != 77).mean() - 0.3) < 0.015 and abs((px[1] == 255).mean() - 0.06) < 0.01
    assert (px[2] == 77).all() and (px[3] == 255).all()
    b = gpuaug.salt_and_pepper(to_layout(x, "NCHW"), prob=[0.1, 0.3, 0.0, 1.0],
                               salt_vs_pepper=[0.5, 0.2, 0.5, 1.0], seed=3, layout="NCHW")
    np.testing.assert_array_equal(b.transpose(0, 2, 3, 1), y)
    assert not np.array_equal(gpuaug.salt_and_pepper(x, 0.1, seed=4), y)


@pytest.mark.parametrize("kw, exc, match", [
    ({"prob": 1.5, "seed": 1}, ValueError, "prob: got 1.5; expected values <= 1.0"),
    ({"prob": -0.1, "seed": 1}, ValueError, "prob: got -0.1; expected values >= 0.0"),
    ({"prob": [0.1, np.nan, 0.2], "seed": 1}, ValueError, "prob: .*finite"),
    ({"prob": [0.1, 0.2], "seed": 1}, ValueError, "prob: got shape"),
    ({"prob": 0.1, "salt_vs_pepper": 2.0, "seed": 1}, ValueError, "salt_vs_pepper: got 2.0"),
    ({"prob": 0.1}, TypeError, "seed: got None"),
    ({"prob": 0.1, "seed": -3}, ValueError, "seed: got -3"),
])
def test_salt_and_pepper_bad_parameters(kw, exc, match):
    with pytest.raises(exc, match=match):
        gpuaug.salt_and_pepper(np.zeros((3, 8, 8, 3), np.uint8), **kw)


def test_salt_and_pepper_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the Numba CUDA twin is tested by test_salt_and_pepper_gpu")
    rng = np.random.default_rng(3)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 9, 3, dtype)
        w = _white(dtype)
        check_op(gpuaug.salt_and_pepper, lambda s, i: R.salt_and_pepper(s, i, 0.5, 0.5, 99, w), x,
                 {"prob": 0.5, "seed": 99}, backend="numba-sim", layout="NCHW", **EXACT)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_salt_and_pepper_gpu(backend, dtype, layout):
    rng = np.random.default_rng(4)
    prob = np.array([0.0, 0.05, 0.3, 1.0, 0.5])
    svp = np.array([0.5, 0.0, 0.7, 1.0, 0.25])
    w = _white(dtype)
    for c in (1, 3, 4):
        x = random_images(rng, 5, 37, 67, c, dtype)
        check_op(gpuaug.salt_and_pepper, lambda s, i: R.salt_and_pepper(s, i, prob[i], svp[i], 42, w), x,
                 {"prob": prob, "salt_vs_pepper": svp, "seed": 42}, layout=layout, backend=backend, **EXACT)
    xs = [random_images(rng, 1, h, w_, 3, dtype)[0] for h, w_ in [(5, 7), (37, 53), (1, 9), (64, 64)]]
    check_op(gpuaug.salt_and_pepper, lambda s, i: R.salt_and_pepper(s, i, 0.4, 0.5, 7, w), xs,
             {"prob": 0.4, "seed": 7}, varshape=True, backend=backend, **EXACT)
