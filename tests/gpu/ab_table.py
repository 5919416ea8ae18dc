"""Same-call A/B table from benchloop.py outputs: per op, the least loop time of each tree over
all its rounds (and every round's value), new against base.

    python3 tests/gpu/ab_table.py OUT/loop32-*.txt
"""
import re
import sys
from collections import defaultdict

got = defaultdict(lambda: defaultdict(list))
for path in sys.argv[1:]:
    for line in open(path):
        m = re.match(r"(\w+)\s+(\w+)\s+loop min\s+([\d.]+) us", line)
        if m:
            got[m.group(2)][m.group(1)].append(float(m.group(3)))
print(f"{'op':24s} {'new us':>8s} {'base us':>8s} {'new/base':>8s}   rounds new | base")
for op, d in got.items():
    n, b = min(d.get("new", [float("nan")])), min(d.get("base", [float("nan")]))
    print(f"{op:24s} {n:8.1f} {b:8.1f} {n / b:8.2f}   {' '.join(f'{v:.1f}' for v in d.get('new', []))} | "
          f"{' '.join(f'{v:.1f}' for v in d.get('base', []))}")
