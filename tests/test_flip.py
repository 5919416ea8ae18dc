import numpy as np
import pytest

import gpuaug
import reference as R
from helpers import DTYPES, LAYOUTS, check_op, gpu, random_images


def _case(rng, n, dtype, c, h=37, w=53):
    x = random_images(rng, n, h, w, c, dtype)
    hf, vf = rng.random(n) < 0.5, rng.random(n) < 0.5
    hf[0], vf[0] = True, True
    return x, hf, vf


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_flip_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x, hf, vf = _case(rng, 5, dtype, channels)
    check_op(gpuaug.flip, lambda s, i: R.flip(s, hf[i], vf[i]), x,
             {"horizontal": hf, "vertical": vf}, layout=layout)
    check_op(gpuaug.flip, lambda s, i: R.flip(s, True, False), x, {}, layout=layout)
    check_op(gpuaug.flip, lambda s, i: R.flip(s, False, True), x,
             {"horizontal": 0, "vertical": 1}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9)]]
    hf, vf = [True, False, True], [False, True, True]
    check_op(gpuaug.flip, lambda s, i: R.flip(s, hf[i], vf[i]), xs,
             {"horizontal": hf, "vertical": vf}, varshape=True)


def test_flip_single_image_and_noncontiguous():
    rng = np.random.default_rng(3)
    img = random_images(rng, 1, 9, 11, 3, "uint8")[0]
    np.testing.assert_array_equal(gpuaug.flip(img), img[:, ::-1])
    big = random_images(rng, 4, 20, 30, 3, "uint8")
    view = big[::2, 3:17, ::3]  # non-contiguous
    np.testing.assert_array_equal(gpuaug.flip(view, vertical=True), view[:, ::-1, ::-1])


def test_flip_twice_is_identity():
    rng = np.random.default_rng(4)
    x = random_images(rng, 3, 13, 17, 4, "float32")
    np.testing.assert_array_equal(gpuaug.flip(gpuaug.flip(x, vertical=True), vertical=True), x)


def test_flip_simulator():
    """The Numba CUDA twin (in the simulator without a GPU, on the GPU otherwise)."""
    from helpers import SIM

    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_flip_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x, hf, vf = _case(rng, 2, dtype, 3, 3, 5)
        check_op(gpuaug.flip, lambda s, i: R.flip(s, hf[i], vf[i]), x,
                 {"horizontal": hf, "vertical": vf}, backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_flip_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    # 37x53: rows not 16-byte multiples; 16x40: vectorised staged rows; 16x32 and 5x224:
    # 16-pixel groups in registers; 3x1208: one big staged row per block
    for c, (h, w) in [(1, (37, 53)), (3, (37, 53)), (4, (37, 53)), (3, (16, 40)), (1, (16, 32)),
                      (3, (16, 32)), (4, (5, 224)), (3, (3, 1208))]:
        x, hf, vf = _case(rng, 5, dtype, c, h, w)
        check_op(gpuaug.flip, lambda s, i: R.flip(s, hf[i], vf[i]), x,
                 {"horizontal": hf, "vertical": vf}, layout=layout, backend=backend)
        # non-contiguous input: the generic kernel
        xs = x[:, ::-1]
        check_op(gpuaug.flip, lambda s, i: R.flip(s, True, False), np.ascontiguousarray(xs), {},
                 layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9)]]
    check_op(gpuaug.flip, lambda s, i: R.flip(s, True, i == 1), xs,
             {"vertical": [False, True, False]}, varshape=True, backend=backend)
