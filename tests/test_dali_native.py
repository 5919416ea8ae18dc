"""gpuaug.dali's native DALI operator (gpuaug__Kernel, a C++ plugin built on first use).

CPU (CI): the kernels' inlined sources compile with NVRTC for every native op; the plugin builds
with the host compiler against the installed DALI and loads (skipped, with the reason, without a
compiler or DALI's headers); DALI sees its schema; gd ops define graphs through it; the parameter
rows it gets (DALI arithmetic on CPU nodes) equal the standalone op's; bad constants fail at
definition naming the op and argument; the fallback warns once and says why.

GPU (marked gpu and dali): every native op bit-exact against the standalone gpuaug op, constants
and per-sample DataNodes, dense and varshape, uint8/float16/float32; serialize -> deserialize in a
fresh process after load_library gives the same outputs; bad arguments give a DALI error naming
the op and the argument, without crashing the process.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import gpuaug

dali = pytest.importorskip("nvidia.dali", reason="NVIDIA DALI is not installed (pip install -e '.[cuda12]')")

N, H, W = 4, 33, 47


@pytest.fixture(scope="module")
def plugin():
    """The built plugin's path (skipped with the reason when it cannot be built here)."""
    from gpuaug.dali import _native, native

    try:
        path = native.build()
    except native.NativeUnavailable as e:
        pytest.skip(f"cannot build the native DALI plugin here: {e}")
    assert _native.load(), _native._state["reason"]
    return path


def _schema_names(pipe):
    pipe._build_graph()
    return [str(op.spec).splitlines()[0].split()[-1].rstrip(":") for op in pipe._ops]


# ------------------------------------------------------------------------------------------ CPU
def test_kernel_sources_compile_with_nvrtc():
    """The self-contained sources the operator carries compile for every instance it may ask for."""
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy's NVRTC bindings are not installed")
    from gpuaug.dali._native import NATIVE_OPS, kernel_source

    ctypes = {"uint8": "unsigned char", "float16": "gpuaug::half", "float32": "float"}
    for op, nat in NATIVE_OPS.items():
        src = kernel_source(nat.file)
        assert '#include "' not in src, f"{op}: an include was left in the inlined source"
        spec = gpuaug.registry[op]
        extra = ""
        if nat.extra:
            args = {p.name: p.default for p in spec.params}
            extra = "".join(f", {e}" for e in nat.extra(args))
        names = [f"{nat.kernel}{suffix}<{ctypes[d]}, {c}{extra}>" for d in ("uint8", "float16", "float32")
                 for c in nat.channels for suffix in ("", "_packed")[:2 if nat.signature == "colour" else 1]]
        if nat.dense:
            names += [f"{nat.dense}<{ctypes[d]}, {c}{extra}>" for d in ctypes for c in nat.channels]
        if nat.signature == "equalize":  # histogram and lookup-table kernels
            names += [f"gpuaug_equalize_hist<{ctypes[d]}, {c}>" for d in ctypes for c in nat.channels]
            names.append("gpuaug_equalize_lut")
        if nat.launch == "separable":  # the unrolled <name>_k<T, C, K> and the one-channel-per-pass variants
            names += [f"{nat.kernel}_k<{ctypes[d]}, {c}, {k}>" for d in ctypes for c in nat.channels for k in (3, 5, 15)]
            names += [f"{nat.kernel}_1<{ctypes[d]}, {c}>" for d in ctypes for c in nat.channels]
        if nat.program == "median":  # the 3x3 variant, picked when every k is 3
            names += [ne.replace(nat.kernel, nat.kernel + "_3", 1) for ne in names]
        if nat.signature == "cmn":
            cos = (lambda c: {c, 4 if c == 3 else c}) if op == "crop_mirror_normalize" else (lambda c: {None})
            names = [f"{nat.kernel}{v}<{ctypes[d]}, {c}, {o}{'' if co is None else f', {co}'}{pl}>"
                     for d in ctypes for c in nat.channels for o in ("float", "gpuaug::half") for co in cos(c)
                     for v, pl in (("", ""), ("_vec", ", true"), ("_vec", ", false"))]
        if nat.mean is not None:
            names += [f"gpuaug_gray_sum{sfx}<{ctypes[d]}, {c}, {b}>" for d in ctypes for c in nat.channels
                      for b in (0, 1) for sfx in ("", "_packed")]
        try:
            prog = nvrtc.createProgram(src, f"{op}.cu", [], [])
        except Exception as e:  # noqa: BLE001 - no libnvrtc here
            pytest.skip(f"NVRTC unavailable: {e}")
        try:
            for ne in names:
                nvrtc.addNameExpression(prog, ne)
            try:
                nvrtc.compileProgram(prog, ["-std=c++17", "-arch=compute_90"])
            except Exception as e:  # noqa: BLE001
                pytest.fail(f"{op}: NVRTC failed on the inlined source: {e}\n{nvrtc.getProgramLog(prog)}")
            for ne in names:
                assert nvrtc.getLoweredName(prog, ne), f"{op}: {ne} not instantiated"
        finally:
            nvrtc.destroyProgram(prog)


HOST_SHIM = r"""
#include "gpuaug_host.h"
extern "C" {
int rotation_row(const float *r, long long h, long long w, int C, int ti, float *out) {
  return gpuaug_host::rotation_row(r, h, w, C, ti, out);
}
int affine_row(const float *r, int C, int ti, float *out, double *det) {
  return gpuaug_host::affine_row(r, C, ti, out, det);
}
double round_half(double v) { return gpuaug_host::round_half(v); }
long long center_offset(long long size, long long crop) { return gpuaug_host::center_offset(size, crop); }
int perspective_row(const float *r, int C, int ti, float *out, double *det) {
  return gpuaug_host::perspective_row(r, C, ti, out, det);
}
int packed_layout(const long long *st, const long long *dt, int n, int ci, int co, int es, long long *items) {
  return gpuaug_host::packed_layout((const int64_t *)st, (const int64_t *)dt, n, ci, co, es, items);
}
int mean_parts(int sms, int n, long long items) { return gpuaug_host::mean_parts(sms, n, items); }
int policy_row(const int *geo, int ngeo, const double *gargs, const int *col, int ncol, const double *cargs,
               int bilinear, int sem_uint8, const double *fill, int nfill, double in_scale, const double *write,
               const double *d, long long h, long long w, int C, float *row, int P) {
  gpuaug_host::PolicyPlan p;
  p.geo = geo; p.ngeo = ngeo; p.geo_args = gargs; p.colour = col; p.ncolour = ncol; p.colour_args = cargs;
  p.bilinear = bilinear; p.has_fill = nfill > 0; p.sem_uint8 = sem_uint8; p.fill = fill; p.nfill = nfill;
  p.in_scale = in_scale; p.write = write;
  if (P != gpuaug_host::policy_row_width(p)) return -1;
  return gpuaug_host::policy_row(p, d, h, w, C, row, P);
}
int policy_width(const int *geo, int ngeo, const int *col, int ncol, int sem_uint8) {
  gpuaug_host::PolicyPlan p;
  p.geo = geo; p.ngeo = ngeo; p.colour = col; p.ncolour = ncol; p.sem_uint8 = sem_uint8;
  return gpuaug_host::policy_row_width(p);
}
void pcg64_draws(unsigned long long sh, unsigned long long sl, unsigned long long ih, unsigned long long il,
                 const int *slots, int nrows, int n, int width, int calls, double *d) {
  gpuaug_host::Pcg64 g;
  g.set(sh, sl, ih, il);
  for (int c = 0; c < calls; ++c) gpuaug_host::policy_draws(g, slots, nrows, n, width, d + (long long)c * n * width);
}
void policy_out_size(const int *geo, int ngeo, const double *gargs, long long h, long long w, long long *oh,
                     long long *ow) {
  gpuaug_host::PolicyPlan p;
  p.geo = geo; p.ngeo = ngeo; p.geo_args = gargs;
  int64_t a, b;
  gpuaug_host::policy_out_size(p, h, w, &a, &b);
  *oh = a; *ow = b;
}
}
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """gpuaug_host.h (the operator's host logic) compiled alone, through ctypes."""
    import ctypes
    import shutil

    from gpuaug.dali import native

    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no C++ compiler (g++/c++) to compile gpuaug_host.h")
    d = tmp_path_factory.mktemp("host")
    (d / "shim.cc").write_text(HOST_SHIM)
    r = subprocess.run([cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-ffp-contract=off", f"-I{native.HERE}",
                        str(d / "shim.cc"),
                        "-o", str(d / "shim.so")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lib = ctypes.CDLL(str(d / "shim.so"))
    f32, f64, i64 = (np.ctypeslib.ndpointer(t, flags="C") for t in (np.float32, np.float64, np.int64))
    lib.rotation_row.argtypes = [f32, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_int, ctypes.c_int, f32]
    lib.affine_row.argtypes = [f32, ctypes.c_int, ctypes.c_int, f32, f64]
    lib.perspective_row.argtypes = [f32, ctypes.c_int, ctypes.c_int, f32, f64]
    lib.round_half.argtypes = [ctypes.c_double]
    lib.round_half.restype = ctypes.c_double
    lib.center_offset.argtypes = [ctypes.c_longlong, ctypes.c_longlong]
    lib.center_offset.restype = ctypes.c_longlong
    lib.packed_layout.argtypes = [i64, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_longlong)]
    V, I, D, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_longlong
    lib.policy_width.argtypes = [V, I, V, I, I]
    lib.policy_row.argtypes = [V, I, V, V, I, V, I, I, V, I, D, V, V, L, L, I, V, I]
    lib.policy_out_size.argtypes = [V, I, V, L, L, ctypes.POINTER(L), ctypes.POINTER(L)]
    U = ctypes.c_ulonglong
    lib.pcg64_draws.argtypes = [U, U, U, U, V, I, I, I, I, V]
    return lib


def test_host_rotation_program_matches_rotation_inverse(host):
    """The operator's rotation rows == the standalone op's (float32, bit for bit)."""
    from gpuaug._batch import as_batch
    from gpuaug.ops import _warp

    rng = np.random.default_rng(5)
    n = 400
    angle = np.concatenate([rng.uniform(-360, 360, n - 8), [0, 90, -90, 180, 270, 45, -180, 720]]).astype(np.float32)
    scale = rng.uniform(0.5, 2, n).astype(np.float32)
    for h, w, center in ((33, 47, None), (224, 224, None), (31, 64, (10.25, 3.5))):
        b = as_batch(np.zeros((n, h, w, 3), np.uint8))
        inv = _warp.rotation_inverse(b, angle.astype(np.float64), center, scale.astype(np.float64))
        want = _warp.params_matrix(b, 1, 3, inv, 7).astype(np.float32)
        cx, cy = (np.nan, np.nan) if center is None else center
        for i in range(n):
            row = np.array([angle[i], scale[i], cx, cy, 1, 3, 7, 7, 7], np.float32)
            out = np.zeros(11, np.float32)
            assert host.rotation_row(row, h, w, 3, 0, out) == 0
            np.testing.assert_array_equal(out, want[i], err_msg=f"angle {angle[i]} scale {scale[i]} {h}x{w} {center}")
    out = np.zeros(11, np.float32)
    assert host.rotation_row(np.array([10, 0, np.nan, np.nan, 1, 0, 0, 0, 0], np.float32), 8, 8, 3, 0, out) == 1


def test_host_affine_program_matches_invert_affine(host):
    from gpuaug.ops import _warp

    rng = np.random.default_rng(6)
    m = rng.uniform(-2, 2, (300, 2, 3)).astype(np.float32)
    inv, det = _warp.invert_affine(m.astype(np.float64), np)
    for i in range(len(m)):
        row = np.concatenate([m[i].reshape(-1), [0, 1, 0, 0, 0, 0]]).astype(np.float32)
        out, d = np.zeros(11, np.float32), np.zeros(1)
        assert host.affine_row(row, 3, 0, out, d) == 0
        np.testing.assert_array_equal(out[2:8], inv[i].astype(np.float32), err_msg=f"matrix {m[i].tolist()}")
        assert out[:2].tolist() == [1, 0]
    singular = np.array([1, 2, 3, 2, 4, 6, 0, 1, 0, 0, 0, 0], np.float32)
    out, d = np.zeros(11, np.float32), np.zeros(1)
    assert host.affine_row(singular, 3, 0, out, d) == 1
    given = np.array([1, 2, 3, 2, 4, 6, 1, 1, 0, 5, 6, 7], np.float32)  # inverse_map: taken as it is
    assert host.affine_row(given, 3, 2, out, d) == 0 and out[2:8].tolist() == [1, 2, 3, 2, 4, 6] and out[8] == 7


def test_host_perspective_program_matches_invert_perspective(host):
    from gpuaug.ops import _warp

    rng = np.random.default_rng(8)
    m = rng.uniform(-2, 2, (300, 3, 3)).astype(np.float32)
    inv, det = _warp.invert_perspective(m.astype(np.float64), np)
    for i in range(len(m)):
        row = np.concatenate([m[i].reshape(-1), [0, 1, 0, 0, 0, 0]]).astype(np.float32)
        out, d = np.zeros(14, np.float32), np.zeros(1)
        assert host.perspective_row(row, 3, 0, out, d) == 0
        np.testing.assert_array_equal(out[2:11], inv[i].astype(np.float32), err_msg=f"matrix {m[i].tolist()}")
        assert out[:2].tolist() == [1, 0]
    singular = np.array([1, 2, 3, 2, 4, 6, 0, 0, 1, 0, 1, 0, 0, 0, 0], np.float32)
    out, d = np.zeros(14, np.float32), np.zeros(1)
    assert host.perspective_row(singular, 3, 0, out, d) == 1
    with pytest.raises(ValueError, match="singular"):
        _warp.check_invertible(singular[:9].reshape(1, 3, 3).astype(np.float64),
                               *_warp.invert_perspective(singular[:9].reshape(1, 3, 3).astype(np.float64), np),
                               "matrix", 3)
    given = np.array([1, 2, 3, 2, 4, 6, 0, 0, 1, 1, 1, 0, 5, 6, 7], np.float32)  # inverse_map: as it is
    assert host.perspective_row(given, 3, 2, out, d) == 0 and out[2:11].tolist() == [1, 2, 3, 2, 4, 6, 0, 0, 1]
    assert out[11] == 7


def test_host_round_half_matches_numpy_float16(host):
    rng = np.random.default_rng(12)
    vals = np.concatenate([rng.uniform(-70000, 70000, 2000), rng.uniform(-1, 1, 2000), rng.uniform(-1e-4, 1e-4, 2000),
                           [0.0, -0.0, 65504, 65519.99, 65520, -65520, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26,
                            0.1, 2049, 2051, 1 + 2.0 ** -11, np.inf, -np.inf]])
    with np.errstate(over="ignore"):
        want = vals.astype(np.float16).astype(np.float64)
    got = np.array([host.round_half(float(v)) for v in vals])
    np.testing.assert_array_equal(got, want)


def test_host_center_offset_matches_torchvision_rule(host):
    from gpuaug.ops.crop import center_offset

    for size in range(1, 40):
        for crop in range(1, 50):
            assert host.center_offset(size, crop) == center_offset(size, crop), (size, crop)


def test_host_packed_layout_and_mean_parts_match_the_colour_plan(host):
    import ctypes

    from gpuaug.ops import _colour

    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(1, 6))
        c = int(rng.choice([1, 3, 4]))
        es = int(rng.choice([1, 2, 4]))
        h, w = rng.integers(1, 40, n), rng.integers(1, 40, n)
        def table(base):
            t = np.zeros((n, 6), np.int64)
            t[:, 0] = base + rng.integers(0, 64, n) * es
            t[:, 1], t[:, 2], t[:, 3], t[:, 4], t[:, 5] = h, w, w * c, c, 1
            if trial % 7 == 0:
                t[0, 3] += 1  # a padded row: not packed
            return t
        st, dt = table(1 << 20), table(1 << 24)
        for dst in (dt, None):
            want_ok, want_items = _colour.packed_layout(st, dst, c, c, es)
            items = ctypes.c_longlong(0)
            ok = host.packed_layout(st, None if dst is None else dst.ctypes.data, n, c, c, es, ctypes.byref(items))
            assert bool(ok) == want_ok
            if want_ok:
                assert items.value == want_items
    for sms, n, items in ((132, 4, 97), (132, 256, 3136), (114, 1, 10 ** 6), (132, 1000, 5)):
        want = max(1, min(_colour.MAX_PARTS, -(-4 * sms // n), -(-items // _colour.BLOCK)))
        assert host.mean_parts(sms, n, items) == want


def test_plugin_builds_loads_and_registers_the_schema(plugin):
    from nvidia.dali import backend, fn

    assert os.path.isfile(plugin)
    assert hasattr(fn.gpuaug, "kernel")
    schema = backend.GetSchema("gpuaug__Kernel")
    for arg in ("op", "source", "kernel", "template_extra", "params", "program", "dtype_cols", "num_params"):
        assert schema.HasArgument(arg), arg
    from gpuaug.dali import native

    assert native.build() == plugin  # cached: the second call does not rebuild


def test_gd_ops_define_graphs_through_the_native_operator(plugin):
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=N, num_threads=1, device_id=0)
    def pipe():
        x = fn.external_source(name="x", device="gpu", layout="HWC")
        x = gd.flip(x, horizontal=fn.random.coin_flip(), vertical=True)
        x = gd.rotate(x, angle=fn.random.uniform(range=(-10, 10)), border="reflect")
        x = gd.brightness(x, factor=1.25)
        x = gd.contrast(x, factor=1.2)
        return gd.gaussian_blur(x, sigma=fn.random.uniform(range=(1.0, 2.0)))  # DataNode sigma: python_function

    names = _schema_names(pipe())
    assert names.count("gpuaug__Kernel") == 4, names
    assert any("PythonFunction" in n for n in names), names


def test_compose_runs_native_ops_natively_and_fuses_the_rest(plugin):
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    aug = gd.compose([("flip", {"horizontal": fn.random.coin_flip()}),
                      ("gaussian_blur", {"sigma": fn.random.uniform(range=(1.0, 2.0))}),
                      ("gaussian_blur", {"sigma": fn.random.uniform(range=(1.0, 2.0))}),
                      ("rotate", {"angle": fn.random.uniform(range=(-5, 5))}), ("brightness", {"factor": 1.1})])

    @pipeline_def(batch_size=N, num_threads=1, device_id=0)
    def pipe():
        return aug(fn.external_source(name="x", device="gpu", layout="HWC"))

    names = [n for n in _schema_names(pipe()) if n in ("gpuaug__Kernel", "DLTensorPythonFunctionImpl")
             or "PythonFunction" in n]
    assert names == ["gpuaug__Kernel", names[1], "gpuaug__Kernel", "gpuaug__Kernel"], names
    assert "PythonFunction" in names[1] and aug.operators == 4

    py = gd.compose(["invert", "equalize"], backend="python")

    @pipeline_def(batch_size=N, num_threads=1, device_id=0)
    def pipe2():
        return py(fn.external_source(name="x", device="gpu", layout="HWC"))

    names = _schema_names(pipe2())
    assert "gpuaug__Kernel" not in names and py.operators == 1


def _chain_specs(plugin, sources, lines, nsteps):
    """The gpuaug__Kernel specs gpuaug__Chain builds from its arguments (OpSpec::ToString each),
    through the plugin's test hook gpuaug_chain_specs (no GPU needed)."""
    import ctypes

    f = ctypes.CDLL(plugin).gpuaug_chain_specs
    f.restype = ctypes.c_long
    P = ctypes.POINTER(ctypes.c_char_p)
    f.argtypes = [P, ctypes.c_int, P, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_long]
    src = (ctypes.c_char_p * max(1, len(sources)))(*[v.encode() for v in sources])
    arg = (ctypes.c_char_p * max(1, len(lines)))(*[v.encode() for v in lines])
    cap = 1 << 26
    buf = ctypes.create_string_buffer(cap)
    rc = f(src, len(sources), arg, len(lines), nsteps, buf, cap)
    text = buf.value.decode()
    if rc < 0:
        raise RuntimeError(text)
    assert rc < cap
    return text.split("\n----\n")


def _spec_args(text):
    """name -> value text of an OpSpec::ToString's arguments (multi-line values joined)."""
    body = text.split("  Arguments:\n", 1)[1]
    out, name = {}, None
    for line in body.splitlines():
        if line.startswith("    ") and not line.startswith("     ") and ": " in line:
            name, v = line[4:].split(": ", 1)
            out[name] = v
        elif name is not None:
            out[name] += "\n" + line
    return out


@pytest.mark.parametrize("per_sample", [False, True], ids=["constants", "nodes"])
def test_chain_gives_every_native_op_the_arguments_of_its_own_operator(per_sample, plugin):
    """gd.compose's gpuaug__Chain (native_chain=True) builds, for every native op, a step whose
    gpuaug__Kernel spec holds the arguments fn.gpuaug.kernel gets for that op (the step_args
    text typed by the schema in C++, checked through the plugin's gpuaug_chain_specs), its
    DataNode parameters as argument inputs; and a compose of native ops is ONE operator."""
    import gpuaug.dali as gd
    from gpuaug.dali import _native
    from gpuaug.dali._nodes import step_for
    from nvidia.dali import fn, pipeline_def

    ops = [op for op in sorted(_native.NATIVE_OPS) if not (op == "gaussian_blur" and per_sample)]
    kws = []

    @pipeline_def(batch_size=N, num_threads=1, device_id=0)
    def pipe():
        x = fn.external_source(name="x", device="gpu", layout="HWC")
        outs = []
        for op in ops:
            spec = gpuaug.registry[op]
            per = _per_sample(op)
            host_kw = per.pop("__host__", {})
            if per_sample:
                kw = dict(host_kw, **{k: fn.external_source(source=_const([v[i] for i in range(N)]), batch=True)
                                      for k, v in per.items()})
            else:
                flags = {p.name for p in spec.params if p.kind == "bool"}
                kw = {k: (bool(v[0]) if k in flags else v[0].tolist() if v.ndim > 1 and v[0].size > 1 else
                          (int(v.reshape(N, -1)[0, 0]) if v.dtype == np.int32 else float(v.reshape(N, -1)[0, 0])))
                      for k, v in per.items()}
                kw.update(host_kw)
            step, nodes = step_for(op, x, kw, "HWC")
            args = _native.native_kwargs(step, nodes, forced=True)
            assert _native.chainable(args), op
            kws.append(args)
            outs.append(fn.gpuaug.kernel(x, **args))
        return tuple(outs)

    p = pipe()
    p._build_graph()
    py = {}
    for o in p._ops:
        text = str(o.spec)
        if text.startswith("OpSpec for gpuaug__Kernel"):
            a = _spec_args(text)
            py[a["op"]] = (a, text.split("  Inputs:\n", 1)[1].split("  Outputs:", 1)[0])
    texts, n_inputs, group, used = [], 0, [], 0
    for kw in kws + [None]:  # chains of at most MAX_CHAIN_INPUTS DataNode parameters
        k = 0 if kw is None else sum(_native._is_node(v) for v in kw.values())
        if kw is None or used + k > _native.MAX_CHAIN_INPUTS:
            sources, lines, inputs = _native.chain_args(group)
            texts += _chain_specs(plugin, sources, lines, len(group))
            n_inputs += len(inputs)
            group, used = [], 0
        if kw is not None:
            group.append(kw)
            used += k
    assert len(texts) == len(ops)
    for op, kw, text in zip(ops, kws, texts):
        got = _spec_args(text)
        want, want_inputs = py[op]
        for name in kw:
            if _native._is_node(kw[name]):
                continue
            assert got.get(name) == want.get(name), (op, name, got.get(name), want.get(name))
        n_nodes = sum(_native._is_node(v) for v in kw.values())
        assert text.split("  Inputs:\n", 1)[1].split("  Outputs:", 1)[0].count("\n") == n_nodes, op
        assert want_inputs.count("\n") == n_nodes + 1, op  # + the images
    assert n_inputs == sum(_native._is_node(v) for kw in kws for v in kw.values())
    with pytest.raises(RuntimeError, match="has no argument 'nope'"):
        _chain_specs(plugin, [], ["0\tnope\t1"], 1)

    aug = gd.compose([("flip", {"horizontal": fn.random.coin_flip()}),
                      ("rotate", {"angle": fn.random.uniform(range=(-5, 5))}),
                      ("gaussian_blur", {"sigma": fn.random.uniform(range=(1.0, 2.0))}),
                      ("brightness", {"factor": 1.1}), ("invert", {}),
                      ("crop_mirror_normalize", {"mean": [1.0, 2.0, 3.0], "std": [4.0, 5.0, 6.0]})],
                     native_chain=True)

    @pipeline_def(batch_size=N, num_threads=1, device_id=0)
    def pipe2():
        return aug(fn.external_source(name="x", device="gpu", layout="HWC"))

    names = [n for n in _schema_names(pipe2()) if n.startswith("gpuaug__") or "PythonFunction" in n]
    assert names[0] == "gpuaug__Chain" and "PythonFunction" in names[1] and names[2] == "gpuaug__Chain", names
    assert len(names) == 3 and aug.operators == 3

    many = gd.compose([("flip", {"horizontal": fn.random.coin_flip()})] * (_native.MAX_CHAIN_INPUTS + 1),
                      native_chain=True)

    @pipeline_def(batch_size=N, num_threads=1, device_id=0)
    def pipe3():
        return many(fn.external_source(name="x", device="gpu", layout="HWC"))

    names = _schema_names(pipe3())  # the argument inputs of one chain are full: a second chain
    assert names.count("gpuaug__Chain") == 1 and names.count("gpuaug__Kernel") == 1, names


def test_chain_argument_text():
    """Values as gpuaug__Chain's step_args text: exact floats (also NumPy's), ints, flags, vectors."""
    from gpuaug.dali._native import _arg_text

    assert _arg_text([np.float64(1.5), np.float32(0.1), np.int64(3), True, 2, "x"]) == "1.5 0.10000000149011612 3 1 2 x"
    assert float(_arg_text(0.1)) == 0.1 and _arg_text(np.bool_(False)) == "0" and _arg_text(float("nan")) == "nan"


def test_calls_the_native_operator_cannot_take_fall_back(plugin):
    """Per-sample constant arrays, per-channel fill, GPU DataNodes: python_function; CHW runs
    natively (in_layout / out_layout CHW)."""
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=2, num_threads=1, device_id=0)
    def pipe():
        x = fn.external_source(name="x", device="gpu", layout="HWC")
        return (gd.brightness(x, factor=np.array([1.0, 1.2])), gd.rotate(x, angle=10, fill=3),
                gd.rotate(x, angle=10, fill=[1, 2, 3]), gd.flip(x, horizontal=fn.random.coin_flip().gpu()),
                gd.invert(fn.transpose(x, perm=[2, 0, 1]), layout="CHW"))

    p = pipe()
    names = [n for n in _schema_names(p) if n == "gpuaug__Kernel" or "PythonFunction" in n]
    assert names.count("gpuaug__Kernel") == 2 and len(names) == 5, names
    chw = [str(op.spec) for op in p._ops if "gpuaug__Kernel" in str(op.spec) and "gpuaug_invert" in str(op.spec)]
    assert len(chw) == 1 and "in_layout: CHW" in chw[0] and "out_layout: CHW" in chw[0]

    @pipeline_def(batch_size=2, num_threads=1, device_id=0)
    def forced():
        x = fn.external_source(name="x", device="gpu", layout="HWC")
        return gd.rotate(x, angle=10, fill=[1, 2, 3], backend="native")

    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.rotate: backend='native': fill"):
        forced()._build_graph()


def test_parameter_rows_match_the_standalone_op(plugin):
    """The per-sample rows built by DALI arithmetic (CPU nodes) equal what the op builds."""
    from gpuaug.dali import _native
    from nvidia.dali import fn, pipeline_def, types

    rng = np.random.default_rng(0)
    h = (rng.random(N) < 0.5).astype(np.int32)
    f = rng.uniform(0.5, 1.5, N).astype(np.float32)
    m = rng.uniform(-1, 1, (N, 3, 4)).astype(np.float32)
    entries_of = {
        "flip": lambda nodes: _native.NATIVE_OPS["flip"].row({"horizontal": nodes[0], "vertical": True}),
        "brightness": lambda nodes: _native.NATIVE_OPS["brightness"].row({"factor": nodes[1]}),
        "color_twist": lambda nodes: _native.NATIVE_OPS["color_twist"].row({"matrix": nodes[2]}),
    }
    widths = {0: 1, 1: 1, 2: 12}
    expect = {"flip": np.stack([h.astype(np.float32), np.ones(N, np.float32)], 1),
              "brightness": np.stack([f, np.zeros(N, np.float32)], 1),
              "color_twist": np.concatenate([m.reshape(N, 12), np.zeros((N, 1), np.float32)], 1)}
    meta = {}

    @pipeline_def(batch_size=N, num_threads=1, device_id=None)
    def pipe():
        nodes = [fn.external_source(source=lambda: [h[i] for i in range(N)], batch=True),
                 fn.external_source(source=lambda: [f[i] for i in range(N)], batch=True),
                 fn.external_source(source=lambda: [m[i] for i in range(N)], batch=True)]
        outs = []
        for op, make in entries_of.items():
            params, num, dcols, dvals = _native._params_node(make(nodes), lambda nd: widths[next(i for i, x in enumerate(nodes) if x is nd)])
            meta[op] = (num, dcols, dvals)
            outs.append(params)
        return tuple(outs)

    p = pipe()
    p.build()
    got = p.run()
    for (op, want), out in zip(expect.items(), got):
        rows = np.stack([np.array(t) for t in out])
        np.testing.assert_array_equal(rows, want, err_msg=op)
        assert meta[op][0] == want.shape[1]
    assert meta["brightness"][1:] == ([1], [255.0, 1.0, 1.0])
    assert meta["color_twist"][1] == [12]
    del types


def _const(value):
    """An external_source callback without arguments (DALI passes an index to callbacks that take
    one, default arguments included)."""
    return lambda: value


def test_node_shapes_reach_the_operator_for_its_checks(plugin, monkeypatch):
    """The "cat" form (GPUAUG_DALI_NATIVE_ARGS=cat): per sample, for each DataNode parameter: ndim
    then dims (what the operator checks, naming the parameter, against node_expect)."""
    monkeypatch.setenv("GPUAUG_DALI_NATIVE_ARGS", "cat")
    from gpuaug.dali import _native
    from nvidia.dali import fn, pipeline_def

    a = [np.float32(1.5)] * N
    m = [np.ones((2, 3), np.float32)] * N
    v = [np.ones(3, np.int32)] * N
    meta = {}

    @pipeline_def(batch_size=N, num_threads=1, device_id=None)
    def pipe():
        nodes = [fn.external_source(source=_const(s), batch=True) for s in (a, m, v)]
        args = dict(zip(("angle", "matrix", "permutation"), nodes))
        checks = _native._shape_checks(nodes, args, {"angle": (), "matrix": (2, 3), "permutation": ("C",)})
        meta.update(checks)
        return checks["node_shapes"]

    p = pipe()
    p.build()
    (out,) = p.run()
    for t in out:
        assert np.array(t).tolist() == [0, 2, 2, 3, 1, 3]
    assert meta["node_names"] == ["angle", "matrix", "permutation"]
    assert meta["node_expect"] == [0, 2, 2, 3, 1, -1]


@pytest.mark.parametrize("per_sample", [False, True], ids=["constants", "nodes"])
def test_every_native_op_gets_the_parameter_matrix_of_the_standalone_op(per_sample, plugin, host, monkeypatch):
    """CPU emulation of the parameter path: the rows DALI builds (constants, DataNodes, DALI
    arithmetic) after the operator's dtype columns and programs (gpuaug_host.h) equal the (N, P)
    matrix the standalone op hands its kernel (from gpuaug._run.describe)."""
    import nvidia.dali.fn as dfn
    from gpuaug._run import describe
    from gpuaug.dali import _native
    from gpuaug.dali._ops import step_for
    from nvidia.dali import fn, pipeline_def

    seen = {}

    def kernel(data, params=None, segments=None, **kw):  # stands in for fn.gpuaug.kernel: outputs its row
        from nvidia.dali import types

        params = [] if params is None else params  # no params argument: an empty row (center_crop)
        if segments:  # the "direct" form: the operator's assemble_rows, in DALI ops
            parts, c = [], 0
            for g in segments:
                if g > 0:
                    parts.append(fn.constant(fdata=list(params[c:c + g]), shape=[g], dtype=types.FLOAT))
                    c += g
                else:
                    parts.append(fn.cast(fn.reshape(kw[f"p{-g - 1}"], shape=[-1]), dtype=types.FLOAT))
            assert c == len(params)
            params = parts[0] if len(parts) == 1 else fn.cat(*parts, axis=0)
        seen.update(kw, params=params)
        return params if not isinstance(params, list) else data

    monkeypatch.setattr(dfn.gpuaug, "kernel", kernel)

    for op in sorted(_native.NATIVE_OPS):
        if op == "gaussian_blur" and per_sample:  # native with constant sigma only
            continue
        spec = gpuaug.registry[op]
        c = 3 if 3 in spec.channels else spec.channels[-1]
        per = _per_sample(op)
        host_kw = per.pop("__host__", {})
        flags = {p.name for p in spec.params if p.kind == "bool"}
        if per_sample:
            consts = dict(host_kw)
            ref_kw = {k: (v.astype(bool) if k in flags else v.astype(np.int64 if v.dtype == np.int32 else np.float64))
                      for k, v in per.items()}
        else:
            consts = {k: (bool(v[0]) if k in flags else v[0].tolist() if v.ndim > 1 and v[0].size > 1 else
                          (int(v.reshape(N, -1)[0, 0]) if v.dtype == np.int32 else float(v.reshape(N, -1)[0, 0])))
                      for k, v in per.items()}
            ref_kw = {k: (v if not isinstance(v, list) else np.asarray(v)) for k, v in consts.items()}
            consts.update(host_kw)
        ref_kw.update(host_kw)
        seen.clear()
        images = np.random.default_rng(1).integers(0, 256, (N, 40, 50, c)).astype(np.uint8)

        @pipeline_def(batch_size=N, num_threads=1, device_id=None)
        def pipe():
            x = fn.external_source(source=_const([images[i] for i in range(N)]), batch=True, layout="HWC")
            nodes = {k: fn.external_source(source=_const([v[i] for i in range(N)]), batch=True)
                     for k, v in per.items()} if per_sample else {}
            step, step_nodes = step_for(op, x, dict(consts, **nodes), "HWC")
            out = _native.native_node(step, x, step_nodes, forced=True)
            return out

        p = pipe()
        p.build()
        (out,) = p.run()
        params = seen["params"]
        rows = (np.stack([np.array(t) for t in out]).astype(np.float32) if not isinstance(params, list) else
                np.tile(np.asarray(params, np.float32), (N, 1)))
        for col, vals in zip(seen.get("dtype_cols", []), np.reshape(seen.get("dtype_values", []), (-1, 3))):
            rows[:, col] = vals[0]  # uint8 images
        want = {}
        if seen.get("signature") == "equalize":  # no parameters: the operator computes its tables
            assert rows.shape[1] == 0
            continue
        launch = describe(spec.func, images, **ref_kw, backend="cpu")
        if launch is not None:
            want["m"] = np.asarray(launch.params, np.float64)
        else:  # run_custom ops have no plan hook: their rows, as their modules build them
            from gpuaug.ops._launch import seed_columns

            def col(name):
                return np.broadcast_to(np.asarray(ref_kw[name], np.float64).reshape(-1), (N,))
            if op == "sharpen":
                want["m"] = np.stack([col("factor"), np.full(N, 255.0), np.ones(N)], 1)
            elif op == "median_blur":
                want["m"] = col("kernel_size")[:, None]
            elif op == "gaussian_blur":
                from gpuaug.ops.gaussian_blur import gaussian_kernel_size, gaussian_weight_rows

                sg = col("sigma")
                ks = (col("kernel_size").astype(np.int64) if ref_kw.get("kernel_size") is not None
                      else gaussian_kernel_size(sg, np.uint8))
                want["m"] = gaussian_weight_rows(ks, sg)
            elif op == "box_blur":
                from gpuaug.ops._launch import separable_rows
                from gpuaug.ops.box_blur import _ones

                ks = col("kernel_size").astype(np.int64)
                want["m"] = separable_rows(ks, _ones)
            elif op == "gaussian_noise":
                want["m"] = np.column_stack([col("mean").astype(np.float32), col("std").astype(np.float32),
                                             seed_columns(ref_kw["seed"], N), np.arange(N)])
            else:  # salt_and_pepper
                pr, sv = col("prob"), col("salt_vs_pepper")
                tn, ts = np.floor(pr * 2.0 ** 32), np.floor(pr * sv * 2.0 ** 32)
                want["m"] = np.column_stack([np.mod(tn, 65536), (tn - np.mod(tn, 65536)) / 65536, np.mod(ts, 65536),
                                             (ts - np.mod(ts, 65536)) / 65536, seed_columns(ref_kw["seed"], N),
                                             np.full(N, 255.0), np.arange(N)])
        m = want["m"].astype(np.float32)
        program = seen.get("program", "identity")
        if program == "rotation":
            got = np.zeros((N, 8 + c), np.float32)
            for i in range(N):
                assert host.rotation_row(np.ascontiguousarray(rows[i]), 40, 50, c, 0, got[i]) == 0
            rows = got
        elif program == "affine":
            got, det = np.zeros((N, 8 + c), np.float32), np.zeros(1)
            for i in range(N):
                assert host.affine_row(np.ascontiguousarray(rows[i]), c, 0, got[i], det) == 0
            rows = got
        elif program == "rot90":
            rows = np.mod(rows, 4)
        elif program == "gaussian":  # [k, taps] for uint8 then floats: uint8 images take the first
            rows = rows[:, :1 + int(rows[0, 0])]
        elif program == "box":  # [k] -> [k, 1/k x k, 0 ...] up to the batch's largest k
            ks = rows[:, 0].astype(np.int64)
            out_rows = np.zeros((N, 1 + int(ks.max())), np.float32)
            out_rows[:, 0] = ks
            for i, kk in enumerate(ks):
                out_rows[i, 1:1 + kk] = np.float32(1.0 / kk)
            rows = out_rows
        elif program == "grid_mask":  # [tile, ratio, angle, shift (2)] -> [cos, sin, shift, tile, ratio tile]
            t, r, a = rows[:, 0].astype(np.float64), rows[:, 1].astype(np.float64), rows[:, 2].astype(np.float64)
            rad = a * (np.pi / 180.0)
            rows = np.column_stack([np.cos(rad), np.sin(rad), rows[:, 3:5], t, r * t]).astype(np.float32)
        elif program == "noise":  # the operator sets the sample index (and adds the batch to the seed: 0 here)
            rows[:, -1] = np.arange(N)
        elif program == "salt_pepper":
            pr, sv = rows[:, 0].astype(np.float64), rows[:, 1].astype(np.float64)
            tn, ts = np.floor(pr * 2.0 ** 32), np.floor(pr * sv * 2.0 ** 32)
            rows = np.column_stack([np.mod(tn, 65536), (tn - np.mod(tn, 65536)) / 65536, np.mod(ts, 65536),
                                    (ts - np.mod(ts, 65536)) / 65536, rows[:, 2:6], rows[:, 6], np.arange(N)]
                                   ).astype(np.float32)
        elif program == "erase":  # [boxes (4K), value] -> [fill (4: value x C, uint8 store), K, boxes]
            k = (rows.shape[1] - 1) // 4
            fill = np.zeros((N, 4), np.float32)
            fill[:, :c] = np.clip(np.floor(rows[:, -1:] + 0.5), 0, 255)
            rows = np.concatenate([fill, np.full((N, 1), k, np.float32), rows[:, :4 * k]], axis=1)
        elif program in ("resize", "resized_crop"):  # gpuaug.ops.resize.resample_params
            from gpuaug.ops.resize import resample_params

            oh, ow = seen["out_size"]
            bx = rows[:, :4].astype(np.float64) if program == "resized_crop" else np.tile([0.0, 0.0, 40.0, 50.0], (N, 1))
            rows = resample_params(bx[:, 0], bx[:, 1], bx[:, 2], bx[:, 3], (oh, ow), rows[0, -1], N).astype(np.float32)
        elif program == "pad":  # [t, b, l, r, mode, value] -> [t, l, mode, value as uint8 stores it]
            rows = np.stack([rows[:, 0], rows[:, 2], rows[:, 4], np.clip(np.floor(rows[:, 5] + 0.5), 0, 255)], 1)
        elif program == "center_crop":
            size = seen["out_size"]
            rows = np.tile(np.array([host.center_offset(40, size[0]), host.center_offset(50, size[1])], np.float32),
                           (N, 1))
        elif program == "perspective":
            got, det = np.zeros((N, 11 + c), np.float32), np.zeros(1)
            for i in range(N):
                assert host.perspective_row(np.ascontiguousarray(rows[i]), c, 0, got[i], det) == 0
            rows = got
        elif program == "cmn":  # [pos (2), mirror, mean (k), std (k)] -> [pos, mirror, h, w, mean (C), std (C)]
            k = (rows.shape[1] - 3) // 2
            mean = np.broadcast_to(rows[:, 3:3 + k], (N, c))
            std = np.broadcast_to(rows[:, 3 + k:], (N, c))
            rows = np.concatenate([rows[:, :3], m[:, 3:5], mean, std], axis=1)  # sizes: read by the Numba twins only
        np.testing.assert_array_equal(rows, m[:, :rows.shape[1]], err_msg=f"{op} ({'nodes' if per_sample else 'constants'})")


def test_direct_form_passes_each_parameter_as_its_own_argument_input(plugin, monkeypatch):
    """The default "direct" form: a gd op with DataNode parameters adds no DALI CPU operator of
    its own (the random ops are the user's); segments interleave constants and p0, p1, ...; the
    shape checks travel as node_names / node_expect."""
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    from gpuaug.dali import _native

    assert _native.args_mode() == "direct"

    @pipeline_def(batch_size=N, num_threads=1, device_id=0)
    def pipe():
        x = fn.external_source(name="x", device="gpu", layout="HWC")
        x = gd.flip(x, horizontal=fn.random.coin_flip(), vertical=False)
        x = gd.rotate(x, angle=fn.random.uniform(range=(-10, 10)))
        return gd.color_jitter(x, brightness=fn.random.uniform(range=(0.5, 1.5)), contrast=1.2,
                               saturation=fn.random.uniform(range=(0.5, 1.5)))

    p = pipe()
    names = _schema_names(p)
    assert names == ["ExternalSource", "random__CoinFlip", "gpuaug__Kernel", "random__Uniform", "gpuaug__Kernel",
                     "random__Uniform", "random__Uniform", "gpuaug__Kernel"], names
    text = str(p._ops[-1].spec).splitlines()
    inputs = text[text.index("  Inputs:") + 1:text.index("  Outputs:")]
    assert len(inputs) == 3 and sum("Uniform" in ln for ln in inputs) == 2, inputs  # data, p0, p1
    monkeypatch.setattr(_native, "_is_node", lambda v: isinstance(v, _Node))
    consts, segments, nodes, num, dcols, dvals = _native._params_direct(
        [1.0, _Node(), (2.0, 3.0), _native.DTYPE((255.0, 1.0, 1.0)), _Node()], lambda nd: 1)
    assert consts == [1.0, 2.0, 3.0, 0.0] and segments == [1, -1, 3, -2] and len(nodes) == 2
    assert num == 6 and dcols == [4] and dvals == [255.0, 1.0, 1.0]


class _Node:
    """A stand-in CPU DataNode for _params_direct."""

    device = "cpu"


def test_constant_rows_and_rotation_program_inputs(plugin):
    from gpuaug.dali import _native

    ent = _native.NATIVE_OPS["rotate"].row({"angle": 30.0, "scale": 1.0, "center": None, "interpolation": "nearest",
                                          "border": "reflect", "fill": 300})
    params, num, dcols, dvals = _native._params_node(ent, lambda nd: 1)
    assert num == 9 and dcols == [] and params[:2] == [30.0, 1.0]
    assert np.isnan(params[2]) and np.isnan(params[3])
    assert params[4:] == [0.0, 3.0, 255.0, 300.0, 300.0]  # uint8 fill saturates; floats keep it
    with pytest.raises(_native.Unsupported, match="fill"):
        _native.NATIVE_OPS["rotate"].row({"angle": 1.0, "scale": 1.0, "center": None, "interpolation": "nearest",
                                         "border": "constant", "fill": (1, 2, 3)})


def test_bad_constants_fail_at_definition_naming_op_and_argument(plugin):
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=N, num_threads=1, device_id=0)
    def pipe():
        x = fn.external_source(name="x", device="gpu", layout="HWC")
        return gd.brightness(x, factor=-1.0)

    with pytest.raises(ValueError, match=r"gpuaug\.dali\.brightness: factor"):
        pipe()._build_graph()

    @pipeline_def(batch_size=N, num_threads=1, device_id=0)
    def pipe2():
        x = fn.external_source(name="x", device="gpu", layout="HWC")
        return gd.gaussian_blur(x, sigma=fn.random.uniform(range=(1.0, 2.0)), backend="native")

    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.gaussian_blur: backend='native': sigma / kernel_size: "
                                           r"DataNodes"):
        pipe2()._build_graph()


def test_fallback_warns_once_and_says_why(monkeypatch):
    import gpuaug.dali as gd
    from gpuaug.dali import _native, native
    from nvidia.dali import fn, pipeline_def

    def no_compiler():
        raise native.NativeUnavailable("no C++ compiler found (test)")

    monkeypatch.setattr(native, "compiler", no_compiler)
    monkeypatch.setenv("GPUAUG_CACHE_DIR", "/nonexistent-gpuaug-cache-for-test")
    _native.reset_for_tests()
    try:
        @pipeline_def(batch_size=N, num_threads=1, device_id=0)
        def pipe():
            x = fn.external_source(name="x", device="gpu", layout="HWC")
            return gd.invert(gd.flip(x, horizontal=True))

        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            names = _schema_names(pipe())
        ours = [w for w in rec if "native DALI operator is unavailable" in str(w.message)]
        assert len(ours) == 1, [str(w.message) for w in rec]
        assert "no C++ compiler found (test)" in str(ours[0].message)
        assert "gpuaug__Kernel" not in names and sum("PythonFunction" in n for n in names) == 2
        st = _native.status()
        assert st["active"] is False and "no C++ compiler" in st["reason"]

        monkeypatch.setenv(_native.ENV, "1")  # forced: an error instead of a fallback
        with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.flip: .*no C\+\+ compiler"):
            pipe()._build_graph()
        monkeypatch.setenv(_native.ENV, "0")  # off: python_function, no warning
        _native.reset_for_tests()
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            names = _schema_names(pipe())
        assert not [w for w in rec if "native" in str(w.message)]
        assert _native.status()["active"] is False
    finally:
        _native.reset_for_tests()


def test_gpuaug_info_reports_the_dali_path(plugin):
    from gpuaug import bench

    st = bench.backend_status()["dali_native"]
    assert st["usable"] is True and "native DALI operator" in st["why"], st


# ------------------------------------------------------------------------------------------ GPU
def _gpu_ready():
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001
        return False


def _native_ops():
    from gpuaug.dali._native import NATIVE_OPS

    return sorted(NATIVE_OPS)


def _images(dtype, varshape, c, seed=1):
    rng = np.random.default_rng(seed)
    shapes = [(H + 3 * i, W - 2 * i) for i in range(N)] if varshape else [(H, W)] * N
    out = []
    for h, w in shapes:
        a = rng.integers(0, 256, (h, w, c)).astype(np.uint8)
        out.append(a if dtype == "uint8" else (a / 255.0).astype(dtype))
    return out


def _per_sample(op, h=H, w=W):
    """The registry example's per-sample values, as float32 / int32 (what DALI nodes carry), and
    its host-only values (sizes, modes) as they are."""
    spec = gpuaug.registry[op]
    by_name = {p.name: p for p in spec.params}
    kw = spec.example(np.random.default_rng(3), N, h, w) if spec.example else {}
    per, host = {}, {}
    for k, v in kw.items():
        a = np.asarray(v)
        p = by_name[k]
        if p.kind == "size" or not p.per_sample or a.ndim == 0 or a.shape[0] != N:
            host[k] = v
        elif a.dtype == bool or np.issubdtype(a.dtype, np.integer):
            per[k] = a.astype(np.int32)
        else:
            per[k] = a.astype(np.float32)
    if not host:
        return per
    per_host = dict(per)
    per_host["__host__"] = host
    return per_host


def _run(graph, n_out=1):
    from nvidia.dali import pipeline_def

    pipe = pipeline_def(graph, batch_size=N, num_threads=2, device_id=0, prefetch_queue_depth=1)()
    pipe.build()
    outs = pipe.run()
    res = [[np.array(t) for t in o.as_cpu()] for o in outs]
    return res, pipe


def _reference(op, imgs, kw):
    import cupy as cp

    fn_ = getattr(gpuaug, op)
    if len({a.shape for a in imgs}) == 1:
        return list(cp.asnumpy(fn_(cp.asarray(np.stack(imgs)), **kw)))
    return [cp.asnumpy(o) for o in fn_([cp.asarray(a) for a in imgs], **kw)]


@pytest.mark.gpu
@pytest.mark.dali
@pytest.mark.parametrize("op", _native_ops())
@pytest.mark.parametrize("varshape", [False, True], ids=["dense", "varshape"])
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
@pytest.mark.parametrize("per_sample", [False, True], ids=["constants", "nodes"])
def test_native_op_bit_exact_against_standalone(op, varshape, dtype, per_sample, plugin):
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    if op == "gaussian_blur" and per_sample:
        pytest.skip("gaussian_blur runs natively with a constant sigma only (DataNode sigma: python_function)")
    import gpuaug.dali as gd
    from nvidia.dali import fn

    spec = gpuaug.registry[op]
    c = 3 if 3 in spec.channels else spec.channels[-1]
    imgs = _images(dtype, varshape, c)
    per = _per_sample(op)
    host = per.pop("__host__", {})
    if op == "solarize" and dtype != "uint8":  # thresholds live in the dtype's range [0, 1]
        per["threshold"] = (per["threshold"] / 255).astype(np.float32)
    if op == "crop" and varshape:  # the varshape images narrow by 2 px per sample: keep windows inside
        per["left"] = np.minimum(per["left"], W - 2 * (N - 1) - host["width"]).astype(np.int32)
    flags = {p.name for p in spec.params if p.kind == "bool"}

    def ref_value(k, v):
        return v.astype(bool) if k in flags else v.astype(np.int64 if v.dtype == np.int32 else np.float64)

    if per_sample:
        consts, ref_kw = dict(host), {k: ref_value(k, v) for k, v in per.items()}
        ref_kw.update(host)
    else:
        def first(k, v):  # sample 0's value as a constant for the whole batch
            if k in flags:
                return bool(v[0])
            if v.ndim > 1 and v[0].size > 1:
                return v[0].tolist() if v.dtype == np.int32 else v[0].astype(np.float64).tolist()
            if v.ndim > 1:  # (N, 1): one number per sample
                v = v.reshape(len(v))
            return int(v[0]) if v.dtype == np.int32 else float(v[0])

        consts = {k: first(k, v) for k, v in per.items()}
        consts.update(host)
        ref_kw = consts

    def graph():
        x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
        nodes = {k: fn.external_source(source=_const([v[i] for i in range(N)]), batch=True)
                 for k, v in per.items()} if per_sample else {}
        return getattr(gd, op)(x, **consts, **nodes, backend="native")

    (got,), _ = _run(graph)
    ref = _reference(op, imgs, ref_kw)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape and g.dtype == r.dtype, f"{op} sample {i}: {g.shape} {g.dtype} vs {r.shape} {r.dtype}"
        if not np.array_equal(g.view(np.uint8), r.view(np.uint8)):
            d = np.abs(g.astype(np.float64) - r.astype(np.float64))
            pytest.fail(f"{op} {dtype} sample {i}: not bit-exact, {int((d > 0).sum())} elements differ, max {d.max()}")


@pytest.mark.gpu
@pytest.mark.dali
@pytest.mark.parametrize("varshape", [False, True], ids=["dense", "varshape"])
def test_native_warp_affine_with_an_output_size(varshape, plugin):
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import gpuaug.dali as gd
    from nvidia.dali import fn

    imgs = _images("uint8", varshape, 3)
    m = _per_sample("warp_affine")["matrix"]  # (N, 2, 3) float32

    def graph():
        x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
        mat = fn.external_source(source=lambda: [m[i] for i in range(N)], batch=True)
        return gd.warp_affine(x, matrix=mat, size=(20, 30), border="reflect", backend="native")

    (got,), _ = _run(graph)
    ref = _reference("warp_affine", imgs, {"matrix": m.astype(np.float64), "size": (20, 30), "border": "reflect"})
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == (20, 30, 3)
        np.testing.assert_array_equal(g, r, err_msg=f"sample {i}")


@pytest.mark.gpu
@pytest.mark.dali
def test_serialize_deserialize_in_a_fresh_process(plugin, tmp_path):
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    imgs = _images("uint8", False, 3)
    np.save(tmp_path / "x.npy", np.stack(imgs))

    @pipeline_def(batch_size=N, num_threads=2, device_id=0, seed=7)
    def pipe():
        x = fn.external_source(name="x", device="gpu", layout="HWC")
        x = gd.flip(x, horizontal=fn.random.coin_flip(seed=3), vertical=False)
        x = gd.rotate(x, angle=fn.random.uniform(range=(-20, 20), seed=4), border="reflect")
        return gd.brightness(x, factor=fn.random.uniform(range=(0.7, 1.3), seed=5))

    p = pipe()
    assert "gpuaug__Kernel" in _schema_names(p)
    p.build()
    p.feed_input("x", np.stack(imgs), layout="HWC")
    (out,) = p.run()
    want = np.stack([np.array(t) for t in out.as_cpu()])
    (tmp_path / "pipe.bin").write_bytes(p.serialize())
    np.save(tmp_path / "want.npy", want)
    script = textwrap.dedent(f"""
        import numpy as np, nvidia.dali.plugin_manager as pm
        from nvidia.dali import Pipeline
        pm.load_library({plugin!r})
        p = Pipeline.deserialize(serialized_pipeline=open({str(tmp_path / 'pipe.bin')!r}, 'rb').read())
        p.build()
        p.feed_input("x", np.load({str(tmp_path / 'x.npy')!r}), layout="HWC")
        (out,) = p.run()
        got = np.stack([np.array(t) for t in out.as_cpu()])
        want = np.load({str(tmp_path / 'want.npy')!r})
        assert np.array_equal(got, want), int((got != want).sum())
        print("ROUNDTRIP OK")
    """)
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert "ROUNDTRIP OK" in r.stdout, r.stdout + r.stderr


@pytest.mark.gpu
@pytest.mark.dali
def test_bad_arguments_raise_a_dali_error_naming_op_and_argument(plugin):
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import gpuaug.dali as gd
    from nvidia.dali import fn

    imgs = _images("uint8", False, 3)
    bad_center = [np.array([1.0, 2.0, 3.0], np.float32)] * N  # 3 values where (cx, cy) is expected

    def graph():
        x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
        ctr = fn.external_source(source=lambda: bad_center, batch=True)
        return gd.rotate(x, angle=10.0, center=ctr, backend="native")

    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.rotate: argument 'center': sample 0 has shape \(3,\); "
                                            r"expected \(2,\)"):
        _run(graph)

    gray = [a[..., :2].copy() for a in imgs]  # 2 channels: refused by the op's channel list

    def graph2():
        x = fn.external_source(source=lambda: gray, batch=True, device="gpu", layout="HWC")
        return gd.flip(x, horizontal=True, backend="native")

    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.flip: x: got 2 channels"):
        _run(graph2)

    # the process is fine and a new pipeline runs
    def graph3():
        x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
        return gd.flip(x, horizontal=True, backend="native")

    (got,), _ = _run(graph3)
    np.testing.assert_array_equal(got[0], imgs[0][:, ::-1])


# ------------------------------------------------------------------------------ gd.policy (native)
def _policies():
    """Policies covering every native transform (name -> transforms, input dtype)."""
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    return {
        "bench": ([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(30),
                   gpuaug.ColorJitter(brightness=0.5, contrast=0.5), gpuaug.Normalize(mean, std)], "uint8"),
        "affine": ([gpuaug.Resize((40, 36)), gpuaug.RandomAffine(20, translate=(0.1, 0.2), scale=(0.8, 1.2),
                                                                 shear=(-5, 5, -3, 3), center=(10.3, 7.1)),
                    gpuaug.RandomVerticalFlip(0.3), gpuaug.CenterCrop(30),
                    gpuaug.ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.7), gpuaug.RandomGamma(p=0.6)], "uint8"),
        "colour_first": ([gpuaug.RandomGrayscale(0.5), gpuaug.RandomSolarize(100, 0.5), gpuaug.RandomPosterize(3, 0.5),
                          gpuaug.RandomInvert(0.5), gpuaug.RandomRotation((-10, 40), center=(3, 4), fill=7)],
                         "uint8"),
        "float_sem": ([gpuaug.ToDtype("float32", scale=True), gpuaug.RandomGrayscale(0.5), gpuaug.RandomGrayscale(0.5),
                       gpuaug.ColorJitter(0.3, 0.3, 0.3), gpuaug.RandomHorizontalFlip(),
                       gpuaug.Normalize(0.5, 0.25, layout="NHWC")], "uint8"),
        "two_stages": ([gpuaug.RandomRotation(10), gpuaug.ColorJitter(contrast=0.5), gpuaug.RandomHorizontalFlip(),
                        gpuaug.ColorJitter(contrast=0.3, saturation=0.2)], "uint8"),
        "float_input": ([gpuaug.RandomAffine(10, scale=(0.9, 1.1)), gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.05),
                         gpuaug.ToDtype("float16")], "float32"),
    }


def _policy_row(host, st, u, h, w, c):
    def nums(text, default):
        return np.array([float(v) for v in text.split()] or [default], np.float64)

    geo, col = np.array(st["geometry"] or [0], np.int32), np.array(st["colour"] or [0], np.int32)
    ga, ca = nums(st["geometry_args"], 0.0), nums(st["colour_args"], 0.0)
    fill, write = nums(st["fill"], 0.0), nums(st["write"], 0.0)
    u = np.ascontiguousarray(np.asarray(u).astype(np.float64))  # float32 (DALI's) draws are exact as doubles
    P = host.policy_width(geo.ctypes.data, len(st["geometry"]), col.ctypes.data, len(st["colour"]),
                          int(st["sem_uint8"]))
    out = np.zeros(P, np.float32)
    rc = host.policy_row(geo.ctypes.data, len(st["geometry"]), ga.ctypes.data, col.ctypes.data, len(st["colour"]),
                         ca.ctypes.data, int(st["bilinear"]), int(st["sem_uint8"]), fill.ctypes.data,
                         len(fill) if st["fill"] else 0, float(st["in_scale"]), write.ctypes.data, u.ctypes.data,
                         h, w, c, out.ctypes.data, P)
    return rc, out


@pytest.mark.parametrize("name", sorted(_policies()))
def test_host_policy_rows_match_the_fused_stage_build(name, host):
    """gpuaug_host.h's policy_row (the native policy's parameter rows, from DALI's uniforms) ==
    gpuaug/policy/_fused.py's build with the parameters the transforms' own rules give for the
    same uniforms (float32, bit for bit), for every stage, channel count and a few image sizes;
    and the output sizes match."""
    import ctypes

    from gpuaug._batch import as_batch
    from gpuaug.dali import _native
    from gpuaug.policy import _fused as F
    from gpuaug.policy.compose import plan_stages

    transforms, dt = _policies()[name]
    pol = gpuaug.Compose(transforms, seed=0, draws="host")
    stages = _native.policy_stages(pol, dt)
    items = plan_stages(pol.transforms, dt)
    assert len(items) == len(stages) and all(k == "fused" for k, _ in items)
    rng = np.random.default_rng(11)
    n = 48
    for c in (1, 3, 4):
        for h, w in ((37, 45), (224, 224), (5, 64)):
            us = [rng.random((n, s["width"])).astype(np.float32) for s in stages]
            sizes = np.tile([h, w], (n, 1))
            try:
                pp = _native.policy_params(pol, stages, us, sizes)
                batch = as_batch(np.zeros((n, h, w, c), np.dtype(dt)))
                built = F.build(items[0][1], pol.transforms, pp.values, batch, "NHWC")
            except ValueError:  # e.g. Normalize's 3 means on 1 channel: the operator refuses too
                rc, _ = _policy_row(host, stages[0], us[0][0], h, w, c)
                assert rc == 3, rc
                continue
            want = built.rows.astype(np.float32)
            for i in range(n):
                rc, got = _policy_row(host, stages[0], us[0][i], h, w, c)
                assert rc == 0, rc
                np.testing.assert_array_equal(got, want[i], err_msg=f"{name} c={c} {h}x{w} sample {i}")
            assert stages[0]["codes"] == list(built.codes)
            geo = np.array(stages[0]["geometry"] or [0], np.int32)
            ga = np.array([float(v) for v in stages[0]["geometry_args"].split()] or [0.0], np.float64)
            oh, ow = ctypes.c_longlong(), ctypes.c_longlong()
            host.policy_out_size(geo.ctypes.data, len(stages[0]["geometry"]), ga.ctypes.data, h, w,
                                 ctypes.byref(oh), ctypes.byref(ow))
            assert (oh.value, ow.value) == tuple(built.shapes[0])


def test_host_policy_row_refuses_a_singular_geometry_and_a_wrong_fill(host):
    from gpuaug.dali import _native

    st = _native.policy_stages(gpuaug.Compose([gpuaug.RandomRotation(10, fill=(1, 2, 3))], draws="host"))[0]
    rc, _ = _policy_row(host, st, [0.5], 8, 8, 4)
    assert rc == 2  # 3 fill values for 4 channels
    aff = _native.policy_stages(gpuaug.Compose([gpuaug.Resize((8, 8)), gpuaug.RandomRotation(5)], draws="host"))[0]
    rc, _ = _policy_row(host, dict(aff, geometry_args="0 0 " + aff["geometry_args"].split(" ", 2)[2]), [0.5], 8, 8, 3)
    assert rc == 1  # a resize to 0 x 0: singular


def _operator_draws(host, state, slots, n, width, calls):
    """(calls, n, width): what gpuaug__Policy draws for ``calls`` batches of ``n`` from
    ``rng_state`` (gpuaug_host.h's Pcg64 and policy_draws)."""
    s, i = (int(v, 16) for v in state.split())
    m = (1 << 64) - 1
    sl = np.ascontiguousarray(list(slots) or [0], np.int32)
    d = np.full((calls, n, max(width, 1)), np.nan)
    host.pcg64_draws(s >> 64, s & m, i >> 64, i & m, sl.ctypes.data, len(slots), n, width, calls, d.ctypes.data)
    return d[..., :width]


def test_host_pcg64_draws_are_numpys_generator(host):
    """gpuaug_host.h's Pcg64 gives numpy.random.default_rng's Generator.random doubles, rows of n
    values dealt to the draw slots row_slots names (-1: consumed, skipped), batch after batch."""
    from gpuaug.dali import _native

    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip()], seed=12345, draws="host")
    state = _native.policy_rng_state(pol)
    ref = np.random.default_rng(12345)
    n = 5
    got = _operator_draws(host, state, [-1, 2, 0], n, 3, 3)
    for c in range(3):
        rows = ref.random((3, n))
        np.testing.assert_array_equal(got[c][:, 2], rows[1])
        np.testing.assert_array_equal(got[c][:, 0], rows[2])
        np.testing.assert_array_equal(got[c][:, 1], np.zeros(n))  # no row fills it
    # the policy's own generator was only read
    assert _native.policy_rng_state(pol) == state


@pytest.mark.parametrize("name", sorted(_policies()))
def test_host_native_policy_rows_follow_the_policys_own_draws(name, host):
    """The operator's host side with the policy's own seed (rng_state, row_slots, Pcg64,
    policy_row) gives, batch after batch and stage by stage, the parameter rows gpuaug's fused
    stage builds (gpuaug/policy/_fused.py's build) from what the policy's own calls draw (a
    Compose of the same seed): so native gd.policy gives what gd.policy's python_function path
    and policy(x) give."""
    from gpuaug._batch import as_batch
    from gpuaug.dali import _native
    from gpuaug.policy import _fused as F
    from gpuaug.policy.compose import plan_stages

    transforms, dt = _policies()[name]
    pol = gpuaug.Compose(transforms, seed=7, draws="host")
    stages = _native.policy_stages(pol, dt)
    state = _native.policy_rng_state(pol)
    _native.check_policy_draws(pol, stages, state)  # the definition-time check passes
    ref = gpuaug.Compose(transforms, seed=7, draws="host")
    items = [spec for _, spec in plan_stages(pol.transforms, dt)]
    n, calls, c = 6, 3, 3
    for h, w in ((37, 45), (64, 48)):
        draws = [_operator_draws(host, state, st["row_slots"], n, st["width"], calls) for st in stages]
        for call in range(calls):
            pp = ref.sample(np.tile([h, w], (n, 1)))
            hw = (h, w)
            for k, (st, spec) in enumerate(zip(stages, items)):
                batch = as_batch(np.zeros((n,) + hw + (c,), np.dtype(st["input_dtype"])))
                built = F.build(spec, pol.transforms, pp.values, batch, "NHWC")
                want = built.rows.astype(np.float32)
                for i in range(n):
                    rc, got = _policy_row(host, st, draws[k][call][i], hw[0], hw[1], c)
                    assert rc == 0, rc
                    np.testing.assert_array_equal(got, want[i], err_msg=f"{name} {h}x{w} call {call} stage {k} "
                                                                        f"sample {i}")
                hw = tuple(built.shapes[0])
        state = _native.policy_rng_state(pol)  # unchanged: the next size starts from the seed again
        ref = gpuaug.Compose(transforms, seed=7, draws="host")


def test_policy_draw_check_refuses_what_the_operator_cannot_replay():
    """No PCG64 generator, or a transform that samples other than its class says: Unsupported
    (gd.policy then keeps python_function), naming why."""
    from gpuaug.dali import _native
    from gpuaug.policy import transforms as TF

    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip()], seed=np.random.Generator(np.random.Philox(1)), draws="host")
    with pytest.raises(_native.Unsupported, match="PCG64"):
        _native.policy_rng_state(pol)
    with pytest.raises(_native.Unsupported, match="draws='device'"):  # Philox draws on the device
        _native.policy_rng_state(gpuaug.Compose([gpuaug.RandomHorizontalFlip()], seed=1, draws="device"))
    # "auto" (the default) draws on the host outside eager CUDA calls: the operator replays its generator
    assert (_native.policy_rng_state(gpuaug.Compose([gpuaug.RandomHorizontalFlip()], seed=1))
            == _native.policy_rng_state(gpuaug.Compose([gpuaug.RandomHorizontalFlip()], seed=1, draws="host")))

    class TwoRowFlip(TF.RandomHorizontalFlip):
        def sample(self, rng, n, sizes):
            rng.random(n)
            return {"apply": rng.random(n) < self.p}

    pol = gpuaug.Compose([TwoRowFlip(), gpuaug.RandomRotation(10)], seed=3, draws="host")
    stages = _native.policy_stages(pol)
    with pytest.raises(_native.Unsupported, match="would not draw what"):
        _native.check_policy_draws(pol, stages, _native.policy_rng_state(pol))


def test_policy_stages_plan_and_refusals():
    from gpuaug.dali import _native

    st = _native.policy_stages(gpuaug.Compose(_policies()["bench"][0], draws="host"))
    assert len(st) == 1 and st[0]["width"] == 7 and st[0]["sum_kind"] == "gray"
    assert st[0]["out_dtype"] == "float32" and st[0]["out_layout"] == "CHW" and st[0]["border"] == 0
    assert len(_native.policy_stages(gpuaug.Compose(_policies()["two_stages"][0], draws="host"))) == 2
    assert _native.policy_stages(gpuaug.Compose(_policies()["float_input"][0], draws="host"), "float32")[0]["sum_kind"] == "gray"
    for ts, why in (([gpuaug.GaussianBlur(3)], "own gpuaug op"),
                    ([gpuaug.RandomPerspective()], "RandomPerspective has no native form"),
                    ([gpuaug.RandomChannelPermutation()], "RandomChannelPermutation has no native form"),
                    ([gpuaug.Normalize(0.5, 0.2), gpuaug.RandomHorizontalFlip()], "writes CHW")):
        with pytest.raises(_native.Unsupported, match=why):
            _native.policy_stages(gpuaug.Compose(ts, draws="host"))
    with pytest.raises(_native.Unsupported, match="only a gpuaug.Compose"):
        _native.policy_stages(lambda x, **k: x)


def _policy_kernel_names(st, dtype, c):
    """The NVRTC name expressions gpuaug__Policy asks for (as gpuaug_dali.cc builds them)."""
    ct = {"uint8": "unsigned char", "float16": "gpuaug::half", "float32": "float"}
    t, o, semi = ct[dtype], ct[st["out_dtype"]], "true" if st["sem_uint8"] else "false"
    prog = sum(k << (4 * i) for i, k in enumerate(st["codes"]))
    mid = f"{c}, {o}, {semi}, {st['geo_kind']}, {st['border']}, "
    names = [f"gpuaug_fused<{t}, {mid}{'true' if st['pre'] else 'false'}, {prog}ull>"]
    if not st["pre"]:
        names.append(f"gpuaug_fused_dense<{t}, {mid}{prog}ull, {'true' if st['out_layout'] == 'CHW' else 'false'}>")
    if st["sum_kind"] == "gray":
        names += [f"gpuaug_gray_sum{p}<{t}, {c}, 1>" for p in ("", "_packed")]
    elif st["sum_kind"] == "fused":
        names.append(f"gpuaug_fused_sum<{t}, {c}, {semi}, {st['sum_prog']}ull>")
    return names


def test_policy_kernels_compile_with_nvrtc():
    """fused.cu, as the operator carries it, compiles for every instance the test policies ask for."""
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy's NVRTC bindings are not installed")
    from gpuaug.dali import _native

    src = _native.kernel_source("fused.cu")
    assert '#include "' not in src
    names = []
    for transforms, dt in _policies().values():
        d = dt
        for st in _native.policy_stages(gpuaug.Compose(transforms, draws="host"), dt):
            names += [nm for c in (1, 3, 4) for nm in _policy_kernel_names(st, d, c)]
            d = st["out_dtype"]
    try:
        prog = nvrtc.createProgram(src, "fused.cu", [], [])
    except Exception as e:  # noqa: BLE001 - no libnvrtc here
        pytest.skip(f"NVRTC unavailable: {e}")
    try:
        for ne in names:
            nvrtc.addNameExpression(prog, ne)
        try:
            nvrtc.compileProgram(prog, ["-std=c++17", "-arch=compute_90"])
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"NVRTC failed on fused.cu: {e}\n{nvrtc.getProgramLog(prog)}")
        for ne in names:
            assert nvrtc.getLoweredName(prog, ne), f"{ne} not instantiated"
    finally:
        nvrtc.destroyProgram(prog)


def test_gd_policy_defines_a_native_graph_and_falls_back(plugin, monkeypatch):
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    from gpuaug.dali import _native

    def names(transforms, seed=None, **kw):
        @pipeline_def(batch_size=N, num_threads=1, device_id=0)
        def pipe():
            x = fn.external_source(name="x", device="gpu", layout="HWC")
            return gd.policy(x, gpuaug.Compose(transforms, seed=seed, draws="host"), **kw)
        return _schema_names(pipe())

    for kw in ({}, {"backend": "native"}):  # native by default
        got = names(_policies()["bench"][0], **kw)
        assert got.count("gpuaug__Policy") == 1 and not any("PythonFunction" in n for n in got), got
        assert not any("Uniform" in n for n in got), got  # the policy's own draws: no DALI random operator
    assert names(_policies()["two_stages"][0]).count("gpuaug__Policy") == 2
    got = names(_policies()["bench"][0], draws="dali")
    assert got.count("gpuaug__Policy") == 1 and any("Uniform" in n for n in got), got
    got = names(_policies()["bench"][0], backend="cuda")
    assert "gpuaug__Policy" not in got and any("PythonFunction" in n for n in got), got
    with pytest.raises(ValueError, match=r"policy: draws: got 'numpy'"):
        names(_policies()["bench"][0], draws="numpy")
    # a policy whose generator the operator cannot replay keeps python_function
    philox = np.random.Generator(np.random.Philox(1))
    got = names([gpuaug.RandomHorizontalFlip()], seed=philox)
    assert "gpuaug__Policy" not in got and any("PythonFunction" in n for n in got), got
    with pytest.raises(RuntimeError, match=r"policy.*backend='native'.*PCG64"):
        names([gpuaug.RandomHorizontalFlip()], seed=philox, backend="native")
    assert names([gpuaug.RandomHorizontalFlip()], seed=philox, draws="dali").count("gpuaug__Policy") == 1
    monkeypatch.setenv("GPUAUG_DALI_NATIVE", "0")
    got = names(_policies()["bench"][0])
    assert "gpuaug__Policy" not in got and any("PythonFunction" in n for n in got), got
    monkeypatch.delenv("GPUAUG_DALI_NATIVE")
    got = names([gpuaug.RandomHorizontalFlip(), gpuaug.GaussianBlur(3)])
    assert "gpuaug__Policy" not in got and any("PythonFunction" in n for n in got), got
    with pytest.raises(RuntimeError, match=r"policy.*backend='native'.*GaussianBlur runs as its own gpuaug op"):
        names([gpuaug.GaussianBlur(3)], backend="native")
    with pytest.raises(RuntimeError, match=r"policy.*backend='native'.*HWC"):
        names(_policies()["bench"][0], backend="native", layout="CHW")
    from nvidia.dali import backend as dbackend

    schema = dbackend.GetSchema("gpuaug__Policy")
    for arg in ("draws", "rng_state", "row_slots", "geometry", "colour", "codes", "write", "input_dtype"):
        assert schema.HasArgument(arg), arg
    assert "RandomRotation" in _native.NATIVE_TRANSFORMS


@pytest.mark.gpu
@pytest.mark.dali
@pytest.mark.parametrize("name,c", [(nm, 3) for nm in sorted(_policies())]
                         + [(nm, c) for nm in ("affine", "float_sem") for c in (1, 4)])
@pytest.mark.parametrize("varshape", [False, True], ids=["dense", "varshape"])
def test_native_policy_bit_exact_against_replay(name, varshape, c, plugin):
    """gd.policy natively with given uniforms == the policy replayed (gpuaug's own fused
    kernels, backend cuda) with the parameters those uniforms give."""
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import cupy as cp
    from nvidia.dali import fn

    from gpuaug.dali import _native

    transforms, dt = _policies()[name]
    pol = gpuaug.Compose(transforms, seed=0, draws="host")
    stages = _native.policy_stages(pol, dt)
    imgs = _images(dt, varshape, c, seed=5)
    sizes = np.array([a.shape[:2] for a in imgs])
    rng = np.random.default_rng(3)
    us = [rng.random((N, s["width"])).astype(np.float32) for s in stages]
    try:
        pp = _native.policy_params(pol, stages, us, sizes)
        x = cp.asarray(np.stack(imgs)) if not varshape else [cp.asarray(a) for a in imgs]
        ref = pol.replay(x, pp, backend="cuda")
    except ValueError as e:
        pytest.skip(f"the policy refuses {c} channels: {e}")
    want = [cp.asnumpy(a) for a in ref] if isinstance(ref, list) else list(cp.asnumpy(ref))

    def graph():
        x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
        # (a lambda with a defaulted argument would be called with DALI's iteration index)
        nodes = [fn.external_source(source=(lambda v: (lambda: list(v)))(u), batch=True) for u in us]
        return _native.policy_node(x, pol, input_dtype=dt, forced=True, uniforms=nodes)

    (got,), _ = _run(graph)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (i, g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=f"{name} sample {i}")


@pytest.mark.gpu
@pytest.mark.dali
@pytest.mark.parametrize("name", sorted(_policies()))
@pytest.mark.parametrize("varshape", [False, True], ids=["dense", "varshape"])
def test_native_policy_equals_the_policys_own_calls(name, varshape, plugin):
    """gd.policy natively (default draws: the policy's own generator) gives, batch after batch,
    bit for bit what the policy's own calls give on the same batches (a Compose of the same
    seed, backend cuda): every stage, dense and varshape."""
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import cupy as cp
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    transforms, dt = _policies()[name]
    imgs = _images(dt, varshape, 3, seed=5)

    @pipeline_def(batch_size=N, num_threads=2, device_id=0, prefetch_queue_depth=1)
    def pipe():
        x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
        return gd.policy(x, gpuaug.Compose(transforms, seed=4, draws="host"), backend="native", input_dtype=dt)

    p = pipe()
    assert "gpuaug__Policy" in _schema_names(p)
    p.build()
    ref = gpuaug.Compose(transforms, seed=4, draws="host")
    for it in range(3):
        (out,) = p.run()
        got = [np.array(t) for t in out.as_cpu()]
        x = cp.asarray(np.stack(imgs)) if not varshape else [cp.asarray(a) for a in imgs]
        r = ref(x, backend="cuda")
        want = [cp.asnumpy(a) for a in r] if isinstance(r, list) else list(cp.asnumpy(r))
        for i, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape and g.dtype == w.dtype, (it, i, g.shape, w.shape, g.dtype, w.dtype)
            np.testing.assert_array_equal(g, w, err_msg=f"{name} batch {it} sample {i}")


@pytest.mark.gpu
@pytest.mark.dali
@pytest.mark.parametrize("varshape", [False, True], ids=["dense", "varshape"])
def test_native_chain_equals_the_ops_one_by_one(varshape, plugin, tmp_path):
    """gd.compose(native_chain=True): ONE gpuaug__Chain per run of native ops gives bit for bit
    what the same compose gives with one gpuaug__Kernel per op (which the other tests check
    against the standalone ops), batch after batch, through a size change, a grayscale mean,
    a warp and a CHW float write; and it serializes (fresh process, same output)."""
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    imgs = _images("uint8", varshape, 3, seed=8)

    def items():
        return [("flip", {"horizontal": fn.random.coin_flip(seed=1)}),
                ("rotate", {"angle": fn.random.uniform(range=(-20, 20), seed=2)}),
                ("resize", {"size": (29, 31)}),
                ("color_jitter", {"brightness": fn.random.uniform(range=(0.7, 1.3), seed=3),
                                  "contrast": fn.random.uniform(range=(0.7, 1.3), seed=4)}),
                ("invert", {}),
                ("crop_mirror_normalize", {"mean": [120.0, 115.0, 100.0], "std": [60.0, 58.0, 57.0],
                                           "output_layout": "CHW"})]

    def make(chain):
        @pipeline_def(batch_size=N, num_threads=2, device_id=0, prefetch_queue_depth=1, seed=5)
        def pipe():
            x = fn.external_source(name="x", device="gpu", layout="HWC")
            return gd.compose(items(), native_chain=chain)(x)
        return pipe()

    a, b = make(True), make(False)
    names_a, names_b = _schema_names(a), _schema_names(b)
    assert names_a.count("gpuaug__Chain") == 1 and "gpuaug__Kernel" not in names_a, names_a
    assert names_b.count("gpuaug__Kernel") == 6, names_b
    for p in (a, b):
        p.build()
    for it in range(3):
        outs = []
        for p in (a, b):
            p.feed_input("x", imgs, layout="HWC")
            (o,) = p.run()
            outs.append([np.array(t) for t in o.as_cpu()])
        for i, (g, w) in enumerate(zip(*outs)):
            assert g.shape == w.shape == (3, 29, 31) and g.dtype == w.dtype == np.float32
            np.testing.assert_array_equal(g, w, err_msg=f"batch {it} sample {i}")
    # serialized: a fresh process gives the same first batch
    c = make(True)
    c.build()
    c.feed_input("x", imgs, layout="HWC")
    (o,) = c.run()
    want = np.stack([np.array(t) for t in o.as_cpu()])
    (tmp_path / "pipe.bin").write_bytes(c.serialize())
    np.save(tmp_path / "want.npy", want)
    np.savez(tmp_path / "x.npz", *imgs)  # one array per image (an object array of equal shapes is 4-D)
    script = textwrap.dedent(f"""
        import numpy as np, nvidia.dali.plugin_manager as pm
        from nvidia.dali import Pipeline
        pm.load_library({plugin!r})
        p = Pipeline.deserialize(serialized_pipeline=open({str(tmp_path / 'pipe.bin')!r}, 'rb').read())
        p.build()
        z = np.load({str(tmp_path / 'x.npz')!r})
        p.feed_input("x", [z[f"arr_{{i}}"] for i in range(len(z.files))], layout="HWC")
        (out,) = p.run()
        got = np.stack([np.array(t) for t in out.as_cpu()])
        assert np.array_equal(got, np.load({str(tmp_path / 'want.npy')!r})), "differs"
        print("ROUNDTRIP OK")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ),
                       timeout=300)
    assert "ROUNDTRIP OK" in r.stdout, r.stdout + r.stderr


@pytest.mark.gpu
@pytest.mark.dali
def test_native_policy_draws_follow_the_transforms(plugin):
    """With DALI's own uniforms (draws="dali"): flips about half the time, outputs of the planned
    dtype and layout, and two pipelines of one seed agree."""
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    imgs = _images("uint8", False, 3, seed=9)
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.ToDtype("float32", scale=True)], draws="host")

    def make():
        @pipeline_def(batch_size=N, num_threads=2, device_id=0, seed=21, prefetch_queue_depth=1)
        def pipe():
            x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
            return gd.policy(x, pol, backend="native", draws="dali")
        p = pipe()
        p.build()
        return p

    p, q = make(), make()
    runs = []
    flips = 0
    for _ in range(8):
        (o,) = p.run()
        (o2,) = q.run()
        a = [np.array(t) for t in o.as_cpu()]
        b = [np.array(t) for t in o2.as_cpu()]
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
        for img, out in zip(imgs, a):
            assert out.dtype == np.float32 and out.shape == img.shape
            plain, mirrored = np.allclose(out * 255, img), np.allclose(out * 255, img[:, ::-1])
            assert plain or mirrored
            flips += mirrored and not plain
        runs.append(a)
    assert 0.2 * 8 * N < flips < 0.8 * 8 * N, flips


@pytest.mark.gpu
@pytest.mark.dali
def test_native_policy_serialize_and_bad_dtype(plugin, tmp_path):
    """A native gd.policy pipeline serializes and runs deserialized in a fresh process with the
    same outputs; images of another dtype than input_dtype give a DALI error naming it, and the
    process stays usable."""
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import gpuaug.dali as gd
    from nvidia.dali import fn, pipeline_def

    imgs = _images("uint8", False, 3)
    np.save(tmp_path / "x.npy", np.stack(imgs))
    pol = gpuaug.Compose(_policies()["bench"][0], draws="host")

    @pipeline_def(batch_size=N, num_threads=2, device_id=0, seed=7)
    def pipe():
        x = fn.external_source(name="x", device="gpu", layout="HWC")
        return gd.policy(x, pol, backend="native")

    p = pipe()
    assert "gpuaug__Policy" in _schema_names(p)
    p.build()
    p.feed_input("x", np.stack(imgs), layout="HWC")
    (out,) = p.run()
    want = np.stack([np.array(t) for t in out.as_cpu()])
    (tmp_path / "pipe.bin").write_bytes(p.serialize())
    np.save(tmp_path / "want.npy", want)
    script = textwrap.dedent(f"""
        import numpy as np, nvidia.dali.plugin_manager as pm
        from nvidia.dali import Pipeline
        pm.load_library({plugin!r})
        p = Pipeline.deserialize(serialized_pipeline=open({str(tmp_path / 'pipe.bin')!r}, 'rb').read())
        p.build()
        p.feed_input("x", np.load({str(tmp_path / 'x.npy')!r}), layout="HWC")
        (out,) = p.run()
        got = np.stack([np.array(t) for t in out.as_cpu()])
        want = np.load({str(tmp_path / 'want.npy')!r})
        assert np.array_equal(got, want), int((got != want).sum())
        print("ROUNDTRIP OK")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ),
                       timeout=300)
    assert "ROUNDTRIP OK" in r.stdout, r.stdout + r.stderr

    floats = [a.astype(np.float32) / 255 for a in imgs]

    def graph():
        x = fn.external_source(source=lambda: floats, batch=True, device="gpu", layout="HWC")
        return gd.policy(x, pol, backend="native")

    with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.policy: argument 'input_dtype': got 'uint8' but the "
                                            r"images are float32"):
        _run(graph)

    def graph2():
        x = fn.external_source(source=lambda: floats, batch=True, device="gpu", layout="HWC")
        return gd.policy(x, pol, backend="native", input_dtype="float32")

    (got,), _ = _run(graph2)
    assert got[0].shape == (3, H, W) and got[0].dtype == np.float32


@pytest.mark.gpu
@pytest.mark.dali
def test_cat_and_direct_parameter_forms_agree(plugin, monkeypatch):
    """GPUAUG_DALI_NATIVE_ARGS=cat (the graph concatenates the rows) and the default direct form
    (the operator does) give the same outputs, and both name a wrong-shaped parameter."""
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import gpuaug.dali as gd
    from nvidia.dali import fn

    imgs = _images("uint8", True, 3)
    rng = np.random.default_rng(4)
    angle = [np.float32(a) for a in rng.uniform(-30, 30, N)]
    center = [rng.uniform(5, 20, 2).astype(np.float32) for _ in range(N)]
    flips = [np.int32(v) for v in rng.integers(0, 2, N)]
    bright = [np.float64(v) for v in rng.uniform(0.5, 1.5, N)]

    def graph():
        x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
        a = fn.external_source(source=lambda: angle, batch=True)
        c = fn.external_source(source=lambda: center, batch=True)
        f = fn.external_source(source=lambda: flips, batch=True)
        b = fn.external_source(source=lambda: bright, batch=True)
        x = gd.flip(x, horizontal=f, vertical=False, backend="native")
        x = gd.rotate(x, angle=a, center=c, border="replicate", backend="native")
        x = gd.rot90(x, k=fn.cast(f, dtype=dali.types.INT32) * 2 - 1, backend="native")
        return gd.color_jitter(x, brightness=b, contrast=1.3, saturation=b, backend="native")

    outs = {}
    for mode in ("cat", "direct"):
        monkeypatch.setenv("GPUAUG_DALI_NATIVE_ARGS", mode)
        (outs[mode],), _ = _run(graph)
    assert len(outs["cat"]) == N
    for g, w in zip(outs["direct"], outs["cat"]):
        np.testing.assert_array_equal(g, w)
    bad = [rng.uniform(5, 20, 3).astype(np.float32) for _ in range(N)]
    for mode in ("cat", "direct"):
        monkeypatch.setenv("GPUAUG_DALI_NATIVE_ARGS", mode)

        def graph_bad():
            x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="HWC")
            c = fn.external_source(source=lambda: bad, batch=True)
            return gd.rotate(x, angle=5.0, center=c, backend="native")

        with pytest.raises(RuntimeError, match=r"gpuaug\.dali\.rotate: argument 'center': sample 0 has shape \(3,\)"):
            _run(graph_bad)


@pytest.mark.gpu
@pytest.mark.dali
@pytest.mark.parametrize("op", _native_ops())
def test_native_op_chw_bit_exact_against_standalone_nchw(op, plugin):
    """layout="CHW" runs natively (descriptor tables with CHW strides) and equals the standalone
    op on the NCHW batch, with per-sample DataNode parameters (gaussian_blur: a constant sigma)."""
    if not _gpu_ready():
        pytest.skip("needs a CUDA GPU")
    import cupy as cp
    import gpuaug.dali as gd
    from nvidia.dali import fn

    spec = gpuaug.registry[op]
    c = 3 if 3 in spec.channels else spec.channels[-1]
    imgs = [np.ascontiguousarray(a.transpose(2, 0, 1)) for a in _images("uint8", False, c)]
    per = _per_sample(op)
    host = per.pop("__host__", {})
    if op == "gaussian_blur":
        host["sigma"] = 1.5
        per.pop("sigma")
    flags = {p.name for p in spec.params if p.kind == "bool"}
    ref_kw = {k: (v.astype(bool) if k in flags else v.astype(np.int64 if v.dtype == np.int32 else np.float64))
              for k, v in per.items()}
    ref_kw.update(host)

    def graph():
        x = fn.external_source(source=lambda: imgs, batch=True, device="gpu", layout="CHW")
        nodes = {k: fn.external_source(source=_const([v[i] for i in range(N)]), batch=True) for k, v in per.items()}
        return getattr(gd, op)(x, **host, **nodes, layout="CHW", backend="native")

    (got,), _ = _run(graph)
    ref = getattr(gpuaug, op)(cp.asarray(np.stack(imgs)), **ref_kw, layout="NCHW")
    ref = [cp.asnumpy(a) for a in ref] if isinstance(ref, list) else list(cp.asnumpy(ref))
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape and g.dtype == r.dtype, f"{op} sample {i}: {g.shape} {g.dtype} vs {r.shape} {r.dtype}"
        np.testing.assert_array_equal(g, r, err_msg=f"{op} CHW sample {i}")
