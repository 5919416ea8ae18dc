"""Output of bench documents: per-op summary, merging op subsets, file names, the terminal
table and the PNG chart."""
from __future__ import annotations

import importlib.util
import json
import os
import re

import numpy as np

from .config import GIB, MIB


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
