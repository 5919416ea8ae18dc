import numpy as np
import pytest

import gpuaug
import ref_colour as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


def _with_grays(x):
    """Put gray pixels (max == min) and two-equal-channel pixels in, the HSV corner cases."""
    x = x.copy()
    x[:, 0, :4] = x[:, 0, :4, :1]
    x[:, 1, :4, 1] = x[:, 1, :4, 0]
    x[:, 1, 4:8, 2] = x[:, 1, 4:8, 1]
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_hue_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 6, 37, 53, channels, dtype)
    if channels >= 3:
        x = _with_grays(x)
    m = R.top(dtype)
    s = np.array([0.0, 0.1, -0.25, 0.5, -0.5, 0.37])
    check_op(gpuaug.hue, lambda a, i: R.hue(a, s[i], m), x, {"shift": s}, layout=layout)
    check_op(gpuaug.hue, lambda a, i: R.hue(a, -0.2, m), x, {"shift": -0.2}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hue_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    s, m = [0.3, 0.0, -0.45], R.top(dtype)
    check_op(gpuaug.hue, lambda a, i: R.hue(a, s[i], m), xs, {"shift": s}, varshape=True)


def test_hue_identities():
    rng = np.random.default_rng(3)
    x = random_images(rng, 3, 11, 13, 3, "float32")
    np.testing.assert_array_equal(gpuaug.hue(x, 0.0), x)  # exactly
    np.testing.assert_allclose(gpuaug.hue(gpuaug.hue(x, 0.5), 0.5), x, atol=1e-6)
    np.testing.assert_allclose(gpuaug.hue(gpuaug.hue(x, 0.2), -0.2), x, atol=1e-6)
    # a hue turn keeps each pixel's max and min
    y = gpuaug.hue(x, 0.3)
    np.testing.assert_allclose(y.max(-1), x.max(-1), atol=1e-7)
    np.testing.assert_allclose(y.min(-1), x.min(-1), atol=1e-7)
    primaries = np.array([[[[255, 0, 0], [0, 255, 0], [0, 0, 255]]]], np.uint8)
    np.testing.assert_array_equal(gpuaug.hue(primaries, 1 / 3), primaries[:, :, [1, 2, 0]])  # R->G->B->R


def test_hue_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="shift: .*<= 0.5"):
        gpuaug.hue(x, 0.6)
    with pytest.raises(ValueError, match="shift: .*>= -0.5"):
        gpuaug.hue(x, [0.1, -0.51])
    with pytest.raises(ValueError, match="shift: .*finite"):
        gpuaug.hue(x, np.nan)
    with pytest.raises(ValueError, match="shift: got shape"):
        gpuaug.hue(x, [0.1, 0.2, 0.3])


def test_hue_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    x = _with_grays(random_images(rng, 2, 9, 11, 3, "uint8"))
    for s in (-0.5, -0.2, 0.1, 0.45):
        tv = F.adjust_hue(torch.from_numpy(x).permute(0, 3, 1, 2), s).permute(0, 2, 3, 1).numpy()
        assert np.abs(gpuaug.hue(x, s).astype(int) - tv.astype(int)).max() <= 1  # tv truncates
        xf = x.astype(np.float32) / 255
        tv = F.adjust_hue(torch.from_numpy(xf).permute(0, 3, 1, 2), s).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(gpuaug.hue(xf, s), tv, rtol=1e-5, atol=1e-5)


def test_hue_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_hue_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        s, m = [0.25, -0.4], R.top(dtype)
        check_op(gpuaug.hue, lambda a, i: R.hue(a, s[i], m), x, {"shift": s}, backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_hue_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    m = R.top(dtype)
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:
            x = random_images(rng, 6, h, w, c, dtype)
            if c >= 3:
                x = _with_grays(x)
            s = np.concatenate([[0.0, 0.5, -0.5], rng.uniform(-0.5, 0.5, 3)])
            check_op(gpuaug.hue, lambda a, i: R.hue(a, s[i], m), x, {"shift": s}, layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.hue, lambda a, i: R.hue(a, 0.3, m), xs, {"shift": 0.3}, varshape=True, backend=backend)
