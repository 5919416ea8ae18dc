"""What the host-cost benches (bench/host_params.py, host_policies.py, host_compose.py,
host_targets.py) share: their command line, one timed row, the machine line, the JSON."""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import timeit

import numpy as np


def parser(doc, number):
    """--n, --number (calls per timing, default ``number``), --repeat, --only, --json."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--number", type=int, default=number, help="calls per timing")
    ap.add_argument("--repeat", type=int, default=7, help="timings per row")
    ap.add_argument("--only", nargs="*", help="row names")
    ap.add_argument("--json", help="write the rows here")
    return ap


def time_us(f, number, repeat, warmup=1):
    """{"median_us", "best_us"} of ``f`` per call, after ``warmup`` calls (imports, memos)."""
    for _ in range(warmup):
        f()
    ts = [t / number * 1e6 for t in timeit.repeat(f, number=number, repeat=repeat)]
    return {"median_us": statistics.median(ts), "best_us": min(ts)}


def machine():
    """The processor, Python and NumPy versions, for a bench's first line."""
    return f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, NumPy {np.__version__}"


def write_json(path, doc):
    if path:
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=1)
