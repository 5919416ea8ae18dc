"""Property tests (hypothesis): every op in ``gpuaug.registry`` on random small shapes, dtypes,
layouts, channel counts and parameters, against its NumPy reference, on the CPU twin (and a
few tiny examples on the Numba CUDA twin: the simulator without a GPU); plus identities
that must hold whatever the input.

Each op's case (the parameters it draws, its reference call and tolerance) is declared beside
the op, in tests/refs/<op>.py (``case``), so the table below is generated from the registry:
a new op with its refs module is covered here with no edit to this file. The references, the
comparison and the tolerances are the per-op tests' own (tests/helpers.py ``check_op``,
tests/ref_*.py, test_normalize.check_layout, ...): a property here is "the per-op test's
check passes for *any* shape and parameters", not a second definition of the op. Continuous parameters are float32-exact (the library
computes in float32 and says so) except the edge values below, and the warp matrices come from the per-op tests'
random generators (continuous, so no nearest-neighbour ties).

Runtime: hypothesis settings for the file (derandomized, so CI sees the same examples every
run; no deadline, because the first example of each dtype/layout compiles a Numba
specialisation): ``PROFILE`` 25 examples for each op's reference property, ``SECONDARY``
15 for varshape lists, strided views and each identity, ``SIMULATOR`` 3 tiny ones per op on
the Numba CUDA twin. Set ``GPUAUG_HYPOTHESIS_EXAMPLES`` (default 25; the others scale with
it) to run more, and ``GPUAUG_HYPOTHESIS_RANDOM=1`` for fresh random examples.

Parameters that decide comparisons or stored values are drawn at the edges too (``edgy`` in
tests/refs/_common.py: thresholds and fill values a hair above or below a pixel value or a
rounding tie, which float32 cannot tell apart), and solarize plants the decisive pixel values into its input:
the CPU twin reads parameters as float64 and the CUDA kernels as float32, which once made
them disagree (see test_determinism's regressions).
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import gpuaug  # noqa: E402
import ref_filters as RF  # noqa: E402
import ref_intensity as RI  # noqa: E402
import refs  # noqa: E402
from helpers import DTYPES, LAYOUTS, SIM, assert_close, check_op, from_layout, random_images, to_layout  # noqa: E402
from refs._common import BORDERS, INTERPS, Geo, f32, floats, images  # noqa: E402
from test_normalize import check_layout  # noqa: E402

EXAMPLES = int(os.environ.get("GPUAUG_HYPOTHESIS_EXAMPLES", "25"))
_COMMON = dict(deadline=None, derandomize=os.environ.get("GPUAUG_HYPOTHESIS_RANDOM", "0") in ("", "0"),
               database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings(max_examples=EXAMPLES, **_COMMON)
# varshape lists, strided views and identities: fewer examples each (the per-op reference
# property above carries the parameter space; these add layouts of memory and algebra)
SECONDARY = settings(max_examples=max(1, EXAMPLES * 3 // 5), **_COMMON)
IDENTITY = SECONDARY
# the Numba CUDA twin in the simulator runs Python per thread: a few tiny examples
SIMULATOR = settings(max_examples=max(1, EXAMPLES // 8), **_COMMON)

OPS = sorted(gpuaug.registry)


# -- the ops' cases: declared beside each op, in tests/refs/<op>.py --------------------------

#: op name -> case(draw, g): the parameters it draws and the per-op tests' reference calls
CASES: dict[str, Callable] = {name: refs.get(name, "case") for name in OPS if refs.get(name, "case")}
#: the twins' tolerance where it differs from the CPU twin's (float32 coordinate maths of the
#: warps and resized_crop's boxes), from each op's tests/refs module
TWIN_RTOL = {name: refs.get(name, "TWIN_RTOL") for name in OPS if refs.get(name, "TWIN_RTOL") is not None}


def test_every_registered_op_has_a_property_case():
    missing = [n for n in OPS if n not in CASES]
    assert not missing, f"no case(draw, g) in tests/refs/<op>.py for {missing}"
    assert all(callable(c) for c in CASES.values())


# -- running a case --------------------------------------------------------------------------

@st.composite
def geometries(draw, name, *, varshape=False, max_hw=12, max_n=3):
    spec = gpuaug.registry[name]
    n = draw(st.integers(1, max_n))
    if varshape:
        shapes = [(draw(st.integers(1, max_hw)), draw(st.integers(1, max_hw))) for _ in range(n)]
    else:
        shapes = [(draw(st.integers(1, max_hw)), draw(st.integers(1, max_hw)))] * n
    dtype = draw(st.sampled_from([d for d in DTYPES if d in spec.dtypes]))
    layout = "NHWC" if varshape else draw(st.sampled_from([lay for lay in LAYOUTS if lay in spec.layouts]))
    c = draw(st.sampled_from(spec.channels))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return Geo(n, shapes, c, dtype, layout, varshape, np.random.default_rng(seed), tiny=max_hw <= 6)


def _input(name, g):
    """The op's own inputs where it declares them (equalize: uneven histograms, a flat image)."""
    return refs.get(name, "images", images)(g)


def _check_layout_varshape(fn, ref_fn, xs, kw, odt, out_layout, backend):
    """normalize / crop_mirror_normalize on a list: a list of HWC or CHW images, or (with a crop)
    one uniform batch."""
    refs = [ref_fn(s.astype(np.float64), i) for i, s in enumerate(xs)]
    got = fn(xs, backend=backend, **kw)
    if isinstance(got, list):
        assert len(got) == len(refs)
        for i, (a, r) in enumerate(zip(got, refs)):
            a = a if out_layout == "NHWC" else a.transpose(1, 2, 0)
            assert a.dtype == np.dtype(odt)
            assert_close(a, r, odt, what=f"{backend} varshape sample {i}")
    else:
        assert got.dtype == np.dtype(odt)
        assert_close(from_layout(got, out_layout), np.stack(refs), odt, what=f"{backend} varshape batch")


def _case(name):
    if name not in CASES:
        pytest.fail(f"op {name!r} declares no property case: add case(draw, g) to tests/refs/{name}.py")
    return CASES[name]


def run_case(name, draw, g, backend="cpu"):
    c = _case(name)(draw, g)
    x = _input(name, g)
    if c.plant is not None:
        for i, s in enumerate(x):
            c.plant(s, i)
    fn = gpuaug.registry[name].func
    if c.kind == "layout":
        if g.varshape:
            _check_layout_varshape(fn, c.ref, x, c.params, c.odt, c.out_layout,
                                   "cpu" if backend == "cpu" else "numba")
        else:
            check_layout(fn, c.ref, x, c.params, layout=g.layout, out_layout=c.out_layout, odt=c.odt,
                         backend="cpu" if backend == "cpu" else "numba-sim")
        return
    tol = dict(c.tol)
    if backend != "cpu" and name in TWIN_RTOL:
        tol.setdefault("rtol", TWIN_RTOL[name])
    check_op(fn, c.ref, x, c.params, layout=g.layout, backend=backend, varshape=g.varshape, **tol)


@pytest.mark.parametrize("name", OPS)
@PROFILE
@given(data=st.data())
def test_op_matches_reference(name, data):
    """Any small shape (1..12 px, odd, 1-pixel), dtype, layout, channel count and parameters."""
    g = data.draw(geometries(name), label="geometry")
    run_case(name, data.draw, g)


@pytest.mark.parametrize("name", [n for n in OPS if gpuaug.registry[n].varshape])
@SECONDARY
@given(data=st.data())
def test_op_matches_reference_varshape(name, data):
    """A list of HWC images of different sizes, one launch, per-sample parameters."""
    g = data.draw(geometries(name, varshape=True), label="geometry")
    run_case(name, data.draw, g)


@pytest.mark.skipif(not SIM, reason="a GPU is present: the Numba CUDA twin runs in the GPU tests")
@pytest.mark.parametrize("name", OPS)
@SIMULATOR
@given(data=st.data())
def test_op_matches_reference_numba_simulator(name, data):
    """The Numba CUDA twin in the CUDA simulator: tiny inputs only (n <= 2, h, w <= 6), a
    uniform batch or a varshape list."""
    varshape = gpuaug.registry[name].varshape and data.draw(st.booleans(), label="varshape")
    g = data.draw(geometries(name, varshape=varshape, max_hw=6, max_n=2), label="geometry")
    run_case(name, data.draw, g, backend="numba-sim")


def _strided_copy(rng, x, axis_steps):
    """``x`` as a non-contiguous view into a larger random array (the same values)."""
    big_shape = tuple(s * k + 1 for s, k in zip(x.shape, axis_steps))
    big = rng.integers(0, 256, big_shape).astype(x.dtype)
    view = big[tuple(slice(1, None, k) for k in axis_steps)]
    view[...] = x
    return big, view


@pytest.mark.parametrize("name", OPS)
@SECONDARY
@given(data=st.data())
def test_op_strided_input_and_output_views(name, data):
    """The same bits from a contiguous input, a strided view of it (rows, columns and
    channels not adjacent) and a single image; ``out=`` a strided view writes exactly its
    elements (the rest of its base untouched) and returns it."""
    g = data.draw(geometries(name), label="geometry")
    c = _case(name)(data.draw, g)
    x = _input(name, g)
    if c.plant is not None:
        for i, s in enumerate(x):
            c.plant(s, i)
    x = to_layout(x, g.layout)
    fn = gpuaug.registry[name].func
    want = fn(x, layout=g.layout, **c.params)
    steps = tuple(data.draw(st.lists(st.integers(1, 3), min_size=4, max_size=4), label="strides"))
    base, view = _strided_copy(g.rng, x, steps)
    before = base.copy()
    got = fn(view, layout=g.layout, **c.params)
    assert bits(got) == bits(want), "strided input"
    np.testing.assert_array_equal(base, before)  # the input is not written
    obase, oview = _strided_copy(g.rng, np.zeros_like(want), (1, 2, 1, 2))
    obefore = obase.copy()
    res = fn(x, layout=g.layout, out=oview, **c.params)
    assert res is oview
    assert bits(np.ascontiguousarray(oview)) == bits(want), "strided out="
    untouched = np.ones(obase.shape, bool)
    untouched[(slice(1, None, 1), slice(1, None, 2), slice(1, None, 1), slice(1, None, 2))] = False
    np.testing.assert_array_equal(obase[untouched], obefore[untouched])  # nothing outside the view
    if g.n == 1 and c.kind == "plain":
        single = fn(x[0], layout=g.layout, **c.params)
        assert bits(single) == bits(want[0]), "one image = a batch of one"


def bits(a):
    a = np.asarray(a)
    return a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()


# -- identities --------------------------------------------------------------------------------

@st.composite
def batches(draw, channels=(1, 3, 4), max_hw=12, square=False):
    n = draw(st.integers(1, 3))
    h = draw(st.integers(1, max_hw))
    w = h if square else draw(st.integers(1, max_hw))
    dtype = draw(st.sampled_from(DTYPES))
    layout = draw(st.sampled_from(LAYOUTS))
    c = draw(st.sampled_from(channels))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    x = random_images(rng, n, h, w, c, dtype)
    return to_layout(x, layout), layout, rng


def same(a, b):
    """Bit-identical (NaN-free data: array_equal is the bitwise test up to -0.0)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_array_equal(a, b)


@IDENTITY
@given(b=batches(), data=st.data())
def test_flip_twice_is_identity(b, data):
    x, layout, _ = b
    n = x.shape[0]
    hf = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    vf = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    same(gpuaug.flip(gpuaug.flip(x, hf, vf, layout=layout), hf, vf, layout=layout), x)


@IDENTITY
@given(b=batches(), data=st.data())
def test_rot90_k_then_4_minus_k_is_identity(b, data):
    x, layout, _ = b
    n = x.shape[0]
    h, w = from_layout(x, layout).shape[1:3]
    k = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    if h != w:
        k = np.where(k % 2 == k[0] % 2, k, (k + 1) % 4)
    y = gpuaug.rot90(x, k, layout=layout)
    same(gpuaug.rot90(y, (4 - k) % 4, layout=layout), x)
    same(gpuaug.rot90(y, -k, layout=layout), x)


@IDENTITY
@given(b=batches())
def test_transpose_twice_is_identity(b):
    x, layout, _ = b
    same(gpuaug.transpose(gpuaug.transpose(x, layout=layout), layout=layout), x)


@IDENTITY
@given(b=batches(), interp=st.sampled_from(INTERPS), border=st.sampled_from(BORDERS),
       turns=st.integers(-2, 2), fill=st.floats(0, 255))
def test_rotate_by_zero_is_copy(b, interp, border, turns, fill):
    x, layout, _ = b
    same(gpuaug.rotate(x, 360.0 * turns, interpolation=interp, border=border, fill=fill, layout=layout), x)


@IDENTITY
@given(b=batches(), interp=st.sampled_from(INTERPS), border=st.sampled_from(BORDERS),
       inverse=st.booleans(), w22=st.sampled_from([1.0, 2.0, 0.5, 3.0]), fill=st.floats(0, 255))
def test_warps_with_identity_matrix_are_copies(b, interp, border, inverse, w22, fill):
    """warp_affine with [I | 0] and warp_perspective with any positive multiple of I."""
    x, layout, _ = b
    kw = {"interpolation": interp, "border": border, "fill": fill, "inverse_map": inverse, "layout": layout}
    same(gpuaug.warp_affine(x, np.eye(3)[:2], **kw), x)
    same(gpuaug.warp_perspective(x, np.eye(3) * w22, **kw), x)


@IDENTITY
@given(b=batches(), interp=st.sampled_from(("nearest", "bilinear")))
def test_resize_to_the_same_size_is_copy(b, interp):
    """Documented for nearest and bilinear."""
    x, layout, _ = b
    h, w = from_layout(x, layout).shape[1:3]
    same(gpuaug.resize(x, (h, w), interp, layout=layout), x)
    same(gpuaug.resized_crop(x, (0, 0, h, w), (h, w), interp, layout=layout), x)


@IDENTITY
@given(b=batches(), odt=st.sampled_from(("float32", "float16")), out_layout=st.sampled_from(LAYOUTS))
def test_normalize_then_denormalize_is_input(b, odt, out_layout):
    """y = (x - mean) / std; y * std + mean == x up to the output dtype's rounding of y."""
    x, layout, rng = b
    xn = from_layout(x, layout)
    n, c = xn.shape[0], xn.shape[3]
    m = RI.top(xn.dtype)
    mean, std = f32(rng.uniform(0, m, (n, c))), f32(rng.uniform(0.1 * m, m, (n, c)))
    y = from_layout(gpuaug.normalize(x, mean, std, dtype=odt, output_layout=out_layout, layout=layout),
                    out_layout).astype(np.float64)
    back = y * std[:, None, None] + mean[:, None, None]
    eps = np.finfo(odt).eps
    # |y| <= 10 (std >= m / 10): one rounding of y costs <= eps |y| std <= eps * 10 m, plus float32 maths
    np.testing.assert_allclose(back, xn.astype(np.float64), rtol=0, atol=eps * m * 12)
    # and the documented undo: normalize(y, -mean / std, 1 / std) in float32
    if odt == "float32":
        y32 = gpuaug.normalize(xn, mean, std)
        undo = gpuaug.normalize(y32, -mean / std, 1 / std)
        np.testing.assert_allclose(undo, xn.astype(np.float64), rtol=0, atol=eps * m * 24)


@IDENTITY
@given(b=batches(), mode=st.sampled_from(("constant", "edge", "reflect")), data=st.data())
def test_crop_of_pad_is_identity(b, mode, data):
    x, layout, _ = b
    n = x.shape[0]
    h, w = from_layout(x, layout).shape[1:3]
    tv, th = data.draw(st.integers(0, 14)), data.draw(st.integers(0, 14))
    top = np.array(data.draw(st.lists(st.integers(0, tv), min_size=n, max_size=n)))
    left = np.array(data.draw(st.lists(st.integers(0, th), min_size=n, max_size=n)))
    padding = np.stack([top, tv - top, left, th - left], 1)
    y = gpuaug.pad(x, padding, mode=mode, value=0.5, layout=layout)
    same(gpuaug.crop(y, top, left, h, w, layout=layout), x)


@IDENTITY
@given(b=batches())
def test_neutral_colour_factors_are_copies(b):
    """brightness 1, contrast 1, saturation 1, gamma 1 (gain 1), hue 0, color_jitter's defaults,
    an identity color_twist: copies (bit for bit: factor 1 multiplies exactly; gamma's
    m * (x / m) may be one float32 ulp off, which the store rounds away for uint8 and float16)."""
    x, layout, _ = b
    kw = {"layout": layout}
    same(gpuaug.brightness(x, 1.0, **kw), x)
    same(gpuaug.contrast(x, 1.0, **kw), x)
    same(gpuaug.saturation(x, 1.0, **kw), x)
    same(gpuaug.hue(x, 0.0, **kw), x)
    same(gpuaug.color_jitter(x, **kw), x)
    g = gpuaug.gamma(x, 1.0, **kw)
    if x.dtype == np.float32:
        np.testing.assert_allclose(g, x, rtol=2 * np.finfo(np.float32).eps, atol=0)
    else:
        same(g, x)
    if from_layout(x, layout).shape[3] >= 3:
        same(gpuaug.color_twist(x, np.eye(3, 4), **kw), x)


@IDENTITY
@given(b=batches())
def test_invert_twice_is_identity(b):
    """uint8 exactly; floats within one rounding of m - x (Sterbenz: exact for x >= m / 2)."""
    x, layout, _ = b
    y = gpuaug.invert(gpuaug.invert(x, layout=layout), layout=layout)
    if x.dtype == np.uint8:
        same(y, x)
    else:
        np.testing.assert_allclose(y.astype(np.float64), x.astype(np.float64), rtol=0,
                                   atol=np.finfo(x.dtype).eps)
        big = x >= 0.5
        np.testing.assert_array_equal(y[big], x[big])


@IDENTITY
@given(b=batches())
def test_channel_shuffle_identity_permutation_is_copy(b):
    x, layout, _ = b
    c = from_layout(x, layout).shape[3]
    same(gpuaug.channel_shuffle(x, list(range(c)), layout=layout), x)
    same(gpuaug.channel_shuffle(x, np.tile(np.arange(c), (x.shape[0], 1)), layout=layout), x)


@IDENTITY
@given(b=batches(), data=st.data())
def test_erase_with_zero_area_boxes_is_copy(b, data):
    """Boxes of height 0 or width 0 anywhere, and boxes wholly outside the image."""
    x, layout, _ = b
    n = x.shape[0]
    h, w = from_layout(x, layout).shape[1:3]
    k = data.draw(st.integers(0, 4))
    boxes = []
    for _ in range(n * k):
        kind = data.draw(st.sampled_from(("h0", "w0", "below", "right", "above", "left")))
        t, le = data.draw(st.integers(-5, h + 5)), data.draw(st.integers(-5, w + 5))
        bh, bw = data.draw(st.integers(0, h + 5)), data.draw(st.integers(0, w + 5))
        if kind == "h0":
            bh = 0
        elif kind == "w0":
            bw = 0
        elif kind == "below":
            t = h + data.draw(st.integers(0, 3))
        elif kind == "right":
            le = w + data.draw(st.integers(0, 3))
        elif kind == "above":
            t = -bh - data.draw(st.integers(0, 3))
        else:
            le = -bw - data.draw(st.integers(0, 3))
        boxes.append((t, le, bh, bw))
    boxes = np.array(boxes, np.int64).reshape(n, k, 4)
    same(gpuaug.erase(x, boxes, value=7, layout=layout), x)


@IDENTITY
@given(b=batches(), data=st.data())
def test_neutral_parameters_are_copies(b, data):
    """More identities: a 1-tap blur, zero noise, probability-0 salt and pepper, ratio-0 grid
    mask, 8-bit posterize of uint8, whole-image crop / center_crop, zero padding, a solarize
    threshold above every value (floats: none reach it)."""
    x, layout, _ = b
    xn = from_layout(x, layout)
    h, w = xn.shape[1:3]
    kw = {"layout": layout}
    same(gpuaug.gaussian_blur(x, data.draw(st.floats(0.1, 5.0)), kernel_size=1, **kw), x)
    same(gpuaug.box_blur(x, 1, **kw), x)
    same(gpuaug.gaussian_noise(x, 0.0, 0.0, seed=data.draw(st.integers(0, 2 ** 64 - 1)), **kw), x)
    same(gpuaug.salt_and_pepper(x, 0.0, seed=data.draw(st.integers(0, 2 ** 64 - 1)), **kw), x)
    same(gpuaug.grid_mask(x, data.draw(st.floats(0.5, 20)), 0.0, data.draw(st.floats(-180, 180)), **kw), x)
    same(gpuaug.crop(x, 0, 0, h, w, **kw), x)
    same(gpuaug.center_crop(x, (h, w), **kw), x)
    same(gpuaug.pad(x, 0, mode=data.draw(st.sampled_from(("constant", "edge", "reflect"))), **kw), x)
    if x.dtype == np.uint8:
        same(gpuaug.posterize(x, 8, **kw), x)
    elif (x < 1).all():  # (float16 may round a random value up to 1)
        same(gpuaug.solarize(x, 1.0, **kw), x)


@IDENTITY
@given(data=st.data())
def test_rotated_grid_mask_matches_definition(data):
    """Rotated grids, any tile/ratio/shift: the float64 definition except within 1e-3 px of a
    square's edge (where float32 may decide either way), as test_grid_mask_rotated_cpu."""
    n, h, w = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12))
    dtype = data.draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    x = random_images(rng, n, h, w, 3, dtype)
    x = np.maximum(x, 1) if dtype == "uint8" else (x + 0.5).astype(dtype)  # no zero: zero means masked
    tile = floats(data.draw, n, 0.5, 20.0)
    ratio = floats(data.draw, n, 0.0, 1.0)
    angle = floats(data.draw, n, -360.0, 360.0)
    shift = np.stack([floats(data.draw, n, -10, 10), floats(data.draw, n, -10, 10)], 1)
    y = gpuaug.grid_mask(x, tile, ratio, angle, shift)
    for i in range(n):
        keep, margin = RF.grid_mask_keep(h, w, tile[i], ratio[i], angle[i], shift[i])
        sure = margin > 1e-3
        np.testing.assert_array_equal((y[i] != 0).all(-1)[sure], keep[sure])
        np.testing.assert_array_equal(y[i][keep & sure], x[i][keep & sure])
