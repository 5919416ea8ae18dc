import numpy as np
import pytest

import gpuaug
import ref_copyops as R
from helpers import DTYPES, LAYOUTS, SIM, assert_close, check_op, gpu, random_images

MODES = ("constant", "edge", "reflect")
# Per-sample sides with one output size (top + bottom = 9, left + right = 11), some of
# them beyond the image (37 x 53 is not; the 3 x 4 images below are: numpy's repeated
# reflection).
PADDING = np.array([[0, 9, 11, 0], [4, 5, 5, 6], [9, 0, 0, 11], [1, 8, 10, 1], [3, 6, 2, 9]])
VALUES = np.array([0.25, 200.0, 127.5, 0.75, 1.5])  # exact in float16; 127.5 rounds up in uint8


def _value(dtype):
    return VALUES if np.dtype(dtype) == np.uint8 else VALUES / 256


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_pad_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    val = _value(dtype)
    for mode in MODES:
        check_op(gpuaug.pad, lambda s, i: R.pad(s, PADDING[i], mode, val[i]), x,
                 {"padding": PADDING, "mode": mode, "value": val}, layout=layout)
    # scalar padding (all sides), one (4,) padding for all, scalar value
    check_op(gpuaug.pad, lambda s, i: R.pad(s, (2, 2, 2, 2)), x, {"padding": 2}, layout=layout)
    check_op(gpuaug.pad, lambda s, i: R.pad(s, (0, 3, 1, 0), "reflect"), x,
             {"padding": (0, 3, 1, 0), "mode": "reflect"}, layout=layout)
    check_op(gpuaug.pad, lambda s, i: R.pad(s, (1, 0, 0, 2), "constant", val[1]), x,
             {"padding": [1, 0, 0, 2], "value": val[1]}, layout=layout)
    check_op(gpuaug.pad, lambda s, i: s, x, {"padding": 0, "mode": "edge"}, layout=layout)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [(1, 1), (1, 4), (3, 2), (2, 5)])
def test_pad_larger_than_image(mode, size):
    """Padding >= the image size: numpy.pad repeats the reflection; so must we."""
    rng = np.random.default_rng(2)
    x = random_images(rng, 5, *size, 3, "uint8")
    check_op(gpuaug.pad, lambda s, i: R.pad(s, PADDING[i], mode, VALUES[i]), x,
             {"padding": PADDING, "mode": mode, "value": VALUES})
    for p in [(7, 0, 0, 13), (0, 12, 9, 0)]:
        check_op(gpuaug.pad, lambda s, i: R.pad(s, p, mode, 3), x,
                 {"padding": p, "mode": mode, "value": 3})


@pytest.mark.parametrize("dtype", DTYPES)
def test_pad_varshape_cpu(dtype):
    rng = np.random.default_rng(3)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (2, 1)]]
    padding = PADDING[:4].copy()
    padding[1] = (0, 0, 7, 0)  # varshape: sizes may differ
    val = _value(dtype)
    for mode in MODES:
        check_op(gpuaug.pad, lambda s, i: R.pad(s, padding[i], mode, val[i]), xs,
                 {"padding": padding, "mode": mode, "value": val[:4]}, varshape=True)


def test_pad_single_image_and_noncontiguous():
    rng = np.random.default_rng(4)
    img = random_images(rng, 1, 9, 11, 3, "uint8")[0]
    np.testing.assert_array_equal(gpuaug.pad(img, (1, 2, 3, 4), "reflect"),
                                  np.pad(img, ((1, 2), (3, 4), (0, 0)), "reflect"))
    chw = np.ascontiguousarray(img.transpose(2, 0, 1))
    np.testing.assert_array_equal(gpuaug.pad(chw, (1, 2, 3, 4), "edge", layout="NCHW"),
                                  np.pad(chw, ((0, 0), (1, 2), (3, 4)), "edge"))
    big = random_images(rng, 4, 20, 30, 3, "uint8")
    view = big[::2, 3:17, ::3]  # non-contiguous
    np.testing.assert_array_equal(gpuaug.pad(view, (5, 0, 0, 5), value=[7, 9]),
                                  np.stack([np.pad(view[i], ((5, 0), (0, 5), (0, 0)),
                                                   constant_values=v) for i, v in enumerate([7, 9])]))


def test_pad_saturates_uint8_value():
    x = np.zeros((2, 2, 2, 1), np.uint8)
    y = gpuaug.pad(x, (0, 0, 0, 1), value=[-20.0, 300.0])
    assert y[0, 0, 2, 0] == 0 and y[1, 0, 2, 0] == 255


def test_pad_bad_params():
    x = random_images(np.random.default_rng(5), 3, 6, 8, 3, "uint8")
    with pytest.raises(ValueError, match=r"padding: got \[1, -1, 0, 0\]; expected values >= 0"):
        gpuaug.pad(x, [1, -1, 0, 0])
    with pytest.raises(ValueError, match=r"padding: got -2; expected values >= 0"):
        gpuaug.pad(x, -2)
    with pytest.raises(ValueError, match=r"padding: got shape \(3,\)"):
        gpuaug.pad(x, (1, 2, 3))
    with pytest.raises(ValueError, match=r"padding: got shape \(2, 4\)"):
        gpuaug.pad(x, [[1, 1, 1, 1]] * 2)
    with pytest.raises(ValueError, match=r"padding: got 1.5; expected integers"):
        gpuaug.pad(x, 1.5)
    with pytest.raises(ValueError, match=r"padding: give per-sample output sizes .*uniform batch"):
        gpuaug.pad(x, [[1, 1, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1]])
    with pytest.raises(ValueError, match=r"mode: got 'wrap'; expected one of 'constant', 'edge', 'reflect'"):
        gpuaug.pad(x, 1, mode="wrap")
    with pytest.raises(ValueError, match=r"value: got \[1.0, nan, 1.0\]; expected finite"):
        gpuaug.pad(x, 1, value=[1, np.nan, 1])
    with pytest.raises(ValueError, match=r"value: got shape \(2,\)"):
        gpuaug.pad(x, 1, value=[1, 2])
    with pytest.raises(TypeError, match="padding: got"):
        gpuaug.pad(x, "one")


def test_pad_simulator():
    """The Numba CUDA twin (in the simulator without a GPU, on the GPU otherwise)."""
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_pad_gpu")
    rng = np.random.default_rng(6)
    padding = np.array([[0, 5, 4, 0], [3, 2, 1, 3]])
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 2, 3, dtype)
        val = _value(dtype)[:2]
        for mode in MODES:
            check_op(gpuaug.pad, lambda s, i: R.pad(s, padding[i], mode, val[i]), x,
                     {"padding": padding, "mode": mode, "value": val}, backend="numba-sim",
                     layout="NCHW" if mode == "edge" else "NHWC")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pad_gpu(backend, dtype, layout):
    import cupy

    rng = np.random.default_rng(7)
    val = _value(dtype)
    for c, (h, w) in [(1, (37, 53)), (3, (37, 53)), (4, (37, 53)), (3, (64, 96)), (1, (32, 64)),
                      (3, (3, 1200)), (3, (2, 3))]:
        x = random_images(rng, 5, h, w, c, dtype)
        for mode in MODES:
            check_op(gpuaug.pad, lambda s, i: R.pad(s, PADDING[i], mode, val[i]), x,
                     {"padding": PADDING, "mode": mode, "value": val}, layout=layout, backend=backend)
        check_op(gpuaug.pad, lambda s, i: R.pad(s, (16, 0, 0, 32), "constant", val[3]), x,
                 {"padding": (16, 0, 0, 32), "value": val[3]}, layout=layout, backend=backend)
        # non-contiguous input: the generic kernel
        R.check_strided_gpu(gpuaug.pad, lambda s, i: R.pad(s, PADDING[i], "reflect", 0), x,
                            {"padding": PADDING, "mode": "reflect"}, layout=layout, backend=backend)
        # fill values on the GPU
        check_op(gpuaug.pad, lambda s, i: R.pad(s, (2, 1, 1, 2), "constant", val[i]), x,
                 {"padding": (2, 1, 1, 2), "value": cupy.asarray(val)}, layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9)]]
    for mode in MODES:
        check_op(gpuaug.pad, lambda s, i: R.pad(s, PADDING[i], mode, val[i]), xs,
                 {"padding": PADDING[:3], "mode": mode, "value": val[:3]}, varshape=True,
                 backend=backend)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pad_fast_path_emulated(dtype, monkeypatch):
    """The CUDA C fast path (gpuaug_window_rows in crop.cu) run on the CPU by tests/cuda_emu.py."""
    import cuda_emu
    from gpuaug.ops.crop import KERNELS, rows_fast
    from gpuaug.ops.pad import MODES

    cuda_emu.patch(monkeypatch, ["crop.cu"], KERNELS.variants)
    rng = np.random.default_rng(9)
    val = _value(dtype)[:3]
    ran = 0
    for layout, c, (h, w), so, do in [("NHWC", 3, (37, 53), 0, 0), ("NHWC", 3, (16, 36), 1, 0),
                                      ("NCHW", 1, (20, 64), 0, 8), ("NHWC", 4, (2, 3), 2, 4),
                                      ("NHWC", 1, (1, 4), 0, 0)]:
        x = random_images(rng, 3, h, w, c, dtype)
        xin = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        f64 = x.astype(np.float64)
        pads = PADDING[:3] if h > 3 else PADDING[:3] * 3  # beyond the image: repeated reflection
        oh, ow = h + pads[0, 0] + pads[0, 1], w + pads[0, 2] + pads[0, 3]
        for mode in MODES:
            prm = np.stack([pads[:, 0], pads[:, 2], np.full(3, MODES[mode]), val], 1)
            got = cuda_emu.run_fast(rows_fast(-1, 3, MODES[mode]), xin, layout, [(oh, ow)] * 3, prm,
                                    src_offset=so, dst_offset=do)
            if got is not None:
                ran += 1
                assert_close(got, np.stack([R.pad(f64[i], pads[i], mode, val[i]) for i in range(3)]),
                             dtype, atol_u8=0, what=f"{mode} {layout} {c} {h}x{w}")
    assert ran >= 6
