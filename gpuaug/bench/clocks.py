"""What a figure is made of: bytes charged to a call and its time (CUDA events or wall clock).

See :mod:`gpuaug.bench` ("Bytes", "Time on a GPU") for the method."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np


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
    // behind it run back to back (see gpuaug/bench/__init__.py, "Time on a GPU").
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


# ----------------------------------------------------------------------------- torch peers
def torch_ms(fn, iters, warmup, cuda=True):
    """Median ms per call: CUDA events around each call (gaps included), or wall time on the CPU."""
    import torch

    for _ in range(max(1, warmup)):
        fn()
    if not cuda:
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)
