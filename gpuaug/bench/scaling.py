"""``gpuaug bench --e2e [FOLDER] --gpus 1,2,4``: the input pipelines on several GPUs.

For each GPU count N and each path, one torchrun of the rank runner
(:mod:`gpuaug.bench.ddp`, the input pipeline alone, no model)::

    python -m torch.distributed.run --standalone --nproc_per_node=N -m gpuaug.bench.ddp \\
        --loader scheduler --decode gpu --folder FOLDER --batch 256 --size 224 --steps 20 --warmup 5 ...

Each rank owns one GPU and reads its shard of FOLDER (batch ``batch`` per rank, random
resized crop + flip + normalize to float32 NCHW), reads one epoch for the partition check,
then runs ``warmup`` untimed and ``steps`` timed steps. Reported per path and count, from
the runs' ``RESULT`` JSON:

- images/s summed over the ranks, and per GPU;
- the scaling efficiency ``images/s(N) / (N / B x images/s(B))``, B the smallest count
  listed: with 1 listed, the usual ``images/s(N) / (N x images/s(1))``;
- data wait: the % of each rank's time blocked in the loader's ``next()``;
- the epoch check: one epoch's sample indices of all ranks disjoint and complete up to
  ``drop_last``'s tail (:func:`gpuaug.bench.ddp.check_partition`);
- placement: each rank holds a CUDA context on its own GPU only.

========================  =================================================================
path (``--paths`` name)   the rank runner's loader
========================  =================================================================
``scheduler_gpu``         ``--loader scheduler --decode gpu``: gpuaug.Scheduler over
                          ``ImageFiles(decode="gpu", crop="random")`` (nvImageCodec; the
                          random resized crop in the decode's launch), then flip + Normalize
``gpuaug_dali_rrc``       ``--loader dali``: ``gpuaug.dali.torch_loader``
                          (``image_folder_pipeline(augment="flip")``, mixed decode)
``scheduler_cpu``         ``--loader scheduler --decode process``: CPU decode in worker
                          processes to ``load_size``, then RRC + flip + Normalize
``scheduler_cpu_threads`` ``--decode cpu``: the same on the scheduler's threads
``scheduler_memory``      the Scheduler over an in-memory uint8 array (as many images as the
                          folder, ``load_size`` square, ``pin_source``): no decode. A path of
                          the scaling only (no single-process row)
========================  =================================================================

Without ``paths``: ``scheduler_gpu`` and ``gpuaug_dali_rrc``. Each run's log and RESULT are
kept as ``scale-<path>-<N>.txt`` / ``.json`` under ``log_dir``. The ranks get
``OMP_NUM_THREADS=4`` unless it is set (torchrun sets 1 only for N > 1: one value for every
N keeps the comparison fair), ``NCCL_NVLS_ENABLE=0`` and ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``
unless set. A count above the GPUs torch sees (``torch.cuda.device_count()``) is an error
before anything runs; ``dry_run`` lists the commands and runs none; ``cpu`` runs the ranks
without a GPU (gloo, FakeDevice Schedulers, DALI CPU pipelines: what CI tests).

Example::

    from gpuaug.bench import scaling
    sec = scaling.run("/data/train", "1,2,4", log_dir="out/scaling")
    print(scaling.format_table(sec))
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

#: path -> the rank runner's arguments for it
RUNNER_ARGS = {
    "scheduler_gpu": ("--loader", "scheduler", "--decode", "gpu"),
    "gpuaug_dali_rrc": ("--loader", "dali"),
    "scheduler_cpu": ("--loader", "scheduler", "--decode", "process"),
    "scheduler_cpu_threads": ("--loader", "scheduler", "--decode", "cpu"),
    "scheduler_memory": ("--loader", "scheduler"),
}
#: paths of the scaling alone (not rows of the single-process end-to-end table)
ONLY = ("scheduler_memory",)
#: run when no paths are named: the Scheduler with GPU decode and the DALI loader
DEFAULT_PATHS = ("scheduler_gpu", "gpuaug_dali_rrc")
#: paths that need a GPU whatever the rank runner's --cpu says
GPU_ONLY = ("scheduler_gpu",)

RUNNER = "gpuaug.bench.ddp"
ROW_KEYS = {"path": str, "gpus": int, "status": str, "command": list, "images_per_s": (float, type(None)),
            "per_gpu": (float, type(None)), "efficiency": (float, type(None)), "data_wait_pct": list,
            "check": (str, type(None)), "placement_ok": (bool, type(None)), "what": str, "seconds": float,
            "runs": list}


# ----------------------------------------------------------------------------- arguments
def parse_gpus(text):
    """``"1,2,4"`` (or a sequence of ints) -> ``(1, 2, 4)``, ascending; ValueError for an
    empty list, a count below 1, a non-integer or a count listed twice."""
    if not isinstance(text, str):
        try:
            text = ",".join(str(g) for g in text)
        except TypeError:
            text = str(text)
    try:
        counts = [int(t) for t in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise ValueError(f"gpus: got {text!r}; expected a comma-separated list of GPU counts >= 1, e.g. 1,2,4")
    twice = sorted({c for c in counts if counts.count(c) > 1})
    if twice:
        raise ValueError(f"gpus: got {text!r}; {twice[0]} is listed twice")
    return tuple(sorted(counts))


def visible_gpus():
    """The GPUs a rank can own here: ``torch.cuda.device_count()`` (torchrun's ranks are
    PyTorch processes)."""
    try:
        import torch
    except ImportError as e:
        raise ValueError("gpus: the multi-GPU runs need PyTorch (torch.distributed.run and NCCL); "
                         "pip install torch") from e
    return int(torch.cuda.device_count())


def select_paths(paths=None):
    """The paths to scale: :data:`DEFAULT_PATHS` for None, else those of ``paths`` that have a
    rank runner (:data:`RUNNER_ARGS`); ValueError if none has."""
    if paths is None:
        return list(DEFAULT_PATHS)
    chosen = [p for p in paths if p in RUNNER_ARGS]
    if not chosen:
        raise ValueError(f"gpus: none of the paths {list(paths)} runs on several GPUs; expected some of "
                         f"{', '.join(RUNNER_ARGS)}")
    return chosen


def check(gpus, paths=None, *, cpu=False, dry_run=False):
    """What :func:`run` refuses before anything runs; returns ``(counts, paths)``. A count
    above :func:`visible_gpus` is an error (not with ``dry_run`` or ``cpu``)."""
    counts = parse_gpus(gpus)
    chosen = select_paths(paths)
    if cpu:
        need = [p for p in chosen if p in GPU_ONLY]
        if need:
            raise ValueError(f"paths: {need[0]} decodes on the GPU; with cpu=True use some of "
                             f"{', '.join(p for p in RUNNER_ARGS if p not in GPU_ONLY)}")
    elif not dry_run:
        seen = visible_gpus()
        over = [c for c in counts if c > seen]
        if over:
            cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
            raise ValueError(f"gpus: got {over[-1]}, but {seen} GPU{'s are' if seen != 1 else ' is'} visible "
                             f"(torch.cuda.device_count()"
                             + (f", CUDA_VISIBLE_DEVICES={cvd!r}" if cvd is not None else "")
                             + f"); expected counts up to {seen}")
    return counts, chosen


def command(path, n, folder, *, images=None, batch=256, size=224, load_size=256, steps=20, warmup=5, workers=None,
            seed=0, cpu=False, json_path=None):
    """The torchrun command (a list) of ``path`` on ``n`` ranks; ``images`` sizes the
    in-memory data set of ``scheduler_memory``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}", "-m", RUNNER,
           *RUNNER_ARGS[path]]
    if path == "scheduler_memory":
        if not images:
            raise ValueError(f"images: got {images!r}; scheduler_memory needs the data set's size")
        cmd += ["--synthetic", str(images)]
    else:
        cmd += ["--folder", os.fspath(folder)]
    cmd += ["--batch", str(batch), "--size", str(size), "--load-size", str(load_size), "--steps", str(steps),
            "--warmup", str(warmup), "--seed", str(seed)]
    if workers:
        cmd += ["--workers", str(workers)]
    if cpu:
        cmd.append("--cpu")
    if json_path:
        cmd += ["--json", os.fspath(json_path)]
    return cmd


def rank_env(base=None):
    """The environment of the ranks: ``base`` (default ``os.environ``) with OMP_NUM_THREADS=4,
    NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 where unset."""
    env = dict(os.environ if base is None else base)
    for k, v in (("OMP_NUM_THREADS", "4"), ("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")):
        env.setdefault(k, v)
    return env


# ----------------------------------------------------------------------------- running
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b(:.*)?$")


def _why(text):
    """The line of a failed run's log that says why: the last exception line, else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if _ERROR_LINE.match(ln) and "ChildFailedError" not in ln]
    return (errs[-1] if errs else lines[-1] if lines else "no output")[:300]


def _end_group(p):
    """End the process group ``p`` leads (torchrun and its ranks): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(20)
            return
        except subprocess.TimeoutExpired:
            continue


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def launch(cmd, stem, *, env=None, timeout=600):
    """Run ``cmd`` (its own process group, output to ``stem.txt``); returns the run's record:
    ``rc`` (None: ended after ``timeout`` s), ``seconds``, ``result`` (``stem.json``, the
    RESULT rank 0 wrote; None if missing), ``log``, ``why`` (a failure's reason). If this
    process is interrupted or sent SIGTERM meanwhile, the group is ended too (no rank is left
    holding a GPU)."""
    log_path, json_path = stem + ".txt", stem + ".json"
    if os.path.exists(json_path):
        os.remove(json_path)  # a stale RESULT is never read as this run's
    t = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            old = signal.signal(signal.SIGTERM, _raise_exit)
        except ValueError:  # not the main thread: SIGTERM keeps its handler
            old = None
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = None
            _end_group(p)
        except BaseException:
            _end_group(p)
            raise
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)
    seconds = time.perf_counter() - t
    result = None
    if os.path.exists(json_path):
        with open(json_path, encoding="utf-8") as f:
            result = json.load(f)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    why = None
    if rc is None:
        why = f"timed out after {timeout} s"
    elif rc != 0:
        why = _why(text)
    return {"rc": rc, "seconds": seconds, "result": result, "log": log_path, "why": why}


def status_of(rec):
    """A run's status from its record: ``ok``, ``dry run``, or ``error: ...``."""
    if rec.get("dry_run"):
        return "dry run"
    res, rc = rec.get("result"), rec.get("rc")
    if rc == 0 and res is not None:
        return "ok"
    if rc == 0:
        return "error: exit 0 but no RESULT"
    if res is not None and res.get("check") and not res["check"].get("ok"):
        return "error: the epoch check failed (samples not disjoint or not complete)"
    if rc is None:
        return f"error: {rec.get('why') or 'timed out'}"
    return f"error: exit {rc}: {rec.get('why') or ''}".rstrip(": ")


def summarize(records):
    """Rows (one per path and count, in the records' order) from run records
    ``{"path", "gpus", "command", ...launch()'s keys}``: images/s summed over ranks, per GPU,
    the efficiency against the path's smallest count that ran, data-wait % per rank, the
    epoch check (``"ok"``, ``"FAILED"``, None: not run), placement (None: no CUDA contexts
    were probed, as with ``cpu``)."""
    rows = []
    for rec in records:
        res = rec.get("result")
        status = status_of(rec)
        ranks = (res or {}).get("ranks") or []
        chk = (res or {}).get("check")
        probed = [r for r in ranks if r.get("contexts") is not None]
        rows.append({
            "path": rec["path"], "gpus": int(rec["gpus"]), "status": status, "command": list(rec["command"]),
            "images_per_s": float(res["images_per_s"]) if res and status == "ok" else None,
            "per_gpu": float(res["images_per_s"]) / int(rec["gpus"]) if res and status == "ok" else None,
            "efficiency": None,
            "data_wait_pct": [float(r["data_wait_pct"]) for r in ranks],
            "check": None if chk is None else ("ok" if chk.get("ok") else "FAILED"),
            "placement_ok": all(r["contexts"] == [r["device"]] for r in probed) if probed else None,
            "what": (res or {}).get("what", ""), "seconds": float(rec.get("seconds", 0.0)),
            "log": rec.get("log"), "result": res,
            "runs": [float(res["images_per_s"])] if res and status == "ok" else []})
    return _efficiency(_median_runs(rows))


def _median_runs(rows):
    """One row per (path, count) of repeated runs (:func:`run`'s ``repeat``), in first-seen
    order: the run with the median images/s (the lower middle of an even number), its
    ``runs`` the images/s of every run in run order; a (path, count) with a failed run gives
    that run's row (status, log) with the images/s of the runs that passed."""
    groups = {}
    for r in rows:
        groups.setdefault((r["path"], r["gpus"]), []).append(r)
    out = []
    for group in groups.values():
        runs = [v for r in group for v in r["runs"]]
        bad = [r for r in group if r["status"] != "ok"]
        if bad:
            row = dict(bad[0])
        else:
            ranked = sorted(group, key=lambda r: r["images_per_s"])
            row = dict(ranked[(len(ranked) - 1) // 2])
        row["runs"] = runs
        row["seconds"] = float(sum(r["seconds"] for r in group))
        out.append(row)
    return out


def _efficiency(rows):
    """Each ok row's efficiency against its path's smallest count that ran."""
    for path in dict.fromkeys(r["path"] for r in rows):
        ok = sorted((r for r in rows if r["path"] == path and r["images_per_s"]), key=lambda r: r["gpus"])
        if ok:
            base = ok[0]
            for r in ok:
                r["efficiency"] = r["images_per_s"] * base["gpus"] / (r["gpus"] * base["images_per_s"])
    return rows


def run(folder, gpus, *, paths=None, images=None, batch=256, size=224, load_size=256, steps=20, warmup=5,
        workers=None, seed=0, cpu=False, dry_run=False, log_dir=None, timeout=600, repeat=1, log=print):
    """Scale the input pipelines over ``gpus`` (e.g. ``"1,2,4"``); returns the section of the
    end-to-end document (``gpus``, the settings, ``rows``: see :func:`summarize`).

    Args:
        folder: a class-per-folder image tree (every path but ``scheduler_memory`` reads it).
        gpus: GPU counts, ``"1,2,4"`` or ``(1, 2, 4)``.
        paths: names of :data:`RUNNER_ARGS` (others are left out; default :data:`DEFAULT_PATHS`).
        images: the data set's size for ``scheduler_memory`` (default: the folder's images).
        batch, size, load_size, steps, warmup, workers, seed: the rank runner's per-rank batch,
            output size, CPU decode / in-memory image size, timed and untimed steps, workers
            (None: the runner's share of the CPUs), seed.
        cpu: run the ranks without a GPU (``--cpu``); dry_run: run nothing, list the commands.
        log_dir: where the runs' logs and RESULT files go (default: a new temporary folder).
        timeout: seconds for one torchrun before it is ended.
        repeat: runs of every path and count (rounds of all of them in turn, so that a slow
            spell of the machine does not land on one count); each row is the median run and
            lists every run's images/s. A run's timed window is short (60 steps of 256 images a
            rank: 1-3 s), and one run of a DALI row on the H200 x4 moved 60-81% between calls.
    """
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise ValueError(f"repeat: got {repeat!r}; expected an int >= 1 (runs of every path and count)")
    counts, chosen = check(gpus, paths, cpu=cpu, dry_run=dry_run)
    left_out = [p for p in (paths or ()) if p not in RUNNER_ARGS]
    if left_out:
        log(f"scaling: {', '.join(left_out)} not scaled (no multi-GPU runner); scaling {', '.join(chosen)}")
    if images is None:
        from .ddp import list_folder

        images = len(list_folder(folder)[0])
    if not dry_run and images < counts[-1] * batch:
        raise ValueError(f"batch: got {batch} per rank for {images} images; {counts[-1]} ranks need at least "
                         f"{counts[-1] * batch} (one batch each)")
    log_dir = log_dir or tempfile.mkdtemp(prefix="gpuaug-scaling-")
    os.makedirs(log_dir, exist_ok=True)
    env = rank_env()
    records = []
    for k, path, n in ((k, path, n) for k in range(repeat) for path in chosen for n in counts):
        stem = os.path.join(log_dir, f"scale-{path}-{n}" + (f"-run{k + 1}" if repeat > 1 else ""))
        cmd = command(path, n, folder, images=images, batch=batch, size=size, load_size=load_size, steps=steps,
                      warmup=warmup, workers=workers, seed=seed, cpu=cpu, json_path=stem + ".json")
        rec = {"path": path, "gpus": n, "command": cmd}
        if dry_run and k:
            continue
        if dry_run:
            log(f"scaling {path} on {n} GPU(s), not run (dry run): {shlex.join(cmd)}")
            records.append({**rec, "dry_run": True, "seconds": 0.0})
            continue
        log(f"scaling {path} on {n} GPU(s)" + (f", run {k + 1} of {repeat}" if repeat > 1 else "")
            + f": {shlex.join(cmd)}")
        rec.update(launch(cmd, stem, env=env, timeout=timeout))
        records.append(rec)
        row = summarize([rec])[0]
        log(f"  -> {row['status']}"
            + (f": {rec['result']['images_per_s']:,.0f} images/s, epoch check {row['check'] or '-'}, "
               f"data wait % per rank {row['data_wait_pct']}" if rec["result"] else "")
            + f" [{rec['seconds']:.1f} s; log {rec['log']}]")
    return {"gpus": list(counts), "paths": chosen, "not_scaled": left_out, "batch": batch, "size": size, "load_size": load_size,
            "steps": steps, "warmup": warmup, "workers": workers, "seed": seed, "images": images, "timeout": timeout,
            "repeat": repeat,
            "cpu": bool(cpu),
            "dry_run": bool(dry_run), "runner": RUNNER, "log_dir": log_dir,
            "env": {k: env[k] for k in ("OMP_NUM_THREADS", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")},
            "rows": summarize(records)}


# ----------------------------------------------------------------------------- report
def _pct(v):
    return "-" if v is None else f"{100 * v:.0f}%"


def format_table(sec):
    """The section as Markdown: a heading line, one table row per path and count, the
    loaders, and the commands."""
    base = min(sec["gpus"])
    eff = "images/s(N) / (N x images/s(1))" if base == 1 else f"images/s(N) / (N/{base} x images/s({base}))"
    lines = [f"scaling over GPUs ({','.join(map(str, sec['gpus']))}): the input pipeline alone, one torchrun "
             f"per count (python -m {sec['runner']}), batch {sec['batch']} per rank, {sec['size']}x{sec['size']} "
             f"float32 NCHW, {sec['steps']} timed steps after {sec['warmup']}; images/s summed over ranks; "
             f"efficiency = {eff}" + ("; ranks on the CPU (--cpu)" if sec.get("cpu") else "")
             + (f"; each row the median of {sec['repeat']} runs (runs: every run's images/s)"
                if sec.get("repeat", 1) > 1 else ""), "",
             "| path | GPUs | images/s | per GPU | efficiency | data wait % per rank | epoch check | "
             "contexts only on own GPU | status |",
             "|---|---:|---:|---:|---:|---|---|---|---|"]
    yes = {True: "yes", False: "NO", None: "-"}
    for r in sec["rows"]:
        ips = "-" if r["images_per_s"] is None else f"{r['images_per_s']:,.0f}"
        per = "-" if r["per_gpu"] is None else f"{r['per_gpu']:,.0f}"
        waits = ", ".join(f"{w:.0f}" for w in r["data_wait_pct"]) or "-"
        if sec.get("repeat", 1) > 1 and r.get("runs"):
            ips += " (runs: " + ", ".join(f"{v:,.0f}" for v in r["runs"]) + ")"
        lines.append(f"| {r['path']} | {r['gpus']} | {ips} | {per} | {_pct(r['efficiency'])} | {waits} | "
                     f"{r['check'] or '-'} | {yes[r['placement_ok']]} | {r['status']} |")
    whats = {}
    for r in sec["rows"]:
        if r["what"]:
            whats.setdefault(r["path"], r["what"])
    if whats:
        lines += ["", "loaders: " + "; ".join(f"{p}: {w}" for p, w in whats.items())]
    lines += ["", "commands" + (" (dry run: not run)" if sec.get("dry_run") else "") + ":", ""]
    lines += ["    " + shlex.join(r["command"]) for r in sec["rows"]]
    return "\n".join(lines)


def validate(sec):
    """Problems with a scaling section (empty list: fine)."""
    out = []
    for key in ("gpus", "paths", "batch", "steps", "warmup", "rows"):
        if key not in sec:
            out.append(f"missing {key}")
    from .schema import row_errors

    return out + row_errors(sec.get("rows", []), ROW_KEYS, bools=("placement_ok",),
                            ok_positive=("images_per_s", "per_gpu", "efficiency"))
