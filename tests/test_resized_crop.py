import numpy as np
import pytest

import gpuaug
import ref_resize as RR
from helpers import DTYPES, LAYOUTS, SIM, check_op, gpu, quantize, random_images

MODES = ("nearest", "bilinear", "area")
SIZES = ((19, 29), (61, 70))


def _boxes(rng, n, h, w):
    """Quarter-pixel boxes (float32-exact): inside, sticking out, wholly outside, tiny."""
    top = np.round(rng.uniform(-4, h - 2, n) * 4) / 4
    left = np.round(rng.uniform(-4, w - 2, n) * 4) / 4
    bh = np.round(rng.uniform(0.25, h, n) * 4) / 4 + 0.25
    bw = np.round(rng.uniform(0.25, w, n) * 4) / 4 + 0.25
    b = np.stack([top, left, bh, bw], axis=1)
    b[0] = (3, 5, 20, 31)             # integer box inside the image
    if n > 1:
        b[1] = (h - 2.5, -6.75, 9.5, 0.5)  # sticks out below, left; thin
    if n > 2:
        b[2] = (-20, w + 3.25, 4, 7.75)   # wholly outside
    return b


@pytest.mark.parametrize("interpolation", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_resized_crop_cpu(interpolation, dtype, layout, channels):
    rng = np.random.default_rng(1)
    x = random_images(rng, 4, 37, 53, channels, dtype)
    boxes = _boxes(rng, 4, 37, 53)
    for size in SIZES:
        kw = {"size": size, "interpolation": interpolation}
        check_op(gpuaug.resized_crop, lambda s, i: RR.resized_crop(s, boxes[i], size, interpolation), x,
                 {"boxes": boxes, **kw}, layout=layout)
        box = (2.5, 7.25, 30, 40.5)  # one box for every sample
        check_op(gpuaug.resized_crop, lambda s, i: RR.resized_crop(s, box, size, interpolation), x,
                 {"boxes": box, **kw}, layout=layout)


@pytest.mark.parametrize("interpolation", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_resized_crop_varshape_cpu(interpolation, dtype):
    rng = np.random.default_rng(2)
    shapes = [(5, 7), (37, 53), (1, 9), (40, 24)]
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in shapes]
    boxes = np.array([(1, 1, 3, 5), (4.5, 2.25, 30, 41.75), (0, 2, 1, 5), (-2, 20, 50, 6.5)])
    for size in ((19, 29), (6, 6)):
        check_op(gpuaug.resized_crop,
                 lambda s, i: RR.resized_crop(s, boxes[i], size, interpolation), xs,
                 {"boxes": boxes, "size": size, "interpolation": interpolation}, varshape=True)


@pytest.mark.parametrize("interpolation", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_full_box_is_resize(interpolation, dtype):
    rng = np.random.default_rng(3)
    x = random_images(rng, 2, 37, 53, 3, dtype)
    for size in SIZES + ((37, 53),):
        np.testing.assert_array_equal(gpuaug.resized_crop(x, (0, 0, 37, 53), size, interpolation),
                                      gpuaug.resize(x, size, interpolation))
    xs = [x[0], x[1, :20, 5:]]
    boxes = [(0, 0, 37, 53), (0, 0, 20, 48)]
    for a, b in zip(gpuaug.resized_crop(xs, boxes, (9, 11), interpolation),
                    gpuaug.resize(xs, (9, 11), interpolation)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_integer_box_is_resize_of_crop(dtype):
    """Nearest and area never read outside the box; bilinear only in the outermost
    output rows/columns (documented), so its interior matches resize of the crop."""
    rng = np.random.default_rng(4)
    x = random_images(rng, 2, 37, 53, 3, dtype)
    t, l, h, w = 3, 5, 20, 31
    crop = np.ascontiguousarray(x[:, t:t + h, l:l + w])
    for size in SIZES:
        np.testing.assert_array_equal(gpuaug.resized_crop(x, (t, l, h, w), size, "nearest"),
                                      gpuaug.resize(crop, size, "nearest"))
        # area: the same footprints up to float rounding of top + y * s
        a = gpuaug.resized_crop(x, (t, l, h, w), size, "area").astype(np.float64)
        np.testing.assert_allclose(a, gpuaug.resize(crop, size, "area").astype(np.float64),
                                   rtol=1e-3, atol=1 if dtype == "uint8" else 1e-3)
        a = gpuaug.resized_crop(x, (t, l, h, w), size)
        b = gpuaug.resize(crop, size)
        # same weights up to float rounding of top + (y + 0.5) * s - 0.5: uint8 may round apart
        np.testing.assert_allclose(a[:, 2:-2, 2:-2].astype(np.float64), b[:, 2:-2, 2:-2].astype(np.float64),
                                   rtol=1e-3, atol=1 if dtype == "uint8" else 1e-3)
    # a box touching the image edges clamps like resize does, so even bilinear agrees
    np.testing.assert_array_equal(gpuaug.resized_crop(x, (0, 0, 37, 53), (61, 70)),
                                  gpuaug.resize(x, (61, 70)))


def test_resized_crop_matches_opencv_on_crops():
    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(5)
    x = random_images(rng, 3, 64, 80, 3, "uint8")
    # box sizes coprime with the output sizes: OpenCV's nearest rounds y * (1 / (out / in))
    # in double and can land a pixel low where y * in / out is a whole number (see resize)
    boxes = np.array([(3, 5, 40, 51), (10, 9, 54, 67), (0, 17, 23, 31)])  # both axes shrink or both grow
    flags = (("nearest", cv2.INTER_NEAREST), ("bilinear", cv2.INTER_LINEAR), ("area", cv2.INTER_AREA))
    for m, flag in flags:
        for size in ((19, 29), (61, 70)):
            got = gpuaug.resized_crop(x, boxes, size, m)
            for i, (t, l, h, w) in enumerate(boxes):
                want = cv2.resize(x[i, t:t + h, l:l + w], size[::-1], interpolation=flag)
                k = 2 if m == "bilinear" else 0  # the crop replicates its edge, gpuaug reads on
                g, r = got[i, k:size[0] - k, k:size[1] - k], want[k:size[0] - k, k:size[1] - k]
                assert np.abs(g.astype(int) - r.astype(int)).max() <= 1, (m, i, size)


def test_resized_crop_single_image_and_host_boxes_rounded_to_float32():
    rng = np.random.default_rng(6)
    img = random_images(rng, 1, 9, 11, 3, "float32")[0]
    got = gpuaug.resized_crop(img, (1, 2, 5, 6), 4, "bilinear")
    assert got.shape == (4, 4, 3)
    b64 = (1 + 1e-12, 2, 5, 6)  # rounds to the same float32 box
    np.testing.assert_array_equal(gpuaug.resized_crop(img, b64, 4), got)


def test_resized_crop_bad_params():
    x = np.zeros((3, 8, 8, 3), np.uint8)
    good = (0, 0, 4, 4)
    with pytest.raises(ValueError, match="boxes: got shape"):
        gpuaug.resized_crop(x, np.zeros((2, 4)) + 1, (4, 4))
    with pytest.raises(ValueError, match="boxes: got shape"):
        gpuaug.resized_crop(x, (0, 0, 4), (4, 4))
    with pytest.raises(ValueError, match="boxes: .*height > 0"):
        gpuaug.resized_crop(x, (0, 0, 0, 4), (4, 4))
    with pytest.raises(ValueError, match="boxes: .*height > 0"):
        gpuaug.resized_crop(x, [good, good, (0, 0, 4, -1)], (4, 4))
    with pytest.raises(ValueError, match="boxes: .*finite"):
        gpuaug.resized_crop(x, (0, np.inf, 4, 4), (4, 4))
    with pytest.raises(ValueError, match="boxes: .*finite"):
        gpuaug.resized_crop(x, (0, 1e39, 4, 4), (4, 4))
    with pytest.raises(TypeError, match="boxes: got None"):
        gpuaug.resized_crop(x, None, (4, 4))
    with pytest.raises(ValueError, match="size: got"):
        gpuaug.resized_crop(x, good, (0, 4))
    with pytest.raises(ValueError, match="interpolation: got 'lanczos'"):
        gpuaug.resized_crop(x, good, 4, "lanczos")


def test_resized_crop_example_boxes_are_inside():
    from gpuaug.ops.resized_crop import random_boxes

    b = random_boxes(np.random.default_rng(0), 500, 37, 53)
    assert (b[:, 2:] >= 1).all() and (b[:, 0] >= 0).all() and (b[:, 1] >= 0).all()
    assert (b[:, 0] + b[:, 2] <= 37).all() and (b[:, 1] + b[:, 3] <= 53).all()


def test_resized_crop_cuda_c_compiles_every_mode():
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not available here ({type(e).__name__})")
    from gpuaug.kernels._cuda import check_compile, kernel_name

    names = [kernel_name("gpuaug_resized_crop", d, c, m) for d in DTYPES for c in (1, 3, 4) for m in range(3)]
    assert check_compile("resized_crop.cu", names).count(".entry") == len(names)


def test_resized_crop_simulator():
    if not SIM:
        pytest.skip("a GPU is present: the CUDA twin is tested by test_resized_crop_gpu")
    rng = np.random.default_rng(7)
    boxes = np.array([(0.5, 1.25, 3, 4.5), (-1, 3, 2.5, 6)])
    for dtype in DTYPES:
        x = random_images(rng, 2, 5, 7, 3, dtype)
        for m in MODES:
            check_op(gpuaug.resized_crop, lambda s, i: RR.resized_crop(s, boxes[i], (3, 4), m), x,
                     {"boxes": boxes, "size": (3, 4), "interpolation": m}, backend="numba-sim",
                     layout="NCHW")


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_resized_crop_gpu(backend, dtype, layout):
    rng = np.random.default_rng(8)
    for c in (1, 3, 4):
        x = random_images(rng, 4, 37, 53, c, dtype)
        boxes = _boxes(rng, 4, 37, 53)
        for m in MODES:
            for size in SIZES:
                # float32: the GPU contracts the float32 coordinate maths into FMAs, so
                # weights differ from the reference's by ~1e-6 and values by up to ~2e-5.
                check_op(gpuaug.resized_crop, lambda s, i: RR.resized_crop(s, boxes[i], size, m), x,
                         {"boxes": boxes, "size": size, "interpolation": m}, layout=layout, backend=backend,
                         rtol=1e-4)
    xs = [random_images(rng, 1, h, w, 3, dtype)[0] for h, w in [(5, 7), (37, 53), (1, 9)]]
    boxes = np.array([(1, 1, 3, 5), (4.5, 2.25, 30, 41.75), (0, 2, 1, 5)])
    for m in MODES:
        check_op(gpuaug.resized_crop, lambda s, i: RR.resized_crop(s, boxes[i], (19, 29), m), xs,
                 {"boxes": boxes, "size": (19, 29), "interpolation": m}, varshape=True, backend=backend)


@gpu
def test_resized_crop_gpu_device_boxes():
    """Boxes already on the GPU are used without a host round trip."""
    import cupy

    rng = np.random.default_rng(9)
    x = random_images(rng, 8, 224, 224, 3, "uint8")
    from gpuaug.ops.resized_crop import random_boxes

    boxes = random_boxes(rng, 8, 224, 224)
    got = cupy.asnumpy(gpuaug.resized_crop(cupy.asarray(x), cupy.asarray(boxes), (112, 112)))
    ref = np.stack([RR.resized_crop(s.astype(np.float64), b, (112, 112), "bilinear")
                    for s, b in zip(x, boxes)])
    assert np.abs(got.astype(int) - quantize(ref, np.uint8).astype(int)).max() <= 1
