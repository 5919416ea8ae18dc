"""gpuaug bench / gpuaug info on the CPU: the whole path end to end on a tiny batch, the JSON
schema, the figures' consistency, the plot, peers that are missing or failing, the GPU event
clock against a simulated device, and the peers' pure-Python parts.

The GPU path itself runs on the GPU machine (tests/gpu/bench_all.sh, bench/).
"""
from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import gpuaug
from gpuaug import bench, bench_peers as bp
from gpuaug.cli import main

HAS_MPL = importlib.util.find_spec("matplotlib") is not None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _shape_changing_op():
    """A registered op whose output is smaller than its input, if there is one (crop-like)."""
    for name in ("crop", "center_crop", "resize"):
        if name in gpuaug.registry:
            return name
    return None


def _ops():
    extra = _shape_changing_op()
    return ["flip"] + ([extra] if extra else [])


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """One CLI run on the CPU (tiny batch), shared by the tests that read its outputs."""
    d = tmp_path_factory.mktemp("bench")
    argv = ["bench", *_ops(), "--device", "cpu", "--batch", "3", "--size", "13x21", "--repeat", "4",
            "--warmup", "1", "--json", str(d / "{date}-{gpu}-{case}.json"), "--plot", str(d / "plot.png"),
            "--quiet"]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    files = sorted(p for p in os.listdir(d) if p.endswith(".json"))
    assert len(files) == 1, files
    with open(d / files[0]) as f:
        doc = json.load(f)
    return {"rc": rc, "stdout": out.getvalue(), "doc": doc, "dir": d, "json": d / files[0]}


# ----------------------------------------------------------------------------- CLI end to end
def test_cli_bench_cpu_runs_end_to_end(cpu_run):
    assert cpu_run["rc"] == 0, cpu_run["stdout"]
    doc = cpu_run["doc"]
    assert doc["schema"] == bench.SCHEMA_ID
    assert doc["config"]["device"] == "cpu" and doc["config"]["batch"] == 3
    assert doc["config"]["ops"] == _ops()
    assert "3x13x21x3-uint8-NHWC" in cpu_run["json"].name
    rows = [r for r in doc["rows"] if r["library"] == "gpuaug"]
    assert [r["op"] for r in rows] == _ops()
    for r in rows:
        assert r["status"] == "ok", r
        assert r["variant"] == "cpu" and r["timing"] == "wall" and r["samples"] == 4
    out = cpu_run["stdout"]
    assert "GB/s" in out and "%copy" in out and "flip" in out and "wrote" in out


def test_figures_are_consistent(cpu_run):
    """GB/s = bytes / time, images/s = N / time, % of copy = GB/s / the same-size copy's GB/s,
    and the bytes are the input read once plus the output written once."""
    doc = cpu_run["doc"]
    assert bench.validate(doc) == []
    n, h, w, c = 3, 13, 21, 3
    copies = {cc["bytes"]: cc for cc in doc["ceilings"]["copy_same_size"]}
    for r in doc["rows"]:
        if r["status"] != "ok":
            continue
        moved = r["bytes_read"] + r["bytes_written"]
        assert r["ms"] > 0 and r["ms_p10"] <= r["ms"] <= r["ms_p90"]
        assert math.isclose(r["gbps"], moved / (r["ms"] * 1e-3) / 1e9, rel_tol=1e-9)
        assert math.isclose(r["images_per_s"], n / (r["ms"] * 1e-3), rel_tol=1e-9)
        assert math.isclose(r["pct_of_copy"], 100 * r["gbps"] / r["copy_gbps"], rel_tol=1e-9)
        same = copies[moved - moved % 2]
        assert math.isclose(same["gbps"], r["copy_gbps"], rel_tol=1e-12)
        assert math.isclose(same["gbps"], same["bytes"] / same["ms"] / 1e6, rel_tol=1e-9)
        out_b = int(np.prod(r["out_shape"])) * np.dtype(r["out_dtype"]).itemsize
        assert r["bytes_written"] == out_b
        if r["op"] == "flip":
            assert r["bytes_read"] == n * h * w * c == r["bytes_written"]
        else:  # a shape-changing op that shrinks reads only its share of the input
            assert r["bytes_read"] == (n * h * w * c) * int(np.prod(r["out_shape"])) // (n * h * w * c) \
                or r["bytes_read"] <= n * h * w * c
    big = doc["ceilings"]["copy_large"]
    assert big and big["gbps"] > 0 and doc["ceilings"]["h2d_pinned"] is None


def test_json_matches_schema_and_bad_documents_fail(cpu_run):
    doc = cpu_run["doc"]
    assert bench.schema_errors(doc) == []
    bad = copy.deepcopy(doc)
    del bad["rows"][0]["gbps"]
    assert any("missing 'gbps'" in e for e in bench.validate(bad))
    bad = copy.deepcopy(doc)
    bad["rows"][0]["status"] = "fine"
    assert any("is not one of" in e for e in bench.validate(bad))
    bad = copy.deepcopy(doc)
    bad["rows"][0]["gbps"] *= 2
    assert any("bytes/time" in e for e in bench.validate(bad))
    bad = copy.deepcopy(doc)
    bad["rows"][0]["surprise"] = 1
    assert any("unexpected key" in e for e in bench.validate(bad))
    bad = copy.deepcopy(doc)
    bad["config"]["batch"] = "3"
    assert bench.validate(bad)
    bad = copy.deepcopy(doc)
    bad["rows"][0].update(status="error", reason=None)
    assert any("without a reason" in e or "has a time" in e for e in bench.validate(bad))


def test_schema_is_json_schema_and_serialisable():
    text = json.dumps(bench.SCHEMA)
    assert '"$schema"' in text and bench.SCHEMA["$id"] == bench.SCHEMA_ID
    assert set(bench.SCHEMA["properties"]["rows"]["items"]["properties"]["status"]["enum"]) == set(bench.STATUSES)


@pytest.mark.skipif(not HAS_MPL, reason="matplotlib is not installed (pip install matplotlib)")
def test_plot_written(cpu_run):
    p = cpu_run["dir"] / "plot.png"
    assert p.exists() and p.stat().st_size > 1000
    with open(p, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_so(monkeypatch, cpu_run, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert bench.plot(cpu_run["doc"], str(tmp_path / "x.png")) is None
    assert not (tmp_path / "x.png").exists()


def test_cli_as_a_subprocess_with_several_cases(tmp_path):
    """`python -m gpuaug.cli bench --case ... --case ...`: one JSON per case."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "gpuaug.cli", "bench", "flip", "--device", "cpu", "--case", "2x9x11",
           "--case", "1x8x16", "--repeat", "2", "--warmup", "1", "--json", str(tmp_path / "r.json")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    names = sorted(os.listdir(tmp_path))
    assert names == ["r-1x8x16x3-uint8-NHWC.json", "r-2x9x11x3-uint8-NHWC.json"], names
    for nm in names:
        with open(tmp_path / nm) as f:
            assert bench.validate(json.load(f)) == []
    assert "[" in res.stderr  # the progress bar (or tqdm's) went to stderr


def test_merge_op_subsets(tmp_path, capsys):
    """Two runs of one case on different op subsets merge into one valid document."""
    docs = []
    for i, ops in enumerate((("flip",), ("flip", _shape_changing_op() or "flip"))):
        doc = bench.run(bench.Config(ops=ops, device="cpu", batch=2, height=8, width=10, repeat=2,
                                     warmup=1, progress=False))
        path = tmp_path / f"part{i}.json"
        bench.write_json(doc, str(path))
        docs.append(str(path))
    assert main(["bench", "--merge", *docs, "--json", str(tmp_path / "m.json")]) == 0
    with open(tmp_path / "m.json") as f:
        m = json.load(f)
    assert bench.validate(m) == [] and len(m["merged_from"]) == 2
    assert m["config"]["ops"] == list(dict.fromkeys(["flip", _shape_changing_op() or "flip"]))
    assert len([r for r in m["rows"] if r["op"] == "flip"]) == 1  # the later run's row replaced it
    assert "wrote" in capsys.readouterr().out


def test_cli_rejects_bad_arguments(capsys):
    assert main(["bench", "no_such_op", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "no_such_op" in err and "flip" in err  # names the op and what is known
    with pytest.raises(SystemExit):
        main(["bench", "--size", "224by224", "--device", "cpu"])
    with pytest.raises(SystemExit):
        main(["bench", "--case", "224x224", "--device", "cpu"])
    assert main([]) == 2


def test_gpu_asked_without_gpu_says_why():
    ok, why = bench.gpu_status()
    if ok:
        pytest.skip("this machine has a GPU")
    with pytest.raises(SystemExit, match="--device gpu was asked for"):
        main(["bench", "flip", "--device", "gpu"])


def test_without_a_gpu_bench_defaults_to_the_cpu(capsys):
    ok, _ = bench.gpu_status()
    if ok:
        pytest.skip("this machine has a GPU")
    assert main(["bench", "flip", "--batch", "2", "--size", "8x8", "--repeat", "2", "--quiet"]) == 0
    cap = capsys.readouterr()
    assert "timing the CPU twins" in cap.err and "2x8x8x3-uint8-NHWC" in cap.out


def test_unsupported_dtype_or_backend_rows_say_so():
    cfg = bench.Config(ops=("flip",), device="cpu", batch=2, height=8, width=8, repeat=2, warmup=1,
                       backends=("cpu", "cuda"), progress=False)
    doc = bench.run(cfg)
    rows = {r["variant"]: r for r in doc["rows"]}
    assert rows["cpu"]["status"] == "ok"
    assert rows["cuda"]["status"] == "needs GPU" and "GPU" in rows["cuda"]["reason"]
    assert bench.validate(doc) == []


# ----------------------------------------------------------------------------- peers in the run
def test_missing_and_failing_peers_make_rows_not_failures(monkeypatch):
    def boom(batch, kw):
        raise RuntimeError("the peer fell over")

    def unsupported(batch, kw):
        raise bp.Unsupported("no such thing here")

    table = {"torchvision": bp.PEERS.get("flip", {}).get("torchvision", boom), "kornia": boom,
             "cvcuda": unsupported, "torch": lambda b, kw: bp.cycle(b.arrays, lambda x: x[:, ::-1].copy())}
    monkeypatch.setitem(bp.PEERS, "flip", table)
    monkeypatch.setitem(bp.LIBRARIES, "torchvision", (("gpuaug_no_such_module_xyz",), "nothing"))
    monkeypatch.setitem(bp.LIBRARIES, "kornia", (("numpy",), "numpy"))
    monkeypatch.setitem(bp.LIBRARIES, "cvcuda", (("numpy",), "numpy"))
    monkeypatch.setitem(bp.LIBRARIES, "torch", (("numpy",), "numpy"))
    cfg = bench.Config(ops=("flip",), device="cpu", batch=2, height=8, width=10, repeat=3, warmup=1,
                       peers=True, progress=False)
    doc = bench.run(cfg)
    rows = {r["library"]: r for r in doc["rows"]}
    assert rows["torchvision"]["status"] == "not installed"
    assert "gpuaug_no_such_module_xyz" in rows["torchvision"]["reason"]
    assert rows["kornia"]["status"] == "error" and "fell over" in rows["kornia"]["reason"]
    assert rows["cvcuda"]["status"] == "unsupported" and rows["cvcuda"]["reason"] == "no such thing here"
    assert rows["torch"]["status"] == "ok" and rows["torch"]["speedup"] > 0
    assert math.isclose(rows["torch"]["speedup"], rows["torch"]["ms"] / rows["gpuaug"]["ms"])
    s = doc["summary"][0]
    assert s["fastest_peer"].startswith("torch") and s["speedup_over_fastest_peer"] > 0
    assert bench.validate(doc) == []
    assert "NOT INSTALLED" in bench.format_table(doc)


def test_real_missing_libraries_are_reported(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] in ("torch", "torchvision", "kornia")
                        else real(name, *a))
    assert "torch" in bp.missing("torchvision") and "install" in bp.missing("kornia")
    assert bp.missing("no-such-library").startswith("unknown library")


@pytest.mark.parametrize("op", sorted(gpuaug.registry))
def test_cpu_peers_accept_the_ops_example_arguments(op):
    """Every peer that can run here (CPU: DALI CPU pipelines, torch on the CPU) takes the op's
    own example arguments and runs; GPU-only peers say "needs GPU"."""
    spec = gpuaug.registry[op]
    if "uint8" not in spec.dtypes or 3 not in spec.channels:
        pytest.skip(f"{op} has no uint8 3-channel form")
    rng = np.random.default_rng(3)
    n, h, w = 3, 20, 28
    kw = spec.example(np.random.default_rng(4), n, h, w) if spec.example else {}
    x = [rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8) for _ in range(2)]
    ran = 0
    for lib, make in bp.peers_for(op).items():
        if bp.missing(lib):
            continue
        try:
            fn = make(bp.PeerInput(x, "NHWC", gpu=False), kw)
        except bp.PeerUnavailable as e:
            assert e.status in bench.STATUSES and str(e)
            continue
        if isinstance(fn, bp.Marginal):
            out = fn.with_op()
            fn.without_op()
            assert fn.output_bytes(out)[0] > 0
        else:
            fn()
            assert bench._nbytes_size(fn())[0] > 0
        ran += 1
    if not ran:
        pytest.skip(f"no peer of {op} runs on this machine")


# ----------------------------------------------------------------------------- the GPU clock
class _Sim:
    """A device that runs queued work in order, and a host clock; enough of CuPy for GpuClock."""

    def __init__(self):
        self.host = 0.0
        self.free_at = 0.0
        sim = self

        class Event:
            def __init__(self, block=False, disable_timing=False):
                self.t = None

            def record(self, stream=None):
                self.t = max(sim.free_at, sim.host)
                sim.free_at = self.t

            @property
            def done(self):
                return sim.host >= self.t

            def synchronize(self):
                sim.host = max(sim.host, self.t)

        class Stream:
            def synchronize(self):
                sim.host = max(sim.host, sim.free_at)

        class Kernel:
            def __call__(self, grid, block, args):
                sim.enqueue(float(args[0]) * 1e-9)

        class Cuda:
            pass

        cuda = Cuda()
        cuda.Event = Event
        cuda.get_elapsed_time = staticmethod(lambda a, b: (b.t - a.t) * 1e3)
        cuda.get_current_stream = staticmethod(lambda: Stream())
        self.cuda = cuda
        self.RawKernel = lambda src, name: Kernel()

    def enqueue(self, seconds):
        self.free_at = max(self.free_at, self.host) + seconds

    def now(self):
        return self.host


def _clock(sim):
    return bench.GpuClock(cp=sim, now=sim.now)


def test_gpu_clock_loop_is_the_slower_of_host_and_device():
    """loop(): back-to-back calls and one sync, so a host-bound op reports its host time and a
    device-bound op its device time (what a training loop gets)."""
    sim = _Sim()

    def host_bound():  # 100 us of host work, 20 us on the device
        sim.host += 100e-6
        sim.enqueue(20e-6)

    def device_bound():  # 10 us of host work, 300 us on the device
        sim.host += 10e-6
        sim.enqueue(300e-6)

    clock = _clock(sim)
    assert math.isclose(clock.loop(host_bound, k=50), 0.100, rel_tol=0.05)
    assert math.isclose(clock.loop(device_bound, k=50), 0.300, rel_tol=0.05)
    assert bench.CpuClock().loop(host_bound) is None


def test_gpu_clock_times_device_work_not_launch_gaps():
    sim = _Sim()

    def call():  # 100 us of host work per call, 20 us on the device
        sim.host += 100e-6
        sim.enqueue(20e-6)

    t = _clock(sim).time(call, repeat=40, warmup=2)
    assert t.method == "events" and len(t.samples) == 40 and not t.host_bound
    assert math.isclose(t.ms, 0.020, rel_tol=1e-6)
    assert math.isclose(t.host_us, 100.0, rel_tol=1e-6)


def test_gpu_clock_device_bound_work():
    sim = _Sim()

    def call():
        sim.host += 5e-6
        sim.enqueue(1e-3)

    t = _clock(sim).time(call, repeat=20, warmup=1)
    assert math.isclose(t.ms, 1.0, rel_tol=1e-6) and not t.host_bound


def test_gpu_clock_flags_an_op_that_synchronises():
    sim = _Sim()

    def call():  # waits for the device before launching, as a blocking copy would
        sim.host = max(sim.host, sim.free_at) + 100e-6
        sim.enqueue(20e-6)

    t = _clock(sim).time(call, repeat=20, warmup=1)
    assert t.host_bound and len(t.samples) == 20
    assert t.ms > 0.1  # the gaps are in the figure, and the row says so


def test_pytest_benchmark_rounds_are_timed_by_events(benchmark):
    """bench/'s harness: benchmark.pedantic with gpuaug.bench.EventTimer as the timer and a
    spin in each round's setup reports the device time of a call (simulated device)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        from _harness import gpu_benchmark
    finally:
        sys.path.pop(0)
    sim = _Sim()

    def call():
        sim.host += 80e-6
        sim.enqueue(30e-6)

    class Runner:
        clock = _clock(sim)

    secs = gpu_benchmark(benchmark, Runner, call, rounds=12)
    assert len(secs) == 12 and all(math.isclose(s, 30e-6, rel_tol=1e-6) for s in secs)
    assert benchmark.extra_info["stats_timer"].startswith("cuda events")
    assert math.isclose(benchmark.extra_info["host_us"], 80.0, rel_tol=1e-6)
    if benchmark.stats is not None:  # None under --benchmark-disable
        assert math.isclose(benchmark.stats.stats.median, 30e-6, rel_tol=1e-6)


def test_cpu_clock_and_marginal():
    calls = []
    t = bench.CpuClock().time(lambda: calls.append(1), repeat=7, warmup=2)
    assert len(calls) == 9 and len(t.samples) == 7 and t.method == "wall"
    m = bp.Marginal(lambda: sum(range(20000)), lambda: None)
    tm = bench.time_marginal(m, bench.CpuClock(), 9, 1)
    assert tm.method == "marginal" and tm.extra["marginal_ms"] > 0
    assert math.isclose(tm.ms, tm.extra["pipeline_ms"] - tm.extra["baseline_ms"], rel_tol=1e-9)


# ----------------------------------------------------------------------------- pure helpers
class _Spec:
    def __init__(self, changes_shape, hook=None):
        self.changes_shape = changes_shape
        if hook:
            self.bytes_moved = hook


def test_count_bytes():
    x = np.zeros((4, 10, 10, 3), np.uint8)
    assert bench.count_bytes(_Spec(False), x, np.zeros((4, 10, 10, 3), np.float32)) == (1200, 4800)
    assert bench.count_bytes(_Spec(True), x, np.zeros((4, 5, 5, 3), np.uint8)) == (300, 300)
    assert bench.count_bytes(_Spec(True), x, np.zeros((4, 12, 12, 3), np.uint8)) == (1200, 1728)
    assert bench.count_bytes(_Spec(False, hook=lambda x, o, kw: (7, 9)), x, x) == (7, 9)
    assert bench.gbps(2e9, 1000.0) == 2.0


def test_compare_tolerances():
    a = np.array([0, 10, 255], np.uint8)
    assert bench.compare(a, a) == (True, 0.0)
    assert bench.compare(np.array([1, 9, 254], np.uint8), a)[0]
    assert not bench.compare(np.array([2, 10, 255], np.uint8), a)[0]
    f = np.array([0.5, 1.0], np.float32)
    assert bench.compare(f * np.float32(1 + 5e-6), f)[0]
    assert not bench.compare(f + np.float32(1e-3), f)[0]
    h = np.array([0.5, 1.0], np.float16)
    assert bench.compare(h + np.float16(1e-3), h)[0]
    assert not bench.compare(np.array([np.nan, 1.0], np.float32), f)[0]
    assert not bench.compare(a[:2], a)[0]


def test_reference_pool_computes_the_cpu_twin_in_a_worker():
    x = np.random.default_rng(5).integers(0, 256, (2, 7, 9, 3), dtype=np.uint8)
    kw = {"horizontal": np.array([True, False])}
    pool = bench.reference_pool(1)
    got = pool.submit(bench._ref_job, "flip", x, kw, "NHWC").result(timeout=300)
    np.testing.assert_array_equal(got, gpuaug.flip(x, **kw))
    assert bench.reference_pool(1) is pool and bench.reference_pool(0) is None
    cfg = bench.Config(device="cpu", batch=64, height=1080, width=1920)
    assert bench.check_samples(cfg) == 2  # at most 16 MiB of input
    assert bench.check_samples(bench.Config(device="cpu", batch=3, height=8, width=8)) == 3


def test_random_inputs_are_not_zeros_and_buffers_beat_the_cache():
    x = bench.random_batch(np, 1, (2, 8, 8, 3), "uint8")
    assert x.dtype == np.uint8 and np.count_nonzero(x) > 0.9 * x.size and x.max() > 200
    f = bench.random_batch(np, 1, (2, 8, 8, 3), "float16")
    assert f.dtype == np.float16 and 0 <= f.min() and f.max() < 1 and np.count_nonzero(f) > 0
    assert bench.n_buffers(38_535_168, 50 << 20) == 4
    assert bench.n_buffers(1 << 20, 50 << 20) == 64 and bench.n_buffers(1 << 20, 50 << 20, 3) == 3
    assert bench.n_buffers(10 << 20, 50 << 20) * (10 << 20) >= 2 * (50 << 20)


def test_expand_path_and_describe_params():
    doc = {"created": "2026-11-21T10:00:00Z", "device": {"name": "NVIDIA H200 NVL"},
           "config": {"case": "16x1080x1920x3-uint8-NHWC"}}
    assert bench.expand_path("r/{date}-{gpu}.json", doc) == "r/2026-11-21-h200-nvl.json"
    assert bench.expand_path("r/x.json", doc, multi=True) == "r/x-16x1080x1920x3-uint8-NHWC.json"
    d = bench.describe_params({"angle": np.linspace(-30, 30, 256), "mode": "constant", "k": 3,
                               "h": np.array([True, False] * 8)})
    assert d["angle"].startswith("float64[256] in [-30") and d["mode"] == "'constant'" and d["k"] == "3"
    assert d["h"].endswith("8 of 16 true")


def test_config_checks_its_arguments():
    with pytest.raises(ValueError, match="device"):
        bench.Config(device="tpu")
    with pytest.raises(ValueError, match="dtype"):
        bench.Config(dtype="int16")
    with pytest.raises(ValueError, match="backends"):
        bench.Config(backends=("cuda", "opencl"))
    c = bench.Config(device="cpu", layout="NCHW", batch=2, height=3, width=5)
    assert c.backends == ("cpu",) and c.shape == (2, 3, 3, 5) and c.case == "2x3x5x3-uint8-NCHW"
    with pytest.raises(ValueError, match="unknown op"):
        bench.resolve_ops(["flip", "nope"])


def test_peer_helpers():
    assert bp.s0([3, 4, 5]) == 3 and bp.s0(7) == 7
    assert bp.s0(np.ones((4, 2, 3)), 2).shape == (2, 3) and bp.s0(np.ones((2, 3)), 2).shape == (2, 3)
    assert bp.per_sample(2.0, 3).tolist() == [2.0, 2.0, 2.0]
    assert bp.per_sample([[1, 2, 3, 4]] * 2, 2, shape=(4,)).shape == (2, 4)
    assert bp.per_sample((1, 2, 3, 4), 3, shape=(4,)).shape == (3, 4)
    assert bp.hw(None, 5, 6) == (5, 6) and bp.hw(7, 5, 6) == (7, 7) and bp.hw((3, 4), 5, 6) == (3, 4)
    assert bp._pad_sides({"padding": 2}, 2).tolist() == [[2, 2, 2, 2]] * 2
    assert bp._pad_sides({"padding": (1, 2, 3, 4)}, 1).tolist() == [[1, 2, 3, 4]]
    assert bp._ksize(1.5, None) == 11 and bp._ksize(1.0, 4) == 5
    assert bp._mean_std({"mean": 0.5, "std": [1, 2, 3]}, 3) == ([0.5] * 3, [1.0, 2.0, 3.0])
    m = bp._forward({"matrix": [[1, 0, 2], [0, 1, 3]], "inverse_map": True}, 2)
    assert m.shape == (2, 3, 3) and np.allclose(m[0], [[1, 0, -2], [0, 1, -3], [0, 0, 1]])
    assert bp._dali_arg(1.5).dtype == np.float32 and bp._dali_arg(True).dtype == np.int32
    assert bp._dali_arg(np.int64(3)).shape == ()


def test_ndimage_matrix_maps_output_index_to_input_index():
    x = [np.zeros((1, 6, 8, 3), np.uint8)]
    b = bp.PeerInput(x, "NHWC", gpu=False)
    inv = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [0, 0, 1]])  # dst (x, y) -> src (x + 2, y - 1)
    mm = bp._ndi_matrix(b, inv)
    src = mm @ np.array([0, 4, 5, 2, 1.0])  # (n, y, x, c, 1)
    assert src.tolist() == [0, 3, 7, 2, 1]
    bn = bp.PeerInput([np.zeros((1, 3, 6, 8), np.uint8)], "NCHW", gpu=False)
    src = bp._ndi_matrix(bn, inv) @ np.array([0, 2, 4, 5, 1.0])  # (n, c, y, x, 1)
    assert src.tolist() == [0, 2, 3, 7, 1]


def test_peer_input_and_cycle():
    xs = [np.full((2, 4, 5, 3), i, np.uint8) for i in range(3)]
    b = bp.PeerInput(xs, "NHWC", gpu=False)
    assert (b.n, b.h, b.w, b.c, b.hax, b.wax, b.cax) == (2, 4, 5, 3, 1, 2, 3)
    assert b.nhwc()[1] is xs[1]
    bn = bp.PeerInput([np.ascontiguousarray(x.transpose(0, 3, 1, 2)) for x in xs], "NCHW", gpu=False)
    assert (bn.n, bn.h, bn.w, bn.c) == (2, 4, 5, 3) and bn.nhwc()[2].shape == (2, 4, 5, 3)
    with pytest.raises(bp.NeedsGPU):
        b.need_gpu("X")
    with pytest.raises(bp.Unsupported):
        bn.need_nhwc("X")
    call = bp.cycle(xs, lambda x: int(x[0, 0, 0, 0]), variant="v", note="n")
    assert [call() for _ in range(5)] == [0, 1, 2, 0, 1]
    assert call.inputs == xs and call.variant == "v" and call.note == "n"
    with pytest.raises(ValueError):
        bp.PeerInput([], "NHWC")


def test_peer_table_shape():
    assert bp.PEERS, "the peer table is empty"
    for op, table in bp.PEERS.items():
        for lib, make in table.items():
            assert lib in bp.LIBRARIES and callable(make), (op, lib)
    assert list(bp.peers_for("flip", libraries=("dali", "torchvision"))) == ["torchvision", "dali"]
    assert bp.peers_for("no_such_op") == {}
    with pytest.raises(ValueError):
        bp.peer("flip", "opencl")


# ----------------------------------------------------------------------------- info
def test_info_runs_here_and_says_why_not(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "GPU:" in out and "backends:" in out and "cpu" in out and "numpy" in out
    ok, why = bench.gpu_status()
    if not ok:
        assert "GPU:          none: " + why in out
        cuda_line = next(line for line in out.splitlines() if line.strip().startswith("cuda "))
        assert " no " in cuda_line and len(cuda_line.split("no", 1)[1].strip()) > 5
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert set(info["backends"]) >= {"cuda", "numba", "cpu", "dali_gpu", "dali_cpu"}
    assert all(isinstance(v["why"], str) and v["why"] for v in info["backends"].values())
    assert info["versions"]["gpuaug"] == gpuaug.__version__


def test_importing_the_cli_and_bench_imports_no_gpu_library():
    code = ("import sys, gpuaug, gpuaug.cli, gpuaug.bench, gpuaug.bench_peers; "
            "bad = [m for m in ('cupy', 'numba', 'torch', 'nvidia.dali', 'kornia', 'cvcuda') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_old_module_names_are_the_package_modules():
    """gpuaug.bench_peers and gpuaug.bench_e2e (the names before gpuaug/bench/ became a package)
    are the very modules gpuaug.bench.peers and gpuaug.bench.e2e, so a patch through one is seen
    through the other."""
    import gpuaug.bench.e2e
    import gpuaug.bench.peers
    import gpuaug.bench_e2e
    import gpuaug.bench_peers

    assert gpuaug.bench_peers is gpuaug.bench.peers and gpuaug.bench_e2e is gpuaug.bench.e2e
    assert bp is gpuaug.bench.peers and bp.PEERS["flip"]
    assert callable(gpuaug.bench_e2e.synthetic_folder)
