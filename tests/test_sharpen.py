import numpy as np
import pytest

import gpuaug
import ref_filters as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_sharpen_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    u8 = dtype == "uint8"
    f = np.array([0.0, 0.5, 1.0, 2.0, 7.5])
    check_op(gpuaug.sharpen, lambda s, i: R.sharpen(s, f[i], u8), x, {"factor": f}, layout=layout)
    check_op(gpuaug.sharpen, lambda s, i: R.sharpen(s, 1.7, u8), x, {"factor": 1.7}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sharpen_varshape_and_tiny_images(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (2, 9), (1, 1), (3, 3)]]
    f = [2.0, 0.3, 4.0, 3.0, 0.0]
    u8 = dtype == "uint8"
    check_op(gpuaug.sharpen, lambda s, i: R.sharpen(s, f[i], u8), xs, {"factor": f}, varshape=True)


def test_sharpen_float_clamps_like_torchvision():
    x = np.zeros((1, 4, 4, 1), np.float32)
    x[0, 1, 1, 0] = 0.9
    y = gpuaug.sharpen(x, 3.0)
    assert y.min() == 0.0 and y.max() == 1.0  # 0.9 + 2 (0.9 - 0.9 * 5 / 13) > 1
    tiny = np.full((1, 2, 5, 1), 1.5, np.float32)  # height <= 2: returned as is, unclamped
    np.testing.assert_array_equal(gpuaug.sharpen(tiny, 2.0), tiny)


def test_sharpen_matches_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2, 20, 31, 3), dtype=np.uint8)
    for f in (0.0, 0.5, 2.0):
        ref = F.adjust_sharpness(torch.from_numpy(x).permute(0, 3, 1, 2), f).permute(0, 2, 3, 1).numpy()
        d = gpuaug.sharpen(x, f).astype(int) - ref
        assert d.min() >= 0 and d.max() <= 1  # torchvision truncates where gpuaug rounds


@pytest.mark.parametrize("bad, match", [
    (-0.5, "factor: got -0.5; expected values >= 0"),
    ([1.0, np.nan, 1.0], "factor: .*finite"),
    ([1.0, 2.0], "factor: got shape"),
])
def test_sharpen_bad_parameters(bad, match):
    with pytest.raises(ValueError, match=match):
        gpuaug.sharpen(np.zeros((3, 8, 8, 3), np.uint8), bad)


def test_sharpen_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the Numba CUDA twin is tested by test_sharpen_gpu")
    rng = np.random.default_rng(4)
    for dtype in DTYPES:
        x = random_images(rng, 2, 4, 5, 3, dtype)
        check_op(gpuaug.sharpen, lambda s, i: R.sharpen(s, [0.2, 3.0][i], dtype == "uint8"), x,
                 {"factor": [0.2, 3.0]}, backend="numba-sim", layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sharpen_gpu(backend, dtype, layout):
    rng = np.random.default_rng(5)
    u8 = dtype == "uint8"
    f = np.array([0.0, 0.5, 1.0, 2.0, 7.5])
    for c in (1, 3, 4):
        x = random_images(rng, 5, 37, 53, c, dtype)
        check_op(gpuaug.sharpen, lambda s, i: R.sharpen(s, f[i], u8), x, {"factor": f}, layout=layout,
                 backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (2, 9)]]
    check_op(gpuaug.sharpen, lambda s, i: R.sharpen(s, f[i], u8), xs, {"factor": f[:3]}, varshape=True,
             backend=backend)


@gpu
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sharpen_packed_gpu(layout):
    """Dense uint8 batches whose rows are whole 16-byte vectors: the packed kernel (one 16-byte
    vector per thread, integer window sums) runs, within 1 of the reference as the tile kernel."""
    import cupy

    from gpuaug.kernels._cuda import record

    rng = np.random.default_rng(7)
    f = np.array([0.0, 0.5, 1.0, 2.0, 7.5])
    for c in (1, 3, 4):
        x = random_images(rng, 5, 37, 64, c, "uint8")
        check_op(gpuaug.sharpen, lambda s, i: R.sharpen(s, f[i], True), x, {"factor": f}, layout=layout,
                 backend="cuda")
        xin = cupy.asarray(x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
        with record() as log:
            gpuaug.sharpen(xin, f, layout=layout)
        assert [e[3] for e in log if e[0] == "launch"] == [(256, 1, 1)]  # the packed kernel's block
