"""What the colour ops share: the packed fast path's choice, every kernel instance assembling
(ptxas, when there), and GPU behaviour the per-op tests do not reach (misaligned packed
batches, parameters on the device, streams, repeatability)."""
import shutil
import subprocess

import numpy as np
import pytest

import gpuaug
import ref_colour as R
from gpuaug.ops._colour import packed_layout
from helpers import check_op, gpu, quantize, random_images


def _packed(spec):
    """Whether the op's kernels have the colour family's packed fast path (ops/_colour.colour_kernels)."""
    return any(v.startswith(spec.kernels.cu[1] + "_packed") for v in spec.kernels.variants)


#: the colour ops: every registry op built on the colour family's kernels (packed fast path)
COLOUR_OPS = tuple(n for n, s in gpuaug.registry.items() if s.kernels is not None and _packed(s))


def _table(addr, h, w, c, sy=None, sx=None, sc=1):
    n = len(addr)
    t = np.zeros((n, 6), np.int64)
    t[:, 0], t[:, 1], t[:, 2] = addr, h, w
    t[:, 3], t[:, 4], t[:, 5] = (w * c if sy is None else sy), (c if sx is None else sx), sc
    return t


def _shift(t, k):
    t = t.copy()
    t[:, 0] += k
    return t


def test_packed_layout_choice():
    base = 1 << 20
    hw = 37 * 53
    # contiguous uint8 RGB batch (samples back to back): packed; 2 scalar head/tail items at most
    src = _table(base + np.arange(3) * hw * 3, 37, 53, 3)
    dst = _table(2 * base + np.arange(3) * hw * 3, 37, 53, 3)
    ok, items = packed_layout(src, dst, 3, 3, 1)
    assert ok and hw // 16 <= items <= hw // 16 + 31
    # same misalignment on both sides (9 bytes): pixel 13 is aligned on both
    ok, _ = packed_layout(_shift(src, 9), _shift(dst, 9), 3, 3, 1)
    assert ok
    # different misalignment: no common aligned pixel
    assert not packed_layout(_shift(src, 9), dst, 3, 3, 1)[0]
    # NCHW seen as NHWC (channel stride h * w), and row padding: generic kernel
    assert not packed_layout(_table([base], 37, 53, 3, sy=53, sx=1, sc=hw), dst[:1], 3, 3, 1)[0]
    assert not packed_layout(_table([base], 37, 53, 3, sy=64 * 3), dst[:1], 3, 3, 1)[0]
    # grayscale: 3 channels in, 1 out; float32: 4 pixels per 16 bytes
    assert packed_layout(src, _table(2 * base + np.arange(3) * hw, 37, 53, 1), 3, 1, 1)[0]
    assert packed_layout(_table([base + 4], 5, 7, 3), _table([2 * base + 4], 5, 7, 3), 3, 3, 4)[0]
    # source only (the mean's reduction)
    assert packed_layout(_shift(src, 5), None, 3, 3, 1)[0]


@pytest.mark.parametrize("name", COLOUR_OPS)
def test_every_instance_assembles(name, tmp_path):
    """NVRTC -> PTX -> ptxas for sm_90: catches what NVRTC alone lets through (inline PTX)."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"NVRTC is not available here ({type(e).__name__})")
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas (CUDA toolkit) is not on PATH; test_contract compiles the PTX")
    from gpuaug.kernels._cuda import check_compile, kernel_name

    spec = gpuaug.registry[name]
    k = spec.kernels
    names = [kernel_name(k.cu[1], d, c) for d in spec.dtypes for c in spec.channels] + list(k.variants)
    ptx = tmp_path / f"{name}.ptx"
    ptx.write_text(check_compile(k.cu[0], names))
    r = subprocess.run([ptxas, "-arch=sm_90", "-v", str(ptx), "-o", str(tmp_path / "out.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    spills = [line for line in r.stderr.splitlines() if "spill" in line]
    assert spills and all("0 bytes spill stores, 0 bytes spill loads" in line for line in spills), r.stderr


# -- GPU ------------------------------------------------------------------------------------

def _ref_brightness(x, f, dtype):
    return np.stack([R.brightness(s.astype(np.float64), fi, R.top(dtype)) for s, fi in zip(x, f)])


def test_fused_mean_launch_choice():
    """contrast's and color_jitter's mean and map in one launch (colour.cuh fused_mean_map) for
    packed uint8 batches of enough samples (for color_jitter one per SM) of bounded size (one
    block per sample); the partial sums' two launches otherwise: other dtypes, color_jitter's
    one channel (non-integer grays), strided layouts, small batches, large images, and ops
    without a mean."""
    from gpuaug.ops import _colour

    base, hw = 1 << 20, 37 * 53
    fused = (16, 1 << 20)

    def kinds(n, dtype="uint8", c=3, bright=False, h=37, w=53, strided=False, f=fused, mean=True):
        es = np.dtype(dtype).itemsize
        src = _table(base + np.arange(n) * h * w * c * es, h, w, c)
        dst = _table(8 * base + np.arange(n) * h * w * c * es, h, w, c)
        if strided:
            src = _table(base + np.arange(n) * h * w * c, h, w, c, sy=(w + 3) * c)
        launches, nparts = _colour.plan(src, dst, dtype, c, c, n, bright if mean else None, 132, fused=f)
        return [ln.kind for ln in launches], [ln.name for ln in launches], [ln.grid for ln in launches], nparts

    k, names, grids, nparts = kinds(20)
    assert k == ["fused"] and names == ["{op}_fused<unsigned char, 3>"] and grids == [(20, 1, 1)] and nparts == 0
    from gpuaug.kernels._cuda import source  # the block the kernel's launch bounds allow
    assert f"#define GPUAUG_COLOUR_FUSED_THREADS {_colour.FUSED_THREADS}\n" in source("colour.cuh")
    # color_jitter (the brightness first): from one sample per SM (132 here)
    assert kinds(131, bright=True)[0] == ["sum", "map"]
    assert kinds(132, bright=True)[0] == ["fused"] and kinds(140, c=4, bright=True)[0] == ["fused"]
    assert kinds(20, c=1)[0] == ["fused"] and kinds(140, c=1, bright=True)[0] == ["sum", "map"]
    assert kinds(20, dtype="float32")[0] == ["sum", "map"]
    assert kinds(15)[0] == ["sum", "map"] and kinds(20, f=(0, 0))[0] == ["sum", "map"]
    assert kinds(20, h=600, w=600)[0] == ["sum", "map"]  # 1.08 MB a sample: more than one block's share
    assert kinds(20, strided=True)[0] == ["sum", "map"]
    assert kinds(20, mean=False)[0] == ["map"]


@gpu
@pytest.mark.parametrize("name, kw", [("contrast", {"factor": None}),
                                      ("color_jitter", {"brightness": None, "contrast": None, "saturation": 1.3,
                                                        "hue": 0.0}),
                                      ("color_jitter", {"brightness": None, "contrast": None, "saturation": None,
                                                        "hue": None})], ids=["contrast", "jitter", "jitter-hue"])
@pytest.mark.parametrize("c", [1, 3, 4])
def test_fused_mean_launch_gives_the_two_launch_bytes(name, kw, c, monkeypatch):
    """The one-launch mean and map against the partial sums' two launches, bit for bit: per-sample
    factors, samples of 37 x 53 (head and tail pixels around the 16-pixel groups), an input and
    output 9 bytes off their 16-byte boundary, 224 x 224; plans off, so each call takes the
    launches its configuration chooses (recorded: the fused kernel really ran)."""
    import cupy as cp
    from gpuaug.kernels import _cuda
    from gpuaug.ops import _colour

    if name == "color_jitter" and c == 1:
        pytest.skip("color_jitter's one-channel grays are not integers: the two launches always")
    monkeypatch.setenv("GPUAUG_PLAN", "0")
    rng = np.random.default_rng(21)
    f = gpuaug.registry[name].func
    if name == "color_jitter":  # fused from one sample per SM: here from 16 as contrast
        monkeypatch.setattr(_colour, "_multiprocessors", lambda cp_: 16)
    for n, h, w, off in [(20, 37, 53, 0), (17, 37, 53, 9 * c), (16, 224, 224, 0)]:
        x = random_images(rng, n, h, w, c, "uint8")
        src = cp.zeros(x.size + off, cp.uint8)[off:].reshape(x.shape)
        src[...] = cp.asarray(x)
        args = {k: (v if v is not None else rng.uniform(0.4, 1.6, n) if k != "hue" else rng.uniform(-0.3, 0.3, n))
                for k, v in kw.items()}
        out = cp.zeros(x.size + off, cp.uint8)[off:].reshape(x.shape)
        with _cuda.record() as log:
            got = cp.asnumpy(f(src, out=out, **args))
        fused = [e for e in log if e[0] == "launch" and "_fused" in e[1].source[1]]
        assert len(fused) == 1, f"{name} n={n}: no fused launch"
        monkeypatch.setattr(_colour, "FUSED_MIN_N", 0)  # never: the partial sums' two launches
        want = cp.asnumpy(f(src, **args))
        monkeypatch.setattr(_colour, "FUSED_MIN_N", 16)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} n={n} {h}x{w} off={off}")


@gpu
@pytest.mark.parametrize("name", ["brightness", "contrast", "hue", "color_jitter", "grayscale"])
def test_packed_misaligned_head_and_tiny_images(name):
    """Input and output both 9 bytes off: the packed kernel starts at pixel 13 (head of 13
    single pixels), 37 x 53 leaves a tail; 1 x 3 images are all head."""
    import cupy as cp

    rng = np.random.default_rng(7)
    f = gpuaug.registry[name].func
    kw = {"brightness": {"factor": 1.3}, "contrast": {"factor": 0.7}, "hue": {"shift": 0.2},
          "color_jitter": {"brightness": 1.2, "contrast": 0.8, "saturation": 1.3, "hue": -0.1},
          "grayscale": {}}[name]
    for n, h, w in [(4, 37, 53), (3, 1, 3)]:
        x = random_images(rng, n, h, w, 3, "uint8")
        co = 1 if name == "grayscale" else 3
        size = n * h * w
        src = cp.zeros(size * 3 + 9, cp.uint8)[9:].reshape(n, h, w, 3)
        src[...] = cp.asarray(x)
        out = cp.full(size * co + 9, 7, cp.uint8)[9:].reshape(n, h, w, co)
        got = cp.asnumpy(f(src, out=out, **kw))
        ref = cp.asnumpy(f(cp.asarray(x), **kw))  # aligned: packed from pixel 0
        np.testing.assert_array_equal(got, ref)
        cpu = f(x, **kw)
        assert np.abs(got.astype(int) - cpu.astype(int)).max() <= 1


@gpu
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_device_parameters_streams_and_repeatability(backend):
    import cupy as cp

    rng = np.random.default_rng(8)
    x = random_images(rng, 5, 40, 48, 3, "uint8")
    f = rng.uniform(0.2, 2.0, 5)
    xd = cp.asarray(x)
    stream = cp.cuda.Stream(non_blocking=True)
    y = gpuaug.brightness(xd, cp.asarray(f), backend=backend, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(y), quantize(_ref_brightness(x, f, "uint8"), np.uint8))
    a = gpuaug.color_jitter(xd, cp.asarray(f), 0.7, cp.asarray(f[::-1].copy()), 0.1, backend=backend,
                            stream=stream)
    b = gpuaug.color_jitter(xd, f, 0.7, f[::-1].copy(), 0.1, backend=backend, stream=stream)
    stream.synchronize()
    if backend == "cuda":  # fixed-order sums: bit-identical
        np.testing.assert_array_equal(cp.asnumpy(a), cp.asnumpy(b))
    cpu = gpuaug.color_jitter(x, f, 0.7, f[::-1].copy(), 0.1)
    assert np.abs(cp.asnumpy(a).astype(int) - cpu.astype(int)).max() <= 1
    m = cp.asarray(np.eye(3, 4)[None].repeat(5, 0) * f[:, None, None])
    z = gpuaug.color_twist(xd, m, backend=backend)
    np.testing.assert_array_equal(cp.asnumpy(z), cp.asnumpy(y))
    p = cp.asarray(np.stack([rng.permutation(3) for _ in range(5)]))
    s = gpuaug.channel_shuffle(xd, p, backend=backend)
    np.testing.assert_array_equal(cp.asnumpy(s), np.take_along_axis(x, cp.asnumpy(p)[:, None, None, :], -1))


# -- the CUDA C kernels, emulated on the CPU (tests/colour_emulation.py) --------------------

def _cases(rng, n, c, dtype):
    """(op, kwargs, reference(sample, i)) for every colour op, per-sample parameters."""
    m, i8 = R.top(dtype), R.is_int(dtype)
    f = rng.uniform(0.0, 2.5, n)
    f[0] = 1.0
    s = rng.uniform(-0.5, 0.5, n)
    s[0], s[-1] = 0.0, 0.5
    jb, jc, js = rng.uniform(0.6, 2.5, n), rng.uniform(0.3, 1.6, n), rng.uniform(0.0, 1.8, n)
    mats = np.eye(3, 4)[None] + rng.uniform(-0.4, 0.4, (n, 3, 4))
    perm = np.stack([rng.permutation(c) for _ in range(n)])
    cases = [
        ("brightness", {"factor": f}, lambda a, i: R.brightness(a, f[i], m)),
        ("contrast", {"factor": f}, lambda a, i: R.contrast(a, f[i], m, i8)),
        ("saturation", {"factor": f}, lambda a, i: R.saturation(a, f[i], m, i8)),
        ("hue", {"shift": s}, lambda a, i: R.hue(a, s[i], m)),
        ("color_jitter", {"brightness": jb, "contrast": jc, "saturation": js, "hue": s},
         lambda a, i: R.color_jitter(a, jb[i], jc[i], js[i], s[i], m, i8)),
        ("color_jitter", {"brightness": jb, "saturation": js, "hue": s},  # contrast 1: no mean pass
         lambda a, i: R.color_jitter(a, jb[i], 1.0, js[i], s[i], m, i8)),
        ("grayscale", {"num_output_channels": 3}, lambda a, i: R.grayscale(a, 3, i8)),
        ("grayscale", {}, lambda a, i: R.grayscale(a, 1, i8)),
        ("channel_shuffle", {"permutation": perm}, lambda a, i: R.channel_shuffle(a, perm[i])),
    ]
    if c >= 3:
        cases.append(("color_twist", {"matrix": mats}, lambda a, i: R.color_twist(a, mats[i], m)))
    return cases


def _need_compiler():
    from colour_emulation import compiler

    if compiler() is None:
        pytest.skip("no C++ compiler (g++/clang++) to build the CUDA C emulation")


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("channels", (1, 3, 4))
def test_cuda_c_emulated(dtype, channels):
    """The CUDA C kernels (packed for NHWC, strided for NCHW and varshape) against the references."""
    _need_compiler()
    from colour_emulation import emulated

    rng = np.random.default_rng(10)
    x = random_images(rng, 5, 37, 53, channels, dtype)
    x[:, 0, :5] = x[:, 0, :5, :1]  # gray pixels: the HSV corner case
    xs = [random_images(rng, 1, h, w, channels, dtype)[0] for h, w in [(5, 7), (16, 16), (1, 9)]]
    for op, kw, ref in _cases(rng, 5, channels, dtype):
        if channels not in gpuaug.registry[op].channels:
            continue
        with emulated(op) as calls:
            for layout in ("NHWC", "NCHW"):
                check_op(gpuaug.registry[op].func, ref, x, kw, layout=layout)
            kv = {k: (v[:3] if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
            check_op(gpuaug.registry[op].func, ref, xs, kv, varshape=True)
        kinds = {c.split("<")[0] for c in calls}
        assert any(k.endswith("_packed") for k in kinds), calls
        # (one-channel NCHW is the same memory as NHWC, and packed too)
        assert channels == 1 or any(not k.endswith("_packed") for k in kinds), calls


@pytest.mark.parametrize("op", ["brightness", "contrast", "hue", "color_jitter", "grayscale", "channel_shuffle"])
def test_cuda_c_emulated_misaligned(op):
    """Packed batches whose first aligned pixel is not 0 (head pixels) and images smaller than
    the head; and the same through the strided kernel, which must agree exactly."""
    _need_compiler()
    from colour_emulation import emulated

    rng = np.random.default_rng(11)
    for n, h, w in [(4, 37, 53), (3, 1, 3), (2, 16, 16)]:
        x = random_images(rng, n, h, w, 3, "uint8")
        case = {c[0]: c for c in _cases(rng, n, 3, "uint8")}[op]
        co = 1 if op == "grayscale" and "num_output_channels" not in case[1] else 3
        size = n * h * w
        buf = np.zeros(size * 3 + 64, np.uint8)
        off = (9 - buf.ctypes.data) % 16  # 9 bytes past a 16-byte boundary
        src = buf[off:off + size * 3].reshape(n, h, w, 3)
        src[...] = x
        obuf = np.full(size * co + 64, 7, np.uint8)
        ooff = (9 * co // 3 - obuf.ctypes.data) % 16
        out = obuf[ooff:ooff + size * co].reshape(n, h, w, co)
        with emulated(op) as calls:
            got = gpuaug.registry[op].func(src, out=out, **case[1])
            strided = gpuaug.registry[op].func(np.ascontiguousarray(x.transpose(0, 3, 1, 2)), layout="NCHW",
                                              **case[1]).transpose(0, 2, 3, 1)
        assert any("_packed" in c for c in calls[:2]), calls
        ref = np.stack([case[2](s.astype(np.float64), i) for i, s in enumerate(x)])
        assert np.abs(got.astype(int) - quantize(ref, np.uint8).astype(int)).max() <= 1
        np.testing.assert_array_equal(got, strided)
