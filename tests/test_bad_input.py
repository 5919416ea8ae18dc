"""Bad input, everywhere public: one test per row of docs/errors.md.

Every row is run for every op in ``gpuaug.registry`` where it applies, on the CPU twin
("cpu"), on the Numba CUDA twin in the simulator ("numba-sim", machines without a GPU) and,
marked ``gpu``, on "cuda" and "numba" with CuPy arrays. Each error must name the argument,
the bad value and what is accepted (asserted with regexes), and must leave a poisoned
``out=`` buffer exactly as it was: nothing is written on error.
"""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import gpuaug
import refs
from conftest import HAS_GPU
from helpers import SIM, gpu

OPS = sorted(gpuaug.registry)
N, H, W, C = 3, 12, 10, 3
POISON = 77

# Where the arrays live and which backend runs: host arrays on the CPU twin and (without a
# GPU) the simulator; CuPy arrays on "cuda" and "numba" (tests marked gpu).
HOST = ["cpu"] + (["numba-sim"] if SIM else [])
DEVICE = [pytest.param(w, marks=gpu) for w in ("cuda", "numba-gpu")]
WHERE = HOST + DEVICE
# Errors found while parsing the arguments, before a backend does anything: the simulator
# would add nothing to the CPU run, so those tests run on "cpu" (and on the GPU, marked gpu).
PARSE = ["cpu"] + DEVICE
# Ops whose simulator run does a pre-pass (a mean, a histogram) before out= is checked: seconds each.
SLOW_IN_SIM = {"contrast", "color_jitter", "equalize"}
# Ops (one per kernel family) whose simulator runs stand for all in the slow rows (strided data).
SIM_SAMPLE = {"flip", "crop", "warp_affine", "resize", "brightness", "gaussian_blur", "erase", "normalize"}
BACKEND = {"cpu": "cpu", "numba-sim": "numba", "cuda": "cuda", "numba-gpu": "numba"}


def cheap(name, where):
    if where == "numba-sim" and name in SLOW_IN_SIM:
        pytest.skip(f"{name} runs a pre-pass in the simulator first (slow); its CPU run covers this row")


def on_device(where):
    return where in ("cuda", "numba-gpu")


def spec(name):
    return gpuaug.registry[name]


def x_(n=N, h=H, w=W, c=C, dtype=np.uint8, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, c)).astype(dtype)


@functools.lru_cache(maxsize=None)
def _example(name, n):
    s = spec(name)
    return s.example(np.random.default_rng(0), n, H, W) if s.example else {}


def kw_(name, n=N):
    """The op's registry example for an N x H x W batch (a fresh dict)."""
    return dict(_example(name, n))


@functools.lru_cache(maxsize=None)
def _good(name):
    return spec(name).func(x_(), backend="cpu", **kw_(name))


def dev(v):
    """NumPy arrays (and lists of them) -> CuPy; anything else unchanged."""
    import cupy

    if isinstance(v, np.ndarray):
        return cupy.asarray(v)
    if isinstance(v, list) and v and all(isinstance(a, np.ndarray) for a in v):
        return [cupy.asarray(a) for a in v]
    return v


def host(v):
    if isinstance(v, list):
        return [host(a) for a in v]
    if isinstance(v, np.ndarray) or not hasattr(v, "__cuda_array_interface__"):
        return v
    import cupy

    return cupy.asnumpy(v)


# Parameters that decide the output shape must be host values: a CUDA array there is refused
# with TypeError ("... must be known on the host", docs/errors.md; test_shape_deciding_
# parameters_must_be_host_values). That is the output sizes (kind "size") and what an op's
# tests/refs module lists in HOST_ONLY (pad's padding and, for the non-square 12x10 images
# used here, rot90's k).
def host_only(name):
    return {p.name for p in spec(name).params if p.kind == "size"} | set(refs.get(name, "HOST_ONLY", ()))


def call(name, x, where, host_args=(), **kw):
    """Run op ``name`` on ``where`` (arrays moved to the GPU for the device variants, except
    the keyword arguments named in ``host_args``: host values are the ones gpuaug checks, and
    the op's host-only parameters, see HOST_ONLY)."""
    kw.setdefault("backend", BACKEND[where])
    if on_device(where):
        x = dev(x)
        keep = set(host_args) | host_only(name)
        kw = {k: v if k in keep else dev(v) for k, v in kw.items()}
    return spec(name).func(x, **kw)


def poisoned(name, where, shape=None, dtype=None):
    """An ``out=`` of the op's output shape and dtype, full of POISON, and a snapshot."""
    g = _good(name)
    out = np.full(shape or g.shape, POISON, dtype or g.dtype)
    return (dev(out) if on_device(where) else out), out.copy()


def untouched(out, snap):
    got = host(out)
    if isinstance(got, list):
        for g, s in zip(got, snap):
            np.testing.assert_array_equal(g, s, err_msg="out= was written although the call failed")
    else:
        np.testing.assert_array_equal(got, snap, err_msg="out= was written although the call failed")


@functools.lru_cache(maxsize=None)
def varshape_gives_list(name):
    """Whether a list input gives a list output (crop_mirror_normalize with a crop gives one batch)."""
    return isinstance(spec(name).func(list(x_()), backend="cpu", **kw_(name)), list)


def raises(exc, pattern):
    return pytest.raises(exc, match=pattern)


def choices_of(name):
    return ", ".join(map(str, spec(name).channels))


def sample_shape(p, c=C, k=2):
    """The shape of one sample's value of Param ``p`` ('C' -> channels, None -> K boxes)."""
    return tuple(c if s == "C" else (k if s is None else s) for s in p.shape)


def per_sample_params(name):
    return [p for p in spec(name).params if p.per_sample]


def params_where(pred):
    return [(n, p.name) for n in OPS for p in spec(n).params if pred(p)]


def param(name, pname):
    return next(p for p in spec(name).params if p.name == pname)


# ---------------------------------------------------------------------------------------
# the batch: dtype, ndim, layout, channels, empty, zero-size, varshape, not an array
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("dtype", ["int16", "float64", "bool", "int32", "uint16"])
@pytest.mark.parametrize("name", OPS)
def test_wrong_dtype(name, dtype, where):
    accepted = ", ".join(spec(name).dtypes)
    out, snap = poisoned(name, where)
    with raises(TypeError, rf"^x: got dtype {dtype}; expected one of {accepted}$"):
        call(name, x_(dtype=dtype), where, out=out, **kw_(name))
    untouched(out, snap)
    with raises(TypeError, rf"^x: got dtype {dtype}; expected one of {accepted}$"):
        call(name, list(x_(dtype=dtype)), where, **kw_(name))


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("shape", [(H, W), (1, 2, H, W, C), (W,), ()], ids=["2d", "5d", "1d", "0d"])
@pytest.mark.parametrize("name", OPS)
def test_wrong_ndim(name, shape, where):
    out, snap = poisoned(name, where)
    want = (rf"^x: got {len(shape)}-D shape {re.escape(str(shape))}; expected a 4-D batch \(NHWC\) "
            r"or a 3-D image \(HWC\)$")
    with raises(ValueError, want):
        call(name, np.zeros(shape, np.uint8), where, out=out, **kw_(name))
    untouched(out, snap)
    with raises(ValueError, r"^x\[1\]: got shape \(12, 10\); each image of a varshape batch must be 3-D HWC$"):
        call(name, [x_()[0], x_()[1, :, :, 0], x_()[2]], where, **kw_(name))


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("layout", ["HWCN", "nhwc", "CHW", None, 3])
@pytest.mark.parametrize("name", OPS)
def test_bad_layout_string(name, layout, where):
    out, snap = poisoned(name, where)
    with raises(ValueError, rf"^layout: got {re.escape(repr(layout))}; expected one of 'NHWC', 'NCHW'$"):
        call(name, x_(), where, layout=layout, out=out, **kw_(name))
    untouched(out, snap)


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("name", OPS)
def test_layout_shape_mismatch(name, where):
    chs = choices_of(name)
    out, snap = poisoned(name, where)
    with raises(ValueError, rf"^x: got 12 channels \(shape \(3, 12, 10, 3\) read as NCHW\); expected one of "
                            rf"{chs} \(as NHWC it has 3: pass layout='NHWC'\)$"):
        call(name, x_(), where, layout="NCHW", out=out, **kw_(name))
    untouched(out, snap)
    nchw = np.ascontiguousarray(x_().transpose(0, 3, 1, 2))
    with raises(ValueError, rf"^x: got 10 channels \(shape \(3, 3, 12, 10\) read as NHWC\); expected one of "
                            rf"{chs} \(as NCHW it has 3: pass layout='NCHW'\)$"):
        call(name, nchw, where, out=out, **kw_(name))
    with raises(ValueError, r"^layout: got 'NCHW'; a varshape batch \(list\) holds HWC images, so layout must "
                            r"be 'NHWC'$"):
        call(name, list(x_()), where, layout="NCHW", **kw_(name))
    untouched(out, snap)


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("name", OPS)
def test_unsupported_channels(name, where):
    chs = choices_of(name)
    bad = sorted({2, 5, 6} | ({1, 3, 4} - set(spec(name).channels)))
    out, snap = poisoned(name, where)
    for c in bad:
        x = x_(c=c)
        with raises(ValueError, rf"^x: got {c} channels \(shape {re.escape(str(x.shape))} read as NHWC\); "
                                rf"expected one of {chs}"):
            call(name, x, where, out=out, **kw_(name))
        with raises(ValueError, rf"^x: got {c} channels; expected one of {chs}$"):
            call(name, list(x), where, **kw_(name))
    untouched(out, snap)


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("name", OPS)
def test_empty_batches_are_refused(name, where):
    """Decision: N = 0 is refused (ValueError), not answered with an empty output."""
    with raises(ValueError, r"^x: got an empty batch \(shape \(0, 12, 10, 3\)\); expected at least one sample$"):
        call(name, x_(n=0), where, **kw_(name))
    with raises(ValueError, r"^x: got an empty list; a varshape batch needs at least one image$"):
        call(name, [], where, **kw_(name))


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("name", OPS)
def test_zero_size_images(name, where):
    out, snap = poisoned(name, where)
    for h, w in [(0, W), (H, 0), (0, 0)]:
        with raises(ValueError, rf"^x: got shape \(3, {h}, {w}, 3\), images of height {h} and width {w}; "
                                r"expected images of at least 1x1 pixels$"):
            call(name, x_(h=h, w=w), where, out=out, **kw_(name))
        with raises(ValueError, rf"^x: got shape \({h}, {w}, 3\), images of height {h} and width {w}; "
                                r"expected images of at least 1x1 pixels$"):
            call(name, x_(h=h, w=w)[0], where, **kw_(name, 1))
    untouched(out, snap)
    with raises(ValueError, r"^x\[2\]: got shape \(12, 0, 3\), an image of height 12 and width 0; expected images "
                            r"of at least 1x1 pixels$"):
        call(name, [x_()[0], x_()[1], x_(w=0)[0]], where, **kw_(name))


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("name", OPS)
def test_varshape_mixed_images(name, where):
    a, b = x_()[0], x_()[1]
    with raises(TypeError, r"^x: images have different dtypes \['float32', 'uint8'\] \(x\[0\] is uint8, x\[2\] is "
                           r"float32\); expected one dtype for every image of a varshape batch$"):
        call(name, [a, b, b.astype(np.float32)], where, **kw_(name))
    c1 = next(c for c in spec(name).channels if c != C)
    with raises(ValueError, rf"^x: images have different channel counts \[{min(c1, C)}, {max(c1, C)}\] \(x\[0\] has "
                            rf"3, x\[1\] has {c1}\); expected one channel count for every image of a varshape batch$"):
        call(name, [a, x_(c=c1)[0], b], where, **kw_(name))
    with raises(TypeError, r"^x\[1\]: got 'abc'; expected a NumPy array, a CUDA array \(CuPy, PyTorch, Numba, "
                           r"pycuda\) or a list of HWC arrays$"):
        call(name, [a, "abc", b], where, **kw_(name))


@gpu
@pytest.mark.parametrize("name", OPS)
def test_varshape_mixing_host_and_device_images(name):
    import cupy

    a = x_()[0]
    with raises(TypeError, r"^x: mixes NumPy and CUDA arrays; put every image on one side$"):
        spec(name).func([a, cupy.asarray(a), a], **kw_(name))


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("bad", [None, "abc", 3, [1, 2, 3], {"a": 1}], ids=["None", "str", "int", "ints", "dict"])
@pytest.mark.parametrize("name", OPS)
def test_not_an_array(name, bad, where):
    out, snap = poisoned(name, where)
    what = re.escape("x[0]: got 1" if isinstance(bad, list) else f"x: got {bad!r}")
    with raises(TypeError, rf"^{what}; expected a NumPy array, a CUDA array \(CuPy, PyTorch, Numba, pycuda\) or "
                           r"a list of HWC arrays$"):
        call(name, bad, where, out=out, **kw_(name))
    untouched(out, snap)


# ---------------------------------------------------------------------------------------
# non-contiguous and strided inputs / outputs: accepted, read and written through strides
# ---------------------------------------------------------------------------------------
def _view(view, where):
    """A non-contiguous view, made on the side (host or GPU) the op runs on."""
    big = x_(n=2 * N, h=2 * H, w=2 * W, c=6, seed=5)
    small = x_(seed=6)
    if on_device(where):
        big, small = dev(big), dev(small)
    return {
        "step-and-flip": lambda: big[::2, ::-2, 1::2, :3],    # negative and >1 strides
        "channel-strided": lambda: big[:N, :H, :W, ::2],       # channels 0, 2, 4 of 6
        "nchw-view": lambda: small.transpose(0, 3, 1, 2),      # NHWC memory read as NCHW
    }[view]()


@pytest.mark.parametrize("where", HOST + [pytest.param("cuda", marks=gpu)])
@pytest.mark.parametrize("view", ["step-and-flip", "channel-strided", "nchw-view"])
@pytest.mark.parametrize("name", OPS)
def test_strided_input_is_read_through_its_strides(name, view, where):
    if where == "numba-sim" and (view != "step-and-flip" or name not in SIM_SAMPLE):
        pytest.skip("the simulator is slow; a few ops and one strided case are enough there")
    v = _view(view, where)
    layout = "NCHW" if view == "nchw-view" else "NHWC"
    assert not v.flags.c_contiguous
    kw = kw_(name)
    got = host(call(name, v, where, layout=layout, **kw))
    want = host(call(name, np.ascontiguousarray(host(v)), where, layout=layout, **kw))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("where", HOST + [pytest.param("cuda", marks=gpu)])
@pytest.mark.parametrize("name", OPS)
def test_strided_out_is_written_through_its_strides(name, where):
    if where == "numba-sim" and name not in SIM_SAMPLE:
        pytest.skip("the simulator is slow; a few ops are enough there")
    g = host(call(name, x_(), where, **kw_(name)))  # this backend's own result
    buf = np.full((g.shape[0], 2 * g.shape[1]) + g.shape[2:], POISON, g.dtype)
    buf = dev(buf) if on_device(where) else buf
    out = buf[:, 1::2]
    res = call(name, x_(), where, out=out, **kw_(name))
    assert res is out
    b = host(buf)
    np.testing.assert_array_equal(b[:, 1::2], g)
    assert (b[:, ::2] == POISON).all(), "wrote between the rows of a strided out="


# ---------------------------------------------------------------------------------------
# parameters: non-finite, lengths, shapes, out-of-range values, choices, flags
# ---------------------------------------------------------------------------------------
def _nonfinite_expectation(p, bad):
    """(exception, regex) for a non-finite value of Param ``p`` (see docs/errors.md)."""
    shown = r"(nan|inf|-inf)"
    if p.kind == "float":
        return ValueError, rf"^{p.name}: got .*{shown}.*; expected finite numbers \(no NaN or inf\)$"
    if p.kind == "bool" and p.per_sample:
        return ValueError, rf"^{p.name}: got .*{shown}.*; expected True/False or 0/1 per sample"
    if p.kind == "bool":
        return TypeError, rf"^{p.name}: got {shown}; expected True or False$"
    if p.kind in ("int", "size") and p.per_sample:
        return ValueError, rf"^{p.name}: got .*{shown}.*; expected integers$"
    if p.kind == "int":  # seeds
        return TypeError, rf"^{p.name}: got {shown}; expected an int in \[0, 2\*\*64\)"
    if p.kind == "size":
        return ValueError, rf"^{p.name}: got {shown}; expected an int or a pair \(height, width\) of ints$"
    return ValueError, rf"^{p.name}: got {shown}; expected"  # choice


NUMERIC = params_where(lambda p: p.kind in ("float", "int", "size", "bool"))


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("name,pname", NUMERIC)
def test_non_finite_parameters(name, pname, bad, where):
    """NaN/inf never reach a kernel: every numeric parameter refuses them (host values)."""
    p = param(name, pname)
    exc, pattern = _nonfinite_expectation(p, bad)
    if p.per_sample:
        value = np.full((N,) + sample_shape(p), 1.0)
        value.reshape(-1)[-1] = bad   # one bad element, in the last sample
    else:
        value = bad
    out, snap = poisoned(name, where)
    with raises(exc, pattern):
        call(name, x_(), where, host_args=(pname,), out=out, **{**kw_(name), pname: value})
    untouched(out, snap)


PER_SAMPLE = params_where(lambda p: p.per_sample)


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("length", [N - 1, N + 1])
@pytest.mark.parametrize("name,pname", PER_SAMPLE)
def test_wrong_parameter_lengths(name, pname, length, where):
    p = param(name, pname)
    shape = (length,) + sample_shape(p)
    value = np.ones(shape, bool if p.kind == "bool" else np.float64)
    per = (rf"a value of shape {re.escape(str(sample_shape(p)))} or {re.escape(str((N,) + sample_shape(p)))} "
           if p.shape else rf"a (number|flag) or a sequence of {N} ")
    out, snap = poisoned(name, where)
    with raises(ValueError, rf"^{pname}: got shape {re.escape(str(shape))} .*; expected {per}.*\(one per sample\)$"):
        call(name, x_(), where, out=out, **{**kw_(name), pname: value})
    untouched(out, snap)
    # varshape: N is the number of images in the list
    with raises(ValueError, rf"^{pname}: got shape {re.escape(str(shape))} "):
        call(name, list(x_()), where, **{**kw_(name), pname: value})


SHAPED = params_where(lambda p: p.per_sample and p.shape)


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("name,pname", SHAPED)
def test_wrong_parameter_shapes(name, pname, where):
    """One sample's value has the wrong shape (e.g. a 3x3 matrix where 2x3 is expected)."""
    p = param(name, pname)
    s = sample_shape(p)
    out, snap = poisoned(name, where)
    for bad in [s[:-1] + (s[-1] + 1,), (N,) + s[:-1] + (s[-1] + 1,)] + ([s[1:]] if len(s) > 1 else []):
        with raises(ValueError, rf"^{pname}: got shape {re.escape(str(bad))}"):
            call(name, x_(), where, out=out, **{**kw_(name), pname: np.ones(bad)})
    untouched(out, snap)


def test_a_3x3_matrix_where_2x3_is_expected():
    with raises(ValueError, r"^matrix: got shape \(3, 3\) \(array of shape \(3, 3\)\); expected a value of shape "
                            r"\(2, 3\) or \(3, 2, 3\) \(one per sample\)$"):
        gpuaug.warp_affine(x_(), np.eye(3))


# Parameters that decide the output shape, given as CUDA arrays: TypeError (the shape must
# be known on the host without reading the GPU). rot90's k may be a CUDA array for square images.
SHAPE_DECIDING = [
    ("pad", "padding", r"^padding: got a CUDA array; padding decides the output shape, which must be known on "
                       r"the host: pass host ints"),
    ("rot90", "k", r"^k: got a CUDA array, but the images are not square, so k decides the output shape, which "
                   r"must be known on the host; pass k as host ints"),
    ("crop", "height", r"^height: got a CUDA array; height decides the output shape, which must be known on the "
                       r"host"),
    ("resize", "size", r"^size: got a CUDA array; output sizes decide the output shape and must be host values"),
]


@pytest.mark.parametrize("where", DEVICE)
@pytest.mark.parametrize("name,pname,pattern", SHAPE_DECIDING, ids=[f"{c[0]}-{c[1]}" for c in SHAPE_DECIDING])
def test_shape_deciding_parameters_must_be_host_values(name, pname, pattern, where):
    import cupy

    assert pname in host_only(name)  # the device variants of the other tests keep it on the host
    out, snap = poisoned(name, where)
    with raises(TypeError, pattern):
        call(name, x_(), where, out=out, **{**kw_(name), pname: cupy.asarray(kw_(name)[pname])})
    untouched(out, snap)


SCALAR = params_where(lambda p: p.per_sample and not p.shape)


@pytest.mark.parametrize("name,pname", SCALAR)
def test_scalar_parameters_refuse_matrices_and_strings(name, pname):
    p = param(name, pname)
    out, snap = poisoned(name, "cpu")
    with raises(ValueError, rf"^{pname}: got shape \(3, 2\) "):
        call(name, x_(), "cpu", out=out, **{**kw_(name), pname: np.ones((N, 2))})
    for bad in ("abc", [1, [2, 3], 4], {"a": 1}):
        with raises(TypeError, rf"^{pname}: got {re.escape(repr(bad))}; expected a (number|flag)"):
            call(name, x_(), "cpu", out=out, **{**kw_(name), pname: bad})
    untouched(out, snap)
    assert p.kind in ("float", "int", "bool", "size")


# Out-of-range values: (op, overrides of the example, exception, regex), generated from the
# registry: a row per bound of every Param (``low``/``high``/``nonzero``/numeric ``choices``,
# per-sample flags), the message as :func:`gpuaug._params.per_sample` words it unless the Param
# says otherwise (``expect``), plus the rows each op declares in tests/refs/<op>.py (``BAD``:
# windows, matrices, seeds of the wrong type, ...).
def _bound_rows(name):
    rows = []
    for p in spec(name).params:
        shaped = p.per_sample and bool(p.shape)

        def row(bad, default, exc=ValueError, p=p, shaped=shaped):
            bad = int(bad) if isinstance(bad, float) and bad.is_integer() else bad
            value = np.full(sample_shape(p), bad).tolist() if shaped else bad
            shown = ".*" if shaped else re.escape(str(bad))
            rows.append((name, {p.name: value}, exc,
                         rf"^{p.name}: got {shown}; expected {re.escape(p.expect or default)}(\s\(|$)"))

        if p.kind == "bool" and p.per_sample:
            row(0.5, "True/False or 0/1 per sample")
        if p.low is not None:
            row(p.low if p.low_open else p.low - 1, f"values {'>' if p.low_open else '>='} {p.low}")
        if p.high is not None:
            hi = p.high_for(x_().dtype)
            row(hi + 1, f"values <= {hi}")
        if p.nonzero:
            row(0, "non-zero values")
        if p.choices and all(isinstance(c, (int, float)) for c in p.choices):  # string choices: below
            row(max(p.choices) + 2, "one of " + ", ".join(map(str, p.choices)))
    return rows


def _declared_rows(name):
    return [(name, over, exc, pattern) for over, exc, pattern in refs.get(name, "BAD", ())]


OUT_OF_RANGE = [r for name in OPS for r in _bound_rows(name) + _declared_rows(name)]


def test_out_of_range_table_covers_every_bound():
    """Every bounded Param has a row, and every declared row names a parameter of its op."""
    covered = {(op, k) for op, over, *_ in OUT_OF_RANGE for k in over}
    assert {(n, p.name) for n in OPS for p in spec(n).params
            if p.bounded and p.kind != "choice" or p.kind == "choice" and p.name in NUMERIC_CHOICE} <= covered
    for op, over, *_ in OUT_OF_RANGE:
        assert set(over) <= set(spec(op).param_names), (op, over)


NUMERIC_CHOICE = {p.name for n in OPS for p in spec(n).params
                  if p.choices and all(isinstance(c, (int, float)) for c in p.choices)}


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("case", range(len(OUT_OF_RANGE)),
                         ids=[f"{c[0]}-{'-'.join(c[1])}-{i}" for i, c in enumerate(OUT_OF_RANGE)])
def test_out_of_range_parameters(case, where):
    name, over, exc, pattern = OUT_OF_RANGE[case]
    out, snap = poisoned(name, where)
    with raises(exc, pattern):
        call(name, x_(), where, host_args=tuple(over), out=out, **{**kw_(name), **over})
    untouched(out, snap)


def _edge_values(p):
    """The values at a Param's declared bounds, which must be accepted (closed bounds, choices)."""
    vals = [v for v in (None if p.low_open else p.low, p.high_for(x_().dtype)) if v is not None]
    if p.choices and all(isinstance(c, (int, float)) for c in p.choices):
        vals += list(p.choices)
    return [np.full(sample_shape(p), v).tolist() if p.per_sample and p.shape else v for v in vals]


AT_BOUNDS = [(n, p.name) for n in OPS for p in spec(n).params if _edge_values(p)]


@pytest.mark.parametrize("name,pname", AT_BOUNDS)
def test_values_at_the_declared_bounds_are_accepted(name, pname):
    """The other side of the generated out-of-range rows: a Param's ``low`` (unless open),
    ``high`` and each numeric choice pass the op's checks, so the spec states the range the op
    enforces, not a narrower one."""
    for v in _edge_values(param(name, pname)):
        call(name, x_(), "cpu", **{**kw_(name), pname: v})


def test_docs_errors_md_ranges_match_the_specs():
    """docs/errors.md's per-op ranges are generated from the Params (docs/gen_errors_ranges.py)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "gen_errors_ranges.py"
    spec_ = importlib.util.spec_from_file_location("gen_errors_ranges", path)
    gen = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(gen)
    text = pathlib.Path(gen.PATH).read_text(encoding="utf-8")
    assert gen.expected(text) == text, "docs/errors.md is out of date: run python docs/gen_errors_ranges.py"
    for name in OPS:  # every op has its row
        assert re.search(rf"^\| ([a-z_0-9]+, )*{name}(, [a-z_0-9]+)* \|", gen.split(text)[1], re.M), name


def test_out_of_range_depends_on_dtype():
    """Value ranges are in the input's units: solarize's threshold is <= 255 for uint8, <= 1 for floats."""
    with raises(ValueError, r"^threshold: got 2; expected values <= 1.0$"):
        gpuaug.solarize(x_(dtype=np.float32) / 255, threshold=2)
    gpuaug.solarize(x_(), threshold=200)


CHOICES = params_where(lambda p: p.kind == "choice")


@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("name,pname", CHOICES)
def test_bad_choice_strings(name, pname, where):
    p = param(name, pname)
    bad = f"{p.default}x" if isinstance(p.default, str) else "cubicc"
    out, snap = poisoned(name, where)
    with raises(ValueError, rf"^{pname}: got {re.escape(repr(bad))}; expected ") as ei:
        call(name, x_(), where, out=out, **{**kw_(name), pname: bad})
    for c in p.choices:
        if c is not None:
            assert repr(c) in str(ei.value) or str(c) in str(ei.value), (c, str(ei.value))
    untouched(out, snap)


def test_interpolation_typo():
    with raises(ValueError, r"^interpolation: got 'cubicc'; expected one of 'nearest', 'bilinear', 'area'$"):
        gpuaug.resize(x_(), (6, 5), interpolation="cubicc")


FLAGS = params_where(lambda p: p.kind == "bool" and not p.per_sample)


@pytest.mark.parametrize("name,pname", FLAGS)
def test_host_flags_take_only_bools(name, pname):
    out, snap = poisoned(name, "cpu")
    for bad in ("yes", 1, 0.0, None, [True]):
        with raises(TypeError, rf"^{pname}: got {re.escape(repr(bad))}; expected True or False$"):
            call(name, x_(), "cpu", out=out, **{**kw_(name), pname: bad})
    untouched(out, snap)


# ---------------------------------------------------------------------------------------
# out=: shape, dtype, layout, type, device, read-only, overlap
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("name", OPS)
def test_out_wrong_shape_dtype_layout(name, where):
    cheap(name, where)
    g = _good(name)
    exp = rf"expected shape {re.escape(str(g.shape))} \((NHWC|NCHW)\) and dtype {g.dtype}$"
    bad_shape = (g.shape[0] + 1,) + g.shape[1:]
    out, snap = poisoned(name, where, shape=bad_shape)
    with raises(ValueError, rf"^out: got shape {re.escape(str(bad_shape))} and dtype {g.dtype}; {exp}"):
        call(name, x_(), where, out=out, **kw_(name))
    untouched(out, snap)
    bad_dtype = "float16" if g.dtype == np.float32 else "float32"
    out, snap = poisoned(name, where, dtype=bad_dtype)
    with raises(ValueError, rf"^out: got shape {re.escape(str(g.shape))} and dtype {bad_dtype}; {exp}"):
        call(name, x_(), where, out=out, **kw_(name))
    untouched(out, snap)
    nchw = (g.shape[0], g.shape[3], g.shape[1], g.shape[2])  # the layout the op does not write
    if nchw != g.shape:
        out, snap = poisoned(name, where, shape=nchw)
        with raises(ValueError, rf"^out: got shape {re.escape(str(nchw))} and dtype {g.dtype}; {exp}"):
            call(name, x_(), where, out=out, **kw_(name))
        untouched(out, snap)


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("name", OPS)
def test_out_wrong_type_or_container(name, where):
    cheap(name, where)
    g = _good(name)
    out, snap = poisoned(name, where)
    with raises(TypeError, r"^out: got 'abc'; expected a NumPy array, a CUDA array"):
        call(name, x_(), where, out="abc", **kw_(name))
    items = [out[i] for i in range(N)]
    with raises(TypeError, r"^out: got a list of 3 items; the input is one array \(not a list of images\), so out "
                           r"must be one array$"):
        call(name, x_(), where, out=items, **kw_(name))
    untouched(out, snap)
    if not varshape_gives_list(name):
        return
    # varshape input: out is a list of N arrays, each checked before anything is written, or
    # (outputs of one size, as here) one dense (N, h, w, C) array, checked as a whole
    with raises(ValueError, rf"^out: got shape \({N - 1}, .*; expected shape {re.escape(str(g.shape))}"):
        call(name, list(x_()), where, out=out[:N - 1], **kw_(name))
    with raises(ValueError, r"^out: a varshape batch needs a list of 3 arrays; got a list of 2 items$"):
        call(name, list(x_()), where, out=items[:2], **kw_(name))
    bad = [out[0], out[1], np.full(g.shape[1:], POISON, "float16" if g.dtype == np.float32 else "float32")]
    bad = [bad[0], bad[1], dev(bad[2]) if on_device(where) else bad[2]]
    with raises(ValueError, r"^out\[2\]: got shape .* and dtype float(16|32); expected shape "):
        call(name, list(x_()), where, out=bad, **kw_(name))
    untouched(out, snap)


@pytest.mark.parametrize("name", OPS)
def test_read_only_out(name):
    out, snap = poisoned(name, "cpu")
    out.flags.writeable = False
    with raises(ValueError, r"^out: the array is read-only; pass a writeable array$"):
        call(name, x_(), "cpu", out=out, **kw_(name))
    untouched(out, snap)
    if not varshape_gives_list(name):
        return
    w = out.copy()
    items = [w[0], w[1], out[2]]
    with raises(ValueError, r"^out\[2\]: the array is read-only; pass a writeable array$"):
        call(name, list(x_()), "cpu", out=items, **kw_(name))
    untouched(w, snap)  # the writeable items were not written either


@pytest.mark.parametrize("name", ["normalize", "crop_mirror_normalize"])
def test_varshape_chw_out_list_is_checked_like_every_out(name):
    """A list in, CHW images out: that path allocates its own views, and checks them the same way."""
    sizes = [(5, 6), (4, 7), (6, 3)]
    xs = [x_(1, h, w, dtype=np.float32)[0] / 255 for h, w in sizes]
    kw = {"mean": 0.5, "std": 0.25, "output_layout": "NCHW"}
    outs = [np.full((3, h, w), POISON, np.float32) for h, w in sizes]
    snap = [o.copy() for o in outs]
    ro = outs[1].copy()
    ro.flags.writeable = False
    with raises(ValueError, r"^out\[1\]: the array is read-only; pass a writeable array$"):
        spec(name).func(xs, out=[outs[0], ro, outs[2]], **kw)
    with raises(ValueError, r"^out\[2\]: overlaps the input in memory"):
        spec(name).func(xs, out=[outs[0], outs[1], xs[2].transpose(2, 0, 1)], **kw)
    with raises(ValueError, r"^out\[0\]: got shape \(3, 6, 5\) and dtype float32; expected shape \(3, 5, 6\) \(CHW\) "
                            r"and dtype float32$"):
        spec(name).func(xs, out=[np.zeros((3, 6, 5), np.float32), outs[1], outs[2]], **kw)
    with raises(ValueError, r"^out: a varshape batch needs a list of 3 arrays; got a list of 2 items$"):
        spec(name).func(xs, out=outs[:2], **kw)
    untouched(outs, snap)
    got = spec(name).func(xs, out=outs, **kw)
    assert all(g is o for g, o in zip(got, outs)) and not any((o == POISON).any() for o in outs)


def _overlapping(x, shape, dtype, where):
    """``x`` copied into a byte buffer and an ``out`` of ``shape``/``dtype`` that shares its
    last bytes with ``x`` (so only a memory-extent check can see the overlap)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    start = (x.nbytes - 1) // dtype.itemsize * dtype.itemsize  # aligned, inside x's last element(s)
    buf = np.zeros(start + nbytes + x.nbytes, np.uint8)
    buf = dev(buf) if on_device(where) else buf
    xa = buf[:x.nbytes].view(x.dtype).reshape(x.shape)
    xa[...] = dev(x) if on_device(where) else x
    out = buf[start:start + nbytes].view(dtype).reshape(shape)
    return xa, out


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("name", OPS)
def test_out_overlapping_the_input(name, where):
    cheap(name, where)
    g = _good(name)
    x = x_()
    xa, out = _overlapping(x, g.shape, g.dtype, where)
    before_x, before_out = host(xa).copy(), host(out).copy()
    with raises(ValueError, r"^out: overlaps the input in memory; ops are not in place, pass a separate array$"):
        call(name, xa, where, out=out, **kw_(name))
    np.testing.assert_array_equal(host(xa), before_x)
    np.testing.assert_array_equal(host(out), before_out)
    if g.shape == x.shape and g.dtype == x.dtype:  # out is x itself
        xs = dev(x) if on_device(where) else x.copy()
        with raises(ValueError, r"^out: overlaps the input"):
            call(name, xs, where, out=xs, **kw_(name))
    xs = [dev(a) if on_device(where) else a.copy() for a in x]
    w = [np.full(g.shape[1:], POISON, g.dtype) for _ in range(N)]
    w = [dev(a) if on_device(where) else a for a in w]
    if g.shape[1:] == x.shape[1:] and g.dtype == x.dtype:
        with raises(ValueError, r"^out\[1\]: overlaps the input"):
            call(name, xs, where, out=[w[0], xs[1], w[2]], **kw_(name))
        assert (host(w[0]) == POISON).all() and (host(w[2]) == POISON).all()


# ---------------------------------------------------------------------------------------
# backends, streams, keywords
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", PARSE)
@pytest.mark.parametrize("backend", ["tpu", "CUDA", "", 0])
@pytest.mark.parametrize("name", OPS)
def test_bad_backend_names(name, backend, where):
    out, snap = poisoned(name, where)
    with raises(ValueError, rf"^backend: got {re.escape(repr(backend))}; expected one of 'cuda', 'numba', 'cpu'$"):
        call(name, x_(), where, backend=backend, out=out, **kw_(name))
    untouched(out, snap)


@pytest.mark.parametrize("name", OPS)
def test_numpy_input_to_gpu_only_backends(name):
    out, snap = poisoned(name, "cpu")
    with raises(ValueError, r"^backend: got 'cuda' with a NumPy input; pass a CUDA array \(e.g. cupy.asarray\(x\)\) "
                            r"or use backend='cpu'$"):
        spec(name).func(x_(), backend="cuda", out=out, **kw_(name))
    if not SIM:  # without the simulator the Numba CUDA twin needs CUDA arrays too
        with raises(ValueError, r"^backend: got 'numba' with a NumPy input; the Numba CUDA twin needs a CUDA array"):
            spec(name).func(x_(), backend="numba", out=out, **kw_(name))
    untouched(out, snap)


@gpu
@pytest.mark.parametrize("name", OPS)
def test_cuda_input_to_the_cpu_backend(name):
    import cupy

    out = cupy.full(_good(name).shape, POISON, _good(name).dtype)
    with raises(ValueError, r"^backend: got 'cpu' with a CUDA array input; pass a NumPy array"):
        spec(name).func(cupy.asarray(x_()), backend="cpu", out=out, **kw_(name))
    assert (out == POISON).all()
    with raises(TypeError, r"^out: got ndarray with shape .*; the input is on the GPU, so out must be a CUDA array$"):
        spec(name).func(cupy.asarray(x_()), out=np.full(_good(name).shape, POISON, _good(name).dtype),
                        **kw_(name))
    with raises(TypeError, r"^out: got ndarray with shape .*; the input is on the CPU, so out must be a NumPy array$"):
        spec(name).func(x_(), out=out, **kw_(name))
    assert (out == POISON).all()


class _NoStream:
    handle = "abc"


class _BadProtocol:
    def __cuda_stream__(self):
        return (0,)


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("stream,exc,pattern", [
    ("abc", TypeError, r"^stream: got 'abc' \(type str\); expected None, an int handle, a CuPy/Numba/PyTorch/pycuda "
                       r"stream or an object with __cuda_stream__$"),
    (1.5, TypeError, r"^stream: got 1.5 \(type float\); expected None, an int handle"),
    (True, TypeError, r"^stream: got True; expected None, an int handle \(a cudaStream_t, >= 0\) or a stream object$"),
    (-1, ValueError, r"^stream: got -1; a stream handle is a non-negative int$"),
    (_NoStream(), TypeError, r"^stream: _NoStream.handle is 'abc'; expected an int"),
    (_BadProtocol(), TypeError, r"^stream: __cuda_stream__ of _BadProtocol gave \(0,\); expected \(version, handle\)"),
], ids=["str", "float", "bool", "negative", "bad-handle", "bad-protocol"])
@pytest.mark.parametrize("name", OPS)
def test_bad_stream_objects(name, stream, exc, pattern, where):
    cheap(name, where)
    """Checked on every backend (the CPU backend ignores streams but not mistakes)."""
    out, snap = poisoned(name, where)
    with raises(exc, pattern):
        call(name, x_(), where, stream=stream, out=out, **kw_(name))
    untouched(out, snap)


@pytest.mark.parametrize("name", OPS)
def test_good_streams_are_ignored_by_the_cpu_backend(name):
    for stream in (None, 0, 7):
        np.testing.assert_array_equal(call(name, x_(), "cpu", stream=stream, **kw_(name)), _good(name))


@pytest.mark.parametrize("name", OPS)
def test_unknown_keyword_arguments(name):
    """Python's own TypeError, which names the keyword; the signature lists what is accepted."""
    out, snap = poisoned(name, "cpu")
    for bad in ("bakend", "laytout", "horizontl", "sigma_x"):
        if bad in spec(name).param_names:
            continue
        with raises(TypeError, rf"^{name}\(\) got an unexpected keyword argument '{bad}'$"):
            call(name, x_(), "cpu", out=out, **{**kw_(name), bad: 1})
    untouched(out, snap)


# ---------------------------------------------------------------------------------------
# arrays on another GPU (needs two GPUs)
# ---------------------------------------------------------------------------------------
def _two_gpus():
    if not HAS_GPU:
        return False
    import cupy

    return cupy.cuda.runtime.getDeviceCount() >= 2


two_gpus = pytest.mark.skipif(not _two_gpus(), reason="needs two CUDA GPUs")


@gpu
@two_gpus
@pytest.mark.parametrize("name", OPS)
def test_arrays_on_another_gpu(name):
    import cupy

    g = _good(name)
    with cupy.cuda.Device(1):
        x1 = cupy.asarray(x_())
    with cupy.cuda.Device(0):
        out0 = cupy.full(g.shape, POISON, g.dtype)
        x0 = cupy.asarray(x_())
    kw = kw_(name)
    with raises(ValueError, r"^out: is on GPU 0 but the input is on GPU 1; put both on one device$"):
        spec(name).func(x1, out=out0, **kw)
    assert bool((out0 == POISON).all())
    with raises(ValueError, r"^x: images lie on different GPUs \(x\[0\] on GPU 1, x\[1\] on GPU 0\)"):
        spec(name).func([x1[0], x0[1], x1[2]], **kw)
    for pname, v in kw.items():
        if isinstance(v, np.ndarray) and param(name, pname).per_sample and pname not in host_only(name):
            with cupy.cuda.Device(0):
                v0 = cupy.asarray(v)
            with raises(ValueError, rf"^{pname}: is on GPU 0 but x is on GPU 1; expected per-sample values on x's GPU"):
                spec(name).func(x1, **{**kw, pname: v0})


# ---------------------------------------------------------------------------------------
# entry points other than the ops: Compose and its transforms, gpuaug.random, geometry
# (the Scheduler's constructor: tests/test_scheduler.py::test_bad_arguments)
# ---------------------------------------------------------------------------------------
def _policy():
    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(10), gpuaug.GaussianBlur(3),
                           gpuaug.ColorJitter(0.2)], seed=0)


@pytest.mark.parametrize("where", ["cpu"])
def test_compose_call_refuses_bad_input_and_writes_nothing(where):
    pol = _policy()
    good = pol(x_(), seed=1, backend=BACKEND[where])
    out = np.full(good.shape, POISON, good.dtype)
    cases = [
        (dict(x=x_(dtype="int16")), TypeError, r"^x: got dtype int16; expected one of uint8, float16, float32$"),
        (dict(x=x_(c=2)), ValueError, r"^x: got 2 channels \(shape \(3, 12, 10, 2\) read as NHWC\)"),
        (dict(x=x_(n=0)), ValueError, r"^x: got an empty batch"),
        (dict(layout="HWC"), ValueError, r"^layout: got 'HWC'; expected one of 'NHWC', 'NCHW'$"),
        (dict(backend="tpu"), ValueError, r"^backend: got 'tpu'; expected one of 'cuda', 'numba', 'cpu'$"),
        (dict(stream="abc"), TypeError, r"^stream: got 'abc' \(type str\)"),
        (dict(seed=-1), ValueError, r"^seed: got -1; expected an int >= 0$"),
        (dict(seed=1.5), TypeError, r"^seed: got 1.5; expected None, an int >= 0"),
    ]
    for over, exc, pattern in cases:
        kw = {"x": x_(), "backend": BACKEND[where], "out": out, **over}
        with raises(exc, pattern):
            pol(kw.pop("x"), **kw)
        assert (out == POISON).all(), over
    # a wrong out= is found only at the last stage; the earlier ones write their own buffers
    wrong = np.full(good.shape[:-1] + (4,), POISON, good.dtype)
    with raises(ValueError, r"^out: got shape \(3, 12, 10, 4\) and dtype uint8; expected shape \(3, 12, 10, 3\)"):
        pol(x_(), seed=1, out=wrong, backend=BACKEND[where])
    assert (wrong == POISON).all()
    with raises(TypeError, r"__call__\(\) got an unexpected keyword argument 'bogus'$"):
        pol(x_(), bogus=1)


@pytest.mark.parametrize("make,exc,pattern", [
    (lambda: gpuaug.RandomAffine(10, fill=float("nan")), ValueError, r"^fill: got nan; expected a finite number"),
    (lambda: gpuaug.RandomRotation(10, fill=(0, float("inf"), 0)), ValueError, r"^fill: got \(0, inf, 0\); expected a sequence of 1 or 2 or 3 or 4 finite numbers$"),
    (lambda: gpuaug.RandomErasing(value=float("nan")), ValueError, r"^value: got nan; expected a finite number"),
    (lambda: gpuaug.Normalize(float("nan"), 1), ValueError, r"^mean: got nan; expected a finite number"),
    (lambda: gpuaug.RandomAffine(float("nan")), ValueError, r"^degrees: got nan; expected a finite number \(no NaN or inf\)$"),
    (lambda: gpuaug.ColorJitter(brightness=float("inf")), ValueError, r"^brightness: got inf; expected a finite number"),
    (lambda: gpuaug.RandomHorizontalFlip(p=float("nan")), ValueError, r"^p: got nan; expected a probability in \[0, 1\]$"),
    (lambda: gpuaug.Resize(8, interpolation="cubicc"), ValueError, r"^interpolation: got 'cubicc'; expected one of 'bilinear', 'nearest'$"),
    (lambda: gpuaug.RandomSolarize("x"), TypeError, r"^threshold: got 'x'; expected a finite number$"),
    (lambda: gpuaug.GaussianNoise(clip="yes"), TypeError, r"^clip: got 'yes'; expected True or False$"),
], ids=["affine-fill-nan", "rotation-fill-inf", "erasing-value-nan", "normalize-mean-nan", "degrees-nan",
        "brightness-inf", "p-nan", "interpolation", "threshold-str", "clip-str"])
def test_transform_constructors_refuse_non_finite_and_bad_values(make, exc, pattern):
    """Adds the non-finite cases to tests/test_policy.py::test_bad_arguments_name_the_argument."""
    with raises(exc, pattern):
        make()


RNG = np.random.default_rng(0)
RANDOM_BAD = [
    (lambda R: R.bernoulli(RNG, 1.5, 4), ValueError, r"^p: got 1.5; expected values <= 1.0$"),
    (lambda R: R.bernoulli(RNG, float("nan"), 4), ValueError, r"^p: got nan; expected finite numbers \(no NaN or inf\)$"),
    (lambda R: R.bernoulli(RNG, 0.5, -1), ValueError, r"^n: got -1; expected an int >= 0$"),
    (lambda R: R.bernoulli(0, 0.5, 4), TypeError, r"^rng: got int 0; expected a numpy.random.Generator"),
    (lambda R: R.uniform(RNG, 2, 1, 3), ValueError, r"^low, high: got low=2 and high=1; expected low <= high$"),
    (lambda R: R.uniform(RNG, 0, float("inf"), 3), ValueError, r"^high: got inf; expected finite numbers"),
    (lambda R: R.integers(RNG, 5, [1, 9, 9], 3), ValueError, r"^low, high: got low=5 and high=\[1, 9, 9\]; expected low <= high$"),
    (lambda R: R.seed64(7), TypeError, r"^rng: got int 7; expected a numpy.random.Generator"),
    (lambda R: R.affine(RNG, 3, [[10, 10]] * 2), ValueError, r"^sizes: got 2 sizes for n=3 samples; expected 1 or 3$"),
    (lambda R: R.affine(RNG, 3, [10, 10], degrees=(5, -5)), ValueError, r"^degrees: got \[5, -5\]; expected a pair \(min, max\) with min <= max$"),
    (lambda R: R.resized_crop_boxes(RNG, [[10, 10]], scale=(-1, 1)), ValueError, r"^scale: got \[-1, 1\]; expected values > 0.0$"),
    (lambda R: R.resized_crop_boxes(RNG, [[0, 10]]), ValueError, r"^sizes: got \[\[0, 10\]\]; expected positive image sizes"),
    (lambda R: R.resized_crop_boxes(RNG, [[5, 10, 3]]), ValueError, r"^sizes: got \[\[5, 10, 3\]\]; expected positive image sizes"),
    (lambda R: R.perspective_corners(RNG, [[10, 10]], 2.0), ValueError, r"^distortion_scale: got 2.0; expected values <= 1.0$"),
    (lambda R: R.erasing_boxes(RNG, [[10, 10]], ratio=(0, 1)), ValueError, r"^ratio: got \[0, 1\]; expected values > 0.0$"),
    (lambda R: R.crop_offsets(RNG, [[10, 10]], (20, 20)), ValueError, r"^size: got \(20, 20\); an image \(padded by \(0, 0, 0, 0\)\) is smaller"),
    (lambda R: R.permutations(RNG, 3, -1), ValueError, r"^k: got -1; expected an int >= 0$"),
    (lambda R: R.generator("a"), TypeError, r"^seed: got 'a'; expected None, an int >= 0"),
]


@pytest.mark.parametrize("i", range(len(RANDOM_BAD)))
def test_random_samplers_check_their_arguments(i):
    make, exc, pattern = RANDOM_BAD[i]
    with raises(exc, pattern):
        make(gpuaug.random)


@pytest.mark.parametrize("make,exc,pattern", [
    (lambda G: G.identity(-1), ValueError, r"^n: got -1; expected None or an int >= 0"),
    (lambda G: G.identity(1.5), TypeError, r"^n: got 1.5; expected None or an int >= 0"),
    (lambda G: G.rotation(float("nan")), ValueError, r"^angle: got nan; expected finite numbers \(no NaN or inf\)$"),
    (lambda G: G.rotation([1, [2, 3]]), TypeError, r"^angle: got \[1, \[2, 3\]\]; expected numbers of shape \(\)"),
    (lambda G: G.rotation(10, center=(1, 2, 3)), ValueError, r"^center: got shape \(3,\); expected \(2,\) \(one value\) or \(N,\) \+ \(2,\)"),
    (lambda G: G.compose(np.full((3, 3), np.inf)), ValueError, r"^mats\[0\]: has NaN or inf entries; expected finite numbers$"),
    (lambda G: G.to_affine(np.eye(2)), ValueError, r"^matrix: got shape \(2, 2\)"),
], ids=["identity-neg", "identity-float", "rotation-nan", "rotation-ragged", "center-shape", "compose-inf", "to-affine"])
def test_geometry_builders_check_their_arguments(make, exc, pattern):
    """Adds to tests/test_geometry.py::test_bad_arguments."""
    with raises(exc, pattern):
        make(gpuaug.geometry)


# ---------------------------------------------------------------------------------------
# issue 18: the Scheduler's constructor bounds and seed; a thread that cannot start
# ---------------------------------------------------------------------------------------
def _sched(**kw):
    from gpuaug.scheduler import FakeDevice

    kw.setdefault("batch_size", 4)
    return gpuaug.Scheduler(np.zeros((16, 4, 4, 3), np.uint8), kw.pop("augment", None), device=FakeDevice(), **kw)


@pytest.mark.parametrize("kw,exc,pattern", [
    (dict(workers=100_000), ValueError, r"^workers: got 100000; expected an int in \[1, 256\]"),
    (dict(depth=10**12), ValueError, r"^depth: got 1000000000000; expected an int in \[1, 64\] \(each slot"),
    (dict(depth=10**9), ValueError, r"^depth: got 1000000000; expected an int in \[1, 64\]"),
    (dict(seed=-1, shuffle=True), ValueError, r"^seed: got -1; expected None or an int >= 0"),
    (dict(seed=-1), ValueError, r"^seed: got -1; expected None or an int >= 0"),
    (dict(seed=1.5, shuffle=True), TypeError, r"^seed: got 1.5; expected None or an int >= 0"),
    (dict(seed="0", shuffle=True), TypeError, r"^seed: got '0'; expected None or an int >= 0"),
], ids=["workers-huge", "depth-1e12", "depth-1e9", "seed-neg-shuffle", "seed-neg", "seed-float", "seed-str"])
def test_scheduler_constructor_bounds_and_seed(kw, exc, pattern):
    with raises(exc, pattern):
        _sched(**kw)


def test_scheduler_thread_start_failure_surfaces_the_real_error(monkeypatch):
    import threading

    real = threading.Thread.start

    def start(self):
        if self.name == "gpuaug-worker-2":
            raise RuntimeError("can't start new thread")
        return real(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    s = _sched(workers=4)
    with pytest.raises(RuntimeError, match=r"^can't start new thread") as info:
        next(iter(s))
    assert "started only 2 of its 6 threads; workers=4" in "".join(getattr(info.value, "__notes__", []))
    monkeypatch.undo()
    for t in threading.enumerate():
        if t.name.startswith("gpuaug-worker-"):
            t.join(timeout=10)
            assert not t.is_alive(), t.name
    assert [b for b, _ in zip(_sched(workers=2), range(5))]   # a new scheduler still runs


# ---------------------------------------------------------------------------------------
# issue 18: defects a fuzzing probe found (each test fails on the code before its fix)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw,pattern", [
    (dict(top=2**63 - 5, left=0), r"^top, height: sample 0 has top=9223372036854775803 and height=10"),
    (dict(top=[0, 1, 2**63 - 1], left=0), r"^top, height: sample 2 has top=9223372036854775807"),
    (dict(top=0, left=2**63 - 1), r"^left, width: sample 0 has left=9223372036854775807 and width=4"),
], ids=["top", "top-per-sample", "left"])
def test_crop_offsets_near_2_63_do_not_overflow_the_bounds_check(kw, pattern):
    """Was: top + height wrapped around in int64, passed the check, and the crop returned zeros."""
    out, snap = poisoned("crop", "cpu", shape=(N, 10, 4, C))
    with raises(ValueError, pattern):
        gpuaug.crop(x_(), height=10, width=4, out=out, **kw)
    untouched(out, snap)


@pytest.mark.parametrize("tile,shown", [(1e-300, "0.0"), (1e300, "inf")])
def test_grid_mask_tile_must_hold_in_float32_and_nothing_is_written(tile, shown):
    """Was: tile=1e-300 (> 0 in float64, 0 in float32) raised ZeroDivisionError from the CPU
    kernel after samples 0 and 1 had been written to out=."""
    out, snap = poisoned("grid_mask", "cpu")
    with raises(ValueError, rf"^tile: sample 2 has tile={re.escape(repr(tile))}, which is {shown} in float32"):
        gpuaug.grid_mask(x_(), tile=[4, 4, tile], ratio=0.5, out=out)
    untouched(out, snap)


@pytest.mark.parametrize("boxes", [
    np.array([[2**64 - 2, 0, 3, 3]], np.uint64), np.array([[0, 0, 2**63, 3]], np.uint64),
    np.array([[1e30, 0, 3, 3]]),
], ids=["uint64-top", "uint64-height", "float-1e30"])
def test_integer_parameters_out_of_int64_are_refused_not_wrapped(boxes):
    """Was: uint64 2**64 - 2 became -2 (a box above the image) without a word."""
    out, snap = poisoned("erase", "cpu")
    with raises(ValueError, r"^boxes: got \[\[.*\]\]; expected integers in \[-2\*\*63, 2\*\*63\)$"):
        gpuaug.erase(x_(), boxes=boxes, value=0, out=out)
    untouched(out, snap)
    with raises(ValueError, r"^top: got \[0, 1, 18446744073709551615\]; expected integers in"):
        gpuaug.crop(x_(), top=np.array([0, 1, 2**64 - 1], np.uint64), left=0, height=2, width=2)


@pytest.mark.parametrize("make,pattern", [
    (lambda: gpuaug.RandomAffine(1e308), r"^degrees: got 1e\+308; expected at most 1000000.0$"),
    (lambda: gpuaug.RandomRotation(1e308), r"^degrees: got 1e\+308; expected at most 1000000.0$"),
    (lambda: gpuaug.RandomRotation((-1e308, 0)), r"^degrees: got \(-1e\+308, 0\); expected a pair \(min, max\)"),
    (lambda: gpuaug.RandomAffine(10, shear=1e308), r"^shear: got 1e\+308; expected at most 1000000.0$"),
    (lambda: gpuaug.RandomAffine(10, shear=(0, 1, 0, 1e308)), r"^shear: got \(0.0, 1.0, 0.0, 1e\+308\); expected degrees within"),
    (lambda: gpuaug.Resize(2**63), r"^size: got 9223372036854775808; expected sizes up to 2\*\*31 - 1"),
    (lambda: gpuaug.CenterCrop(2**63), r"^size: got 9223372036854775808; expected sizes up to 2\*\*31 - 1"),
    (lambda: gpuaug.RandomResizedCrop(2**63), r"^size: got 9223372036854775808; expected sizes up to 2\*\*31 - 1"),
    (lambda: gpuaug.RandomCrop((2**31, 4)), r"^size: got \(2147483648, 4\); expected sizes up to 2\*\*31 - 1"),
    (lambda: gpuaug.GaussianNoise(sigma=1e308), r"^sigma: got 1e\+308; expected a number <= 7.04977"),
    (lambda: gpuaug.GaussianNoise(mean=-1e308), r"^mean: got -1e\+308; expected a number >= -7.04977"),
], ids=["affine-degrees", "rotation-degrees", "rotation-pair", "shear", "shear-4", "resize", "center-crop",
        "rrc", "random-crop", "noise-sigma", "noise-mean"])
def test_transform_constructors_refuse_values_that_would_fail_at_call_time(make, pattern):
    """Were accepted, then failed at call time with IndexError / OverflowError (or, for
    GaussianNoise, a message naming the op's std instead of the transform's sigma)."""
    with raises(ValueError, pattern):
        make()


@pytest.mark.parametrize("call,name", [
    (lambda x: gpuaug.flip(x, layout=np.array(["NHWC", "NCHW"])), "layout"),
    (lambda x: gpuaug.flip(x, layout=np.array(["NHWC"])), "layout"),
    (lambda x: gpuaug.resize(x, (4, 4), interpolation=np.array(["nearest"])), "interpolation"),
    (lambda x: gpuaug.pad(x, 1, mode=np.array(["edge"])), "mode"),
    (lambda x: gpuaug.rotate(x, 10, border=np.array(["reflect"])), "border"),
    (lambda x: gpuaug.grayscale(x, num_output_channels=np.array([3])), "num_output_channels"),
    (lambda x: gpuaug.normalize(x, 0.5, 0.5, output_layout=np.array(["NCHW"])), "output_layout"),
    (lambda x: gpuaug.flip(x, backend=np.array(["cpu"])), "backend"),
    (lambda x: gpuaug.Resize(4, interpolation=np.array(["nearest"])), "interpolation"),
    (lambda x: gpuaug.Compose([gpuaug.RandomHorizontalFlip()], seed=0).plan(dtype="uint8", channels=3,
                                                                           layout=np.array(["NHWC"])), "layout"),
], ids=["layout-2", "layout-1", "interpolation", "mode", "border", "channels", "output-layout", "backend",
        "transform", "plan-layout"])
def test_choice_arguments_given_as_arrays_are_named(call, name):
    """Were NumPy's 'truth value ... is ambiguous' / 'unhashable type' errors, or accepted."""
    with raises(TypeError, rf"^{name}: got ndarray array\(.*\); expected one of .* \(one value, not an array\)$"):
        call(x_())
    assert gpuaug.grayscale(x_(), num_output_channels=np.int64(3)).shape[-1] == 3   # NumPy scalars still fine


class _RaisingProtocol:
    def __cuda_stream__(self):
        raise RuntimeError("no stream here")


class _NegativeProtocol:
    def __cuda_stream__(self):
        return (0, -5)


@pytest.mark.parametrize("stream,exc,pattern", [
    (_RaisingProtocol(), TypeError, r"^stream: __cuda_stream__ of _RaisingProtocol raised RuntimeError: no stream here; "
                                    r"expected \(version, handle\) with an int handle$"),
    (_NegativeProtocol(), ValueError, r"^stream: __cuda_stream__ of _NegativeProtocol gave handle -5; a stream "
                                      r"handle is a non-negative int$"),
], ids=["raises", "negative"])
def test_cuda_stream_protocol_errors_are_named(stream, exc, pattern):
    out, snap = poisoned("flip", "cpu")
    with raises(exc, pattern):
        gpuaug.flip(x_(), out=out, stream=stream)
    untouched(out, snap)


def test_scheduler_augment_name_typo():
    """Was AttributeError: module 'gpuaug' has no attribute 'nope'."""
    with raises(ValueError, r"^augment: got 'nope'; expected a callable, None or an op name: ([a-z_0-9]+, )*box_blur, "):
        gpuaug.Scheduler(np.zeros((16, 4, 4, 3), np.uint8), "nope", batch_size=4)


def test_dali_compose_unknown_op_is_a_named_value_error():
    """Was a KeyError (its message quoted whole)."""
    gd = pytest.importorskip("gpuaug.dali")
    pytest.importorskip("nvidia.dali")
    with raises(ValueError, r"^compose: item 1: got op 'flipp'; did you mean 'flip'\? expected one of ([a-z_0-9]+, )*box_blur,"):
        gd.compose(["flip", ("flipp", {})])
    with raises(ValueError, r"^compose: item 0: got op 'zzz'; expected one of ([a-z_0-9]+, )*box_blur,"):
        gd.compose(["zzz"])


@pytest.mark.parametrize("name", OPS)
def test_out_whose_elements_alias_each_other(name):
    """Was accepted: a writeable stride-0 out= (every sample the same memory) and an out= list
    naming one buffer twice; the samples silently overwrote each other."""
    from numpy.lib.stride_tricks import as_strided

    one, snap1 = poisoned(name, "cpu")
    one = one[:1]
    alias = as_strided(one, (N,) + one.shape[1:], (0,) + one.strides[1:])   # writeable, stride 0
    with raises(ValueError, rf"^out: its elements overlap one another \(strides \(0, "):
        call(name, x_(), "cpu", out=alias, **kw_(name))
    untouched(one, snap1[:1])
    if not varshape_gives_list(name):
        return
    out, snap = poisoned(name, "cpu")
    items = [out[0], out[1], out[0]]
    with raises(ValueError, r"^out\[0\] and out\[2\]: share memory; each image of a varshape out= needs its own buffer"):
        call(name, list(x_()), "cpu", out=items, **kw_(name))
    untouched(out, snap)
    assert isinstance(call(name, list(x_()), "cpu", out=list(out), **kw_(name)), list)   # distinct images: fine


def test_out_lists_of_interleaved_views_that_share_no_element_pass():
    buf = np.full((H, 2 * W, C), POISON, np.uint8)
    x = x_()
    y = gpuaug.flip(list(x), horizontal=True, out=[buf[:, 0::2], buf[:, 1::2], np.empty((H, W, C), np.uint8)])
    np.testing.assert_array_equal(buf[:, 0::2], x[0, :, ::-1])
    np.testing.assert_array_equal(y[1], x[1, :, ::-1])


def test_equalize_on_many_tiny_images_keeps_its_scratch_memory_bounded(monkeypatch):
    """Was a 2 GB peak for 100,000 images of 2x2: the (N, C, 256) int64 histograms at once, on
    top of the (N, 769) float64 tables. Histograms now go in chunks of samples; what is left is
    mostly the tables (here, 20,000 images: about 1.4x the tables, against 2.2x in one chunk)."""
    import tracemalloc

    from gpuaug.ops import equalize as E

    n = 20_000
    x = np.random.default_rng(0).integers(0, 256, (n, 2, 2, 3), dtype=np.uint8)
    gpuaug.equalize(x[:10])

    def peak_of():
        tracemalloc.start()
        try:
            y = gpuaug.equalize(x)
            return y, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    y, peak = peak_of()
    monkeypatch.setattr(E, "_HIST_CHUNK", n)   # all histograms at once, as before the fix
    y1, peak1 = peak_of()
    tables = n * (3 * 256 + 1) * 8
    assert peak < 1.6 * tables and peak < 0.8 * peak1, (peak / 2**20, peak1 / 2**20, tables / 2**20)
    np.testing.assert_array_equal(y, y1)   # chunk boundaries change nothing


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_device_out_whose_elements_alias_each_other(backend):
    import cupy
    from cupy.lib.stride_tricks import as_strided

    x = dev(x_())
    one = cupy.full((1, H, W, C), POISON, cupy.uint8)
    alias = as_strided(one, (N, H, W, C), (0,) + one.strides[1:])
    with raises(ValueError, r"^out: its elements overlap one another \(strides \(0, "):
        gpuaug.flip(x, out=alias, backend=backend)
    a, b = cupy.full((H, W, C), POISON, cupy.uint8), cupy.full((H, W, C), POISON, cupy.uint8)
    with raises(ValueError, r"^out\[0\] and out\[2\]: share memory"):
        gpuaug.flip(list(x), out=[a, b, a], backend=backend)
    assert int((one != POISON).sum()) == 0 and int((a != POISON).sum()) == 0
    c = cupy.empty_like(a)
    y = gpuaug.flip(list(x), horizontal=True, out=[a, b, c], backend=backend)
    np.testing.assert_array_equal(cupy.asnumpy(y[2]), x_()[2, :, ::-1])


@gpu
def test_device_stream_protocol_errors_are_named():
    x = dev(x_())
    with raises(TypeError, r"^stream: __cuda_stream__ of _RaisingProtocol raised RuntimeError"):
        gpuaug.flip(x, stream=_RaisingProtocol())
    with raises(ValueError, r"^stream: __cuda_stream__ of _NegativeProtocol gave handle -5"):
        gpuaug.flip(x, stream=_NegativeProtocol())
