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
- **Peers** (``peers=True``) come from :mod:`gpuaug.bench.peers`, one row per (op,
  library); ``speedup`` = peer time / the fastest checked gpuaug backend's time for the
  same images (> 1: gpuaug is faster). A peer's GB/s counts the bytes it actually moves in
  its own dtype and layout (kornia works in float32).

The JSON document is described by :data:`SCHEMA` (JSON Schema, draft 2020-12) and
checked by :func:`validate`, which also checks that the figures agree with each other.

Modules (everything public is re-exported here, so ``from gpuaug import bench`` is enough):
``config`` (:class:`Config`, constants), ``env`` (GPU status, device, versions, usable
backends), ``clocks`` (byte counting, :class:`GpuClock`, :class:`CpuClock`,
:class:`EventTimer`), ``checks`` (against the CPU twin), ``runner`` (:class:`Runner`,
:func:`run`), ``schema`` (:data:`SCHEMA`, :func:`validate`), ``report`` (summary, merge,
table, plot), ``peers/`` (one module per peer library) and ``e2e`` (``gpuaug bench --e2e``).
``gpuaug.bench_peers`` and ``gpuaug.bench_e2e`` are ``peers`` and ``e2e`` under their old names.

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

from .checks import (_ref_job, _to_host, _unsupported, check_backend, check_samples, compare,  # noqa: F401
                     cpu_reference, describe_params, example_kwargs, prepare_call, reference_pool,
                     unsupported_reason)
from .clocks import (CpuClock, EventTimer, GpuClock, Timing, _nbytes_size, count_bytes, gbps,  # noqa: F401
                     marginal_noise, time_marginal)
from .config import GIB, MIB, SCHEMA_ID, STATUSES, TOLERANCES, Config  # noqa: F401
from .env import backend_status, device_info, gpu_status, versions  # noqa: F401
from .report import _human, _num, expand_path, format_table, merge, plot, summarize, write_json  # noqa: F401
from .runner import Runner, n_buffers, random_batch, resolve_ops, run  # noqa: F401
from .schema import SCHEMA, consistency_errors, schema_errors, validate  # noqa: F401

__all__ = ["Config", "Runner", "run", "merge", "SCHEMA", "SCHEMA_ID", "validate", "schema_errors",
           "consistency_errors", "format_table", "plot", "write_json", "expand_path", "count_bytes",
           "compare", "GpuClock", "CpuClock", "EventTimer", "Timing", "example_kwargs", "check_backend",
           "prepare_call", "unsupported_reason", "cpu_reference", "check_samples", "reference_pool",
           "random_batch", "n_buffers", "versions", "device_info", "gpu_status", "backend_status", "gbps"]
