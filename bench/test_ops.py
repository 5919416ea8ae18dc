"""One microbenchmark per registered op and backend, per case, plus the device's ceilings.

pytest-benchmark's columns are CUDA-event times per call (see conftest.gpu_benchmark);
``extra_info`` of each benchmark holds the figures ``gpuaug bench`` reports: GB/s (bytes
read + written once), the same-size copy's GB/s and the percentage, images/s, the check
against the CPU twin. Run: ``pytest bench/ --benchmark-only`` (bench/README.md).
"""
from __future__ import annotations

import statistics

import pytest

from _harness import gpu_benchmark


def _figures(benchmark, ctx, secs, read, written, copy_gbps=None):
    from gpuaug import bench

    ms = statistics.median(secs) * 1e3
    info = benchmark.extra_info
    info.update(case=ctx.cfg.case, ms=ms, bytes_read=int(read), bytes_written=int(written),
                gbps=bench.gbps(read + written, ms), images_per_s=ctx.cfg.batch / ms * 1e3)
    if copy_gbps:
        info.update(copy_gbps=copy_gbps, pct_of_copy=100 * info["gbps"] / copy_gbps)
    return info


def test_op(benchmark, case_ctx, gpuaug_op, gpuaug_backend):
    """An op on one backend: checked against the CPU twin, then timed with events."""
    op_name, backend = gpuaug_op, gpuaug_backend
    import gpuaug
    from gpuaug import bench

    ctx = case_ctx
    spec = gpuaug.registry[op_name]
    why = bench.unsupported_reason(spec, ctx.cfg)
    if why:
        pytest.skip(f"{op_name}: {why}")
    if backend not in tuple(spec.backends):
        pytest.skip(f"{op_name} has no {backend!r} backend")
    cfg = ctx.cfg
    benchmark.group = f"{cfg.case}"
    benchmark.name = f"{op_name}[{backend}]"
    k = bench.check_samples(cfg)
    if op_name not in ctx.refs:  # one CPU reference per op and case, shared by the backends
        kw_small = bench.example_kwargs(spec, cfg.seed + 2, k, cfg.height, cfg.width)
        ctx.refs[op_name] = (kw_small, bench.cpu_reference(spec, ctx.inputs[0][:k], kw_small, cfg.layout))
    kw_small, ref = ctx.refs[op_name]
    ok, err = bench.check_backend(spec, backend, ctx.inputs[0][:k], kw_small, cfg.layout, ref=ref)
    benchmark.extra_info.update(check="pass" if ok else "fail", max_error=err)
    assert ok, f"{op_name}/{backend} differs from the CPU twin (max abs error {err:g})"
    kwargs = bench.example_kwargs(spec, cfg.seed + 1, cfg.batch, cfg.height, cfg.width)
    call, y0, _ = bench.prepare_call(spec, backend, ctx.inputs, kwargs, cfg.layout, ctx.runner.xp)
    read, written = bench.count_bytes(spec, ctx.inputs[0], y0, kwargs)
    copy = ctx.runner.copy_ceiling(read + written)
    secs = gpu_benchmark(benchmark, ctx.runner, call, ctx.rounds)
    _figures(benchmark, ctx, secs, read, written, copy["gbps"])


def test_copy_same_size_as_input(benchmark, case_ctx):
    """The ceiling: a device-to-device copy of one input batch (read + write = 2 x input)."""
    ctx = case_ctx
    benchmark.group = f"{ctx.cfg.case}"
    benchmark.name = "copy[d2d, batch bytes]"
    nbytes = ctx.inputs[0].nbytes
    call, keep = ctx.runner._copy_call(nbytes, len(ctx.inputs))
    secs = gpu_benchmark(benchmark, ctx.runner, call, ctx.rounds)
    info = _figures(benchmark, ctx, secs, nbytes, nbytes)
    info["what"] = "device-to-device copy"
    del keep


def test_host_to_device_pinned(benchmark, case_ctx):
    """Pinned H2D of one input batch: the scheduler's ceiling (GB/s counts the bytes once)."""
    import cupy
    import numpy as np

    ctx = case_ctx
    benchmark.group = f"{ctx.cfg.case}"
    benchmark.name = "copy[h2d pinned, batch bytes]"
    nbytes = ctx.inputs[0].nbytes
    mem = cupy.cuda.alloc_pinned_memory(nbytes)
    np.frombuffer(mem, np.uint8, nbytes)[:] = 0x5A
    dev = cupy.empty(nbytes, np.uint8)

    def call():
        dev.data.copy_from_host_async(mem.ptr, nbytes, cupy.cuda.get_current_stream())

    secs = gpu_benchmark(benchmark, ctx.runner, call, max(5, ctx.rounds // 5))
    ms = statistics.median(secs) * 1e3
    benchmark.extra_info.update(case=ctx.cfg.case, ms=ms, bytes=nbytes, gbps=nbytes / ms / 1e6,
                                what="H2D from pinned host memory")
