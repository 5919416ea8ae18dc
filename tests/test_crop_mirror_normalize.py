import numpy as np
import pytest

import gpuaug
import ref_intensity as R
from helpers import DTYPES, LAYOUTS, SIM, assert_close, gpu, random_images
from test_normalize import check_layout

cmn = gpuaug.crop_mirror_normalize
SIZES = [(9, 12), (37, 53), (20, 16)]


def _params(rng, n, c, dtype):
    m = R.top(dtype)
    pos = rng.random((n, 2))
    pos[0] = (0, 1)
    if n > 1:
        pos[1] = (1, 0.5)
    mirror = rng.random(n) < 0.5
    mirror[0] = True
    return pos, mirror, rng.uniform(0, m, (n, c)), rng.uniform(0.1 * m, m, (n, c))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("odt", ("float32", "float16"))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("out_layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_cmn_cpu(dtype, odt, layout, out_layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    pos, mirror, mean, std = _params(rng, 5, channels, dtype)
    kw = dict(layout=layout, out_layout=out_layout, odt=odt)
    for crop, pad in [((20, 31), False), ((37, 53), True), (None, True), ((1, 1), False)]:
        check_layout(cmn, lambda s, i: R.crop_mirror_normalize(s, crop, pos[i], mirror[i], mean[i], std[i], pad), x,
                     {"crop": crop, "crop_pos": pos, "mirror": mirror, "mean": mean, "std": std, "dtype": odt,
                      "output_layout": out_layout, "pad_output": pad}, **kw)
    # scalar parameters, defaults (centre crop, no mirror)
    check_layout(cmn, lambda s, i: R.crop_mirror_normalize(s, (24, 24), (0.5, 0.5), False, 5.0, 3.0, False), x,
                 {"crop": 24, "mean": 5.0, "std": 3.0, "dtype": odt, "output_layout": out_layout}, **kw)


def test_cmn_anchor_rounds_half_away_from_zero():
    # (H - h) * 0.5 = 2.5 -> row 3 (DALI's roundf), not 2 (round half to even)
    x = np.arange(8, dtype=np.uint8).reshape(1, 8, 1, 1).repeat(2, axis=2)
    y = cmn(x, crop=(3, 2), crop_pos=(0.5, 0.5), output_layout="NHWC")
    np.testing.assert_array_equal(y[0, :, 0, 0], [3, 4, 5])
    assert R.dali_anchor(0.5, 8, 3) == 3
    # float32 product: 0.3 * 10 = 3.0000001 in float32 -> 3
    assert R.dali_anchor(0.3, 13, 3) == 3


def test_cmn_defaults_match_dali_layout():
    rng = np.random.default_rng(2)
    x = random_images(rng, 3, 10, 12, 3, "uint8")
    y = cmn(x)
    assert y.shape == (3, 3, 10, 12) and y.dtype == np.float32
    np.testing.assert_array_equal(y, x.transpose(0, 3, 1, 2).astype(np.float32))
    y = cmn(x[0], crop=(4, 6), pad_output=True, dtype="float16")
    assert y.shape == (4, 4, 6) and y.dtype == np.float16 and not y[3].any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_cmn_varshape_cpu(dtype):
    rng = np.random.default_rng(3)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in SIZES]
    pos, mirror, mean, std = _params(rng, 3, 3, dtype)
    # with a crop: one uniform NCHW batch
    refs = np.stack([R.crop_mirror_normalize(s.astype(np.float64), (8, 10), pos[i], mirror[i], mean[i], std[i],
                                             True) for i, s in enumerate(xs)])
    out = np.full((3, 4, 8, 10), np.nan, np.float32)
    for o in (None, out):
        got = cmn(xs, crop=(8, 10), crop_pos=pos, mirror=mirror, mean=mean, std=std, pad_output=True, out=o)
        assert got.shape == (3, 4, 8, 10) and (o is None or got is o)
        assert_close(got.transpose(0, 2, 3, 1), refs, "float32")
    # without a crop: a list, CHW (default) or HWC
    for out_layout in LAYOUTS:
        got = cmn(xs, mirror=mirror, mean=mean, std=std, output_layout=out_layout)
        for i, (g, s) in enumerate(zip(got, xs)):
            r = R.crop_mirror_normalize(s.astype(np.float64), None, (0.5, 0.5), mirror[i], mean[i], std[i], False)
            assert_close(g if out_layout == "NHWC" else g.transpose(1, 2, 0), r, "float32")


def test_cmn_bad_parameters():
    x = np.zeros((2, 10, 12, 3), np.uint8)
    with pytest.raises(ValueError, match="crop: got \\(11, 5\\); image 0 is 10x12"):
        cmn(x, crop=(11, 5))
    with pytest.raises(ValueError, match="crop: "):
        cmn(x, crop=(0, 5))
    with pytest.raises(ValueError, match="crop: "):
        cmn([x[0], x[1, :4]], crop=(5, 5))
    with pytest.raises(ValueError, match="crop_pos: .*<= 1"):
        cmn(x, crop=4, crop_pos=(0.5, 1.5))
    with pytest.raises(ValueError, match="crop_pos: .*>= 0"):
        cmn(x, crop=4, crop_pos=[(0.5, 0.5), (-0.1, 0)])
    with pytest.raises(ValueError, match="crop_pos: .*finite"):
        cmn(x, crop=4, crop_pos=(np.nan, 0.5))
    with pytest.raises(ValueError, match="crop_pos: got shape"):
        cmn(x, crop=4, crop_pos=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="std: .*non-zero"):
        cmn(x, std=[1, 1, 0])
    with pytest.raises(ValueError, match="mean: got shape"):
        cmn(x, mean=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="mirror: got shape"):
        cmn(x, mirror=[True, False, True])
    with pytest.raises(ValueError, match="dtype: "):
        cmn(x, dtype="int32")
    with pytest.raises(ValueError, match="output_layout: "):
        cmn(x, output_layout="CHW")


@pytest.mark.parametrize("crop, out_layout, odt, pad", [
    ((20, 31), "NCHW", "float32", True),
    ((24, 26), "NHWC", "float16", False),  # (37 - 24) * pos, (53 - 26) * pos hit .5 cases
    (None, "NCHW", "float32", False),
])
def test_cmn_dali(crop, out_layout, odt, pad):
    """Against DALI's own operator, where DALI is installed (its CPU backend)."""
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn, pipeline_def, types

    rng = np.random.default_rng(4)
    n = 6
    x = random_images(rng, n, 37, 53, 3, "uint8")
    pos, mirror, mean, std = _params(rng, n, 3, "uint8")
    pos[2:4] = [(0.5, 0.5), (0.5, 1 / 6)]  # with crop (24, 26): roundf(6.5) = 7, roundf(13.5) = 14
    per = lambda a, t: fn.external_source(source=lambda: [t(v) for v in a], batch=True)  # noqa: E731
    kw = {} if crop is None else {"crop": crop, "crop_pos_y": per(pos[:, 0], np.float32),
                                  "crop_pos_x": per(pos[:, 1], np.float32)}

    @pipeline_def(batch_size=n, num_threads=1, device_id=None)
    def pipe():
        imgs = fn.external_source(source=lambda: list(x), batch=True, layout="HWC")
        return fn.crop_mirror_normalize(
            imgs, mirror=per(mirror, np.int32), mean=list(mean[0]), std=list(std[0]), pad_output=pad,
            output_layout="CHW" if out_layout == "NCHW" else "HWC",
            dtype=types.FLOAT16 if odt == "float16" else types.FLOAT, **kw)

    p = pipe()
    p.build()
    (out,) = p.run()
    want = np.stack([np.asarray(out[i]) for i in range(n)])
    got = cmn(x, crop=crop, crop_pos=pos, mirror=mirror, mean=mean[0], std=std[0], pad_output=pad,
              output_layout=out_layout, dtype=odt)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 2e-3 if odt == "float16" else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def test_cmn_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_cmn_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 4, 5, 3, dtype)
        pos, mirror, mean, std = _params(rng, 2, 3, dtype)
        check_layout(cmn, lambda s, i: R.crop_mirror_normalize(s, (3, 3), pos[i], mirror[i], mean[i], std[i], True),
                     x, {"crop": (3, 3), "crop_pos": pos, "mirror": mirror, "mean": mean, "std": std,
                         "pad_output": True}, layout="NHWC", out_layout="NCHW", odt="float32", backend="numba-sim")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("odt", ("float32", "float16"))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("out_layout", LAYOUTS)
def test_cmn_gpu(backend, dtype, odt, layout, out_layout):
    rng = np.random.default_rng(6)
    for c in (1, 3, 4):
        for (h, w), crop in [((37, 53), (20, 31)), ((37, 53), (24, 32)), ((256, 256), (224, 224)), ((9, 12), None)]:
            x = random_images(rng, 5, h, w, c, dtype)
            pos, mirror, mean, std = _params(rng, 5, c, dtype)
            for pad in (False, True):
                check_layout(cmn, lambda s, i: R.crop_mirror_normalize(s, crop, pos[i], mirror[i], mean[i], std[i],
                                                                         pad), x,
                             {"crop": crop, "crop_pos": pos, "mirror": mirror, "mean": mean, "std": std,
                              "dtype": odt, "output_layout": out_layout, "pad_output": pad},
                             layout=layout, out_layout=out_layout, odt=odt, backend=backend)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_cmn_varshape_gpu(backend):
    import cupy

    rng = np.random.default_rng(7)
    xs = [random_images(rng, 1, h, w, 3, "uint8")[0] for h, w in SIZES]
    pos, mirror, mean, std = _params(rng, 3, 3, "uint8")
    refs = np.stack([R.crop_mirror_normalize(s.astype(np.float64), (8, 8), pos[i], mirror[i], mean[i], std[i],
                                             True) for i, s in enumerate(xs)])
    got = cmn([cupy.asarray(a) for a in xs], crop=(8, 8), crop_pos=pos, mirror=mirror, mean=mean, std=std,
              pad_output=True, backend=backend)
    assert_close(cupy.asnumpy(got).transpose(0, 2, 3, 1), refs, "float32")
