import numpy as np
import pytest

import gpuaug
import ref_intensity as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, quantize, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_gamma_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    m = R.top(dtype)
    g, k = rng.uniform(0.3, 3.0, 5), rng.uniform(0.5, 1.5, 5)
    g[0] = 0.0
    check_op(gpuaug.gamma, lambda s, i: R.gamma(s, g[i], k[i], m), x, {"gamma": g, "gain": k}, layout=layout)
    check_op(gpuaug.gamma, lambda s, i: R.gamma(s, 2.2, 1.0, m), x, {"gamma": 2.2}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gamma_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    g, m = [0.5, 1.0, 2.0], R.top(dtype)
    check_op(gpuaug.gamma, lambda s, i: R.gamma(s, g[i], 1.2, m), xs, {"gamma": g, "gain": 1.2}, varshape=True)


def test_gamma_single_image_noncontiguous_and_identity():
    rng = np.random.default_rng(3)
    big = random_images(rng, 4, 20, 30, 3, "uint8")
    view = big[::2, 3:17, ::3]
    got = gpuaug.gamma(view, 0.7)
    ref = quantize(np.stack([R.gamma(v.astype(float), 0.7, 1, 255) for v in view]), np.uint8)
    assert np.abs(got.astype(int) - ref).max() <= 1
    np.testing.assert_array_equal(gpuaug.gamma(big[0], 1.0), big[0])


def test_gamma_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="gamma: .*>= 0"):
        gpuaug.gamma(x, -0.5)
    with pytest.raises(ValueError, match="gamma: .*finite"):
        gpuaug.gamma(x, [1.0, np.nan])
    with pytest.raises(ValueError, match="gamma: got shape"):
        gpuaug.gamma(x, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="gain: .*finite"):
        gpuaug.gamma(x, 1.0, gain=np.inf)


def test_gamma_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    x = random_images(rng, 2, 9, 11, 3, "uint8")
    for g, k in [(0.5, 1.0), (2.0, 0.8), (1.3, 1.5)]:
        ours = gpuaug.gamma(x, g, gain=k)
        tv = F.adjust_gamma(torch.from_numpy(x).permute(0, 3, 1, 2), g, k).permute(0, 2, 3, 1).numpy()
        assert np.abs(ours.astype(int) - tv.astype(int)).max() <= 1  # torchvision truncates
        xf = x.astype(np.float32) / 255
        ours = gpuaug.gamma(xf, g, gain=k)
        tv = F.adjust_gamma(torch.from_numpy(xf).permute(0, 3, 1, 2), g, k).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(ours, tv, rtol=1e-5, atol=1e-6)


def test_gamma_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_gamma_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        g, m = [0.5, 2.0], R.top(dtype)
        check_op(gpuaug.gamma, lambda s, i: R.gamma(s, g[i], 0.9, m), x, {"gamma": g, "gain": 0.9},
                 backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_gamma_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    m = R.top(dtype)
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:  # generic and dense (fast path) sizes
            x = random_images(rng, 5, h, w, c, dtype)
            g, k = rng.uniform(0.3, 3.0, 5), rng.uniform(0.5, 1.5, 5)
            check_op(gpuaug.gamma, lambda s, i: R.gamma(s, g[i], k[i], m), x, {"gamma": g, "gain": k},
                     layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    check_op(gpuaug.gamma, lambda s, i: R.gamma(s, 0.5, 1, m), xs, {"gamma": 0.5}, varshape=True, backend=backend)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_gamma_device_parameters_gpu(backend):
    import cupy

    rng = np.random.default_rng(7)
    x = random_images(rng, 4, 32, 32, 3, "uint8")
    g, k = rng.uniform(0.3, 3.0, 4), rng.uniform(0.5, 1.5, 4)
    got = cupy.asnumpy(gpuaug.gamma(cupy.asarray(x), cupy.asarray(g), cupy.asarray(k), backend=backend))
    ref = quantize(np.stack([R.gamma(s.astype(np.float64), g[i], k[i], 255) for i, s in enumerate(x)]), np.uint8)
    assert np.abs(got.astype(int) - ref.astype(int)).max() <= 1
