import numpy as np
import pytest

import gpuaug
import ref_copyops as R
from helpers import DTYPES, LAYOUTS, SIM, assert_close, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9), (16, 16)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_rot90_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    for k in ([1, 3, -1, -3, 1], [0, 2, -2, 2, 0]):  # one parity: non-square images
        check_op(gpuaug.rot90, lambda s, i: R.rot90(s, k[i]), x, {"k": np.array(k)}, layout=layout)
    check_op(gpuaug.rot90, lambda s, i: R.rot90(s, 1), x, {}, layout=layout)
    check_op(gpuaug.rot90, lambda s, i: R.rot90(s, 2), x, {"k": 2}, layout=layout)
    sq = random_images(rng, 5, 19, 19, channels, dtype)
    k = [0, 1, 2, 3, -1]  # square images may mix parities
    check_op(gpuaug.rot90, lambda s, i: R.rot90(s, k[i]), sq, {"k": k}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rot90_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    k = [1, 2, 3, -1]
    check_op(gpuaug.rot90, lambda s, i: R.rot90(s, k[i]), xs, {"k": k}, varshape=True)
    check_op(gpuaug.rot90, lambda s, i: R.rot90(s, 1), xs, {}, varshape=True)


def test_rot90_single_image_and_noncontiguous():
    rng = np.random.default_rng(3)
    img = random_images(rng, 1, 9, 11, 3, "uint8")[0]
    for k in range(-3, 4):
        np.testing.assert_array_equal(gpuaug.rot90(img, k), np.rot90(img, k))
    chw = np.ascontiguousarray(img.transpose(2, 0, 1))
    np.testing.assert_array_equal(gpuaug.rot90(chw, 1, layout="NCHW"), np.rot90(chw, 1, axes=(1, 2)))
    big = random_images(rng, 4, 20, 30, 3, "uint8")
    view = big[::2, 3:17, ::3]  # non-contiguous
    np.testing.assert_array_equal(gpuaug.rot90(view, 3), np.rot90(view, 3, axes=(1, 2)))


def test_rot90_identities():
    rng = np.random.default_rng(4)
    x = random_images(rng, 3, 13, 17, 4, "float32")
    y = x
    for _ in range(4):
        y = gpuaug.rot90(y)
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(gpuaug.rot90(gpuaug.rot90(x, [1, 3, -1]), [-1, -3, 1]), x)
    np.testing.assert_array_equal(gpuaug.rot90(x, 2), gpuaug.rot90(gpuaug.rot90(x)))
    # rot90 = transpose then vertical flip
    np.testing.assert_array_equal(gpuaug.rot90(x), gpuaug.flip(gpuaug.transpose(x), False, True))


def test_rot90_bad_params():
    x = random_images(np.random.default_rng(5), 3, 6, 8, 3, "uint8")
    with pytest.raises(ValueError, match=r"k: got 4; expected integers in -3\.\.3"):
        gpuaug.rot90(x, 4)
    with pytest.raises(ValueError, match=r"k: got \[1, -5, 1\]; expected integers in -3\.\.3"):
        gpuaug.rot90(x, [1, -5, 1])
    with pytest.raises(ValueError, match="k: got 1.5; expected integers"):
        gpuaug.rot90(x, 1.5)
    with pytest.raises(ValueError, match=r"k: got shape \(2,\)"):
        gpuaug.rot90(x, [1, 1])
    with pytest.raises(ValueError, match=r"k: got \[1, 2, 1\]; the images are 6x8 \(not square\).*parity"):
        gpuaug.rot90(x, [1, 2, 1])
    with pytest.raises(TypeError, match="k: got"):
        gpuaug.rot90(x, "one")


def test_rot90_simulator():
    """The Numba CUDA twin (in the simulator without a GPU, on the GPU otherwise)."""
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_rot90_gpu")
    rng = np.random.default_rng(6)
    for dtype in DTYPES:
        x = random_images(rng, 4, 3, 5, 3, dtype)
        k = [1, 3, -1, -3]
        check_op(gpuaug.rot90, lambda s, i: R.rot90(s, k[i]), x, {"k": k},
                 backend="numba-sim", layout="NCHW")
        k2 = [0, 2, -2, 2]
        check_op(gpuaug.rot90, lambda s, i: R.rot90(s, k2[i]), x, {"k": k2}, backend="numba-sim")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_rot90_gpu(backend, dtype, layout):
    import cupy

    rng = np.random.default_rng(7)
    for c, (h, w) in [(1, (37, 53)), (3, (37, 53)), (4, (37, 53)), (3, (64, 96)), (1, (32, 32)),
                      (3, (3, 1200))]:
        x = random_images(rng, 5, h, w, c, dtype)
        for k in ([1, 3, -1, -3, 1], [0, 2, -2, 2, 0]):
            check_op(gpuaug.rot90, lambda s, i: R.rot90(s, k[i]), x, {"k": k}, layout=layout,
                     backend=backend)
        # non-contiguous input: the generic kernel
        R.check_strided_gpu(gpuaug.rot90, lambda s, i: R.rot90(s, [1, 3, -1, -3, 1][i]), x,
                            {"k": [1, 3, -1, -3, 1]}, layout=layout, backend=backend)
    sq = random_images(rng, 5, 19, 19, 3, dtype)
    k = np.array([0, 1, 2, 3, -1])
    # k on the GPU (square images), not normalised on the host; even out of -3..3
    check_op(gpuaug.rot90, lambda s, i: R.rot90(s, k[i]), sq, {"k": cupy.asarray(k + 4)},
             layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    kv = [1, 2, 3, -1]
    check_op(gpuaug.rot90, lambda s, i: R.rot90(s, kv[i]), xs, {"k": kv}, varshape=True,
             backend=backend)


def test_rot90_even_k_takes_flip(monkeypatch):
    """On the cuda backend, all-even k is a flip of both axes (or a copy): flip's kernels."""
    import gpuaug.ops.flip as flip_mod
    import gpuaug.ops.rot90 as rot_mod

    calls = []
    monkeypatch.setattr(flip_mod, "flip", lambda x, h, v, **kw: calls.append((list(h), list(v), kw)))
    monkeypatch.setattr(rot_mod, "choose_backend", lambda b, backend: "cuda")
    x = random_images(np.random.default_rng(8), 3, 6, 8, 3, "uint8")
    rot_mod.rot90(x, [2, 0, -2], layout="NHWC")
    assert calls == [([True, False, True], [True, False, True],
                      {"out": None, "layout": "NHWC", "stream": None, "backend": "cuda"})]
