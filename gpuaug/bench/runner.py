"""One benchmark case: ceilings, then every op's backends and peers, into a JSON document."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.util
import math
import os
import sys
import time

import numpy as np

from .checks import (_ref_job, _to_host, _unsupported, check_backend, check_samples, cpu_reference,
                     describe_params, example_kwargs, prepare_call, reference_pool)
from .clocks import (CpuClock, GpuClock, Timing, _nbytes_size, count_bytes, gbps, marginal_noise,
                     time_marginal)
from .config import MIB, SCHEMA_ID, Config
from .env import device_info, gpu_status, versions
from .report import summarize


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
            from . import peers as bp

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
        """One peer row; ``batch``: the op's :class:`gpuaug.bench.peers.PeerInput`."""
        from . import peers as bp

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
        from . import peers as bp

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


def run(cfg: Config, log=None) -> dict:
    """Benchmark one case and return the JSON document (see :data:`SCHEMA`)."""
    return Runner(cfg, log=log).run()
