"""DALI benchmark: what each gpuaug op costs inside a DALI pipeline, next to DALI's own ops.

Run on the GPU machine (``tests/gpu/dali_bench.sh`` wraps it)::

    python3 -m gpuaug.dali._bench --out dali_bench.json

Method (as DESIGN.md measured the python_function floor): a GPU batch of 256x224x224x3
uint8 from ``external_source`` (one device buffer, ``no_copy``), DALI's synchronous
executor (``exec_async=False, exec_pipelined=False``), per pipeline the median over
``--repeats`` blocks of ``--iters`` ``run()`` calls (device synchronised at block ends),
after ``--warmup`` runs. Reported in ms per batch *over the bare pipeline* (the same
pipeline returning the external_source output):

- ``floor``: a python_function that returns its inputs (DALI's own cost of a Python op);
- per gpuaug op: ``cuda`` (python_function, CUDA C) and ``numba`` (backend="numba":
  numba_function where DALI accepts the toolkit, else the Numba CUDA twin inside
  python_function), with per-sample parameters from ``external_source`` (the registry's
  ``example``); ``kernel``: the standalone op on the same batch timed with CUDA events;
  ``host``: Python time inside the callback per batch (where the time over the floor goes);
- DALI built-ins (flip, rotate, warp_affine, resize, gaussian_blur, brightness_contrast,
  hsv, crop_mirror_normalize) with random per-sample arguments;
- ``gpuaug.dali.compose`` of flip + rotate + color_jitter(brightness, contrast) +
  crop_mirror_normalize (random per sample, one python_function) against the chain of
  DALI's fn.flip, fn.rotate, fn.brightness_contrast, fn.crop_mirror_normalize, against
  the same four gpuaug ops unfused, and against ``gpuaug.dali.policy`` running the
  equivalent ``gpuaug.Compose`` policy (its fused passes).

``--device cpu`` runs the same on a CPU pipeline (small batch), to check the script
without a GPU. Writes JSON and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import gpuaug

from ._callback import call_host, host_kwargs

MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]



def overrides(op, h, w):
    """Parameters that differ from the registry's example, for like-for-like with DALI's ops
    (224 -> 112 resize, sigma 1.5, a 192x192 window of a 224x224 image): each OpSpec's
    ``bench_params``."""
    spec = gpuaug.registry[op]
    return spec.bench_params(h, w) if spec.bench_params is not None else {}


def peers():
    """gpuaug op -> DALI built-in with the same job (a graph of :meth:`Bench.builtins`),
    from each OpSpec's ``peers["dali"]``."""
    return {op: spec.peers["dali"] for op, spec in gpuaug.registry.items() if "dali" in spec.peers}


def _const(value):
    """An external_source callback without arguments (DALI passes an index to callbacks that
    take one, default arguments included)."""
    return lambda: value


def _identity(samples):
    return samples


class Timer:
    """Python time spent inside gpuaug's DALI callbacks (wraps Chain.__call__)."""

    def __init__(self):
        from gpuaug.dali import _callback, _numba

        self.total = 0.0
        self.calls = 0
        for cls in (_callback.Chain, _numba.Planner):
            orig = cls.__call__

            def timed(obj, *a, _orig=orig):
                t0 = time.perf_counter()
                try:
                    return _orig(obj, *a)
                finally:
                    self.total += time.perf_counter() - t0
                    self.calls += 1

            cls.__call__ = timed

    def reset(self):
        self.total, self.calls = 0.0, 0


class Bench:
    def __init__(self, args):
        self.args = args
        self.gpu = args.device == "gpu"
        n, h, w = args.batch, args.height, args.width
        self.shape = (n, h, w, 3)
        host = np.random.default_rng(0).integers(0, 256, self.shape, dtype=np.uint8)
        if self.gpu:
            import cupy as cp

            self.cp = cp
            self.batch = cp.asarray(host)
        else:
            self.cp = None
            self.batch = host
        self.timer = Timer()
        self.t_start = time.perf_counter()

    # -- pipelines ------------------------------------------------------------------------
    def images(self):
        from nvidia.dali import fn

        batch = self.batch
        return fn.external_source(source=lambda: batch, batch=True, device="gpu" if self.gpu else "cpu",
                                  layout="HWC", no_copy=True)

    def sync(self):
        if self.gpu:
            self.cp.cuda.runtime.deviceSynchronize()

    def time_graph(self, graph):
        """ms per run() of a pipeline whose outputs are ``graph(images)``."""
        from nvidia.dali import pipeline_def

        a = self.args

        def define():
            out = graph(self.images())
            return out if isinstance(out, tuple) else (out,)

        pipe = pipeline_def(define, batch_size=self.shape[0], num_threads=a.threads,
                            device_id=0 if self.gpu else None, exec_async=False, exec_pipelined=False,
                            prefetch_queue_depth=1, seed=1)()
        pipe.build()
        for _ in range(a.warmup):
            pipe.run()
        self.sync()
        self.timer.reset()
        blocks = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            for _ in range(a.iters):
                pipe.run()
            self.sync()
            blocks.append((time.perf_counter() - t0) / a.iters * 1e3)
        host = self.timer.total / max(1, self.timer.calls) * 1e3 if self.timer.calls else None
        del pipe
        return statistics.median(blocks), host

    def kernel_ms(self, op, consts, per):
        """Standalone op on the same batch: CUDA events, median of 20 (ms)."""
        if not self.gpu:
            return None
        cp = self.cp
        spec = gpuaug.registry[op]
        kw = dict(consts, **{k: cp.asarray(np.stack(v)) for k, v in per.items()})
        host = set()  # values the op reads on the host (pad's padding...) go there, as in the callback
        call_host(spec.func, self.batch, kw, host)
        kw = host_kwargs(kw, host)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(20):
            start.record()
            spec.func(self.batch, **kw)
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end))
        return statistics.median(times)

    # -- cases ------------------------------------------------------------------------------
    def op_params(self, op):
        spec = gpuaug.registry[op]
        n, h, w, _ = self.shape
        kw = spec.example(np.random.default_rng(1), n, h, w) if spec.example else {}
        kw.update(overrides(op, h, w))
        by_name = {p.name: p for p in spec.params}
        consts, per = {}, {}
        for k, v in kw.items():
            p = by_name[k]
            a = np.asarray(v) if not isinstance(v, (str, type(None))) else None
            if (a is not None and p.per_sample and p.kind != "size" and a.ndim >= 1 and a.shape[0] == n
                    and a.ndim == len(p.shape) + 1):
                a = a.astype(np.float32) if a.dtype == np.float64 else a
                per[k] = [np.array(a[i]) for i in range(n)]
            else:
                consts[k] = v
        return consts, per

    def gpuaug_graph(self, op, backend):
        import gpuaug.dali as gd
        from nvidia.dali import fn

        consts, per = self.op_params(op)

        def graph(x):
            nodes = {k: fn.external_source(source=_const(v), batch=True) for k, v in per.items()}
            return getattr(gd, op)(x, **consts, **nodes, backend=backend)
        return graph, consts, per

    def builtins(self):
        from nvidia.dali import fn, types

        n, h, w, _ = self.shape

        def u(lo, hi):
            return fn.random.uniform(range=[lo, hi])

        return {
            "flip": lambda x: fn.flip(x, horizontal=fn.random.coin_flip()),
            "rotate": lambda x: fn.rotate(x, angle=u(-30, 30), keep_size=True, fill_value=0),
            "warp_affine": lambda x: fn.warp_affine(
                x, matrix=fn.transforms.rotation(angle=u(-30, 30), center=[w / 2, h / 2]), fill_value=0),
            "resize": lambda x: fn.resize(x, size=[h // 2, w // 2]),
            "gaussian_blur": lambda x: fn.gaussian_blur(x, sigma=1.5),
            "brightness_contrast": lambda x: fn.brightness_contrast(x, brightness=u(0.5, 1.5),
                                                                    contrast=u(0.5, 1.5)),
            "hsv": lambda x: fn.hsv(x, hue=u(-30, 30), saturation=u(0.5, 1.5)),
            "crop_mirror_normalize": lambda x: fn.crop_mirror_normalize(
                x, crop=[h * 6 // 7, w * 6 // 7], mirror=fn.random.coin_flip(), mean=MEAN, std=STD, dtype=types.FLOAT,
                output_layout="CHW"),
        }

    def compose_graphs(self):
        import gpuaug.dali as gd
        from nvidia.dali import fn, types

        def u(lo, hi):
            return fn.random.uniform(range=[lo, hi])

        def items():
            return [("flip", {"horizontal": fn.random.coin_flip()}),
                    ("rotate", {"angle": u(-30, 30)}),
                    ("color_jitter", {"brightness": u(0.5, 1.5), "contrast": u(0.5, 1.5)}),
                    ("crop_mirror_normalize", {"mean": MEAN, "std": STD, "mirror": fn.random.coin_flip()})]

        def fused(x):
            return gd.compose(items())(x)

        def unfused(x):
            for name, params in items():
                x = getattr(gd, name)(x, **params)
            return x

        def dali(x):
            x = fn.flip(x, horizontal=fn.random.coin_flip())
            x = fn.rotate(x, angle=u(-30, 30), keep_size=True, fill_value=0)
            x = fn.brightness_contrast(x, brightness=u(0.5, 1.5), contrast=u(0.5, 1.5))
            return fn.crop_mirror_normalize(x, mirror=fn.random.coin_flip(), mean=MEAN, std=STD,
                                            dtype=types.FLOAT, output_layout="CHW")

        def policy(x):
            pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(30),
                                  gpuaug.ColorJitter(brightness=0.5, contrast=0.5),
                                  gpuaug.Normalize([m / 255 for m in MEAN], [s / 255 for s in STD])], seed=0)
            return gd.policy(x, pol)

        return {"gpuaug.dali.compose (one python_function)": fused,
                "gpuaug.dali.policy(gpuaug.Compose, fused passes)": policy,
                "gpuaug.dali ops unfused (4 python_functions)": unfused,
                "DALI fn.flip+rotate+brightness_contrast+crop_mirror_normalize": dali}

    def floor_graph(self, x):
        """A python_function that returns its inputs: DALI's cost of any Python operator."""
        from nvidia.dali import fn

        return fn.python_function(x, function=_identity, batch_processing=True,
                                  device="gpu" if self.gpu else "cpu", output_layouts="HWC")

    def save(self):
        """Write what is measured so far (a timeout still leaves the JSON)."""
        if self.args.out:
            with open(self.args.out, "w") as f:
                json.dump(self.res, f, indent=1)

    def over_budget(self):
        return time.perf_counter() - self.t_start > self.args.budget

    def run(self):
        a = self.args
        res = self.res = {"device": self.device_name(), "dali": self.dali_version(), "batch": list(self.shape),
                          "executor": "synchronous (exec_async=False, exec_pipelined=False)", "ops": {},
                          "builtins": {}, "compose": {}, "unit": "ms per batch over the bare pipeline"}
        bare, _ = self.time_graph(lambda x: x)
        res["bare_ms"] = bare
        floor, _ = self.time_graph(self.floor_graph)
        res["floor_ms"] = floor - bare
        print(f"bare pipeline {bare:.3f} ms/batch; python_function floor +{floor - bare:.3f} ms", flush=True)
        for name, g in self.builtins().items():
            t, _ = self.time_graph(g)
            res["builtins"][name] = t - bare
            print(f"  DALI fn.{name:24s} +{t - bare:7.3f} ms", flush=True)
        for name, g in self.compose_graphs().items():
            t, host = self.time_graph(g)
            res["compose"][name] = {"ms": t - bare, "host_ms": host}
            print(f"  {name:60s} +{t - bare:7.3f} ms", flush=True)
        self.save()
        ops = a.ops.split(",") if a.ops else sorted(gpuaug.registry)
        numba_ops = (ops if a.numba == "all" else [] if a.numba == "none" else
                     [o for o in ops if o in ("flip", "rotate", "brightness", "crop_mirror_normalize", "warp_affine",
                                              "resize", "gaussian_blur", "color_jitter")])
        for op in ops:
            row = {}
            try:
                graph, consts, per = self.gpuaug_graph(op, None)
                t, host = self.time_graph(graph)
                row.update(cuda_ms=t - bare, host_ms=host, vs_floor=(t - bare) / res["floor_ms"] if res["floor_ms"] > 0
                           else None, kernel_ms=self.kernel_ms(op, consts, per))
                if op in numba_ops and not self.over_budget():
                    graph, _, _ = self.gpuaug_graph(op, "numba")
                    t, _ = self.time_graph(graph)
                    row["numba_ms"] = t - bare
                elif op in numba_ops:
                    row["numba_ms"] = None
                    row["note"] = "numba skipped: time budget"
                peer = peers().get(op)
                if peer:
                    row["dali_peer"] = peer
                    row["dali_peer_ms"] = res["builtins"][peer]
            except Exception as e:  # noqa: BLE001 - one row of errors, not a crash
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            res["ops"][op] = row
            self.print_row(op, row)
            self.save()
        res["elapsed_s"] = time.perf_counter() - self.t_start
        return res

    @staticmethod
    def _f(v, w=7):
        return f"{v:{w}.3f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"

    def print_row(self, op, row):
        if "error" in row:
            print(f"  {op:22s} ERROR {row['error']}", flush=True)
            return
        f = self._f
        peer = f"{row.get('dali_peer', ''):>22s} {f(row.get('dali_peer_ms'))}" if row.get("dali_peer") else ""
        print(f"  {op:22s} cuda {f(row['cuda_ms'])}  x floor {f(row.get('vs_floor'), 5)}  kernel {f(row['kernel_ms'])}"
              f"  host {f(row['host_ms'])}  numba {f(row.get('numba_ms'))}  {peer}", flush=True)

    def device_name(self):
        if not self.gpu:
            return "cpu"
        p = self.cp.cuda.runtime.getDeviceProperties(0)
        name = p["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    @staticmethod
    def dali_version():
        import nvidia.dali

        return nvidia.dali.__version__


def table(res):
    lines = [f"# gpuaug.dali on {res['device']}, DALI {res['dali']}, batch {'x'.join(map(str, res['batch']))} uint8,",
             f"# {res['executor']}; {res['unit']} (bare pipeline {res['bare_ms']:.3f} ms)",
             f"python_function floor: +{res['floor_ms']:.3f} ms", "",
             "| op | gpuaug cuda | / floor | kernel alone | callback host | numba | DALI peer | peer |",
             "|---|---|---|---|---|---|---|---|"]
    f = Bench._f
    for op, r in res["ops"].items():
        if "error" in r:
            lines.append(f"| {op} | error: {r['error']} | | | | | | |")
            continue
        lines.append(f"| {op} | {f(r['cuda_ms'])} | {f(r.get('vs_floor'), 5)} | {f(r['kernel_ms'])} | "
                     f"{f(r['host_ms'])} | {f(r.get('numba_ms'))} | {r.get('dali_peer', '')} | "
                     f"{f(r.get('dali_peer_ms'))} |")
    lines += ["", "| chain (random per sample) | ms |", "|---|---|"]
    for k, v in res["compose"].items():
        lines.append(f"| {k} | {f(v['ms'])} |")
    lines += ["", "| DALI built-in | ms |", "|---|---|"]
    for k, v in res["builtins"].items():
        lines.append(f"| fn.{k} | {f(v)} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--height", type=int, default=224)
    ap.add_argument("--width", type=int, default=224)
    ap.add_argument("--ops", default=os.environ.get("DALI_BENCH_OPS", ""), help="comma-separated (default: all)")
    ap.add_argument("--numba", choices=("all", "some", "none"), default=os.environ.get("DALI_BENCH_NUMBA", "all"))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--budget", type=float, default=float(os.environ.get("DALI_BENCH_BUDGET", 180)),
                    help="seconds after which numba rows are skipped")
    ap.add_argument("--out", default=None, help="JSON file to write")
    args = ap.parse_args(argv)
    if args.device == "cpu" and args.batch == 256:
        args.batch, args.height, args.width = 8, 64, 64
    import warnings

    warnings.simplefilter("ignore", RuntimeWarning)
    bench = Bench(args)
    res = bench.run()
    bench.save()
    text = table(res)
    print("\n" + text)
    if args.out:
        with open(os.path.splitext(args.out)[0] + ".md", "w") as f:
            f.write(text + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
