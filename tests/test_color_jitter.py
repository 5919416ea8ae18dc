import numpy as np
import pytest

import gpuaug
import ref_colour as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


def _factors(rng, n):
    b, c, s, h = (rng.uniform(0.6, 1.6, n), rng.uniform(0.5, 1.5, n), rng.uniform(0.0, 2.0, n),
                  rng.uniform(-0.5, 0.5, n))
    b[0], c[0], s[0], h[0] = 1.0, 1.0, 1.0, 0.0  # identity
    b[1], h[1] = 2.5, 0.0  # clamping brightness, no hue
    c[2], s[2] = 0.0, 0.0  # flat gray
    return b, c, s, h


def _ref(dtype, b, c, s, h):
    m, i8 = R.top(dtype), R.is_int(dtype)
    return lambda a, i: R.color_jitter(a, b[i], c[i], s[i], h[i], m, i8)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_color_jitter_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 6, 37, 53, channels, dtype)
    b, c, s, h = _factors(rng, 6)
    check_op(gpuaug.color_jitter, _ref(dtype, b, c, s, h), x,
             {"brightness": b, "contrast": c, "saturation": s, "hue": h}, layout=layout)
    one = [np.full(6, v) for v in (1.2, 0.8, 1.3, 0.1)]
    check_op(gpuaug.color_jitter, _ref(dtype, *one), x,
             {"brightness": 1.2, "contrast": 0.8, "saturation": 1.3, "hue": 0.1}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_color_jitter_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    b, c, s, h = _factors(rng, 3)
    check_op(gpuaug.color_jitter, _ref(dtype, b, c, s, h), xs,
             {"brightness": b, "contrast": c, "saturation": s, "hue": h}, varshape=True)


def test_color_jitter_defaults_are_identity_and_single_factors_match_the_ops():
    rng = np.random.default_rng(3)
    for dtype in ("uint8", "float32"):
        x = random_images(rng, 3, 9, 10, 3, dtype)
        np.testing.assert_array_equal(gpuaug.color_jitter(x), x)
        tol = 1 if dtype == "uint8" else 1e-6
        for kw, op, arg in [("brightness", gpuaug.brightness, 1.4), ("contrast", gpuaug.contrast, 0.6),
                            ("saturation", gpuaug.saturation, 1.7), ("hue", gpuaug.hue, -0.3)]:
            got = gpuaug.color_jitter(x, **{kw: arg}).astype(np.float64)
            assert np.abs(got - op(x, arg)).max() <= tol, kw


def test_color_jitter_contrast_mean_is_of_the_clamped_brightness():
    # half the pixels 200, half 50: brightness 2 clamps the 200s to 255, so the mean gray the
    # contrast blends with is (254 + 99) / 2 = 176.5, not 2 * (199 + 49) / 2 = 248
    x = np.full((1, 4, 4, 3), 200, np.uint8)
    x[:, 2:] = 50
    y = gpuaug.color_jitter(x, brightness=2.0, contrast=0.0)
    assert (y == 177).all()
    xf = x.astype(np.float32) / 255
    yf = gpuaug.color_jitter(xf, brightness=2.0, contrast=0.0)
    np.testing.assert_allclose(yf, (0.9999 * 1.0 + 0.9999 * 100 / 255) / 2, rtol=1e-6)


def test_color_jitter_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    for name in ("brightness", "contrast", "saturation"):
        with pytest.raises(ValueError, match=f"{name}: .*>= 0"):
            gpuaug.color_jitter(x, **{name: [1.0, -0.5]})
        with pytest.raises(ValueError, match=f"{name}: .*finite"):
            gpuaug.color_jitter(x, **{name: np.nan})
        with pytest.raises(ValueError, match=f"{name}: got shape"):
            gpuaug.color_jitter(x, **{name: [1.0, 1.0, 1.0]})
    with pytest.raises(ValueError, match="hue: .*<= 0.5"):
        gpuaug.color_jitter(x, hue=0.7)
    with pytest.raises(ValueError, match="hue: .*finite"):
        gpuaug.color_jitter(x, hue=[0.1, np.nan])


def test_color_jitter_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    x = random_images(rng, 1, 9, 11, 3, "float32")
    for b, c, s, h in [(1.3, 0.7, 1.5, 0.2), (0.6, 1.4, 0.3, -0.4), (2.0, 0.5, 1.0, 0.0)]:
        t = torch.from_numpy(x).permute(0, 3, 1, 2)
        t = F.adjust_hue(F.adjust_saturation(F.adjust_contrast(F.adjust_brightness(t, b), c), s), h)
        np.testing.assert_allclose(gpuaug.color_jitter(x, b, c, s, h), t.permute(0, 2, 3, 1).numpy(),
                                   rtol=1e-5, atol=2e-5)


def test_color_jitter_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_color_jitter_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 3, 3, 5, 3, dtype)
        b, c, s, h = _factors(rng, 3)
        check_op(gpuaug.color_jitter, _ref(dtype, b, c, s, h), x,
                 {"brightness": b, "contrast": c, "saturation": s, "hue": h}, backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_color_jitter_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    for c in (1, 3, 4):
        for n, h, w in [(6, 37, 53), (6, 16, 16), (6, 224, 224), (3, 300, 500)]:  # _factors needs n >= 3
            x = random_images(rng, n, h, w, c, dtype)
            f = _factors(rng, n)
            check_op(gpuaug.color_jitter, _ref(dtype, *f), x,
                     {"brightness": f[0], "contrast": f[1], "saturation": f[2], "hue": f[3]},
                     layout=layout, backend=backend)
        f = _factors(rng, n)  # contrast 1 everywhere: no mean pass
        check_op(gpuaug.color_jitter, _ref(dtype, f[0], np.ones(n), f[2], f[3]), x,
                 {"brightness": f[0], "saturation": f[2], "hue": f[3]}, layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    f = _factors(rng, 3)
    check_op(gpuaug.color_jitter, _ref(dtype, *f), xs,
             {"brightness": f[0], "contrast": f[1], "saturation": f[2], "hue": f[3]}, varshape=True, backend=backend)
