import numpy as np
import pytest

import gpuaug
import ref_copyops as R
from helpers import DTYPES, LAYOUTS, SIM, assert_close, check_op, gpu, random_images


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_transpose_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    check_op(gpuaug.transpose, lambda s, i: R.transpose(s), x, {}, layout=layout)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9), (8, 1)]]
    check_op(gpuaug.transpose, lambda s, i: R.transpose(s), xs, {}, varshape=True)


def test_transpose_single_image_and_noncontiguous():
    rng = np.random.default_rng(3)
    img = random_images(rng, 1, 9, 11, 3, "uint8")[0]
    np.testing.assert_array_equal(gpuaug.transpose(img), img.transpose(1, 0, 2))
    chw = np.ascontiguousarray(img.transpose(2, 0, 1))
    np.testing.assert_array_equal(gpuaug.transpose(chw, layout="NCHW"), chw.transpose(0, 2, 1))
    big = random_images(rng, 4, 20, 30, 3, "uint8")
    view = big[::2, 3:17, ::3]  # non-contiguous
    np.testing.assert_array_equal(gpuaug.transpose(view), view.transpose(0, 2, 1, 3))


def test_transpose_identities():
    rng = np.random.default_rng(4)
    x = random_images(rng, 3, 13, 17, 4, "float16")
    np.testing.assert_array_equal(gpuaug.transpose(gpuaug.transpose(x)), x)
    # transpose = rot90 then vertical flip
    np.testing.assert_array_equal(gpuaug.transpose(x), gpuaug.flip(gpuaug.rot90(x), False, True))


def test_transpose_out_shape():
    x = np.zeros((2, 5, 7, 3), np.uint8)
    with pytest.raises(ValueError, match=r"out: got shape \(2, 5, 7, 3\).*expected shape \(2, 7, 5, 3\)"):
        gpuaug.transpose(x, out=np.zeros((2, 5, 7, 3), np.uint8))


def test_transpose_simulator():
    """The Numba CUDA twin (in the simulator without a GPU, on the GPU otherwise)."""
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_transpose_gpu")
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        check_op(gpuaug.transpose, lambda s, i: R.transpose(s), x, {}, backend="numba-sim",
                 layout="NCHW")
        check_op(gpuaug.transpose, lambda s, i: R.transpose(s), x, {}, backend="numba-sim")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_transpose_gpu(backend, dtype, layout):
    rng = np.random.default_rng(6)
    for c, (h, w) in [(1, (37, 53)), (3, (37, 53)), (4, (37, 53)), (3, (64, 96)), (1, (32, 32)),
                      (3, (3, 1200))]:
        x = random_images(rng, 5, h, w, c, dtype)
        check_op(gpuaug.transpose, lambda s, i: R.transpose(s), x, {}, layout=layout, backend=backend)
        # non-contiguous input: the generic kernel
        R.check_strided_gpu(gpuaug.transpose, lambda s, i: R.transpose(s), x, {}, layout=layout,
                            backend=backend)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9)]]
    check_op(gpuaug.transpose, lambda s, i: R.transpose(s), xs, {}, varshape=True, backend=backend)


EMU_CASES = [("NHWC", 3, (37, 53), 0, 0), ("NHWC", 3, (72, 36), 0, 0), ("NHWC", 4, (9, 40), 3, 8),
             ("NCHW", 1, (33, 132), 0, 4), ("NCHW", 1, (65, 64), 1, 0), ("NHWC", 1, (5, 8), 0, 0)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_fast_path_emulated(dtype, monkeypatch):
    """The CUDA C fast path (gpuaug_transpose_tiles) run on the CPU by tests/cuda_emu.py,
    for transpose and for rot90 with odd k (both word and byte accesses)."""
    import cuda_emu
    import ref_copyops as RC
    from gpuaug.ops.transpose import KERNELS, tiles_fast

    cuda_emu.patch(monkeypatch, ["transpose.cu"], KERNELS.variants)
    rng = np.random.default_rng(9)
    k = np.array([1, 3, -1])
    for layout, c, (h, w), so, do in EMU_CASES:
        x = random_images(rng, 3, h, w, c, dtype)
        xin = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        f64 = x.astype(np.float64)
        got = cuda_emu.run_fast(tiles_fast(), xin, layout, [(w, h)] * 3, np.zeros((3, 1)),
                                src_offset=so, dst_offset=do)
        assert_close(got, np.stack([RC.transpose(s) for s in f64]), dtype, atol_u8=0,
                     what=f"transpose {layout} {c} {h}x{w}")
        got = cuda_emu.run_fast(tiles_fast(0), xin, layout, [(w, h)] * 3, (k % 4)[:, None],
                                src_offset=so, dst_offset=do)
        assert_close(got, np.stack([RC.rot90(s, kk) for s, kk in zip(f64, k)]), dtype, atol_u8=0,
                     what=f"rot90 {layout} {c} {h}x{w}")


def test_fast_path_plans():
    """Which dense batches take the fast kernels, with which vector widths."""
    from gpuaug.ops.crop import rows_plan
    from gpuaug.ops.transpose import tiles_plan

    # 256 x 224 x 224 x 3 uint8: 16-byte stores; odd rows of 3-byte pixels: the generic kernel
    name, grid, block, args = rows_plan(256, 1, 256, 256, 3, 224, 224, "uint8", 0, 256)
    assert name == "gpuaug_window_rows<unsigned char, 16>" and grid == (256 * 224 * 42 // 256,)
    assert rows_plan(2, 1, 37, 53, 3, 37, 53, "uint8", 0, 0) is None
    assert rows_plan(2, 1, 37, 54, 2, 36, 52, "float16", 0, 8)[0] == "gpuaug_window_rows<gpuaug::half, 8>"
    assert rows_plan(2, 1, 37, 54, 4, 36, 50, "float32", 0, 4)[0] == "gpuaug_window_rows<float, 4>"
    name, grid, block, args = tiles_plan(256, 1, 224, 224, 3, 0, 0)
    assert name == "gpuaug_transpose_tiles<3, 64>" and grid == (4, 4, 256) and args[-1] == 1
    assert tiles_plan(2, 1, 224, 224, 12, 0, 0)[:2] == ("gpuaug_transpose_tiles<12, 32>", (7, 7, 2))
    assert tiles_plan(2, 1, 37, 53, 3, 0, 0)[3][-1] == 0   # rows not whole words: bytes
    assert tiles_plan(2, 1, 32, 64, 4, 2, 0)[3][-1] == 0   # unaligned base: bytes
    assert tiles_plan(2, 1, 32, 64, 5, 0, 0) is None
