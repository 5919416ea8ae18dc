"""The ``gpuaug`` command: one subcommand per pair of functions below.

    gpuaug bench [OPS...] [--batch 256 --size 224x224 --dtype uint8 --layout NHWC
                  --backends cuda,numba --peers --json PATH --plot PATH --repeat N
                  --device gpu|cpu --case NxHxW ...]
    gpuaug bench --e2e [FOLDER] [--images 4096 --batch 256 --workers 14 --epochs 3
                  --paths dali,gpuaug_dali_rrc,... --gpus 1,2,4 --steps 20 --out DIR --dry-run]
    gpuaug bench --policies [--batch 256 --size 224 --out DIR --dry-run]
    gpuaug info

Adding a subcommand: write ``add_<name>(sub)`` (builds its parser from the subparsers
object and returns it) and ``cmd_<name>(args) -> int``, and add one line to
:data:`COMMANDS`. Nothing here imports CuPy, Numba, DALI or torch at import time.

Example::

    $ gpuaug info
    $ gpuaug bench flip --device cpu --batch 4 --size 32x32 --json /tmp/b.json
    $ gpuaug bench --peers --json 'bench/results/{date}-{gpu}-{case}.json' \\
          --plot 'bench/results/{date}-{gpu}-{case}.png'
"""
from __future__ import annotations

import argparse
import os
import sys


# ----------------------------------------------------------------------------- helpers
def _size(text: str) -> tuple[int, int]:
    """``224x224`` or ``224`` -> (h, w)."""
    parts = text.lower().replace("×", "x").split("x")
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        vals = []
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2 or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"size: got {text!r}; expected HxW, e.g. 224x224 or 1080x1920")
    return vals[0], vals[1]


def _case(text: str) -> tuple[int, int, int]:
    """``256x224x224`` -> (n, h, w)."""
    parts = text.lower().replace("×", "x").split("x")
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        vals = []
    if len(vals) != 3 or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"case: got {text!r}; expected NxHxW, e.g. 256x224x224 or 16x1080x1920")
    return vals[0], vals[1], vals[2]


def _csv(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}; expected a positive integer")
    return v


def _gpus(text: str) -> tuple[int, ...]:
    """``1,2,4`` -> (1, 2, 4) (gpuaug.bench.scaling.parse_gpus)."""
    from gpuaug.bench.scaling import parse_gpus

    try:
        return parse_gpus(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("gpus: ")) from e


def _out(msg=""):
    print(msg, flush=True)


def _err(msg):
    print(f"gpuaug: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- bench
def add_bench(sub):
    p = sub.add_parser(
        "bench", help="time every op (or OPS) against the device's copy bandwidth and against peers",
        description="Time gpuaug's ops on random batches: median per-call time (CUDA events on a GPU, "
                    "a wall clock on the CPU), GB/s counting bytes read + written once, % of a device copy of "
                    "the same bytes measured in the same run, images/s; with --peers, the same op in "
                    "torchvision, kornia, CuPy, DALI and CV-CUDA where importable. Each GPU backend is "
                    "checked against the CPU twin before it is timed.")
    p.add_argument("ops", nargs="*", metavar="OPS", help="op names (default: every registered op)")
    p.add_argument("--batch", type=_positive, default=None,
                   help="images per batch (default: 256 on a GPU, 8 on the CPU)")
    p.add_argument("--size", type=_size, default=None, metavar="HxW",
                   help="image height x width (default: 224x224 on a GPU, 64x64 on the CPU)")
    p.add_argument("--case", type=_case, action="append", default=None, metavar="NxHxW",
                   help="a batch size and image size in one (repeatable: several cases in one run, "
                        "sharing compiled kernels); overrides --batch/--size")
    p.add_argument("--channels", type=_positive, default=3,
                   help="channels per image: 1, 3 or 4; an op that does not support the count (the colour "
                        "ops need 3 or 4) gets an 'unsupported' row (default: %(default)s)")
    p.add_argument("--dtype", default="uint8", choices=("uint8", "float16", "float32"),
                   help="element type of the random batch, in the op's units: uint8 0..255, floats "
                        "0..1 (default: %(default)s)")
    p.add_argument("--layout", default="NHWC", choices=("NHWC", "NCHW"),
                   help="memory layout of the batch (default: %(default)s)")
    p.add_argument("--backends", type=_csv, default=None,
                   help="gpuaug backends, comma-separated (default: cuda,numba on a GPU, cpu on the CPU)")
    p.add_argument("--device", choices=("gpu", "cpu"), default=None,
                   help="gpu: CUDA backends timed with events; cpu: the CPU twins with a wall clock "
                        "(default: gpu if one is usable, else cpu)")
    p.add_argument("--peers", action="store_true", help="also time the peer libraries")
    p.add_argument("--libraries", type=_csv, default=None,
                   help="with --peers: only these (torchvision,torch,kornia,cupy,dali,cvcuda)")
    p.add_argument("--repeat", type=_positive, default=None,
                   help="timed calls per row (default: 100 on a GPU, 10 on the CPU); with --e2e --gpus: runs of "
                        "every path and count, in rounds, each row the median run (1 unless given)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed calls first (default: 5 GPU, 2 CPU); with --e2e --gpus: untimed steps per rank "
                        "(5 then)")
    p.add_argument("--buffers", type=int, default=0,
                   help="input buffers rotated (default 0: at least 4, together over twice the L2 cache)")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds the random batches and each op's per-sample parameters (default: %(default)s)")
    p.add_argument("--ref-workers", type=int, default=-1, metavar="N",
                   help="processes computing the checks' CPU references alongside the GPU work "
                        "(default -1: up to 8 on a GPU; 0: in-process)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="after this long (per case), skip peers and cut repeats to a fifth")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="write the results as JSON (schema gpuaug-bench/1); {date}, {gpu} and {case} "
                        "in PATH are filled in")
    p.add_argument("--plot", default=None, metavar="PATH",
                   help="write a PNG bar chart of GB/s per op and library (needs matplotlib)")
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                   help="time nothing: merge these result files (op subsets of one case, e.g. run on "
                        "separate GPU calls) into one per case, then print/--json/--plot as usual")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--log", action="store_true", help="print one line per row as it finishes (stderr)")
    p.add_argument("--policies", action="store_true",
                   help="the automatic policies and mixing against torchvision, kornia and DALI's auto_aug "
                        "(gpuaug.bench.policies; with --out DIR, --dry-run)")
    e2e = p.add_argument_group("end to end (--e2e): a JPEG folder to augmented batches, every path "
                                "(gpuaug.bench.e2e)")
    e2e.add_argument("--e2e", nargs="?", const="", default=None, metavar="FOLDER",
                     help="run the end-to-end benchmark on FOLDER (class folders of JPEGs; default: a generated "
                          "synthetic one)")
    e2e.add_argument("--images", type=_positive, default=None,
                     help="images in the generated folder (default 4096; 32 with --dry-run)")
    e2e.add_argument("--workers", type=_positive, default=None,
                     help="worker processes/threads of every path (default min(14, CPUs); 2 with --dry-run)")
    e2e.add_argument("--epochs", type=_positive, default=3, help="timed epochs, after one warm-up (default 3)")
    e2e.add_argument("--min-seconds", type=float, default=None,
                     help="time more epochs until this many seconds (default 2; 0 with --dry-run)")
    e2e.add_argument("--paths", type=_csv, default=None,
                     help="comma-separated: dali,gpuaug_dali_rrc,gpuaug_dali,scheduler_cpu,scheduler_cpu_threads,"
                          "scheduler_gpu,torchvision (default: all); with --gpus also scheduler_memory (an "
                          "in-memory array, scaling only)")
    e2e.add_argument("--gpus", type=_gpus, default=None, metavar="LIST",
                     help="also run the paths with a multi-GPU runner (scheduler_gpu and gpuaug_dali_rrc unless "
                          "--paths names others of scheduler_gpu,gpuaug_dali_rrc,scheduler_cpu,"
                          "scheduler_cpu_threads,scheduler_memory) on each of these GPU counts, e.g. 1,2,4: one "
                          "torchrun of gpuaug.bench.ddp per count; images/s summed over ranks, scaling efficiency, "
                          "data wait per rank, the epoch's disjointness, placement (gpuaug.bench.scaling; not "
                          "run by default)")
    e2e.add_argument("--steps", type=_positive, default=None,
                     help="with --gpus: timed steps per rank, after --warmup untimed ones (default 20)")
    e2e.add_argument("--timeout", type=_positive, default=None, metavar="SECONDS",
                     help="with --gpus: seconds one torchrun may take before it and its ranks are ended "
                          "(default 600)")
    e2e.add_argument("--out", default=None, metavar="DIR",
                     help="write e2e.json, e2e.md and e2e.png here (default: gpuaug-e2e)")
    e2e.add_argument("--dry-run", action="store_true",
                     help="everything on the CPU on a tiny folder (no GPU paths): tests the machinery; with "
                          "--gpus, prints the torchrun commands without running them")
    return p


def _bench_configs(args):
    from gpuaug import bench

    device, no_gpu = args.device, None
    if device is None:
        ok, why = bench.gpu_status()
        device = "gpu" if ok else "cpu"
        no_gpu = None if ok else why
    elif device == "gpu":
        ok, why = bench.gpu_status()
        if not ok:
            raise SystemExit(f"gpuaug bench: --device gpu was asked for but {why}; use --device cpu")
    gpu = device == "gpu"
    if args.case:
        cases = list(args.case)
    else:
        n = args.batch or (256 if gpu else 8)
        h, w = args.size or ((224, 224) if gpu else (64, 64))
        cases = [(n, h, w)]
    if no_gpu:
        given = args.case or args.batch or args.size
        what = ", ".join(f"{n}x{h}x{w}" for n, h, w in cases)
        _err(f"no GPU ({no_gpu}); timing the CPU twins (--device cpu) on "
             + (f"{what}" if given else f"a small batch, {what} (--batch/--size/--case to change)"))
    cfgs = []
    for n, h, w in cases:
        cfgs.append(bench.Config(
            ops=tuple(args.ops), batch=n, height=h, width=w, channels=args.channels, dtype=args.dtype,
            layout=args.layout, backends=args.backends, peers=args.peers, libraries=args.libraries,
            repeat=args.repeat or (100 if gpu else 10),
            warmup=args.warmup if args.warmup is not None else (5 if gpu else 2),
            device=device, buffers=args.buffers, seed=args.seed, budget_s=args.budget,
            ref_workers=args.ref_workers,
            progress=not args.quiet))
    return cfgs


def _report(doc, args, multi) -> int:
    from gpuaug import bench

    status = 0
    _out(bench.format_table(doc))
    problems = bench.validate(doc)
    if problems:  # a bug in the benchmark itself: say so loudly, still write what we have
        _err("the results do not validate: " + "; ".join(problems[:5]))
        status = 1
    if args.json:
        path = bench.write_json(doc, bench.expand_path(args.json, doc, multi))
        _out(f"wrote {path}")
    if args.plot:
        path = bench.plot(doc, bench.expand_path(args.plot, doc, multi))
        _out(f"wrote {path}" if path else "no plot: matplotlib is not installed (pip install matplotlib)")
    fails = [r for r in doc["rows"] if r["check"] == "fail"]
    if fails:
        _err("check failed (result differs from the CPU twin): " +
             ", ".join(f"{r['op']}/{r['variant']}" for r in fails))
        status = 1
    _out()
    return status


def cmd_bench(args) -> int:
    import json

    from gpuaug import bench

    if args.e2e is not None:
        return cmd_bench_e2e(args)
    given = [o for o, v in (("--gpus", args.gpus), ("--steps", args.steps), ("--timeout", args.timeout))
             if v is not None]
    if given:
        _err(f"{given[0]} is an option of the end-to-end benchmark: use it with --e2e [FOLDER]")
        return 2
    if args.policies:
        from gpuaug.bench.policies import cli

        return cli(args)
    if args.merge:
        docs = []
        for path in args.merge:
            with open(path) as f:
                docs.append(json.load(f))
        try:
            merged = bench.merge(docs)
        except ValueError as e:
            _err(str(e))
            return 2
        return max([_report(d, args, len(merged) > 1) for d in merged] or [0])
    try:
        cfgs = _bench_configs(args)
        bench.resolve_ops(cfgs[0].ops)
    except ValueError as e:
        _err(str(e))
        return 2
    multi = len(cfgs) > 1
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.log else None
    status = 0
    for cfg in cfgs:
        doc = bench.run(cfg, log=log)
        status = max(status, _report(doc, args, multi))
    return status


def cmd_bench_e2e(args) -> int:
    """``gpuaug bench --e2e [FOLDER]``: see :mod:`gpuaug.bench.e2e`."""
    from gpuaug.bench import e2e as bench_e2e

    dry = args.dry_run
    batch = args.batch or (8 if dry else 256)
    size = args.size[0] if args.size else (64 if dry else 224)
    out = args.out or "gpuaug-e2e"
    for opt, v, what in (("--steps", args.steps, "the timed steps per rank"),
                         ("--timeout", args.timeout, "the time limit of one torchrun"),
                         ("--repeat", args.repeat, "the runs of every path and count")):
        if v is not None and args.gpus is None:
            _err(f"{opt}: {what} of the multi-GPU runs; use it with --gpus")
            return 2
    try:
        doc = bench_e2e.run(args.e2e or None, images=args.images or (32 if dry else 4096), batch=batch,
                            workers=args.workers or (2 if dry else min(14, os.cpu_count() or 1)),
                            epochs=args.epochs, min_seconds=(0.0 if dry else 2.0) if args.min_seconds is None
                            else args.min_seconds, paths=args.paths, dry_run=dry, size=size, seed=args.seed,
                            gpus=args.gpus, steps=args.steps or 20,
                            warmup_steps=5 if args.warmup is None else args.warmup, rank_workers=args.workers,
                            scaling_dir=os.path.join(out, "scaling"), scaling_timeout=args.timeout or 600,
                            scaling_repeat=args.repeat or 1,
                            log=lambda m: print(m, file=sys.stderr, flush=True))
    except ValueError as e:
        _err(str(e))
        return 2
    _out(bench_e2e.format_table(doc))
    problems = bench_e2e.validate(doc)
    for p in problems:
        _err(f"e2e document: {p}")
    failed = [r for r in (doc.get("scaling") or {}).get("rows", [])
              if r["status"].startswith("error") or r["placement_ok"] is False]
    for r in failed:  # a wrong epoch partition or a context on another rank's GPU is a failure, not a number
        _err(f"scaling: {r['path']} on {r['gpus']} GPU(s): {r['status']}"
             + ("; a rank holds a CUDA context on another GPU" if r["placement_ok"] is False else "")
             + (f" (log {r['log']})" if r.get("log") else ""))
    for path in bench_e2e.write(doc, out):
        if path:
            _out(f"wrote {path}")
    return 1 if problems or failed else 0


# ----------------------------------------------------------------------------- info
def add_info(sub):
    p = sub.add_parser("info", help="GPU, driver, CUDA, library versions, and which backends work here",
                       description="What gpuaug can use on this machine, and why not where it cannot.")
    p.add_argument("--json", action="store_true", help="print the same as JSON")
    return p


def cmd_info(args) -> int:
    import json

    from gpuaug import bench

    gpu, why = bench.gpu_status()
    dev = None
    if gpu:
        try:
            dev = bench.device_info("gpu")
        except Exception as e:  # noqa: BLE001
            gpu, why = False, f"CuPy sees a device but cannot query it ({type(e).__name__}: {e})"
    vers = bench.versions()
    backends = bench.backend_status()
    if args.json:
        _out(json.dumps({"gpu": dev, "gpu_reason": None if gpu else why, "versions": vers,
                         "backends": backends}, indent=1))
        return 0
    if gpu:
        _out(f"GPU:          {dev['name']} (compute capability {dev['compute_capability']}, "
             f"{dev['memory_bytes'] / 2**30:.1f} GiB, {dev['sm_count']} SMs, L2 {dev['l2_bytes'] / 2**20:.0f} MiB)")
        _out(f"driver:       {dev['driver'] or '?'} (CUDA {dev['cuda_driver']})")
        _out(f"CUDA runtime: {dev['cuda_runtime']}")
    else:
        _out(f"GPU:          none: {why}")
    _out(f"CPU:          {bench.device_info('cpu')['name']} ({os.cpu_count()} threads)")
    _out("versions:     " + ", ".join(f"{k} {v if v else '(not installed)'}" for k, v in vers.items()))
    _out("backends:")
    for name, st in backends.items():
        _out(f"  {name:9s} {'yes' if st['usable'] else 'no ':3s}  {st['why']}")
    return 0


# ----------------------------------------------------------------------------- main
#: (name, add_parser(subparsers) -> parser, run(args) -> exit code)
def add_demo(sub):
    p = sub.add_parser("demo", help="augment the bundled photo with every op; write a contact sheet",
                       description="Augment the bundled sample photo with every registered op (on the GPU "
                                   "if there is one, else on the CPU) and write a labelled PNG contact sheet.")
    p.add_argument("--out", default="gpuaug-demo.png", help="where to write the PNG (default: %(default)s)")
    p.add_argument("--device", default="auto", choices=("auto", "gpu", "cpu"),
                   help="where to run (default auto: the GPU if usable, else the CPU)")
    p.add_argument("--columns", type=_positive, default=6,
                   help="tiles per row of the sheet (default: %(default)s)")
    return p


def cmd_demo(args) -> int:
    from gpuaug import demo

    try:
        return demo.main(args)
    except demo.NoGPU as e:  # --device gpu without a usable GPU: a message, not a traceback
        _err(f"demo: {e}")
        return 2


COMMANDS = [
    ("demo", add_demo, cmd_demo),
    ("bench", add_bench, cmd_bench),
    ("info", add_info, cmd_info),
]


def build_parser() -> argparse.ArgumentParser:
    from gpuaug import __version__

    parser = argparse.ArgumentParser(prog="gpuaug", description="GPU image augmentation kernels: tools.")
    parser.add_argument("--version", action="version", version=f"gpuaug {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, add, run in COMMANDS:
        p = add(sub)
        p.set_defaults(_run=run)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``gpuaug`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
