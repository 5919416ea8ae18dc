import numpy as np
import pytest

import gpuaug
import ref_colour as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


def _matrices(rng, n):
    m = np.eye(3, 4)[None] + rng.uniform(-0.3, 0.3, (n, 3, 4))
    m[0] = np.eye(3, 4)
    m[1] = [[0.299, 0.587, 0.114, 0], [0.299, 0.587, 0.114, 0], [0.299, 0.587, 0.114, 0]]
    return m


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (3, 4))
def test_color_twist_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    mats, top = _matrices(rng, 5), R.top(dtype)
    check_op(gpuaug.color_twist, lambda s, i: R.color_twist(s, mats[i], top), x, {"matrix": mats}, layout=layout)
    check_op(gpuaug.color_twist, lambda s, i: R.color_twist(s, mats[2], top), x, {"matrix": mats[2]},
             layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_color_twist_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    mats, top = _matrices(rng, 3), R.top(dtype)
    check_op(gpuaug.color_twist, lambda s, i: R.color_twist(s, mats[i], top), xs, {"matrix": mats},
             varshape=True)


def test_color_twist_units_clamping_and_alpha():
    x = np.array([[[[10, 100, 200, 77]]]], np.uint8)
    lift = np.eye(3, 4)
    lift[:, 3] = 0.1  # + 0.1 of the range: 25.5 for uint8
    np.testing.assert_array_equal(gpuaug.color_twist(x, lift)[0, 0, 0], [36, 126, 226, 77])
    xf = x.astype(np.float32) / 255
    np.testing.assert_allclose(gpuaug.color_twist(xf, 2 * np.eye(3, 4))[0, 0, 0, :3], 2 * xf[0, 0, 0, :3],
                               rtol=1e-6)  # floats are not clamped
    np.testing.assert_array_equal(gpuaug.color_twist(x, 2 * np.eye(3, 4))[0, 0, 0], [20, 200, 255, 77])
    np.testing.assert_array_equal(gpuaug.color_twist(x, np.eye(3, 4)), x)


def test_color_twist_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="matrix: got shape"):
        gpuaug.color_twist(x, np.eye(3))
    with pytest.raises(ValueError, match="matrix: got shape"):
        gpuaug.color_twist(x, np.zeros((3, 3, 4)))
    bad = np.eye(3, 4)
    bad[1, 3] = np.inf
    with pytest.raises(ValueError, match="matrix: .*finite"):
        gpuaug.color_twist(x, bad)
    with pytest.raises(ValueError, match="x: got 1 channels"):
        gpuaug.color_twist(np.zeros((2, 4, 4, 1), np.uint8), np.eye(3, 4))


def test_color_twist_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_color_twist_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        mats, top = _matrices(rng, 2), R.top(dtype)
        check_op(gpuaug.color_twist, lambda s, i: R.color_twist(s, mats[i], top), x, {"matrix": mats},
                 backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_color_twist_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    top = R.top(dtype)
    for c in (3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:
            x = random_images(rng, 5, h, w, c, dtype)
            mats = _matrices(rng, 5)
            check_op(gpuaug.color_twist, lambda s, i: R.color_twist(s, mats[i], top), x, {"matrix": mats},
                     layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    mats = _matrices(rng, 3)
    check_op(gpuaug.color_twist, lambda s, i: R.color_twist(s, mats[i], top), xs, {"matrix": mats},
             varshape=True, backend=backend)
