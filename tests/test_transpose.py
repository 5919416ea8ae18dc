import numpy as np
import pytest

import gpuaug
import ref_copyops as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_transpose_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    check_op(gpuaug.transpose, lambda s, i: R.transpose(s), x, {}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (8, 1)]]
    check_op(gpuaug.transpose, lambda s, i: R.transpose(s), xs, {}, varshape=True)


def test_transpose_single_image_and_noncontiguous():
    rng = np.random.default_rng(3)
    img = random_images(rng, 1, 9, 11, 3, "uint8")[0]
    np.testing.assert_array_equal(gpuaug.transpose(img), img.transpose(1, 0, 2))
    chw = np.ascontiguousarray(img.transpose(2, 0, 1))
    np.testing.assert_array_equal(gpuaug.transpose(chw, layout="NCHW"), chw.transpose(0, 2, 1))
    big = random_images(rng, 4, 20, 30, 3, "uint8")
    view = big[::2, 3:17, ::3]  # non-contiguous
    np.testing.assert_array_equal(gpuaug.transpose(view), view.transpose(0, 2, 1, 3))


def test_transpose_identities():
    rng = np.random.default_rng(4)
    x = random_images(rng, 3, 13, 17, 4, "float16")
    np.testing.assert_array_equal(gpuaug.transpose(gpuaug.transpose(x)), x)
    # transpose = rot90 then vertical flip
    np.testing.assert_array_equal(gpuaug.transpose(x), gpuaug.flip(gpuaug.rot90(x), False, True))


def test_transpose_out_shape():
    x = np.zeros((2, 5, 7, 3), np.uint8)
    with pytest.raises(ValueError, match=r"out: got shape \(2, 5, 7, 3\).*expected shape \(2, 7, 5, 3\)"):
        gpuaug.transpose(x, out=np.zeros((2, 5, 7, 3), np.uint8))


def test_transpose_simulator():
    """The Numba CUDA twin (in the simulator without a GPU, on the GPU otherwise)."""
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_transpose_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        check_op(gpuaug.transpose, lambda s, i: R.transpose(s), x, {}, backend="numba-sim",
                 layout="NCHW")
        check_op(gpuaug.transpose, lambda s, i: R.transpose(s), x, {}, backend="numba-sim")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_transpose_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    for c, (h, w) in [(1, (37, 53)), (3, (37, 53)), (4, (37, 53)), (3, (64, 96)), (1, (32, 32)),
                      (3, (3, 1200))]:
        x = random_images(rng, 5, h, w, c, dtype)
        check_op(gpuaug.transpose, lambda s, i: R.transpose(s), x, {}, layout=layout, backend=backend)
        # non-contiguous input: the generic kernel
        xs = np.ascontiguousarray(x[:, ::-1])
        check_op(gpuaug.transpose, lambda s, i: R.transpose(s), xs, {}, layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9)]]
    check_op(gpuaug.transpose, lambda s, i: R.transpose(s), xs, {}, varshape=True, backend=backend)
