"""Benchmarks of every registered op: ceilings, timing, byte counting, checks, peers, reports.

``gpuaug bench`` (gpuaug/cli.py) and the pytest-benchmark suite in bench/ both use this
module, so a figure means the same thing wherever it comes from.

How a figure is made (the method; everything below is recorded in the JSON):

- **Bytes**: an op is charged the fewest bytes it must move: its input read once and its
  output written once (``bytes_read + bytes_written``), whatever the kernel really
  moves. An op that changes the shape and returns fewer elements than it gets (a crop, a
  downscale) is charged only its share of the input, ``input bytes × output elements /
  input elements``, because it need not read the rest; this undercounts a bilinear
  downscale (which reads a little more) and so errs low. An OpSpec may override both
  numbers with a ``bytes_moved(x, out, kwargs) -> (read, written)`` attribute. Side
  inputs (per-sample parameter arrays, a few bytes per sample) are not counted.
- **GB/s** = bytes / median time (10^9 bytes per second); **images/s** = N / median time;
  **% of copy** = GB/s over the GB/s of a device-to-device copy of the same traffic (a
  buffer of ``bytes / 2`` copied: read once, written once), measured in the same run with
  the same buffer rotation. Short kernels cannot reach a large copy's rate, so the
  same-size copy is the fair ceiling; the 2 GiB copy is reported as the device's peak.
- **Time on a GPU**: CUDA events around each call, median of ``repeat`` calls after
  ``warmup`` calls (the first of which compiles). While a round of calls is queued, the
  stream is held by a short spin kernel, so the events time the device work of each call
  back to back and not the host's launch gaps (nvbench's "blocking kernel"). If the host
  still falls behind (an op that synchronises, or costs more on the host than on the
  device), the row is marked ``host_bound`` and its times include the gaps. The host's
  cost per call (Python, argument checks, launch) is reported apart as ``host_us``.
  Everything runs on the legacy default stream, which CuPy, PyTorch and kornia use
  unless told otherwise, so the events see their work too.
- **Time on the CPU** (``device="cpu"``): ``time.perf_counter`` around each call.
- **DALI** peers are timed as the marginal cost in a pipeline: the median wall time of
  ``pipe.run()`` (plus a device synchronisation) with the op, minus the same without it,
  both fed the same batches by ``external_source``.
- **Inputs** are random (uint8 uniform in [0, 255], floats in [0, 1)), never zeros, in at
  least 4 buffers that together exceed twice the L2 cache, used in turn (outputs too), so
  repeated calls do not run from the cache.
- **Checks**: before timing, each GPU backend runs on the first few samples and is
  compared with the CPU twin (``backend="cpu"`` on the same data, copied to the host):
  uint8 within 1, float32 within 1e-5 (absolute + relative), float16 within 2e-3. The
  CPU twin is the reference, so CPU rows carry no check. Peers are not checked (their
  conventions differ); they are timed on the same batch and parameters.
- **Peers** (``peers=True``) come from :mod:`gpuaug.bench_peers`, one row per (op,
  library); ``speedup`` = peer time / the fastest checked gpuaug backend's time for the
  same images (> 1: gpuaug is faster). A peer's GB/s counts the bytes it actually moves in
  its own dtype and layout (kornia works in float32).

The JSON document is described by :data:`SCHEMA` (JSON Schema, draft 2020-12) and
checked by :func:`validate`, which also checks that the figures agree with each other.

Example::

    >>> from gpuaug import bench
    >>> doc = bench.run(bench.Config(ops=("flip",), device="cpu", batch=2, height=16,
    ...                              width=16, repeat=3, warmup=1, progress=False))
    >>> doc["rows"][0]["library"], doc["rows"][0]["variant"]
    ('gpuaug', 'cpu')
    >>> bench.validate(doc)
    []
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
import numpy as np

SCHEMA_ID = "gpuaug-bench/1"
GIB = 1 << 30
MIB = 1 << 20
STATUSES = ("ok", "error", "not installed", "unsupported", "needs GPU", "skipped", "below noise")
TOLERANCES = {"uint8": (1.0, 0.0), "float16": (2e-3, 2e-3), "float32": (1e-5, 1e-5)}


# ----------------------------------------------------------------------------- config
@dataclass
class Config:
    """What to benchmark. ``ops`` empty: every op in ``gpuaug.registry``.

    ``device``: "gpu" (CUDA events) or "cpu" (the CPU twins, wall clock). ``backends``:
    gpuaug backends to time (default: cuda + numba on a GPU, cpu on the CPU).
    ``libraries``: restrict the peers (default: every library in bench_peers).
    ``buffers``: input buffers rotated (0: enough to exceed 2× the L2, at least 4).
    ``budget_s``: after this many seconds, peers are skipped and repeats cut to a fifth.
    ``check_batch``/``check_bytes``: the checks run on the first samples, at most this many
    and this many input bytes. ``ref_workers``: processes computing the CPU references in
    parallel with the GPU work (-1: up to 8 on a GPU run, none on a CPU run; 0: in-process).
    """

    ops: tuple = ()
    batch: int = 256
    height: int = 224
    width: int = 224
    channels: int = 3
    dtype: str = "uint8"
    layout: str = "NHWC"
    backends: tuple | None = None
    peers: bool = False
    libraries: tuple | None = None
    repeat: int = 100
    warmup: int = 5
    device: str = "gpu"
    buffers: int = 0
    seed: int = 0
    check_batch: int = 8
    check_bytes: int = 16 * MIB
    ref_workers: int = -1
    budget_s: float | None = None
    large_copy_bytes: int = 2 * GIB
    pcie_bytes: int = 256 * MIB
    progress: bool = True

    def __post_init__(self):
        if self.device not in ("gpu", "cpu"):
            raise ValueError(f"device: got {self.device!r}; expected 'gpu' or 'cpu'")
        if self.dtype not in TOLERANCES:
            raise ValueError(f"dtype: got {self.dtype!r}; expected one of {', '.join(TOLERANCES)}")
        if self.layout not in ("NHWC", "NCHW"):
            raise ValueError(f"layout: got {self.layout!r}; expected 'NHWC' or 'NCHW'")
        for name in ("batch", "height", "width", "channels", "repeat"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: got {getattr(self, name)!r}; expected a positive int")
        if self.warmup < 0:
            raise ValueError(f"warmup: got {self.warmup!r}; expected an int >= 0")
        if self.backends is None:
            self.backends = ("cuda", "numba") if self.device == "gpu" else ("cpu",)
        self.backends = tuple(self.backends)
        for b in self.backends:
            if b not in ("cuda", "numba", "cpu"):
                raise ValueError(f"backends: got {b!r}; expected 'cuda', 'numba' or 'cpu'")
        self.ops = tuple(self.ops or ())
        if self.libraries is not None:
            self.libraries = tuple(self.libraries)

    @property
    def case(self) -> str:
        """A short name of the case, e.g. ``256x224x224x3-uint8-NHWC``."""
        return f"{self.batch}x{self.height}x{self.width}x{self.channels}-{self.dtype}-{self.layout}"

    @property
    def shape(self) -> tuple:
        n, h, w, c = self.batch, self.height, self.width, self.channels
        return (n, h, w, c) if self.layout == "NHWC" else (n, c, h, w)


# ----------------------------------------------------------------------------- environment
def gpu_status() -> tuple[bool, str]:
    """(usable, reason): whether CuPy sees a CUDA device, and why not (no driver, no device,
    driver too old: gpuaug._util.why_no_gpu)."""
    if importlib.util.find_spec("cupy") is None:
        return False, "CuPy is not installed (install gpuaug[cuda12] or gpuaug[cuda13])"
    from gpuaug._util import why_no_gpu

    why = why_no_gpu()
    if why is not None:
        return False, why
    import cupy

    return True, f"{cupy.cuda.runtime.getDeviceCount()} CUDA device(s)"


def _dist_version(*names) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _dist_prefix_version(prefix) -> str | None:
    for d in importlib.metadata.distributions():
        name = (d.metadata["Name"] or "").lower()
        if name.startswith(prefix):
            return f"{d.version} ({name})"
    return None


def versions() -> dict:
    """Versions of Python and every library a figure may depend on (None: not installed).

    Read from the installed distributions, so nothing is imported.
    """
    from gpuaug import __version__

    return {
        "python": platform.python_version(),
        "gpuaug": __version__,
        "numpy": _dist_version("numpy"),
        "numba": _dist_version("numba"),
        "numba_cuda": _dist_version("numba-cuda"),
        "cupy": _dist_prefix_version("cupy"),
        "dali": _dist_prefix_version("nvidia-dali"),
        "torch": _dist_version("torch"),
        "torchvision": _dist_version("torchvision"),
        "kornia": _dist_version("kornia"),
        "cvcuda": _dist_prefix_version("cvcuda"),
        "opencv": _dist_prefix_version("opencv"),
        "matplotlib": _dist_version("matplotlib"),
    }


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _nvidia_smi_driver() -> str | None:
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except Exception:  # noqa: BLE001
        return None


def device_info(kind: str) -> dict:
    """What the figures were measured on: the GPU (kind "gpu") or this CPU (kind "cpu")."""
    if kind == "gpu":
        import cupy

        dev = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return {
            "kind": "gpu",
            "name": name,
            "index": int(dev.id),
            "compute_capability": f"{props['major']}.{props['minor']}",
            "memory_bytes": int(props["totalGlobalMem"]),
            "l2_bytes": int(props.get("l2CacheSize", 0)),
            "sm_count": int(props["multiProcessorCount"]),
            "driver": _nvidia_smi_driver(),
            "cuda_driver": _cuda_version(cupy.cuda.runtime.driverGetVersion()),
            "cuda_runtime": _cuda_version(cupy.cuda.runtime.runtimeGetVersion()),
            "cpu": _cpu_name(),
        }
    return {"kind": "cpu", "name": _cpu_name(), "index": None, "compute_capability": None,
            "memory_bytes": None, "l2_bytes": _cpu_cache_bytes(), "sm_count": os.cpu_count(),
            "driver": None, "cuda_driver": None, "cuda_runtime": None, "cpu": _cpu_name()}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_cache_bytes() -> int:
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            s = f.read().strip()
        return int(s[:-1]) * (1024 if s.endswith("K") else MIB if s.endswith("M") else 1)
    except (OSError, ValueError):
        return 32 * MIB


def backend_status() -> dict:
    """For each way of running gpuaug here: ``{"usable": bool, "why": str}``.

    Keys: cuda (CUDA C via CuPy/NVRTC), numba (Numba CUDA twin), cpu (Numba njit twin),
    dali_gpu, dali_cpu (the DALI operators). Imports CuPy/Numba/DALI, so call it only
    when that is wanted (``gpuaug info``).
    """
    out = {}
    gpu, why_gpu = gpu_status()
    if not gpu:
        out["cuda"] = {"usable": False, "why": why_gpu}
    else:
        try:
            import cupy

            k = cupy.RawKernel('extern "C" __global__ void gpuaug_probe(int* p) { if (p) *p = 1; }',
                               "gpuaug_probe")
            k((1,), (1,), (np.intp(0),))
            cupy.cuda.runtime.deviceSynchronize()
            out["cuda"] = {"usable": True, "why": f"CuPy {cupy.__version__}, NVRTC compiled and ran a kernel"}
        except Exception as e:  # noqa: BLE001
            out["cuda"] = {"usable": False, "why": f"NVRTC/CuPy failed: {type(e).__name__}: {str(e)[:160]}"}
    if importlib.util.find_spec("numba") is None:
        out["numba"] = {"usable": False, "why": "Numba is not installed"}
        out["cpu"] = {"usable": False, "why": "Numba is not installed"}
    else:
        sim = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
        try:
            from numba import cuda

            if sim:
                out["numba"] = {"usable": False, "why": "NUMBA_ENABLE_CUDASIM=1: only Numba's CUDA "
                                "simulator (NumPy inputs, tiny sizes, for tests)"}
            elif cuda.is_available():
                out["numba"] = {"usable": True, "why": f"numba-cuda sees {len(cuda.gpus)} GPU(s)"}
            else:
                reason = why_gpu if not gpu else "numba.cuda.is_available() is False"
                try:
                    cuda.gpus  # noqa: B018 - raises with the driver's reason
                except Exception as e:  # noqa: BLE001
                    reason = f"{type(e).__name__}: {str(e)[:160]}"
                out["numba"] = {"usable": False, "why": reason}
        except Exception as e:  # noqa: BLE001
            out["numba"] = {"usable": False, "why": f"numba.cuda failed to import: {type(e).__name__}: {e}"}
        out["cpu"] = {"usable": True, "why": f"Numba {_dist_version('numba')} njit on "
                      f"{os.cpu_count()} CPU threads"}
    if importlib.util.find_spec("nvidia") is None or importlib.util.find_spec("nvidia.dali") is None:
        out["dali_gpu"] = out["dali_cpu"] = {"usable": False, "why": "NVIDIA DALI is not installed"}
    else:
        v = _dist_prefix_version("nvidia-dali")
        out["dali_cpu"] = {"usable": True, "why": f"DALI {v}: CPU pipelines"}
        out["dali_gpu"] = ({"usable": True, "why": f"DALI {v} with a GPU"} if gpu else
                           {"usable": False, "why": f"DALI {v} is installed, but {why_gpu}"})
        try:  # which path gpuaug.dali's GPU ops take (builds the C++ plugin on first use)
            st = importlib.import_module("gpuaug.dali._native").status()
            out["dali_native"] = ({"usable": True, "why": f"native DALI operator for {len(st['ops'])} ops "
                                   f"({st['library']}); other ops: python_function"} if st["active"] else
                                  {"usable": False, "why": f"gd ops use python_function: {st['reason']}"})
        except Exception as e:  # noqa: BLE001
            out["dali_native"] = {"usable": False, "why": f"{type(e).__name__}: {str(e)[:200]}"}
    return out


# ----------------------------------------------------------------------------- bytes
def _nbytes_size(a) -> tuple[int, int]:
    """(bytes, elements) of an array-like: NumPy/CuPy, torch, anything with CAI, lists."""
    if isinstance(a, (list, tuple)):
        b = s = 0
        for item in a:
            bi, si = _nbytes_size(item)
            b, s = b + bi, s + si
        return b, s
    if hasattr(a, "nbytes") and hasattr(a, "size") and not callable(a.size):
        return int(a.nbytes), int(a.size)
    if hasattr(a, "numel") and hasattr(a, "element_size"):  # torch
        return int(a.numel() * a.element_size()), int(a.numel())
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is None and hasattr(a, "cuda"):  # cvcuda.Tensor
        cai = getattr(a.cuda(), "__cuda_array_interface__", None)
    if cai is not None:
        size = int(np.prod(cai["shape"]))
        return size * np.dtype(cai["typestr"]).itemsize, size
    raise TypeError(f"cannot count the bytes of a {type(a).__name__}")


def count_bytes(spec, x, out, kwargs=None) -> tuple[int, int]:
    """(bytes_read, bytes_written) charged to ``spec`` for input ``x`` and output ``out``.

    See the module docstring: input read once, output written once; shape-changing ops
    that shrink are charged only the input share they need. ``spec.bytes_moved`` (if an
    OpSpec has it) overrides.
    """
    hook = getattr(spec, "bytes_moved", None)
    if callable(hook):
        r, w = hook(x, out, kwargs or {})
        return int(r), int(w)
    in_b, in_n = _nbytes_size(x)
    out_b, out_n = _nbytes_size(out)
    read = in_b
    if getattr(spec, "changes_shape", False) and out_n < in_n:
        read = in_b * out_n // in_n
    return int(read), int(out_b)


def gbps(nbytes, ms) -> float:
    """10^9 bytes per second for ``nbytes`` moved in ``ms`` milliseconds."""
    return nbytes / ms / 1e6


# ----------------------------------------------------------------------------- timing
@dataclass
class Timing:
    """Per-call times of one measurement (milliseconds) and how they were taken."""

    samples: list
    method: str                      # "events", "wall" or "marginal"
    host_us: float | None = None     # host cost per call (enqueue), GPU events only
    host_bound: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def ms(self) -> float:
        return float(statistics.median(self.samples))

    def pct(self, q) -> float:
        return float(np.percentile(np.asarray(self.samples, np.float64), q))


_SPIN_SRC = r"""
extern "C" __global__ void gpuaug_bench_spin(unsigned long long ns) {
    // Holds the stream for ns nanoseconds of the global timer, so that calls queued
    // behind it run back to back (see gpuaug/bench.py, "Time on a GPU").
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(2000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""


class GpuClock:
    """Times callables on CuPy's current stream with CUDA events (see module docstring)."""

    ROUND = 16          # calls queued behind one spin (the op staging ring has 32 slots)
    MAX_SPIN_NS = 200_000_000

    def __init__(self, cp=None, now=time.perf_counter):
        if cp is None:
            import cupy as cp
        self.cp = cp
        self.now = now  # the host clock (replaceable, for tests)
        self._spin = cp.RawKernel(_SPIN_SRC, "gpuaug_bench_spin")

    def spin(self, ns: int):
        """Hold the current stream for ``ns`` nanoseconds (one thread, one SM)."""
        self._spin((1,), (1,), (np.uint64(max(0, min(int(ns), self.MAX_SPIN_NS))),))

    def sync(self):
        self.cp.cuda.get_current_stream().synchronize()

    def _round(self, call, k, spin_ns):
        cp = self.cp
        evs = [cp.cuda.Event() for _ in range(k + 1)]
        gate = None
        if spin_ns:
            self.spin(spin_ns)
            gate = cp.cuda.Event(block=False, disable_timing=True)
            gate.record()
        t0 = self.now()
        evs[0].record()
        for i in range(k):
            call()
            evs[i + 1].record()
        host = (self.now() - t0) / k
        late = gate is not None and gate.done  # the device caught up with the host
        evs[-1].synchronize()
        return [cp.cuda.get_elapsed_time(evs[i], evs[i + 1]) for i in range(k)], host, late

    def time(self, call, repeat=100, warmup=5, *, stall=True) -> Timing:
        """Median-ready per-call device times of ``call()`` (ms), after ``warmup`` calls."""
        for _ in range(max(1, warmup)):
            call()
        self.sync()
        _, host, _ = self._round(call, min(self.ROUND, 4), 0)
        samples, hosts = [], []
        factor, host_bound = 3.0, not stall
        while len(samples) < repeat:
            k = min(self.ROUND, repeat - len(samples))
            spin = 0 if host_bound else int(factor * k * host * 1e9) + 50_000
            t, h, late = self._round(call, k, spin)
            if late and not host_bound:
                host = max(host, h)
                factor *= 4
                if factor <= 48:
                    continue  # the spin was too short: redo the round with a longer one
                host_bound = stall  # the host cannot keep ahead: time with the gaps
            samples += t
            hosts.append(h)
        return Timing(samples, "events", host_us=float(np.median(hosts)) * 1e6,
                      host_bound=bool(host_bound and stall))


    def loop(self, call, k=100, rounds=3) -> float:
        """What a training loop gets: ms per call over ``k`` back-to-back calls and one sync
        (the host's cost and the device's overlap; the median of ``rounds``)."""
        call()
        self.sync()
        out = []
        for _ in range(rounds):
            t0 = self.now()
            for _ in range(k):
                call()
            self.sync()
            out.append((self.now() - t0) / k * 1e3)
        return float(np.median(out))

    def host_cost(self, call, warmup=5) -> float:
        """Seconds of host time per call (after ``warmup`` calls), measured without a spin."""
        for _ in range(max(1, warmup)):
            call()
        self.sync()
        _, host, _ = self._round(call, 4, 0)
        return host


class EventTimer:
    """A pytest-benchmark timer made of CUDA events (bench/ sets it on the fixture).

    Each reading records an event on the current stream; subtracting two readings waits
    for the later one and returns the seconds between them on the device, so
    ``benchmark.pedantic`` rounds are timed on the GPU. With a spin launched in the
    round's ``setup`` (longer than the host's cost of one call), the start event runs just
    before the call's work and the figure is the call's device time. ``durations`` keeps
    every difference taken (seconds).
    """

    __name__ = "EventTimer"
    __module__ = "gpuaug.bench"

    def __init__(self, cp=None):
        if cp is None:
            import cupy as cp
        self.cp = cp
        self.durations = []

    def __call__(self):
        ev = self.cp.cuda.Event()
        ev.record()
        return _Stamp(self, ev)


class _Stamp:
    __slots__ = ("timer", "ev")

    def __init__(self, timer, ev):
        self.timer, self.ev = timer, ev

    def __sub__(self, other):
        self.ev.synchronize()
        d = self.timer.cp.cuda.get_elapsed_time(other.ev, self.ev) / 1e3
        self.timer.durations.append(d)
        return d


class CpuClock:
    """Times callables with ``time.perf_counter`` (the CPU twins, CPU peers)."""

    def sync(self):
        pass

    def loop(self, call, k=100, rounds=3):  # noqa: ARG002 - a CPU call is its own loop time
        return None

    def time(self, call, repeat=10, warmup=1, *, stall=True) -> Timing:  # noqa: ARG002
        for _ in range(max(1, warmup)):
            call()
        samples = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            call()
            samples.append((time.perf_counter() - t0) * 1e3)
        return Timing(samples, "wall")


def time_marginal(marginal, clock, repeat, warmup) -> Timing:
    """Wall time of ``marginal.with_op()`` minus ``marginal.without_op()`` (each followed by
    ``clock.sync``-like device synchronisation), medians over interleaved runs."""
    for _ in range(max(1, warmup)):
        marginal.with_op()
        marginal.without_op()
    w, wo = [], []
    for _ in range(repeat):
        for fn, acc in ((marginal.with_op, w), (marginal.without_op, wo)):
            t0 = time.perf_counter()
            fn()
            acc.append((time.perf_counter() - t0) * 1e3)
    mw, mwo = statistics.median(w), statistics.median(wo)
    # The difference's spread: samples of the with-op runs less the baseline's median.
    samples = [s - mwo for s in w]
    t = Timing(samples, "marginal", extra={"pipeline_ms": mw, "baseline_ms": mwo,
                                           "marginal_ms": mw - mwo})
    return t


def marginal_noise(t: Timing) -> float:
    """How small a marginal cost can be told from zero: the with-op runs' spread (p10..p90)
    or 2% of the baseline, whichever is larger (ms)."""
    spread = (t.pct(90) - t.pct(10)) / 2
    return max(spread, 0.02 * t.extra["baseline_ms"])


# ----------------------------------------------------------------------------- data
def random_batch(xp, seed, shape, dtype):
    """Random data (never zeros): uint8 uniform in [0, 255], floats uniform in [0, 1)."""
    dtype = np.dtype(dtype)
    if xp is np:
        rng = np.random.default_rng(seed)
        if dtype == np.uint8:
            return rng.integers(0, 256, shape, dtype=np.uint8)
        return rng.random(shape, dtype=np.float32).astype(dtype)
    rs = xp.random.RandomState(seed)
    u = rs.random_sample(shape, dtype=np.float32)
    if dtype == np.uint8:
        out = (u * 256).astype(np.uint8)
    else:
        out = u.astype(dtype)
    del u
    return out


def n_buffers(nbytes: int, cache_bytes: int, requested: int = 0, cap: int = 64) -> int:
    """How many buffers of ``nbytes`` to rotate: at least 4, together over 2× the cache."""
    if requested:
        return int(requested)
    return int(min(cap, max(4, math.ceil(2 * cache_bytes / max(1, nbytes)))))


def compare(got, ref) -> tuple[bool, float]:
    """(within tolerance, max abs error) of ``got`` against the reference ``ref`` (host arrays).

    uint8 within 1; float16 2e-3 and float32 1e-5 (absolute + relative); NaN only where
    the reference has NaN.
    """
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return False, float("inf")
    g, r = got.astype(np.float64), ref.astype(np.float64)
    nan_g, nan_r = np.isnan(g), np.isnan(r)
    if np.any(nan_g != nan_r):
        return False, float("inf")
    ok = ~nan_r
    if not np.any(ok):
        return True, 0.0
    err = np.abs(g[ok] - r[ok])
    atol, rtol = TOLERANCES.get(ref.dtype.name, (1.0, 0.0) if ref.dtype.kind in "iu" else (1e-5, 1e-5))
    passed = bool(np.all(err <= atol + rtol * np.abs(r[ok])))
    return passed, float(err.max())


def _to_host(a):
    if isinstance(a, np.ndarray):
        return a
    if isinstance(a, (list, tuple)):
        return [_to_host(x) for x in a]
    import cupy

    return cupy.asnumpy(a)


def describe_params(kwargs) -> dict:
    """Short text per parameter for the report (per-sample arrays by shape and range)."""
    out = {}
    for k, v in kwargs.items():
        a = np.asarray(v) if not isinstance(v, str) else None
        if a is None or a.dtype == object:
            out[k] = repr(v)[:60]
        elif a.ndim == 0:
            out[k] = repr(a.item())
        elif a.size <= 4:
            out[k] = repr(a.tolist())
        else:
            if a.dtype == bool:
                rng = f"{int(a.sum())} of {a.size} true"
            else:
                rng = f"in [{a.min():.4g}, {a.max():.4g}]"
            out[k] = f"{a.dtype}{list(a.shape)} {rng}"
    return out


def example_kwargs(spec, seed, n, h, w) -> dict:
    """The op's own example parameters (``OpSpec.example``) for a batch of ``n`` h x w images."""
    return spec.example(np.random.default_rng(seed), n, h, w) if spec.example else {}


def cpu_reference(spec, x, kwargs, layout):
    """The CPU twin's result (``backend="cpu"``) on a host copy of ``x``."""
    return spec.func(_to_host(x), **kwargs, layout=layout, backend="cpu")


def check_backend(spec, backend, x, kwargs, layout, ref=None) -> tuple[bool, float]:
    """Run ``spec`` on ``backend`` and compare with the CPU twin on the same data (host copy);
    ``ref``: that CPU result, if already computed.

    Returns (within tolerance, max abs error); see :func:`compare` for the tolerances.
    """
    got = _to_host(spec.func(x, **kwargs, layout=layout, backend=backend))
    if ref is None:
        ref = cpu_reference(spec, x, kwargs, layout)
    return compare(got, ref)


def prepare_call(spec, backend, inputs, kwargs, layout, xp):
    """A zero-argument callable running ``spec`` on the next input buffer into the matching
    preallocated output (``out=``), plus the first output and whether ``out=`` was accepted.

    The first two calls happen here (so a compile is not timed twice as a warm-up miss).
    """
    func = spec.func
    common = {"layout": layout, "backend": backend}
    y0 = func(inputs[0], **kwargs, **common)
    outs = [y0] + [xp.empty_like(y0) for _ in range(len(inputs) - 1)]
    try:
        func(inputs[1 % len(inputs)], **kwargs, out=outs[1 % len(outs)], **common)
        use_out = True
    except TypeError:
        use_out = False
    state = [0]

    def call():
        j = state[0] % len(inputs)
        state[0] += 1
        if use_out:
            return func(inputs[j], **kwargs, out=outs[j], **common)
        return func(inputs[j], **kwargs, **common)

    return call, y0, use_out


def _ref_job(op, x, kwargs, layout):
    from gpuaug import registry

    return cpu_reference(registry[op], x, kwargs, layout)


def _ref_worker_init(threads):
    os.environ["NUMBA_NUM_THREADS"] = str(threads)


_POOL = {}


def reference_pool(workers: int):
    """A process pool (spawned, reused across cases) for the CPU references, or None.

    Compiling every op's CPU twin is the longest serial part of a GPU run; in worker
    processes it overlaps with the GPU work.
    """
    if workers <= 0:
        return None
    pool = _POOL.get(workers)
    if pool is None:
        import atexit
        import concurrent.futures as cf
        import multiprocessing as mp

        threads = max(1, (os.cpu_count() or 2) // workers)
        pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                                      initializer=_ref_worker_init, initargs=(threads,))
        atexit.register(pool.shutdown, wait=False, cancel_futures=True)
        _POOL[workers] = pool
    return pool


def check_samples(cfg) -> int:
    """How many samples the checks use: ``check_batch``, at most ``check_bytes`` of input."""
    per_image = cfg.height * cfg.width * cfg.channels * np.dtype(cfg.dtype).itemsize
    return int(max(1, min(cfg.check_batch, cfg.batch, cfg.check_bytes // per_image)))


def unsupported_reason(spec, cfg) -> str | None:
    """Why ``spec`` cannot run the case ``cfg`` (dtype, layout, channels), or None."""
    return _unsupported(spec, cfg)


# ----------------------------------------------------------------------------- rows
def _row(op, library, variant, status="ok", reason=None, **kw) -> dict:
    row = {"op": op, "library": library, "variant": variant, "status": status, "reason": reason,
           "check": None, "max_error": None, "timing": None, "ms": None, "ms_p10": None,
           "ms_p90": None, "samples": 0, "host_us": None, "loop_ms": None, "host_bound": False,
           "bytes_read": None, "bytes_written": None, "gbps": None, "copy_gbps": None,
           "pct_of_copy": None, "images_per_s": None, "speedup": None, "in_dtype": None,
           "out_dtype": None, "out_shape": None, "note": "", "params": {}, "extra": {}}
    row.update(kw)
    return row


def _fill_figures(row, t: Timing, n, read, written, copy_gbps):
    ms = t.extra.get("marginal_ms", t.ms)
    row.update(timing=t.method, ms=ms, ms_p10=t.pct(10), ms_p90=t.pct(90), samples=len(t.samples),
               host_us=t.host_us, host_bound=t.host_bound, bytes_read=int(read),
               bytes_written=int(written))
    row["gbps"] = gbps(read + written, ms)
    row["images_per_s"] = n / ms * 1e3
    row["copy_gbps"] = copy_gbps
    row["pct_of_copy"] = 100.0 * row["gbps"] / copy_gbps if copy_gbps else None
    row["extra"].update(t.extra)
    return row


def _err(e) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


# ----------------------------------------------------------------------------- the run
class _Progress:
    """tqdm when importable, else a plain counter on stderr (one line per step off a TTY)."""

    def __init__(self, total, enabled, desc=""):
        self.total, self.n, self.enabled, self.bar = total, 0, enabled, None
        self.tty = sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self.desc = desc
        if enabled and importlib.util.find_spec("tqdm") is not None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="row", file=sys.stderr, leave=False,
                            dynamic_ncols=True)

    def step(self, label):
        self.n += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(label[:40], refresh=False)
            self.bar.update(1)
            return
        width = 30
        done = int(width * self.n / max(1, self.total))
        line = (f"[{'#' * done}{'.' * (width - done)}] {self.n}/{self.total} "
                f"{time.perf_counter() - self.t0:6.1f}s {label}")
        if self.tty:
            sys.stderr.write("\r" + line[:120].ljust(120))
        else:
            sys.stderr.write(f"{self.desc} {line}\n")
        sys.stderr.flush()

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def resolve_ops(names) -> list:
    """The OpSpecs to run: ``names`` (checked against the registry) or every registered op."""
    from gpuaug import registry

    if not names:
        return [registry[k] for k in registry]
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise ValueError(f"ops: got unknown op(s) {', '.join(map(repr, unknown))}; known ops: "
                         f"{', '.join(sorted(registry))}")
    return [registry[n] for n in names]


def _unsupported(spec, cfg) -> str | None:
    if cfg.dtype not in tuple(spec.dtypes):
        return f"dtype {cfg.dtype} not supported (supports {', '.join(spec.dtypes)})"
    if cfg.layout not in tuple(spec.layouts):
        return f"layout {cfg.layout} not supported (supports {', '.join(spec.layouts)})"
    if cfg.channels not in tuple(spec.channels):
        return f"{cfg.channels} channels not supported (supports {', '.join(map(str, spec.channels))})"
    return None


class Runner:
    """One benchmark case (a Config): ceilings first, then every op, backend and peer."""

    def __init__(self, cfg: Config, log=None):
        self.cfg = cfg
        self.log = log or (lambda msg: None)
        self.gpu = cfg.device == "gpu"
        if self.gpu:
            ok, why = gpu_status()
            if not ok:
                raise RuntimeError(f"device: 'gpu' was asked for but {why}; use device='cpu' "
                                   "(gpuaug bench --device cpu)")
            import cupy

            self.xp = cupy
            self.clock = GpuClock()
        else:
            self.xp = np
            self.clock = CpuClock()
        self.t0 = time.perf_counter()
        self._copies = {}
        self._refs = {}
        self.device = device_info("gpu" if self.gpu else "cpu")
        self.cache_bytes = self.device["l2_bytes"] or 50 * MIB

    # -- helpers -----------------------------------------------------------------
    def over_budget(self) -> bool:
        b = self.cfg.budget_s
        return b is not None and time.perf_counter() - self.t0 > b

    def repeats(self) -> int:
        r = self.cfg.repeat
        return max(5, r // 5) if self.over_budget() else r

    def free(self, collect=False):
        if collect:
            import gc

            gc.collect()  # peers' pipelines and tensors hold device memory until collected
            torch = sys.modules.get("torch")
            if self.gpu and torch is not None and torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        if self.gpu:
            self.clock.sync()
            self.xp.get_default_memory_pool().free_all_blocks()

    def _copy_call(self, nbytes, nbuf):
        xp = self.xp
        srcs = [xp.full(nbytes, 0x5A, np.uint8) for _ in range(nbuf)]
        dsts = [xp.empty(nbytes, np.uint8) for _ in range(nbuf)]
        i = [0]
        if self.gpu:
            rt = xp.cuda.runtime

            def call():
                k = i[0] % nbuf
                i[0] += 1
                rt.memcpyAsync(dsts[k].data.ptr, srcs[k].data.ptr, nbytes, 3,
                               xp.cuda.get_current_stream().ptr)
        else:
            def call():
                k = i[0] % nbuf
                i[0] += 1
                np.copyto(dsts[k], srcs[k])
        return call, (srcs, dsts)

    def copy_ceiling(self, traffic: int, *, nbuf=None, repeat=None, stall=True) -> dict:
        """A device-to-device copy moving ``traffic`` bytes (a buffer of traffic/2)."""
        buf = max(1, traffic // 2)
        nbuf = nbuf or n_buffers(buf, self.cache_bytes, self.cfg.buffers)
        key = (buf, nbuf)
        if key in self._copies:
            return self._copies[key]
        call, keep = self._copy_call(buf, nbuf)
        t = self.clock.time(call, repeat or self.repeats(), self.cfg.warmup, stall=stall)
        del keep, call
        self.free()
        res = {"bytes": 2 * buf, "buffer_bytes": buf, "buffers": nbuf, "ms": t.ms,
               "gbps": gbps(2 * buf, t.ms), "samples": len(t.samples),
               "what": "device-to-device copy (cudaMemcpyAsync)" if self.gpu else "host memory copy (np.copyto)"}
        self._copies[key] = res
        return res

    def pcie(self, direction: str, pinned: bool) -> dict:
        """Host<->device copy of ``cfg.pcie_bytes`` (GB/s counts the bytes once)."""
        cp = self.xp
        nbytes = self.cfg.pcie_bytes
        dev = cp.empty(nbytes, np.uint8)
        if pinned:
            mem = cp.cuda.alloc_pinned_memory(nbytes)
            host_ptr = mem.ptr
            host = np.frombuffer(mem, np.uint8, nbytes)
        else:
            host = np.empty(nbytes, np.uint8)
            host_ptr = host.ctypes.data
        host[:] = 0x5A
        kind = 1 if direction == "h2d" else 2
        rt = cp.cuda.runtime

        def call():
            s = cp.cuda.get_current_stream().ptr
            if kind == 1:
                rt.memcpyAsync(dev.data.ptr, host_ptr, nbytes, 1, s)
            else:
                rt.memcpyAsync(host_ptr, dev.data.ptr, nbytes, 2, s)

        t = self.clock.time(call, max(5, min(20, self.cfg.repeat)), 2, stall=False)
        return {"bytes": nbytes, "buffer_bytes": nbytes, "buffers": 1, "ms": t.ms,
                "gbps": gbps(nbytes, t.ms), "samples": len(t.samples),
                "what": f"{direction.upper()} from {'pinned' if pinned else 'pageable'} host memory"}

    def ceilings(self) -> dict:
        """The device's limits, measured before any op: a large copy and the PCIe copies."""
        out = {"copy_large": None, "h2d_pinned": None, "d2h_pinned": None, "h2d_pageable": None,
               "copy_same_size": []}
        if self.gpu:
            free, _ = self.xp.cuda.runtime.memGetInfo()
            big = self.cfg.large_copy_bytes
            while big > 64 * MIB and 2 * big > 0.6 * free:
                big //= 2
            try:
                out["copy_large"] = self.copy_ceiling(2 * big, nbuf=1, repeat=20, stall=False)
            except Exception as e:  # noqa: BLE001
                self.log(f"large copy failed: {_err(e)}")
            for key, d, pinned in (("h2d_pinned", "h2d", True), ("d2h_pinned", "d2h", True),
                                   ("h2d_pageable", "h2d", False)):
                try:
                    out[key] = self.pcie(d, pinned)
                except Exception as e:  # noqa: BLE001
                    self.log(f"{key} failed: {_err(e)}")
        else:
            big = min(self.cfg.large_copy_bytes, 64 * MIB)
            out["copy_large"] = self.copy_ceiling(2 * big, nbuf=1, repeat=5, stall=False)
        return out

    # -- one op ------------------------------------------------------------------
    def bench_op(self, spec, inputs, peers_for, progress) -> list:
        cfg = self.cfg
        rows = []
        n = cfg.batch
        why = _unsupported(spec, cfg)
        peer_fns = peers_for(spec.name) if cfg.peers else {}
        if why:
            for be in cfg.backends:
                rows.append(_row(spec.name, "gpuaug", be, "unsupported", why))
                progress.step(f"{spec.name} {be}")
            for lib in peer_fns:
                rows.append(_row(spec.name, lib, "", "skipped", f"gpuaug: {why}"))
                progress.step(f"{spec.name} {lib}")
            return rows
        try:
            kwargs = example_kwargs(spec, cfg.seed + 1, n, cfg.height, cfg.width)
            params = describe_params(kwargs)
        except Exception as e:  # noqa: BLE001 - a broken example must not stop the other ops
            why = f"OpSpec.example failed: {_err(e)}"
            for be in cfg.backends:
                rows.append(_row(spec.name, "gpuaug", be, "error", why))
                progress.step(f"{spec.name} {be}")
            for lib in peer_fns:
                rows.append(_row(spec.name, lib, "", "skipped", f"gpuaug: {why}"))
                progress.step(f"{spec.name} {lib}")
            return rows
        for be in cfg.backends:
            t0 = time.perf_counter()
            rows.append(self.bench_backend(spec, be, inputs, kwargs, params))
            progress.step(f"{spec.name} gpuaug/{be}")
            self.log(f"{spec.name:22s} gpuaug/{be:6s} {rows[-1]['status']:>9s} "
                     f"{time.perf_counter() - t0:6.1f}s")
        self.free()
        if peer_fns:
            from gpuaug import bench_peers as bp

            shared = bp.PeerInput(inputs, cfg.layout, gpu=self.gpu)  # conversions made once per op
        for lib, make in peer_fns.items():
            t0 = time.perf_counter()
            rows.append(self.bench_peer(spec, lib, make, shared, kwargs, params))
            progress.step(f"{spec.name} {lib}")
            self.log(f"{spec.name:22s} {lib:13s} {rows[-1]['status']:>9s} "
                     f"{time.perf_counter() - t0:6.1f}s")
            self.free(collect=True)
        if peer_fns:
            del shared
            self.free(collect=True)
        self._refs.pop(spec.name, None)
        ref = [r for r in rows if r["library"] == "gpuaug" and r["ms"] and r["check"] != "fail"]
        if ref:
            best = min(ref, key=lambda r: r["ms"])
            for r in rows:
                if r["library"] != "gpuaug" and r["ms"]:
                    r["speedup"] = r["ms"] / best["ms"]
                    r["extra"]["speedup_vs"] = best["variant"]
        return rows

    def bench_backend(self, spec, be, inputs, kwargs, params) -> dict:
        cfg = self.cfg
        row = _row(spec.name, "gpuaug", be, params=params)
        if be not in tuple(spec.backends):
            row.update(status="unsupported", reason=f"backend {be!r} not offered by this op")
            return row
        if (be in ("cuda", "numba")) != self.gpu:
            row.update(status="needs GPU" if be != "cpu" else "unsupported",
                       reason=("the CUDA backends need a GPU (run with --device gpu on a GPU machine)"
                               if be != "cpu" else "backend 'cpu' runs on NumPy input; use --device cpu"))
            return row
        # Correctness first: the first samples against the CPU twin.
        if self.gpu:
            k = check_samples(cfg)
            try:
                if spec.name not in self._refs:  # one CPU reference per op, for every backend
                    kw_small = example_kwargs(spec, cfg.seed + 2, k, cfg.height, cfg.width)
                    self._refs[spec.name] = (kw_small, cpu_reference(spec, inputs[0][:k], kw_small, cfg.layout))
                kw_small, ref = self._refs[spec.name]
                if hasattr(ref, "result"):  # computed by a worker process
                    ref = ref.result()
                    self._refs[spec.name] = (kw_small, ref)
                ok, err = check_backend(spec, be, inputs[0][:k], kw_small, cfg.layout, ref=ref)
                row.update(check="pass" if ok else "fail", max_error=err if math.isfinite(err) else None)
                if not ok:
                    row["note"] = ("differs from the CPU twin beyond tolerance "
                                   f"(max abs error {err:g})")
            except Exception as e:  # noqa: BLE001
                row.update(status="error", reason=f"check: {_err(e)}")
                return row
        try:
            call, y0, use_out = prepare_call(spec, be, inputs, kwargs, cfg.layout, self.xp)
            t = self.clock.time(call, self.repeats(), cfg.warmup)
            row["loop_ms"] = self.clock.loop(call, k=max(10, min(100, self.repeats())))
            read, written = count_bytes(spec, inputs[0], y0, kwargs)
            copy = self.copy_ceiling(read + written)
            _fill_figures(row, t, cfg.batch, read, written, copy["gbps"])
            row.update(in_dtype=cfg.dtype, out_dtype=str(y0.dtype), out_shape=[int(v) for v in y0.shape])
            if not use_out:
                row["note"] = (row["note"] + "; " if row["note"] else "") + "timed without out= (allocates)"
            if t.host_bound:
                row["note"] = (row["note"] + "; " if row["note"] else "") + \
                    "host-bound: times include launch gaps"
            del call, y0
        except Exception as e:  # noqa: BLE001
            row.update(status="error", reason=_err(e), timing=None)
        return row

    def bench_peer(self, spec, lib, make, batch, kwargs, params) -> dict:
        """One peer row; ``batch``: the op's :class:`gpuaug.bench_peers.PeerInput`."""
        from gpuaug import bench_peers as bp

        cfg = self.cfg
        row = _row(spec.name, lib, getattr(make, "variant", ""), params=params)
        row["note"] = getattr(make, "note", "")
        if self.over_budget():
            row.update(status="skipped", reason=f"time budget of {cfg.budget_s:g} s spent")
            return row
        missing = bp.missing(lib)
        if missing:
            row.update(status="not installed", reason=missing)
            return row
        try:
            fn = make(batch, kwargs)
            if isinstance(fn, bp.Marginal):
                out = fn.with_op()
                fn.without_op()
                t = time_marginal(fn, self.clock, max(5, min(self.repeats(), 30)), cfg.warmup)
                if t.extra["marginal_ms"] <= marginal_noise(t):
                    row.update(status="below noise", reason=(
                        f"marginal cost {t.extra['marginal_ms']:.4g} ms is within the pipeline's noise "
                        f"(with the op {t.extra['pipeline_ms']:.4g} ms, without {t.extra['baseline_ms']:.4g} ms)"),
                        timing="marginal", extra=dict(t.extra))
                    return row
                out_b = fn.output_bytes(out)
                in_b = _nbytes_size(batch.arrays[0])
            else:
                out = fn()
                self.clock.sync()
                t = self.clock.time(fn, self.repeats(), cfg.warmup)
                row["loop_ms"] = self.clock.loop(fn, k=max(10, min(100, self.repeats())))
                in_b = _nbytes_size(getattr(fn, "inputs", batch.arrays)[0])
                out_b = _nbytes_size(out)
            read = in_b[0]
            if getattr(spec, "changes_shape", False) and out_b[1] < in_b[1]:
                read = in_b[0] * out_b[1] // in_b[1]
            copy = self.copy_ceiling(read + out_b[0])
            _fill_figures(row, t, cfg.batch, read, out_b[0], copy["gbps"])
            row["note"] = "; ".join(x for x in (getattr(make, "note", ""), getattr(fn, "note", "")) if x)
            row["variant"] = getattr(fn, "variant", "") or row["variant"]
            row["in_dtype"] = getattr(fn, "in_dtype", None) or cfg.dtype
            if t.host_bound:
                row["note"] = (row["note"] + "; " if row["note"] else "") + \
                    "host-bound: times include launch gaps or syncs"
            del fn, out
        except bp.PeerUnavailable as e:
            row.update(status=e.status, reason=str(e))
        except Exception as e:  # noqa: BLE001
            row.update(status="error", reason=_err(e))
        return row

    def submit_references(self, specs, inputs):
        """Start the CPU references of every op's check in worker processes (see
        :func:`reference_pool`); without a pool they are computed when first needed."""
        cfg = self.cfg
        workers = cfg.ref_workers if cfg.ref_workers >= 0 else min(8, max(0, (os.cpu_count() or 1) // 2))
        if not any(b in ("cuda", "numba") for b in cfg.backends):
            return
        try:
            pool = reference_pool(workers)
        except Exception as e:  # noqa: BLE001
            self.log(f"no reference pool ({_err(e)}); CPU references in-process")
            return
        if pool is None:
            return
        k = check_samples(cfg)
        x = _to_host(inputs[0][:k])
        for spec in specs:
            if _unsupported(spec, cfg):
                continue
            kw_small = example_kwargs(spec, cfg.seed + 2, k, cfg.height, cfg.width)
            self._refs[spec.name] = (kw_small, pool.submit(_ref_job, spec.name, x, kw_small, cfg.layout))

    # -- everything ------------------------------------------------------------------
    def run(self) -> dict:
        from gpuaug import bench_peers as bp

        cfg = self.cfg
        specs = resolve_ops(cfg.ops)
        created = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        stream_ctx = self.xp.cuda.Stream.null if self.gpu else _Null()
        peers_for = (lambda name: bp.peers_for(name, cfg.libraries)) if cfg.peers else (lambda name: {})
        total = sum(len(cfg.backends) + len(peers_for(s.name)) for s in specs)
        progress = _Progress(total, cfg.progress, desc=cfg.case)
        rows = []
        with stream_ctx:
            ceilings = self.ceilings()
            in_bytes = int(np.prod(cfg.shape)) * np.dtype(cfg.dtype).itemsize
            nbuf = n_buffers(in_bytes, self.cache_bytes, cfg.buffers, cap=64 if self.gpu else 8)
            inputs = [random_batch(self.xp, cfg.seed + 100 + i, cfg.shape, cfg.dtype) for i in range(nbuf)]
            if self.gpu:
                self.submit_references(specs, inputs)
            try:
                for spec in specs:
                    rows += self.bench_op(spec, inputs, peers_for, progress)
            finally:
                progress.close()
                del inputs
                self.free()
        ceilings["copy_same_size"] = sorted(self._copies.values(), key=lambda c: c["bytes"])
        if ceilings["copy_large"] in ceilings["copy_same_size"]:
            ceilings["copy_same_size"].remove(ceilings["copy_large"])
        doc = {
            "schema": SCHEMA_ID,
            "created": created,
            "config": {**{k: v for k, v in dataclasses.asdict(cfg).items() if k != "progress"},
                       "ops": [s.name for s in specs], "backends": list(cfg.backends),
                       "libraries": list(cfg.libraries) if cfg.libraries else None,
                       "case": cfg.case, "buffers": nbuf, "input_bytes": in_bytes},
            "device": self.device,
            "versions": versions(),
            "ceilings": ceilings,
            "rows": rows,
            "summary": summarize(rows),
            "elapsed_s": time.perf_counter() - self.t0,
        }
        return doc


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def summarize(rows) -> list:
    """Per op: the fastest checked gpuaug row, the fastest peer, and the speed-up over it."""
    out = []
    ops = list(dict.fromkeys(r["op"] for r in rows))
    for op in ops:
        mine = [r for r in rows if r["op"] == op and r["library"] == "gpuaug" and r["ms"]
                and r["check"] != "fail"]
        peers = [r for r in rows if r["op"] == op and r["library"] != "gpuaug" and r["ms"]]
        best = min(mine, key=lambda r: r["ms"]) if mine else None
        fp = min(peers, key=lambda r: r["ms"]) if peers else None
        out.append({
            "op": op,
            "gpuaug_variant": best["variant"] if best else None,
            "gpuaug_ms": best["ms"] if best else None,
            "gpuaug_gbps": best["gbps"] if best else None,
            "pct_of_copy": best["pct_of_copy"] if best else None,
            "fastest_peer": f"{fp['library']} {fp['variant']}".strip() if fp else None,
            "fastest_peer_ms": fp["ms"] if fp else None,
            "speedup_over_fastest_peer": (fp["ms"] / best["ms"]) if (fp and best) else None,
        })
    return out


def merge(docs) -> list:
    """Merge documents of the same case (e.g. op subsets run on separate GPU calls) into one
    per case. Rows keep their own same-size copy figures; a later row for the same (op,
    library, variant) replaces an earlier one; the ceilings are the first document's.
    Returns one document per case, in first-seen order.
    """
    import copy

    by_case = {}
    for d in docs:
        by_case.setdefault(d["config"]["case"], []).append(d)
    out = []
    for case, group in by_case.items():
        names = {d["device"]["name"] for d in group}
        if len(names) > 1:
            raise ValueError(f"merge: case {case} was measured on different devices {sorted(names)}; "
                             "merge runs of one device only")
        base = copy.deepcopy(group[0])
        rows, ops, copies = {}, [], {}
        for d in group:
            for r in d["rows"]:
                rows[(r["op"], r["library"], r["variant"])] = r
            ops += [o for o in d["config"]["ops"] if o not in ops]
            for c in d["ceilings"]["copy_same_size"]:
                copies.setdefault((c["bytes"], c["buffers"]), c)
        order = {o: i for i, o in enumerate(ops)}
        base["rows"] = sorted(rows.values(), key=lambda r: order.get(r["op"], len(order)))
        base["config"]["ops"] = ops
        base["ceilings"]["copy_same_size"] = sorted(copies.values(), key=lambda c: c["bytes"])
        base["summary"] = summarize(base["rows"])
        base["elapsed_s"] = float(sum(d["elapsed_s"] for d in group))
        base["merged_from"] = [d["created"] for d in group]
        out.append(base)
    return out


def run(cfg: Config, log=None) -> dict:
    """Benchmark one case and return the JSON document (see :data:`SCHEMA`)."""
    return Runner(cfg, log=log).run()


# ----------------------------------------------------------------------------- schema
_NUM = {"type": ["number", "null"]}
_INT = {"type": ["integer", "null"]}
_STR = {"type": ["string", "null"]}
_COPY = {
    "type": ["object", "null"],
    "required": ["bytes", "buffer_bytes", "buffers", "ms", "gbps", "samples", "what"],
    "properties": {"bytes": {"type": "integer", "minimum": 1}, "buffer_bytes": {"type": "integer"},
                   "buffers": {"type": "integer", "minimum": 1}, "ms": {"type": "number"},
                   "gbps": {"type": "number"}, "samples": {"type": "integer"},
                   "what": {"type": "string"}},
}
_ROW = {
    "type": "object",
    "required": ["op", "library", "variant", "status", "reason", "check", "max_error", "timing",
                 "ms", "ms_p10", "ms_p90", "samples", "host_us", "host_bound", "bytes_read",
                 "bytes_written", "gbps", "copy_gbps", "pct_of_copy", "images_per_s", "speedup",
                 "in_dtype", "out_dtype", "out_shape", "note", "params", "extra"],
    "properties": {
        "op": {"type": "string"},
        "library": {"type": "string", "description": "'gpuaug' or the peer library"},
        "variant": {"type": "string", "description": "gpuaug backend, or the peer call timed"},
        "status": {"enum": list(STATUSES)},
        "reason": _STR,
        "check": {"enum": ["pass", "fail", None]},
        "max_error": _NUM,
        "timing": {"enum": ["events", "wall", "marginal", None]},
        "ms": _NUM, "ms_p10": _NUM, "ms_p90": _NUM,
        "samples": {"type": "integer", "minimum": 0},
        "host_us": _NUM,
        "loop_ms": {"type": ["number", "null"],
                    "description": "ms per call over back-to-back calls and one sync (GPU only)"},
        "host_bound": {"type": "boolean"},
        "bytes_read": _INT, "bytes_written": _INT,
        "gbps": _NUM, "copy_gbps": _NUM, "pct_of_copy": _NUM, "images_per_s": _NUM,
        "speedup": {"type": ["number", "null"],
                    "description": "peer ms / fastest checked gpuaug ms (peers only)"},
        "in_dtype": _STR, "out_dtype": _STR,
        "out_shape": {"type": ["array", "null"], "items": {"type": "integer"}},
        "note": {"type": "string"},
        "params": {"type": "object", "additionalProperties": {"type": "string"}},
        "extra": {"type": "object"},
    },
    "additionalProperties": False,
}
_SUMMARY = {
    "type": "object",
    "required": ["op", "gpuaug_variant", "gpuaug_ms", "gpuaug_gbps", "pct_of_copy", "fastest_peer",
                 "fastest_peer_ms", "speedup_over_fastest_peer"],
    "properties": {"op": {"type": "string"}, "gpuaug_variant": _STR, "gpuaug_ms": _NUM,
                   "gpuaug_gbps": _NUM, "pct_of_copy": _NUM, "fastest_peer": _STR,
                   "fastest_peer_ms": _NUM, "speedup_over_fastest_peer": _NUM},
    "additionalProperties": False,
}
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_ID,
    "title": "gpuaug bench results (one case)",
    "type": "object",
    "required": ["schema", "created", "config", "device", "versions", "ceilings", "rows", "summary",
                 "elapsed_s"],
    "properties": {
        "schema": {"const": SCHEMA_ID},
        "created": {"type": "string", "description": "UTC, ISO 8601"},
        "config": {
            "type": "object",
            "required": ["ops", "batch", "height", "width", "channels", "dtype", "layout", "backends",
                         "peers", "libraries", "repeat", "warmup", "device", "buffers", "seed",
                         "check_batch", "budget_s", "case", "input_bytes"],
            "properties": {
                "ops": {"type": "array", "items": {"type": "string"}},
                "batch": {"type": "integer", "minimum": 1},
                "height": {"type": "integer", "minimum": 1},
                "width": {"type": "integer", "minimum": 1},
                "channels": {"type": "integer", "minimum": 1},
                "dtype": {"enum": list(TOLERANCES)},
                "layout": {"enum": ["NHWC", "NCHW"]},
                "backends": {"type": "array", "items": {"enum": ["cuda", "numba", "cpu"]}},
                "peers": {"type": "boolean"},
                "libraries": {"type": ["array", "null"], "items": {"type": "string"}},
                "repeat": {"type": "integer", "minimum": 1},
                "warmup": {"type": "integer", "minimum": 0},
                "device": {"enum": ["gpu", "cpu"]},
                "buffers": {"type": "integer", "minimum": 1},
                "seed": {"type": "integer"},
                "check_batch": {"type": "integer"},
                "ref_workers": {"type": "integer"},
                "budget_s": _NUM,
                "case": {"type": "string"},
                "input_bytes": {"type": "integer", "minimum": 1},
            },
        },
        "device": {
            "type": "object",
            "required": ["kind", "name", "compute_capability", "memory_bytes", "l2_bytes", "sm_count",
                         "driver", "cuda_driver", "cuda_runtime"],
            "properties": {"kind": {"enum": ["gpu", "cpu"]}, "name": {"type": "string"},
                           "compute_capability": _STR, "memory_bytes": _INT, "l2_bytes": _INT,
                           "sm_count": _INT, "driver": _STR, "cuda_driver": _STR,
                           "cuda_runtime": _STR},
        },
        "versions": {"type": "object", "required": ["python", "gpuaug", "numpy"],
                     "additionalProperties": _STR},
        "ceilings": {
            "type": "object",
            "required": ["copy_large", "h2d_pinned", "d2h_pinned", "h2d_pageable", "copy_same_size"],
            "properties": {"copy_large": _COPY, "h2d_pinned": _COPY, "d2h_pinned": _COPY,
                           "h2d_pageable": _COPY,
                           "copy_same_size": {"type": "array", "items": _COPY}},
        },
        "rows": {"type": "array", "items": _ROW},
        "summary": {"type": "array", "items": _SUMMARY},
        "elapsed_s": {"type": "number", "minimum": 0},
    },
}

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _type_ok(value, t) -> bool:
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, _TYPES[t])


def schema_errors(value, schema=None, path="$") -> list:
    """Errors of ``value`` against a JSON Schema (the subset :data:`SCHEMA` uses: type,
    enum, const, required, properties, additionalProperties, items, minimum)."""
    schema = SCHEMA if schema is None else schema
    errs = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, t) for t in types):
            return [f"{path}: expected {' or '.join(types)}, got {type(value).__name__} {value!r:.60}"]
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        errs.append(f"{path}: expected {schema['const']!r}, got {value!r}")
    if "minimum" in schema and isinstance(value, (int, float)) and value < schema["minimum"]:
        errs.append(f"{path}: {value} < minimum {schema['minimum']}")
    if isinstance(value, dict):
        for k in schema.get("required", ()):
            if k not in value:
                errs.append(f"{path}: missing {k!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if k in props:
                errs += schema_errors(v, props[k], f"{path}.{k}")
            elif extra is False:
                errs.append(f"{path}: unexpected key {k!r}")
            elif isinstance(extra, dict):
                errs += schema_errors(v, extra, f"{path}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errs += schema_errors(v, schema["items"], f"{path}[{i}]")
    return errs


def consistency_errors(doc) -> list:
    """Figures that disagree: GB/s = bytes / time, images/s = N / time, % = GB/s / copy."""
    errs = []
    n = doc["config"]["batch"]

    def close(a, b):
        return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-12)

    for i, r in enumerate(doc["rows"]):
        where = f"rows[{i}] ({r['op']} {r['library']} {r['variant']})"
        if r["status"] == "ok":
            for k in ("ms", "gbps", "images_per_s", "bytes_read", "bytes_written"):
                if r[k] is None:
                    errs.append(f"{where}: status ok but {k} is null")
            if errs:
                continue
            if r["ms"] <= 0:
                errs.append(f"{where}: ms {r['ms']} <= 0")
                continue
            b = r["bytes_read"] + r["bytes_written"]
            if not close(r["gbps"], b / r["ms"] / 1e6):
                errs.append(f"{where}: gbps {r['gbps']} != bytes/time {b / r['ms'] / 1e6}")
            if not close(r["images_per_s"], n / r["ms"] * 1e3):
                errs.append(f"{where}: images_per_s {r['images_per_s']} != N/time")
            if r["copy_gbps"] and r["pct_of_copy"] is not None and \
                    not close(r["pct_of_copy"], 100 * r["gbps"] / r["copy_gbps"]):
                errs.append(f"{where}: pct_of_copy disagrees with gbps / copy_gbps")
            if r["ms_p10"] is not None and r["timing"] != "marginal" and \
                    not (r["ms_p10"] <= r["ms"] * (1 + 1e-9) and r["ms"] <= r["ms_p90"] * (1 + 1e-9)):
                errs.append(f"{where}: median {r['ms']} outside [p10, p90]")
        elif r["ms"] is not None:
            errs.append(f"{where}: status {r['status']!r} but has a time")
        if r["status"] != "ok" and not r["reason"]:
            errs.append(f"{where}: status {r['status']!r} without a reason")
    for c in [doc["ceilings"][k] for k in ("copy_large", "h2d_pinned", "d2h_pinned", "h2d_pageable")] + \
            list(doc["ceilings"]["copy_same_size"]):
        if c and not close(c["gbps"], c["bytes"] / c["ms"] / 1e6):
            errs.append(f"ceiling {c['what']} {c['bytes']} B: gbps disagrees with bytes/time")
    return errs


def validate(doc) -> list:
    """Every schema error and inconsistency of a bench document (empty list: valid)."""
    errs = schema_errors(doc)
    if errs:
        return errs
    return consistency_errors(doc)


# ----------------------------------------------------------------------------- output
def _slug(s: str) -> str:
    s = re.sub(r"^nvidia\s+", "", str(s).strip(), flags=re.I)
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-") or "device"


def expand_path(path: str, doc: dict, multi: bool = False) -> str:
    """Fill ``{date}``, ``{gpu}`` (the device's name, slugged) and ``{case}`` in ``path``.

    With several cases in one run and no ``{case}`` in ``path``, ``-{case}`` goes before
    the extension, so the files do not overwrite each other.
    """
    if multi and "{case}" not in path:
        root, ext = os.path.splitext(path)
        path = f"{root}-{{case}}{ext}"
    return path.format(date=doc["created"][:10], gpu=_slug(doc["device"]["name"]),
                       case=doc["config"]["case"])


def write_json(doc: dict, path: str) -> str:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=_json_default)
        f.write("\n")
    return path


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _human(nbytes) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes} B"


def _num(v, suffix=""):
    """A figure in 3-4 significant digits, whatever its size ('-' for none)."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        txt = f"{v:.0f}"
    elif a >= 100:
        txt = f"{v:.1f}"
    elif a >= 1:
        txt = f"{v:.2f}"
    elif a == 0:
        txt = "0"
    else:
        txt = f"{v:.3g}"
    return txt + suffix


def format_table(doc: dict) -> str:
    """The terminal table: one line per row, ceilings on top, summary at the end."""
    dev, cfg, c = doc["device"], doc["config"], doc["ceilings"]
    lines = [f"gpuaug bench  {cfg['case']}  on {dev['name']}  ({doc['created']})"]
    ceil = []
    if c["copy_large"]:
        ceil.append(f"copy of {_human(c['copy_large']['buffer_bytes'])}: {c['copy_large']['gbps']:.0f} GB/s")
    for k, label in (("h2d_pinned", "H2D pinned"), ("d2h_pinned", "D2H pinned"),
                     ("h2d_pageable", "H2D pageable")):
        if c[k]:
            ceil.append(f"{label}: {c[k]['gbps']:.1f} GB/s")
    lines.append("ceilings: " + ("; ".join(ceil) if ceil else "none measured"))
    # Op names are never cut (crop_mirror_normalize is 21 characters). On the CPU the %copy
    # column is left out: a NumPy copy of the same bytes is no ceiling for a per-pixel loop
    # (flip ran at 228% of it), so the ratio would mislead; the JSON keeps it.
    ow = max([20] + [len(r["op"]) for r in doc["rows"]] + [len(s["op"]) for s in doc["summary"]])
    on_gpu = dev["kind"] == "gpu"
    pct = (lambda v: f" {_num(v):>6s}") if on_gpu else (lambda v: "")
    hl = (lambda r: f" {_num(r.get('host_us')):>7s} {_num(r.get('loop_ms')):>8s}") if on_gpu else (lambda r: "")
    hdr = (f"{'op':{ow}s} {'library':12s} {'variant':24s} {'check':5s} {'ms':>9s} {'GB/s':>8s}"
           f"{' ' + format('%copy', '>6s') if on_gpu else ''}"
           f"{' ' + format('host us', '>7s') + ' ' + format('loop ms', '>8s') if on_gpu else ''}"
           f" {'images/s':>10s} {'speed-up':>8s}  note")
    lines += [hdr, "-" * len(hdr)]
    for r in doc["rows"]:
        if r["status"] == "ok":
            tail = r["note"]
            lines.append(
                f"{r['op']:{ow}s} {r['library'][:12]:12s} {r['variant'][:24]:24s} "
                f"{(r['check'] or '-'):5s} {_num(r['ms']):>9s} {_num(r['gbps']):>8s}{pct(r['pct_of_copy'])}{hl(r)} "
                f"{_num(r['images_per_s']):>10s} {_num(r['speedup'], 'x'):>8s}  {tail}")
        else:
            lines.append(f"{r['op']:{ow}s} {r['library'][:12]:12s} {r['variant'][:24]:24s} "
                         f"{'-':5s} {r['status'].upper()}: {r['reason']}")
    if any(s["fastest_peer"] for s in doc["summary"]):
        lines.append("")
        lines.append(f"{'op':{ow}s} {'gpuaug':>10s} {'GB/s':>8s}{' ' + format('%copy', '>6s') if on_gpu else ''}  {'fastest peer':32s} "
                     f"{'ms':>9s} {'speed-up':>8s}")
        for s in doc["summary"]:
            lines.append(f"{s['op']:{ow}s} {_num(s['gpuaug_ms']):>10s} "
                         f"{_num(s['gpuaug_gbps']):>8s}{pct(s['pct_of_copy'])}  "
                         f"{(s['fastest_peer'] or '-')[:32]:32s} {_num(s['fastest_peer_ms']):>9s} "
                         f"{_num(s['speedup_over_fastest_peer'], 'x'):>8s}")
    lines.append(f"({len(doc['rows'])} rows in {doc['elapsed_s']:.1f} s; times are medians of per-call "
                 f"{'CUDA events' if dev['kind'] == 'gpu' else 'wall clock'}; "
                 + ("host us: host time per call with the device kept busy; loop ms: per call over "
                    "back-to-back calls and one sync, what a training loop gets; " if on_gpu else "")
                 + "GB/s counts bytes read + "
                 "written once; " + ("%copy is of a device copy of the same bytes)" if on_gpu else
                                     "no %copy column on the CPU: a NumPy copy of the same bytes is no "
                                     "ceiling for the per-pixel twins; the JSON keeps it as pct_of_copy)"))
    return "\n".join(lines)


def plot(doc: dict, path: str) -> str | None:
    """A PNG bar chart of GB/s per op and library, the same-size copy drawn over each op and
    the large copy across the chart. Returns None (writes nothing) without matplotlib."""
    if importlib.util.find_spec("matplotlib") is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in doc["rows"] if r["status"] == "ok" and r["gbps"]]
    ops = list(dict.fromkeys(r["op"] for r in doc["rows"]))
    series = list(dict.fromkeys((r["library"], r["variant"] if r["library"] == "gpuaug" else "")
                                for r in rows))
    fig_w = min(24.0, max(8.0, 3 + 0.55 * len(ops) * max(1, len(series)) ** 0.5))
    fig, ax = plt.subplots(figsize=(fig_w, 6), dpi=120)
    width = 0.8 / max(1, len(series))
    cmap = plt.get_cmap("tab10" if len(series) <= 10 else "tab20")
    for si, (lib, var) in enumerate(series):
        xs, ys = [], []
        for oi, op in enumerate(ops):
            cand = [r for r in rows if r["op"] == op and r["library"] == lib and
                    (r["variant"] == var or lib != "gpuaug")]
            if cand:
                xs.append(oi - 0.4 + width * (si + 0.5))
                ys.append(max(c["gbps"] for c in cand))
        label = f"gpuaug {var}" if lib == "gpuaug" else lib
        ax.bar(xs, ys, width=width, label=label, color=cmap(si % cmap.N))
    labelled = False
    for oi, op in enumerate(ops):
        copies = [r["copy_gbps"] for r in rows if r["op"] == op and r["library"] == "gpuaug" and r["copy_gbps"]]
        if copies:
            ax.hlines(copies[0], oi - 0.45, oi + 0.45, colors="black", linewidth=1.5,
                      label=None if labelled else "copy of the same bytes (per op)")
            labelled = True
    big = doc["ceilings"]["copy_large"]
    if big:
        ax.axhline(big["gbps"], color="red", linestyle="--", linewidth=1,
                   label=f"copy of {_human(big['buffer_bytes'])}: {big['gbps']:.0f} GB/s")
    ax.set_xticks(range(len(ops)))
    ax.set_xticklabels(ops, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("GB/s (bytes read + written once)")
    if rows and max(r["gbps"] for r in rows) / max(1e-9, min(r["gbps"] for r in rows)) > 50:
        ax.set_yscale("log")
    ax.set_title(f"gpuaug bench {doc['config']['case']} on {doc['device']['name']} "
                 f"({doc['created'][:10]})", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    ax.legend(seen.values(), seen.keys(), fontsize=7, ncol=2, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


__all__ = ["Config", "Runner", "run", "merge", "SCHEMA", "SCHEMA_ID", "validate", "schema_errors",
           "consistency_errors", "format_table", "plot", "write_json", "expand_path", "count_bytes",
           "compare", "GpuClock", "CpuClock", "EventTimer", "Timing", "example_kwargs", "check_backend",
           "prepare_call", "unsupported_reason", "cpu_reference", "check_samples", "reference_pool", "random_batch", "n_buffers", "versions",
           "device_info", "gpu_status", "backend_status", "gbps"]
