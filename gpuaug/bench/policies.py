"""``gpuaug bench --policies``: the automatic policies and mixing against their peers, on one
batch in one run.

Rows (one batch, 256x224x224x3 uint8 NHWC by default):

- **gpuaug** RandAugment(2, 9), TrivialAugmentWide, AutoAugment(imagenet), AugMix(),
  MixUp(0.8) and CutMix(1.0) with soft labels, Mosaic; and a same-size device copy (the
  ceiling the mixing targets are measured against). On a GPU: device ms (CUDA events, calls
  queued behind a spin kernel: :class:`gpuaug.bench.GpuClock`), host ms per call and loop ms
  (back-to-back calls, one sync). On the CPU (``device="cpu"`` / ``--dry-run``): wall ms of
  the NumPy twins.
- **gpuaug in DALI** (``gpuaug.dali.rand_augment`` and ``trivial_augment``) and **DALI's
  ``nvidia.dali.auto_aug``** (``rand_augment``, ``trivial_augment_wide``,
  ``auto_augment``): marginal cost in a pipeline (the pipeline with the op minus the same
  pipeline without it, fed the same batch: :func:`gpuaug.bench.time_marginal`).
- **torchvision** (``transforms.v2``: RandAugment, TrivialAugmentWide, AutoAugment, AugMix,
  MixUp, CutMix): one draw per batch call (its model), and per sample by looping over the
  images (what per-sample draws cost it); **kornia** RandAugment and TrivialAugment (per
  sample, float32 NCHW). CUDA events around each call, gaps included (host code is part of
  their cost).

Checks before timing: on a GPU each gpuaug policy's CuPy output equals its NumPy twin on the
same draws (first 16 samples; mixing and Mosaic on the whole batch); on the CPU a replayed
call (``params=last_params``) gives the same bits; the gpuaug DALI operators equal the
standalone policy with the same seed on the first batch. The issue's targets are evaluated
on a GPU run: RandAugment(2, 9) and TrivialAugmentWide <= 0.25 ms, >= 10x kornia's, >= 5x
DALI's auto_aug (marginal); MixUp/CutMix <= 1.5x the copy.

Example (CPU, the machinery only)::

    >>> from gpuaug.bench import policies
    >>> doc = policies.run(dry_run=True, peers=False)  # doctest: +SKIP
    >>> sorted(doc["checks"])[:1]  # doctest: +SKIP
    ['AugMix(...)']
"""
from __future__ import annotations

import math
import time

import numpy as np

from gpuaug.bench.clocks import torch_ms as _torch_ms

KIND = "gpuaug-policies-bench"
COPY = "copy (same size, device to device)"


# ----------------------------------------------------------------------------- the cases
def gpuaug_policies(seed=0):
    """name -> a gpuaug policy (a fresh object with ``seed``)."""
    import gpuaug

    return {"RandAugment(2, 9)": gpuaug.RandAugment(2, 9, seed=seed),
            "TrivialAugmentWide": gpuaug.TrivialAugmentWide(seed=seed),
            "AutoAugment(imagenet)": gpuaug.AutoAugment("imagenet", seed=seed),
            "AugMix()": gpuaug.AugMix(seed=seed)}


def _mixers(seed=0):
    import gpuaug

    return {"MixUp(0.8)": gpuaug.MixUp(0.8, num_classes=1000, seed=seed),
            "CutMix(1.0)": gpuaug.CutMix(1.0, num_classes=1000, seed=seed)}


def _row(library, policy, variant, timing=None, *, ms=None, method=None, loop_ms=None, note=""):
    r = {"library": library, "policy": policy, "variant": variant, "note": note}
    if timing is not None:
        r.update(ms=timing.ms, method=timing.method,
                 host_ms=None if timing.host_us is None else timing.host_us / 1e3,
                 host_bound=bool(timing.host_bound))
        if timing.method == "marginal":
            r.update(pipeline_ms=timing.extra["pipeline_ms"], baseline_ms=timing.extra["baseline_ms"])
    else:
        r.update(ms=ms, method=method)
    if loop_ms is not None:
        r["loop_ms"] = loop_ms
    return r


# ----------------------------------------------------------------------------- checks
def check_policy(pol, x, gpu):
    """GPU: the CuPy path equals the NumPy twin on the first 16 samples (same draws). CPU: a
    replayed call gives the same bits. Returns a one-line verdict; raises AssertionError."""
    from gpuaug.policy.auto import AutoParams

    y = pol(x)
    p = pol.last_params
    if gpu:
        import cupy as cp

        k = min(16, x.shape[0])
        sub = AutoParams(p.ops[:k], p.magnitudes[:k], {key: v[:k] for key, v in p.extra.items()})
        ref = pol(cp.asnumpy(x[:k]), params=sub)
        bad = int((cp.asnumpy(y[:k]) != ref).sum())
        assert bad == 0, f"{pol!r}: {bad} values differ from the NumPy twin"
        what = f"{k} samples = NumPy twin"
    else:
        again = pol(x, params=p)
        assert (again == y).all(), f"{pol!r}: a replayed call differs"
        what = "replay = same bits"
    ids, counts = np.unique(p.ops, return_counts=True)
    return f"ok ({what}); ops drawn: " + ", ".join(f"{int(i)}:{int(c)}" for i, c in zip(ids, counts))


def check_mixing(m, x, labels, host, host_labels, gpu):
    y, soft = m(x, labels)
    if gpu:
        import cupy as cp

        ry, rs = m(host, host_labels, params=m.last_params)
        assert (cp.asnumpy(y) == ry).all(), f"{type(m).__name__}: differs from the NumPy twin"
        assert np.allclose(cp.asnumpy(soft), rs, atol=1e-6), f"{type(m).__name__}: soft labels differ"
        return "ok (whole batch = NumPy twin)"
    ry, rs = m(x, labels, params=m.last_params)
    assert (ry == y).all() and np.allclose(rs, soft), f"{type(m).__name__}: a replayed call differs"
    return "ok (replay = same bits)"


def check_mosaic(mo, x, host, boxes, gpu):
    y, b = mo(x, boxes)
    if gpu:
        import cupy as cp
        from gpuaug.targets import Boxes

        hb = Boxes(cp.asnumpy(boxes.data), counts=cp.asnumpy(boxes.counts), labels=cp.asnumpy(boxes.labels))
        ry, rb = mo(host, hb, params=mo.last_params)
        assert (cp.asnumpy(y) == ry).all(), "Mosaic: images differ from the NumPy twin"
        assert (cp.asnumpy(b.counts) == rb.counts).all(), "Mosaic: box counts differ from the NumPy twin"
        return "ok (images and boxes = NumPy twin)"
    ry, rb = mo(x, boxes, params=mo.last_params)
    assert (ry == y).all() and (rb.counts == b.counts).all(), "Mosaic: a replayed call differs"
    return "ok (replay = same bits)"


# ----------------------------------------------------------------------------- DALI
class _Pipes:
    """A DALI pipeline pair fed the same batch (with the op / without), for time_marginal."""

    def __init__(self, samples, body, *, gpu, conditionals=False, seed=1234):
        from nvidia.dali import fn, pipeline_def

        dev = None
        if gpu:
            import cupy

            dev = int(cupy.cuda.runtime.getDevice())
            self._sync = cupy.cuda.runtime.deviceSynchronize
        else:
            self._sync = lambda: None
        device = "gpu" if gpu else "cpu"

        def build(with_op):
            @pipeline_def(batch_size=len(samples), num_threads=4, device_id=dev, prefetch_queue_depth=1,
                          exec_async=False, exec_pipelined=False, seed=seed, enable_conditionals=conditionals)
            def pipe():
                data = fn.external_source(source=lambda: samples, batch=True, layout="HWC", device=device)
                return body(data) if with_op else data

            p = pipe()
            p.build()
            return p

        self.p_with, self.p_without = build(True), build(False)

    def with_op(self):
        out = self.p_with.run()
        self._sync()
        return out

    def without_op(self):
        out = self.p_without.run()
        self._sync()
        return out


def _dali_bodies():
    """name -> (library, DataNode -> DataNode, needs conditionals)."""
    import gpuaug.dali as gd
    from nvidia.dali.auto_aug import auto_augment, rand_augment, trivial_augment

    return {
        ("gpuaug.dali", "RandAugment(2, 9)"): (lambda d: gd.rand_augment(d, 2, 9, seed=0), False),
        ("gpuaug.dali", "TrivialAugmentWide"): (lambda d: gd.trivial_augment(d, seed=0), False),
        ("gpuaug.dali", "AutoAugment(imagenet)"): (lambda d: gd.auto_augment(d, seed=0), False),
        ("dali", "RandAugment(2, 9)"): (lambda d: rand_augment.rand_augment(d, n=2, m=9), True),
        ("dali", "TrivialAugmentWide"): (lambda d: trivial_augment.trivial_augment_wide(d), True),
        ("dali", "AutoAugment(imagenet)"): (lambda d: auto_augment.auto_augment(d), True),
    }


def check_dali_operator(samples, gpu):
    """gd.rand_augment's first batch equals gpuaug.RandAugment with the same seed."""
    import gpuaug

    pipes = _Pipes(samples, lambda d: __import__("gpuaug.dali", fromlist=["x"]).rand_augment(d, 2, 9, seed=7),
                   gpu=gpu)
    out = pipes.with_op()[0]
    out = out.as_cpu() if hasattr(out, "as_cpu") else out
    got = np.stack([np.array(out[i]) for i in range(len(out))])
    if gpu:
        import cupy as cp

        ref = cp.asnumpy(gpuaug.RandAugment(2, 9, seed=7)(cp.stack(samples)))
    else:
        ref = gpuaug.RandAugment(2, 9, seed=7)(np.stack(samples))
    bad = int((got != ref).sum())
    assert bad == 0, f"gpuaug.dali.rand_augment: {bad} values differ from gpuaug.RandAugment with the same seed"
    return "ok (first batch = gpuaug.RandAugment, same seed)"


# ----------------------------------------------------------------------------- torch peers
def _torchvision_rows(x, labels, iters, cuda, loop_iters, log):
    import torch
    from torchvision.transforms import v2 as T

    tx = torch.from_dlpack(x).permute(0, 3, 1, 2).contiguous() if cuda else \
        torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    tl = torch.from_dlpack(labels).long() if cuda else torch.from_numpy(np.asarray(labels)).long()
    imgs = list(tx)
    n = len(imgs)
    rows = []
    for name, tr in (("RandAugment(2, 9)", T.RandAugment(2, 9)), ("TrivialAugmentWide", T.TrivialAugmentWide()),
                     ("AutoAugment(imagenet)", T.AutoAugment(T.AutoAugmentPolicy.IMAGENET)), ("AugMix()", T.AugMix())):
        log(f"torchvision {name}")
        rows.append(_row("torchvision", name, "one draw per batch call",
                         ms=_torch_ms(lambda: tr(tx), iters, 3, cuda), method="events" if cuda else "wall"))
        rows.append(_row("torchvision", name, f"per sample (a loop over {n} images)",
                         ms=_torch_ms(lambda: [tr(i) for i in imgs], loop_iters, 1, cuda),
                         method="events" if cuda else "wall"))
    # v2.MixUp scales the images in place (uint8 cannot hold the result): float32 for it
    txf = tx.float()
    for name, tr, xin, note in (("MixUp(0.8)", T.MixUp(alpha=0.8, num_classes=1000), txf, "float32 NCHW in"),
                                ("CutMix(1.0)", T.CutMix(alpha=1.0, num_classes=1000), tx, "uint8 NCHW in")):
        log(f"torchvision {name}")
        rows.append(_row("torchvision", name, "one lambda per batch call",
                         ms=_torch_ms(lambda tr=tr, xin=xin: tr(xin, tl), iters, 3, cuda),
                         method="events" if cuda else "wall", note=f"{note}, soft labels out"))
    return rows


def _kornia_rows(x, iters, cuda, log, errors):
    import torch
    from kornia.augmentation import auto as KA

    tf = (torch.from_dlpack(x) if cuda else torch.from_numpy(np.asarray(x))).permute(0, 3, 1, 2).float().div(255.0)
    tf = tf.contiguous()
    rows = []
    for name, make in (("RandAugment(2, 9)", lambda: KA.RandAugment(n=2, m=9)),
                       ("TrivialAugmentWide", lambda: KA.TrivialAugment())):
        log(f"kornia {name}")
        try:
            aug = make()
            assert aug(tf).shape == tf.shape
            rows.append(_row("kornia", name, "per sample, float32 NCHW",
                             ms=_torch_ms(lambda: aug(tf), iters, 3, cuda), method="events" if cuda else "wall"))
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            errors[f"kornia {name}"] = f"{type(e).__name__}: {e}"
    return rows


# ----------------------------------------------------------------------------- run
def run(n=None, size=None, iters=None, warmup=None, *, device=None, dry_run=False, peers=True, seed=0,
        log=None) -> dict:
    """Time gpuaug's policies and mixing (and, with ``peers``, torchvision, kornia and DALI's
    auto_aug) on one batch; returns the results document (see :func:`validate`).

    Args:
        n, size: the batch, n x size x size x 3 uint8 NHWC (default 256 x 224 on a GPU; 4 x 32
            with ``dry_run`` or on the CPU).
        iters, warmup: timed and untimed calls per row (default 50 / 10 on a GPU, 3 / 1 otherwise).
        device: "gpu", "cpu" or None (the GPU when one is usable, unless ``dry_run``).
        dry_run: the machinery on the CPU on a tiny batch (NumPy twins; DALI CPU pipelines).
        peers: also time torchvision, kornia and DALI (each one is skipped, with the reason
            in ``errors``, where it is missing).
        log: ``log(message)`` for progress (default: nothing).
    """
    from gpuaug.bench import CpuClock, GpuClock, device_info, gpu_status, time_marginal, versions

    log = log or (lambda m: None)
    if device is None:
        device = "cpu" if dry_run else ("gpu" if gpu_status()[0] else "cpu")
    if device not in ("gpu", "cpu"):
        raise ValueError(f"device: got {device!r}; expected 'gpu', 'cpu' or None")
    gpu = device == "gpu"
    if gpu and dry_run:
        raise ValueError("dry_run: runs on the CPU; got device='gpu'")
    if gpu and not gpu_status()[0]:
        raise ValueError(f"device: got 'gpu' but {gpu_status()[1]}")
    small = dry_run or not gpu
    n = n if n is not None else (4 if small else 256)
    size = size if size is not None else (32 if small else 224)
    iters = iters if iters is not None else (3 if small else 50)
    warmup = warmup if warmup is not None else (1 if small else 10)
    for name, v in (("n", n), ("size", size), ("iters", iters)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: got {v!r}; expected an int >= 1")
    if n < 2:
        raise ValueError(f"n: got {n}; expected at least 2 images (mixing pairs samples)")

    rng = np.random.default_rng(seed)
    host = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    host_labels = rng.integers(0, 1000, n)
    from gpuaug.targets import Boxes

    a = rng.uniform(0, size * 0.6, (n, 8, 2))
    bdata = np.concatenate([a, a + rng.uniform(4, size * 0.4, (n, 8, 2))], axis=2).astype(np.float32)
    bcounts = rng.integers(0, 9, n).astype(np.int32)
    blabels = rng.integers(0, 80, (n, 8))
    if gpu:
        import cupy as cp

        x, labels = cp.asarray(host), cp.asarray(host_labels)
        boxes = Boxes(cp.asarray(bdata), counts=cp.asarray(bcounts), labels=cp.asarray(blabels), check=False)
        clock = GpuClock()
    else:
        x, labels = host, host_labels
        boxes = Boxes(bdata, counts=bcounts, labels=blabels, check=False)
        clock = CpuClock()

    doc = {"kind": KIND, "device": device_info(device), "device_kind": device, "dry_run": bool(dry_run),
           "n": n, "size": size, "iters": iters, "warmup": warmup, "versions": versions(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": [], "checks": {}, "targets": {}, "errors": {}}
    rows, checks, errors = doc["rows"], doc["checks"], doc["errors"]

    import gpuaug

    pols = gpuaug_policies(seed)
    mixers = _mixers(seed)
    mosaic = gpuaug.Mosaic(seed=seed)
    log("checks")
    for name, pol in pols.items():
        checks[f"gpuaug {name}"] = check_policy(pol, x, gpu)
    for name, m in mixers.items():
        checks[f"gpuaug {name}"] = check_mixing(m, x, labels, host, host_labels, gpu)
    checks["gpuaug Mosaic()"] = check_mosaic(mosaic, x, host, boxes, gpu)

    def timed(name, call, variant, note=""):
        log(f"gpuaug {name}")
        t = clock.time(call, iters, warmup)
        loop = clock.loop(call, k=iters) if gpu else None
        rows.append(_row("gpuaug", name, variant, t, loop_ms=loop, note=note))

    variant = "CUDA C" if gpu else "NumPy twin (CPU)"
    if gpu:
        dst = cp.empty_like(x)
        timed(COPY, lambda: cp.copyto(dst, x), "cupy.copyto")
    for name, pol in pols.items():
        timed(name, lambda pol=pol: pol(x), variant, note="draws included")
    for name, m in mixers.items():
        timed(name, lambda m=m: m(x, labels), variant, note="draws and soft labels included")
    timed("Mosaic()", lambda: mosaic(x), variant, note="images only")
    timed("Mosaic() + boxes", lambda: mosaic(x, boxes), variant, note="8 boxes a sample at most, labels follow")

    if peers:
        samples = list(x)
        try:
            checks["gpuaug.dali.rand_augment"] = check_dali_operator(samples, gpu)
            for (lib, name), (body, cond) in _dali_bodies().items():
                log(f"{lib} {name} (DALI pipeline)")
                pipes = _Pipes(samples, body, gpu=gpu, conditionals=cond)
                t = time_marginal(pipes, clock, max(3, iters // 2 if gpu else iters), max(1, warmup // 2))
                rows.append(_row(lib, name, "marginal cost in a DALI pipeline", t,
                                 note="nvidia.dali.auto_aug (conditional split/merge per op)" if lib == "dali"
                                 else "one python_function operator"))
                del pipes
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            errors["dali"] = f"{type(e).__name__}: {e}"
        cuda = gpu
        try:
            rows.extend(_torchvision_rows(x, labels, max(5, iters // 5), cuda, 1 if small else 3, log))
        except Exception as e:  # noqa: BLE001
            errors["torchvision"] = f"{type(e).__name__}: {e}"
        try:
            rows.extend(_kornia_rows(x, max(5, iters // 5), cuda, log, errors))
        except Exception as e:  # noqa: BLE001
            errors["kornia"] = f"{type(e).__name__}: {e}"
    doc["targets"] = targets(doc) if gpu else {}
    return doc


def _find(doc, library, policy, variant_prefix=""):
    for r in doc["rows"]:
        if r["library"] == library and r["policy"] == policy and r["variant"].startswith(variant_prefix):
            return r
    return None


def targets(doc) -> dict:
    """The issue's targets, each ``{"text": ..., "met": bool}``, from a GPU document."""
    out = {}
    copy = _find(doc, "gpuaug", COPY)
    for name in ("RandAugment(2, 9)", "TrivialAugmentWide"):
        g = _find(doc, "gpuaug", name)
        if g is None:
            continue
        ms = g["ms"]
        out[f"{name} device time <= 0.25 ms"] = {"text": f"{ms:.3f} ms", "met": ms <= 0.25}
        k = _find(doc, "kornia", name)
        if k is not None:
            out[f"{name} >= 10x kornia (per sample)"] = {"text": f"{k['ms'] / ms:.1f}x", "met": k["ms"] / ms >= 10}
        d = _find(doc, "dali", name)
        if d is not None:
            out[f"{name} >= 5x DALI auto_aug (gpuaug device time vs DALI's marginal cost)"] = {
                "text": f"{d['ms'] / ms:.1f}x (gpuaug {ms:.3f} ms, DALI {d['ms']:.3f} ms)", "met": d["ms"] / ms >= 5}
            gd = _find(doc, "gpuaug.dali", name)
            if gd is not None and gd["ms"] > 0:  # python_function's own cost per batch included
                out[f"{name} >= 5x DALI auto_aug (both marginal in a pipeline: gpuaug.dali's python_function)"] = {
                    "text": f"{d['ms'] / gd['ms']:.1f}x (gpuaug.dali {gd['ms']:.3f} ms, DALI {d['ms']:.3f} ms)",
                    "met": d["ms"] / gd["ms"] >= 5}
    for name in ("MixUp(0.8)", "CutMix(1.0)"):
        g = _find(doc, "gpuaug", name)
        if g is not None and copy is not None:
            r = g["ms"] / copy["ms"]
            out[f"{name} <= 1.5x a same-size copy"] = {"text": f"{r:.2f}x", "met": r <= 1.5}
    return out


def validate(doc) -> list:
    """Problems with a document (empty when it is sound): its kind, rows with a finite time
    (marginal rows may be negative within noise), every check "ok", targets well-formed."""
    bad = []
    if doc.get("kind") != KIND:
        bad.append(f"kind: got {doc.get('kind')!r}; expected {KIND!r}")
    if not doc.get("rows"):
        bad.append("rows: none")
    for i, r in enumerate(doc.get("rows", [])):
        for k in ("library", "policy", "variant", "ms", "method"):
            if k not in r:
                bad.append(f"rows[{i}]: no {k!r}")
        ms = r.get("ms")
        if not isinstance(ms, (int, float)) or not math.isfinite(ms) or (r.get("method") != "marginal" and ms <= 0):
            bad.append(f"rows[{i}] ({r.get('library')} {r.get('policy')}): ms {ms!r} is not a positive finite time")
    for k, v in doc.get("checks", {}).items():
        if not str(v).startswith("ok"):
            bad.append(f"checks[{k!r}]: {v}")
    for k, v in doc.get("targets", {}).items():
        if not isinstance(v, dict) or set(v) != {"text", "met"}:
            bad.append(f"targets[{k!r}]: expected {{'text', 'met'}}")
    return bad


def format_table(doc) -> str:
    """A Markdown table of the rows, then the checks, targets and what was not measured."""
    dev = doc["device"].get("name", doc["device_kind"])
    head = (f"gpuaug bench --policies: {doc['n']}x{doc['size']}x{doc['size']}x3 uint8 NHWC on {dev}"
            f"{' (dry run)' if doc['dry_run'] else ''}, {doc['date']}")
    unit = "device ms" if doc["device_kind"] == "gpu" else "ms"
    lines = [head, "", f"| library | policy | variant | {unit} | host ms | loop ms | note |", "|---|---|---|---:|---:|---:|---|"]

    def f(v):
        return "" if v is None else f"{v:.3f}"

    for r in doc["rows"]:
        note = r.get("note", "") + ("; host-bound" if r.get("host_bound") else "")
        if r["method"] == "marginal":
            note = f"{note}; pipeline {r['pipeline_ms']:.3f} ms vs {r['baseline_ms']:.3f} ms without"
        lines.append(f"| {r['library']} | {r['policy']} | {r['variant']} | {f(r['ms'])} | {f(r.get('host_ms'))} | "
                     f"{f(r.get('loop_ms'))} | {note.strip('; ')} |")
    lines.append("")
    lines += [f"- check {k}: {v}" for k, v in doc["checks"].items()]
    lines += [f"- target {k}: {v['text']} — {'MET' if v['met'] else 'NOT MET'}" for k, v in doc["targets"].items()]
    lines += [f"- {k}: not measured ({v})" for k, v in doc["errors"].items()]
    return "\n".join(lines) + "\n"


def write(doc, out_dir) -> list:
    """policies.json and policies.md under ``out_dir``; returns their paths."""
    import json
    import os

    os.makedirs(out_dir, exist_ok=True)
    pj, pm = os.path.join(out_dir, "policies.json"), os.path.join(out_dir, "policies.md")
    with open(pj, "w") as fh:
        json.dump(doc, fh, indent=2, default=str)
    with open(pm, "w") as fh:
        fh.write(format_table(doc))
    return [pj, pm]


def cli(args) -> int:
    """``gpuaug bench --policies`` (gpuaug/cli.py): reads ``batch``, ``size``, ``repeat``,
    ``warmup``, ``device``, ``dry_run``, ``out``, ``seed`` from the parsed arguments."""
    import sys

    size = args.size[0] if getattr(args, "size", None) else None
    try:
        doc = run(args.batch, size, args.repeat, args.warmup, device=args.device, dry_run=args.dry_run,
                  peers=True, seed=args.seed,
                  log=lambda m: print(m, file=sys.stderr, flush=True))
    except (ValueError, AssertionError) as e:
        print(f"gpuaug bench --policies: {e}", file=sys.stderr)
        return 2
    print(format_table(doc))
    problems = validate(doc)
    for p in problems:
        print(f"policies document: {p}", file=sys.stderr)
    for path in write(doc, args.out or "gpuaug-policies"):
        print(f"wrote {path}")
    return 1 if problems else 0
