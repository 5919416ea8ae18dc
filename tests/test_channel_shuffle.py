import numpy as np
import pytest

import gpuaug
import ref_colour as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

SIZES = [(5, 7), (37, 53), (1, 9)]


def _perms(rng, n, c):
    p = np.stack([rng.permutation(c) for _ in range(n)])
    p[0] = np.arange(c)
    return p


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_channel_shuffle_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    p = _perms(rng, 5, channels)
    check_op(gpuaug.channel_shuffle, lambda s, i: R.channel_shuffle(s, p[i]), x, {"permutation": p},
             layout=layout, atol_u8=0, rtol=0)
    one = p[-1].tolist()
    check_op(gpuaug.channel_shuffle, lambda s, i: R.channel_shuffle(s, one), x, {"permutation": one},
             layout=layout, atol_u8=0, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_channel_shuffle_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    p = _perms(rng, 3, 3)
    check_op(gpuaug.channel_shuffle, lambda s, i: R.channel_shuffle(s, p[i]), xs, {"permutation": p},
             varshape=True, atol_u8=0, rtol=0)


def test_channel_shuffle_is_exact():
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 0x7C00, (2, 5, 6, 4), dtype=np.uint16)  # every finite float16
    x = bits.view(np.float16)
    y = gpuaug.channel_shuffle(x, [3, 0, 2, 1])
    np.testing.assert_array_equal(y.view(np.uint16), bits[..., [3, 0, 2, 1]])


def test_channel_shuffle_bad_parameters():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="permutation: .*each channel index once"):
        gpuaug.channel_shuffle(x, [0, 0, 1])
    with pytest.raises(ValueError, match="permutation: .*sample 1"):
        gpuaug.channel_shuffle(x, [[0, 1, 2], [0, 1, 3]])
    with pytest.raises(ValueError, match="permutation: got shape"):
        gpuaug.channel_shuffle(x, [0, 1])
    with pytest.raises(ValueError, match="permutation: got shape"):
        gpuaug.channel_shuffle(x, [0, 1, 2, 3])
    with pytest.raises(ValueError, match="permutation: .*integers"):
        gpuaug.channel_shuffle(x, [0, 1.5, 2])
    with pytest.raises(ValueError, match="permutation: .*integers"):
        gpuaug.channel_shuffle(x, [0, np.nan, 2])


def test_channel_shuffle_torchvision():
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torchvision.transforms.v2.functional")
    rng = np.random.default_rng(4)
    x = random_images(rng, 2, 9, 11, 3, "uint8")
    for p in ([2, 0, 1], [1, 2, 0], [2, 1, 0]):
        tv = F.permute_channels(torch.from_numpy(x).permute(0, 3, 1, 2), p).permute(0, 2, 3, 1).numpy()
        np.testing.assert_array_equal(gpuaug.channel_shuffle(x, p), tv)


def test_channel_shuffle_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_channel_shuffle_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        p = _perms(rng, 2, 3)
        check_op(gpuaug.channel_shuffle, lambda s, i: R.channel_shuffle(s, p[i]), x, {"permutation": p},
                 backend="numba-sim", layout="NCHW", atol_u8=0, rtol=0)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_channel_shuffle_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    for c in (1, 3, 4):
        for h, w in [(37, 53), (16, 16), (224, 224)]:
            x = random_images(rng, 5, h, w, c, dtype)
            p = _perms(rng, 5, c)
            check_op(gpuaug.channel_shuffle, lambda s, i: R.channel_shuffle(s, p[i]), x, {"permutation": p},
                     layout=layout, backend=backend, atol_u8=0, rtol=0)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    p = _perms(rng, 3, 3)
    check_op(gpuaug.channel_shuffle, lambda s, i: R.channel_shuffle(s, p[i]), xs, {"permutation": p},
             varshape=True, backend=backend, atol_u8=0, rtol=0)
