import numpy as np
import pytest

import gpuaug
import ref_filters as R
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, random_images

EXACT = {"atol_u8": 0, "rtol": 0.0}


def _boxes(rng, n, k, h, w):
    top = rng.integers(-5, h, (n, k))
    left = rng.integers(-5, w, (n, k))
    bh = rng.integers(0, h // 2 + 2, (n, k))
    bw = rng.integers(0, w // 2 + 2, (n, k))
    return np.stack([top, left, bh, bw], -1)


def _fill(v, dtype):
    """A fill value as the op stores it (uint8 rounds and saturates; float16 rounds)."""
    if dtype == "uint8":
        return np.clip(np.floor(np.asarray(v, float) + 0.5), 0, 255)
    return np.asarray(v, np.float64).astype(dtype).astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_erase_cpu(dtype, layout, channels):
    rng = np.random.default_rng(1)
    n, h, w = 5, 37, 53
    x = random_images(rng, n, h, w, channels, dtype)
    boxes = _boxes(rng, n, 3, h, w)
    vals = rng.uniform(-20, 300, n) if dtype == "uint8" else rng.uniform(-1, 2, n)
    check_op(gpuaug.erase, lambda s, i: R.erase(s, boxes[i], _fill(vals[i], dtype)), x,
             {"boxes": boxes, "value": vals}, layout=layout, **EXACT)
    shared = np.array([[0, 0, 5, 5], [30, 40, 20, 20], [-3, 10, 6, 2]])
    per_ch = np.arange(1, channels + 1) * 0.25
    check_op(gpuaug.erase, lambda s, i: R.erase(s, shared, _fill(per_ch, dtype)), x,
             {"boxes": shared, "value": [per_ch]}, layout=layout, **EXACT)
    full = rng.uniform(0, 1, (n, channels))
    check_op(gpuaug.erase, lambda s, i: R.erase(s, boxes[i, :1], _fill(full[i], dtype)), x,
             {"boxes": boxes[:, :1], "value": full}, layout=layout, **EXACT)
    check_op(gpuaug.erase, lambda s, i: s, x, {"boxes": np.zeros((0, 4))}, layout=layout, **EXACT)


@pytest.mark.parametrize("dtype", DTYPES)
def test_erase_varshape_cpu(dtype):
    rng = np.random.default_rng(2)
    shapes = [(5, 7), (37, 53), (1, 9), (2, 1)]
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in shapes]
    boxes = np.stack([_boxes(rng, 1, 2, h, w)[0] for h, w in shapes])
    check_op(gpuaug.erase, lambda s, i: R.erase(s, boxes[i], [0, 10, 200, 3][i]), xs,
             {"boxes": boxes, "value": [0, 10, 200, 3]}, varshape=True, atol_u8=0, rtol=1e-3)


def test_erase_value_forms():
    x = np.full((3, 4, 4, 3), 9, np.uint8)
    box = [[1, 1, 2, 2]]
    y = gpuaug.erase(x, box, value=[1, 2, 3])  # N == C: one value per sample
    assert (y[:, 1, 1].T == [[1, 2, 3]] * 3).all()
    y = gpuaug.erase(x, box, value=[[1, 2, 3]])  # (1, C): per channel
    assert (y[:, 1, 1] == [1, 2, 3]).all()
    y = gpuaug.erase(x[:2], box, value=[4, 5, 6])  # N != C: per channel
    assert (y[:, 2, 2] == [4, 5, 6]).all()


@pytest.mark.parametrize("kw, match", [
    ({"boxes": [[0, 0, -1, 2]]}, "boxes: got a negative height or width"),
    ({"boxes": [[0, 0, 1.5, 2]]}, "boxes: .*expected integers"),
    ({"boxes": [0, 0, 1, 2]}, "boxes: got shape \\(4,\\)"),
    ({"boxes": np.zeros((2, 1, 4))}, "boxes: got shape"),
    ({"boxes": [[0, 0, 1, 1]], "value": [1.0, 2.0]}, "value: got shape"),
    ({"boxes": [[0, 0, 1, 1]], "value": np.nan}, "value: .*finite"),
])
def test_erase_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        gpuaug.erase(np.zeros((3, 8, 8, 3), np.uint8), **kw)


def test_erase_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the Numba CUDA twin is tested by test_erase_gpu")
    rng = np.random.default_rng(3)
    for dtype in DTYPES:
        x = random_images(rng, 2, 3, 5, 3, dtype)
        boxes = np.array([[[0, 1, 2, 2]], [[1, -1, 5, 3]]])
        check_op(gpuaug.erase, lambda s, i: R.erase(s, boxes[i], [1.0, 0.0][i]), x,
                 {"boxes": boxes, "value": [1.0, 0.0]}, backend="numba-sim", layout="NCHW", **EXACT)


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_erase_gpu(backend, dtype, layout):
    rng = np.random.default_rng(4)
    n, h, w = 5, 37, 53
    for c in (1, 3, 4):
        x = random_images(rng, n, h, w, c, dtype)
        boxes = _boxes(rng, n, 3, h, w)
        full = rng.uniform(0, 1, (n, c))
        check_op(gpuaug.erase, lambda s, i: R.erase(s, boxes[i], _fill(full[i], dtype)), x,
                 {"boxes": boxes, "value": full}, layout=layout, backend=backend, **EXACT)


@pytest.mark.parametrize("dtype", ["uint8", "float32", "float16"])
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_erase_compiled_rows_equal_the_general_path(dtype, channels):
    """Host boxes and values take one compiled loop (issue 13): the same parameter rows, bit for
    bit, as the NumPy path (boxes as a list), for every value form, with rounding edges."""
    from gpuaug._run import describe

    rng = np.random.default_rng(3)
    n, k = 6, 3
    x = random_images(rng, n, 9, 11, channels, dtype)
    boxes = _boxes(rng, n, k, 9, 11)
    edges = np.array([2.5, -0.5, 255.49999999999997, 300.0, -7.0, 0.1 + 0.2])
    values = [0, 7.5, rng.uniform(-20, 280, n), edges[:n], rng.uniform(0, 1, (n, channels)),
              rng.uniform(0, 1, (1, channels)), np.arange(n, dtype=np.int32), 1 / 3]
    if channels != n:
        values.append(rng.uniform(0, 300, channels))
    for dt in (np.int64, np.int32, np.uint16):  # uint16: negative coordinates wrap (and stay legal)
        b = boxes.astype(dt)
        for value in values:
            got = describe(gpuaug.ops.erase.erase, x, boxes=b, value=value).params
            want = describe(gpuaug.ops.erase.erase, x, boxes=b.tolist(), value=value).params
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), (dt, value)


@pytest.mark.parametrize("bad", ["negative size", "far", "float boxes", "nan value", "inf value"])
def test_erase_compiled_rows_refusals_are_the_general_paths(bad):
    rng = np.random.default_rng(4)
    x = random_images(rng, 3, 8, 8, 3, "uint8")
    boxes = _boxes(rng, 3, 2, 8, 8)
    value = rng.uniform(0, 255, 3)
    if bad in ("nan value", "inf value"):
        value[1] = np.nan if bad == "nan value" else -np.inf
    elif bad == "negative size":
        boxes[1, 0, 3] = -1
    elif bad == "far":
        boxes[2, 1, 0] = 2 ** 24
    else:
        boxes = boxes.astype(float) + 0.5
    errors = []
    for b, v in ((boxes, value), (boxes.tolist(), value.tolist())):
        with pytest.raises((ValueError, TypeError)) as e:
            gpuaug.erase(x, b, value=v)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_erase_packed_gpu(dtype):
    """Dense NHWC batches whose rows are whole 16-byte vectors: the packed kernel runs (boxes in
    registers and, past 4 per sample, read from the parameters), exact against the reference."""
    import cupy

    from gpuaug.kernels._cuda import record

    rng = np.random.default_rng(8)
    n, h, w = 5, 37, 64
    for c in (1, 3, 4):
        x = random_images(rng, n, h, w, c, dtype)
        for k in (2, 6):
            boxes = _boxes(rng, n, k, h, w)
            full = rng.uniform(0, 1, (n, c))
            check_op(gpuaug.erase, lambda s, i: R.erase(s, boxes[i], _fill(full[i], dtype)), x,
                     {"boxes": boxes, "value": full}, backend="cuda", **EXACT)
            with record() as log:
                gpuaug.erase(cupy.asarray(x), boxes, full)
            assert [e[3] for e in log if e[0] == "launch"] == [(256,)]  # the packed kernel's block
