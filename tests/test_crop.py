import numpy as np
import pytest

import gpuaug
import ref_copyops as R
from helpers import DTYPES, LAYOUTS, SIM, assert_close, check_op, gpu, random_images

VARSIZES = [(5, 7), (37, 53), (1, 9), (20, 3)]


def _window(rng, n, h, w, ch, cw):
    return rng.integers(0, h - ch + 1, n), rng.integers(0, w - cw + 1, n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_crop_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    top, left = _window(rng, 5, 37, 53, 19, 31)
    top[0], left[0] = 37 - 19, 53 - 31  # window touching the bottom-right corner
    check_op(gpuaug.crop, lambda s, i: R.crop(s, top[i], left[i], 19, 31), x,
             {"top": top, "left": left, "height": 19, "width": 31}, layout=layout)
    # scalar offsets, per-sample (equal) sizes, full image
    check_op(gpuaug.crop, lambda s, i: R.crop(s, 3, 4, 33, 49), x,
             {"top": 3, "left": 4, "height": [33] * 5, "width": np.full(5, 49)}, layout=layout)
    check_op(gpuaug.crop, lambda s, i: s, x, {"top": 0, "left": 0, "height": 37, "width": 53},
             layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_center_crop_cpu(dtype, layout, channels):
    rng = np.random.default_rng(2)
    x = random_images(rng, 3, 37, 53, channels, dtype)
    # smaller (odd and even differences: Python's half-to-even rounding), equal, larger
    # (zero padding), and mixed (one axis cropped, the other padded)
    for size in (24, (30, 50), (33, 47), (36, 52), (37, 53), (40, 61), (41, 54), (20, 60), (45, 8), 1):
        check_op(gpuaug.center_crop, lambda s, i: R.center_crop(s, size), x, {"size": size},
                 layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_crop_varshape_cpu(dtype):
    rng = np.random.default_rng(3)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in VARSIZES]
    hs, ws = [3, 30, 1, 20], [7, 1, 5, 2]
    top = [h - ch for (h, _), ch in zip(VARSIZES, hs)]
    left = [0, 52, 2, 1]
    check_op(gpuaug.crop, lambda s, i: R.crop(s, top[i], left[i], hs[i], ws[i]), xs,
             {"top": top, "left": left, "height": hs, "width": ws}, varshape=True)
    check_op(gpuaug.crop, lambda s, i: R.crop(s, 0, 1, 1, 2), xs,
             {"top": 0, "left": 1, "height": 1, "width": 2}, varshape=True)
    for size in ((4, 6), 9):
        check_op(gpuaug.center_crop, lambda s, i: R.center_crop(s, size), xs, {"size": size},
                 varshape=True)


def test_crop_single_image_and_noncontiguous():
    rng = np.random.default_rng(4)
    img = random_images(rng, 1, 9, 11, 3, "uint8")[0]
    np.testing.assert_array_equal(gpuaug.crop(img, 2, 3, 4, 5), img[2:6, 3:8])
    chw = np.ascontiguousarray(img.transpose(2, 0, 1))
    np.testing.assert_array_equal(gpuaug.crop(chw, 2, 3, 4, 5, layout="NCHW"), chw[:, 2:6, 3:8])
    np.testing.assert_array_equal(gpuaug.center_crop(img, (5, 5)), img[2:7, 3:8])
    big = random_images(rng, 4, 20, 30, 3, "uint8")
    view = big[::2, 3:17, ::3]  # non-contiguous
    np.testing.assert_array_equal(gpuaug.crop(view, [1, 2], [0, 3], 7, 6),
                                  np.stack([view[0, 1:8, 0:6], view[1, 2:9, 3:9]]))


def test_crop_of_pad_is_identity():
    rng = np.random.default_rng(5)
    x = random_images(rng, 4, 13, 17, 3, "float32")
    padding = np.array([[1, 4, 0, 7], [2, 3, 5, 2], [0, 5, 3, 4], [5, 0, 7, 0]])
    for mode in ("constant", "edge", "reflect"):
        y = gpuaug.pad(x, padding, mode=mode, value=0.5)
        np.testing.assert_array_equal(gpuaug.crop(y, padding[:, 0], padding[:, 2], 13, 17), x)
    # center_crop undoes a symmetric pad; with odd excess, Python's round (half to even)
    # decides the side: round(3.5) = 4 rows above, round(2.5) = 2 columns left
    y = gpuaug.pad(x, (3, 3, 2, 2), mode="reflect")
    np.testing.assert_array_equal(gpuaug.center_crop(y, (13, 17)), x)
    y = gpuaug.pad(x, (4, 3, 2, 3))
    np.testing.assert_array_equal(gpuaug.center_crop(y, (13, 17)), x)
    # a center_crop larger than the image is a zero pad
    np.testing.assert_array_equal(gpuaug.center_crop(x, (16, 22)), gpuaug.pad(x, (1, 2, 2, 3)))


def test_crop_bad_params():
    x = random_images(np.random.default_rng(6), 3, 6, 8, 3, "uint8")
    with pytest.raises(ValueError, match=r"top, height: sample 1 has top=3 and height=4, which "
                                         r"ends at 7, outside its 6x8 image; expected 0 <= top <= 6 - height"):
        gpuaug.crop(x, [0, 3, 0], 0, 4, 4)
    with pytest.raises(ValueError, match=r"left, width: sample 0 has left=0 and width=9"):
        gpuaug.crop(x, 0, 0, 4, 9)
    with pytest.raises(ValueError, match=r"top: got -1; expected values >= 0"):
        gpuaug.crop(x, -1, 0, 4, 4)
    with pytest.raises(ValueError, match=r"left: got \[0, 1, -2\]; expected values >= 0"):
        gpuaug.crop(x, 0, [0, 1, -2], 4, 4)
    with pytest.raises(ValueError, match=r"height: got 0; expected values >= 1"):
        gpuaug.crop(x, 0, 0, 0, 4)
    with pytest.raises(ValueError, match=r"width: got 2.5; expected integers"):
        gpuaug.crop(x, 0, 0, 2, 2.5)
    with pytest.raises(ValueError, match=r"top: got shape \(2,\)"):
        gpuaug.crop(x, [0, 0], 0, 2, 2)
    with pytest.raises(ValueError, match=r"height, width: give per-sample output sizes .*uniform batch"):
        gpuaug.crop(x, 0, 0, [2, 3, 2], 2)
    with pytest.raises(ValueError, match=r"top, height: sample 1 .* outside its 3x2 image"):
        gpuaug.crop([x[0], x[1][:3, :2]], 0, 0, [2, 4], 2)
    with pytest.raises(ValueError, match=r"size: got \[0, 3\]; expected positive sizes"):
        gpuaug.center_crop(x, (0, 3))
    with pytest.raises(ValueError, match=r"size: got \[1, 2, 3\]; expected an int or a pair"):
        gpuaug.center_crop(x, (1, 2, 3))


def test_crop_simulator():
    """The Numba CUDA twin (in the simulator without a GPU, on the GPU otherwise)."""
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_crop_gpu")
    rng = np.random.default_rng(7)
    for dtype in DTYPES:
        x = random_images(rng, 2, 4, 5, 3, dtype)
        check_op(gpuaug.crop, lambda s, i: R.crop(s, i, 2 - i, 3, 3), x,
                 {"top": [0, 1], "left": [2, 1], "height": 3, "width": 3}, backend="numba-sim",
                 layout="NCHW")
        check_op(gpuaug.center_crop, lambda s, i: R.center_crop(s, (6, 3)), x, {"size": (6, 3)},
                 backend="numba-sim")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_crop_gpu(backend, dtype, layout):
    import cupy

    rng = np.random.default_rng(8)
    for c, (h, w), (ch, cw) in [(1, (37, 53), (19, 31)), (3, (37, 53), (20, 17)),
                                (4, (37, 53), (37, 53)), (3, (64, 96), (32, 48)),
                                (1, (32, 64), (16, 32)), (3, (3, 1200), (2, 1001))]:
        x = random_images(rng, 5, h, w, c, dtype)
        top, left = _window(rng, 5, h, w, ch, cw)
        check_op(gpuaug.crop, lambda s, i: R.crop(s, top[i], left[i], ch, cw), x,
                 {"top": top, "left": left, "height": ch, "width": cw}, layout=layout, backend=backend)
        # offsets on the GPU (not checked on the host); a window partly outside gives zeros
        t2, l2 = top.copy(), left.copy()
        t2[0], l2[1] = h - ch + 2, -3
        check_op(gpuaug.crop, lambda s, i: R.crop(s, t2[i], l2[i], ch, cw), x,
                 {"top": cupy.asarray(t2), "left": cupy.asarray(l2), "height": ch, "width": cw},
                 layout=layout, backend=backend)
        # non-contiguous input: the generic kernel
        R.check_strided_gpu(gpuaug.crop, lambda s, i: R.crop(s, top[i], left[i], ch, cw), x,
                            {"top": top, "left": left, "height": ch, "width": cw}, layout=layout,
                            backend=backend)
        for size in ((h // 2, w // 2 + 1), (h + 3, w - 1)):
            check_op(gpuaug.center_crop, lambda s, i: R.center_crop(s, size), x, {"size": size},
                     layout=layout, backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in VARSIZES]
    hs, ws = [3, 30, 1, 20], [7, 1, 5, 2]
    check_op(gpuaug.crop, lambda s, i: R.crop(s, 0, 0, hs[i], ws[i]), xs,
             {"top": 0, "left": 0, "height": hs, "width": ws}, varshape=True, backend=backend)
    check_op(gpuaug.center_crop, lambda s, i: R.center_crop(s, (6, 5)), xs, {"size": (6, 5)},
             varshape=True, backend=backend)


EMU_CASES = [("NHWC", 3, (37, 53), 0, 0), ("NHWC", 3, (16, 32), 0, 0), ("NHWC", 4, (9, 40), 3, 8),
             ("NCHW", 1, (33, 64), 1, 4), ("NHWC", 1, (5, 8), 2, 0)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_crop_fast_path_emulated(dtype, monkeypatch):
    """The CUDA C fast path (gpuaug_window_rows) run on the CPU by tests/cuda_emu.py."""
    import cuda_emu
    from gpuaug.ops.crop import KERNELS, center_offset, rows_fast

    cuda_emu.patch(monkeypatch, ["crop.cu"], KERNELS.variants)
    rng = np.random.default_rng(9)
    ran = 0
    for layout, c, (h, w), so, do in EMU_CASES:
        x = random_images(rng, 3, h, w, c, dtype)
        xin = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        f64 = x.astype(np.float64)
        for ch, cw in [(h // 2 + 1, w - 5), (h, w), (1, 4)]:
            top, left = _window(rng, 3, h, w, ch, cw)
            # host-checked windows, and offsets as they may come from the GPU (partly outside)
            for t, l_ in [(top, left), (top - 2, left + 3)]:
                got = cuda_emu.run_fast(rows_fast(), xin, layout, [(ch, cw)] * 3, np.stack([t, l_], 1),
                                        src_offset=so, dst_offset=do)
                if got is not None:
                    ran += 1
                    assert_close(got, np.stack([R.crop(f64[i], t[i], l_[i], ch, cw) for i in range(3)]),
                                 dtype, atol_u8=0, rtol=0, what=f"{layout} {c} {h}x{w} {ch}x{cw}")
        size = (h + 5, max(1, w - 3))
        prm = np.array([(center_offset(h, size[0]), center_offset(w, size[1]))] * 3, np.float64)
        got = cuda_emu.run_fast(rows_fast(), xin, layout, [size] * 3, prm, src_offset=so, dst_offset=do)
        if got is not None:
            ran += 1
            assert_close(got, np.stack([R.center_crop(f64[i], size) for i in range(3)]), dtype,
                         atol_u8=0, rtol=0, what=f"center_crop {layout} {c} {h}x{w}")
    assert ran >= 8
