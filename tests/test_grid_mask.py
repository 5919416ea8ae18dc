import numpy as np
import pytest

import gpuaug
import ref_filters as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images, to_layout

EXACT = {"atol_u8": 0, "rtol": 0.0}


def _nonzero(rng, n, h, w, c, dtype):
    """Random images with no zero element (so a zero in the output means "masked")."""
    x = random_images(rng, n, h, w, c, dtype)
    return np.maximum(x, 1) if dtype == "uint8" else (x + 0.5).astype(dtype)


def _ref(s, tile, ratio, angle=0.0, shift=(0.0, 0.0)):
    keep, _ = R.grid_mask_keep(s.shape[0], s.shape[1], tile, ratio, angle, shift)
    return s * keep[:, :, None]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_grid_mask_axis_aligned_cpu(dtype, layout, channels):
    """Integer tiles and shifts, ratios that are multiples of 1/tile: no rounding anywhere."""
    rng = np.random.default_rng(1)
    x = _nonzero(rng, 5, 37, 53, channels, dtype)
    tile = np.array([4, 8, 10, 16, 7])
    ratio = np.array([0.5, 0.25, 0.6, 0.75, 3 / 7])
    shift = np.array([[0, 0], [3, -2], [5, 7], [-9, 4], [1, 1]])
    check_op(gpuaug.grid_mask, lambda s, i: _ref(s, tile[i], ratio[i], 0.0, shift[i]), x,
             {"tile": tile, "ratio": ratio, "shift": shift}, layout=layout, **EXACT)
    check_op(gpuaug.grid_mask, lambda s, i: _ref(s, 6, 0.5, 90.0), x, {"tile": 6, "ratio": 0.5, "angle": 90.0},
             layout=layout, **EXACT)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grid_mask_rotated_cpu(dtype):
    """Rotated grids: equal to the float64 definition except within 1e-3 px of a square's edge."""
    rng = np.random.default_rng(2)
    n = 6
    x = _nonzero(rng, n, 41, 59, 3, dtype)
    tile = rng.uniform(5, 20, n)
    ratio = rng.uniform(0.1, 0.9, n)
    angle = rng.uniform(-180, 180, n)
    shift = rng.uniform(-10, 10, (n, 2))
    y = gpuaug.grid_mask(x, tile, ratio, angle, shift)
    for i in range(n):
        keep, margin = R.grid_mask_keep(41, 59, tile[i], ratio[i], angle[i], shift[i])
        sure = margin > 1e-3
        assert sure.mean() > 0.99
        np.testing.assert_array_equal((y[i] != 0).all(-1)[sure], keep[sure])


def test_grid_mask_varshape_and_layouts():
    rng = np.random.default_rng(3)
    xs = [_nonzero(rng, 1, h, w, 3, "uint8")[0] for h, w in [(5, 7), (37, 53), (1, 9)]]
    check_op(gpuaug.grid_mask, lambda s, i: _ref(s, [2, 5, 3][i], 0.5), xs, {"tile": [2, 5, 3], "ratio": 0.5},
             varshape=True, **EXACT)
    x = np.stack([xs[1]] * 2)
    a = gpuaug.grid_mask(x, 7.3, 0.4, 33.0, (1.5, 2.5))
    b = gpuaug.grid_mask(to_layout(x, "NCHW"), 7.3, 0.4, 33.0, (1.5, 2.5), layout="NCHW")
    np.testing.assert_array_equal(a, b.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("kw, match", [
    ({"tile": 0, "ratio": 0.5}, "tile: got 0; expected values > 0"),
    ({"tile": -4, "ratio": 0.5}, "tile: got -4; expected values > 0"),
    ({"tile": 4, "ratio": 1.5}, "ratio: got 1.5; expected values <= 1.0"),
    ({"tile": 4, "ratio": -0.1}, "ratio: got -0.1; expected values >= 0.0"),
    ({"tile": 4, "ratio": 0.5, "angle": np.nan}, "angle: .*finite"),
    ({"tile": 4, "ratio": 0.5, "shift": (1, 2, 3)}, "shift: got shape"),
    ({"tile": [4, 5], "ratio": 0.5}, "tile: got shape"),
])
def test_grid_mask_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        gpuaug.grid_mask(np.zeros((3, 8, 8, 3), np.uint8), **kw)


def test_grid_mask_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the Numba CUDA twin is tested by test_grid_mask_gpu")
    rng = np.random.default_rng(4)
    for dtype in DTYPES:
        x = _nonzero(rng, 2, 3, 5, 3, dtype)
        check_op(gpuaug.grid_mask, lambda s, i: _ref(s, [2, 4][i], 0.5, 0.0, (1, 0)), x,
                 {"tile": [2, 4], "ratio": 0.5, "shift": (1, 0)}, backend="numba-sim", layout="NCHW", **EXACT)
    x = random_images(rng, 2, 6, 7, 1, "float32") + 0.5
    a = gpuaug.grid_mask(x, 3.3, 0.45, 27.0, (0.5, 1.25), backend="cpu")
    b = gpuaug.grid_mask(x, 3.3, 0.45, 27.0, (0.5, 1.25), backend="numba")
    np.testing.assert_array_equal(a, b)  # the same float32 decisions


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_grid_mask_gpu(backend, dtype, layout):
    import cupy

    rng = np.random.default_rng(5)
    tile = np.array([4, 8, 10, 16, 7])
    ratio = np.array([0.5, 0.25, 0.6, 0.75, 3 / 7])
    shift = np.array([[0, 0], [3, -2], [5, 7], [-9, 4], [1, 1]])
    for c in (1, 3, 4):
        x = _nonzero(rng, 5, 37, 53, c, dtype)
        check_op(gpuaug.grid_mask, lambda s, i: _ref(s, tile[i], ratio[i], 0.0, shift[i]), x,
                 {"tile": tile, "ratio": ratio, "shift": shift}, layout=layout, backend=backend, **EXACT)
        kw = {"tile": rng.uniform(3, 20, 5), "ratio": rng.uniform(0.1, 0.9, 5), "angle": rng.uniform(-90, 90, 5),
              "shift": rng.uniform(-5, 5, (5, 2))}
        xl = to_layout(x, layout)
        cpu = gpuaug.grid_mask(xl, layout=layout, **kw)
        dev = gpuaug.grid_mask(cupy.asarray(xl), layout=layout, backend=backend, **kw)
        np.testing.assert_array_equal(cpu, cupy.asnumpy(dev))  # same float32 decisions as the CPU twin
