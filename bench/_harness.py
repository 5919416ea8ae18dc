"""Helpers of the bench/ suite (kept out of conftest.py so test modules can import them)."""
from __future__ import annotations

_GPU = None


def gpu_reason():
    """None when a GPU is usable, else why not (computed once)."""
    global _GPU
    if _GPU is None:
        from gpuaug import bench

        ok, why = bench.gpu_status()
        _GPU = "" if ok else why
    return _GPU or None


class CaseContext:
    """One case's inputs (rotated random buffers), runner (ceilings, same-size copies) and config."""

    def __init__(self, case, config):
        import numpy as np

        from gpuaug import bench

        n, h, w = (int(v) for v in case.lower().split("x"))
        self.cfg = bench.Config(batch=n, height=h, width=w, channels=config.getoption("--gpuaug-channels"),
                                dtype=config.getoption("--gpuaug-dtype"),
                                layout=config.getoption("--gpuaug-layout"), device="gpu", progress=False,
                                repeat=config.getoption("--gpuaug-rounds"))
        self.runner = bench.Runner(self.cfg)
        in_bytes = int(np.prod(self.cfg.shape)) * np.dtype(self.cfg.dtype).itemsize
        nbuf = bench.n_buffers(in_bytes, self.runner.cache_bytes)
        xp = self.runner.xp
        self.inputs = [bench.random_batch(xp, 100 + i, self.cfg.shape, self.cfg.dtype) for i in range(nbuf)]
        self.rounds = config.getoption("--gpuaug-rounds")
        self.refs = {}  # op -> (check kwargs, CPU reference)

    def close(self):
        self.inputs = []
        self.runner.free()


def gpu_benchmark(benchmark, runner, call, rounds, warmup=3):
    """Time ``call`` with ``benchmark.pedantic`` on CUDA events; returns per-round seconds.

    Each round's setup launches a spin kernel longer than the host's cost of one call, so
    the round's start event runs right before the call's work and the round measures the
    device time of that work (see gpuaug.bench, "Time on a GPU"). If the fixture cannot
    take a custom timer (a pytest-benchmark without ``_timer``), pytest-benchmark times
    the call plus a stream synchronisation with its wall clock, and the event figures come
    from gpuaug.bench.GpuClock instead (``extra_info['stats_timer']`` says which).
    """
    from gpuaug import bench

    clock = runner.clock
    host = clock.host_cost(call, warmup)
    spin_ns = int(3 * host * 1e9) + 50_000
    if hasattr(benchmark, "_timer"):
        timer = bench.EventTimer(cp=clock.cp)
        benchmark._timer = timer
        benchmark.pedantic(call, setup=lambda: clock.spin(spin_ns), rounds=rounds, warmup_rounds=1,
                           iterations=1)
        benchmark.extra_info["stats_timer"] = "cuda events (gpuaug.bench.EventTimer)"
        secs = timer.durations[-rounds:]
    else:  # pragma: no cover - depends on pytest-benchmark's internals
        def synced():
            call()
            clock.sync()

        benchmark.pedantic(synced, rounds=rounds, warmup_rounds=1, iterations=1)
        benchmark.extra_info["stats_timer"] = "wall clock of call + synchronize"
        secs = [s / 1e3 for s in clock.time(call, rounds, warmup).samples]
    benchmark.extra_info["host_us"] = host * 1e6
    return secs
