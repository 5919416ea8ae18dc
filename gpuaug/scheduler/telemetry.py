"""What the scheduler did, batch by batch: intervals, summary numbers, timelines.

Every batch leaves a :class:`BatchTiming`: its host-to-device copy and its augment as
intervals on the GPU clock (from CUDA events: elapsed time from the run's origin event
to the batch's start/end events), and, on the host clock aligned to the same origin,
the worker fills of its staging slot and the time the consumer waited for it.

:func:`summarize` turns a list of them into :class:`Stats`; :func:`chrome_trace` into a
Chrome trace (open it in https://ui.perfetto.dev or chrome://tracing);
:func:`ascii_timeline` into lanes of text like::

    copy    |=b0=|=b1=|=b2=|=b3=|
    compute      |a0|  |a1|  |a2|  |a3|

All times are seconds from the run's origin.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BatchTiming:
    """One batch's timeline (seconds from the run's origin).

    ``copy``/``compute``: (start, end) on the GPU clock (copy stream / compute stream).
    ``fill``: (worker, start, end) host intervals of the workers filling its staging slot.
    ``wait``: (start, end) of the consumer blocked in ``next()`` for it (host clock).
    ``images``: samples in the batch; ``nbytes``: bytes copied host to device (the
    encoded file bytes when decoding on the GPU).
    ``launch``: (start, end) host time the compute thread spent calling the augment (its
    Python and launch cost; long when the thread waits for the GIL).
    ``skipped``: (path, reason) of the samples left out (``on_error="skip"``).
    """

    index: int
    images: int
    nbytes: int
    copy: tuple
    compute: tuple
    fill: list = field(default_factory=list)
    wait: tuple | None = None
    launch: tuple | None = None
    skipped: list = field(default_factory=list)


def merge(intervals):
    """Union of (start, end) intervals as a sorted list of disjoint ones."""
    out = []
    for s, e in sorted((float(s), float(e)) for s, e in intervals if e > s):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def length(merged):
    """Total length of disjoint intervals."""
    return sum(e - s for s, e in merged)


def intersection(a, b):
    """Length of the intersection of two lists of disjoint sorted intervals."""
    i = j = 0
    tot = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            tot += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


@dataclass(frozen=True)
class Stats:
    """Summary of a scheduler run (``Scheduler.stats()``).

    - ``images_per_s``, ``gb_per_s``: delivered images and host-to-device bytes per
      second of wall time (the consumer's first request to the later of the last
      delivery and the last augment's end);
    - ``copy_gb_per_s``: bytes per second of copy-busy time (the link's speed while it ran);
    - ``copy_busy``, ``compute_busy``: fraction of the GPU span (first copy start to last
      augment end) during which the copy stream / the compute stream was busy;
    - ``overlap``: time both were busy at once, as a fraction of the shorter of the two
      busy times (1.0: the shorter one was completely hidden behind the other);
    - ``host_wait_s``: total time the consumer waited in ``next()``;
    - ``fill_gb_per_s``: staged bytes per second of time some worker was filling (the
      host staging speed; 0 when nothing was staged);
    - ``launch_mean_ms``: mean host time of one augment call on the compute thread;
    - ``skipped``: samples left out by ``on_error="skip"`` (``Scheduler.skipped()`` lists them).
    """

    batches: int
    images: int
    bytes: int
    wall_s: float
    span_s: float
    images_per_s: float
    gb_per_s: float
    copy_gb_per_s: float
    copy_s: float
    compute_s: float
    copy_busy: float
    compute_busy: float
    overlap: float
    host_wait_s: float
    host_wait_mean_ms: float
    pinned_reallocs: int = 0
    device_reallocs: int = 0
    fill_gb_per_s: float = 0.0
    launch_mean_ms: float = 0.0
    skipped: int = 0

    def __str__(self):
        return (f"{self.batches} batches, {self.images} images, {self.bytes / 1e9:.3f} GB in "
                f"{self.wall_s * 1e3:.1f} ms: {self.images_per_s:,.0f} images/s, "
                f"{self.gb_per_s:.2f} GB/s host to device ({self.copy_gb_per_s:.2f} GB/s while copying)\n"
                f"copy busy {self.copy_busy:.0%}, compute busy {self.compute_busy:.0%}, "
                f"overlap {self.overlap:.0%}; consumer waited {self.host_wait_s * 1e3:.1f} ms "
                f"({self.host_wait_mean_ms:.2f} ms per batch); reallocations: pinned "
                f"{self.pinned_reallocs}, device {self.device_reallocs}\n"
                f"host: staging {self.fill_gb_per_s:.2f} GB/s while filling, augment call "
                f"{self.launch_mean_ms:.2f} ms per batch; skipped samples {self.skipped}")


def summarize(batches, *, warmup=0, pinned_reallocs=0, device_reallocs=0) -> Stats:
    """:class:`Stats` over ``batches`` (a list of BatchTiming), skipping the first ``warmup``."""
    bs = sorted(batches, key=lambda b: b.index)
    prev = bs[warmup - 1] if 0 < warmup <= len(bs) else None
    bs = bs[warmup:]
    if not bs:
        return Stats(0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                     pinned_reallocs, device_reallocs)
    images = sum(b.images for b in bs)
    nbytes = sum(b.nbytes for b in bs)
    copies = merge(b.copy for b in bs)
    computes = merge(b.compute for b in bs)
    c, k = length(copies), length(computes)
    t0 = min([b.copy[0] for b in bs] + [b.compute[0] for b in bs])
    t1 = max([b.copy[1] for b in bs] + [b.compute[1] for b in bs])
    span = max(t1 - t0, 0.0)
    waits = [b.wait for b in bs if b.wait is not None]
    host_wait = sum(e - s for s, e in waits)
    # wall time: from the consumer's first request (or the end of the last warm-up batch)
    # to the later of the last delivery and the last augment's end
    if prev is not None:
        start = max(prev.compute[1], prev.wait[1] if prev.wait is not None else prev.compute[1])
    else:
        start = min(t0, waits[0][0]) if waits else t0
    end = max(t1, waits[-1][1]) if waits else t1
    wall = max(end - start, 0.0)
    inter = intersection(copies, computes)
    short = min(c, k)
    fills = length(merge((s0, e0) for b in bs for _, s0, e0 in b.fill))
    filled = sum(b.nbytes for b in bs if b.fill)
    launches = [b.launch[1] - b.launch[0] for b in bs if b.launch is not None]
    return Stats(
        batches=len(bs), images=images, bytes=nbytes, wall_s=wall, span_s=span,
        images_per_s=images / wall if wall > 0 else 0.0,
        gb_per_s=nbytes / wall / 1e9 if wall > 0 else 0.0,
        copy_gb_per_s=nbytes / c / 1e9 if c > 0 else 0.0,
        copy_s=c, compute_s=k,
        copy_busy=c / span if span > 0 else 0.0,
        compute_busy=k / span if span > 0 else 0.0,
        overlap=inter / short if short > 0 else 0.0,
        host_wait_s=host_wait, host_wait_mean_ms=host_wait / len(bs) * 1e3,
        pinned_reallocs=pinned_reallocs, device_reallocs=device_reallocs,
        fill_gb_per_s=filled / fills / 1e9 if fills > 0 else 0.0,
        launch_mean_ms=sum(launches) / len(launches) * 1e3 if launches else 0.0,
        skipped=sum(len(b.skipped) for b in bs))


def chrome_trace(batches, *, device="gpu", meta=None) -> dict:
    """A Chrome trace (``{"traceEvents": [...]}``) of the batches, timestamps in µs.

    Process "GPU" has threads "copy stream" and "compute stream"; process "host" has one
    thread per worker ("fill") and "consumer wait". ``meta`` lands in ``otherData``.
    """
    ev = []

    def meta_ev(pid, tid, kind, name):
        e = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
        if tid is not None:
            e["tid"] = tid
        ev.append(e)

    meta_ev(1, None, "process_name", f"GPU ({device})")
    meta_ev(1, 1, "thread_name", "copy stream (H2D)")
    meta_ev(1, 2, "thread_name", "compute stream (augment)")
    meta_ev(2, None, "process_name", "host")
    meta_ev(2, 100, "thread_name", "consumer wait")
    meta_ev(2, 101, "thread_name", "compute thread (augment call)")
    workers = set()
    for b in sorted(batches, key=lambda b: b.index):
        args = {"batch": b.index, "images": b.images, "bytes": b.nbytes}
        for name, tid, (s, e) in ((f"copy b{b.index}", 1, b.copy), (f"augment a{b.index}", 2, b.compute)):
            ev.append({"name": name, "cat": "gpu", "ph": "X", "pid": 1, "tid": tid,
                       "ts": s * 1e6, "dur": max(e - s, 0.0) * 1e6, "args": args})
        for w, s, e in b.fill:
            workers.add(w)
            ev.append({"name": f"fill b{b.index}", "cat": "host", "ph": "X", "pid": 2, "tid": 10 + w,
                       "ts": s * 1e6, "dur": max(e - s, 0.0) * 1e6, "args": {"batch": b.index}})
        if b.launch is not None:
            s, e = b.launch
            ev.append({"name": f"augment call a{b.index}", "cat": "host", "ph": "X", "pid": 2, "tid": 101,
                       "ts": s * 1e6, "dur": max(e - s, 0.0) * 1e6, "args": {"batch": b.index}})
        if b.wait is not None:
            s, e = b.wait
            ev.append({"name": f"wait b{b.index}", "cat": "host", "ph": "X", "pid": 2, "tid": 100,
                       "ts": s * 1e6, "dur": max(e - s, 0.0) * 1e6, "args": {"batch": b.index}})
    for w in sorted(workers):
        meta_ev(2, 10 + w, "thread_name", f"worker {w} (fill)")
    return {"traceEvents": ev, "displayTimeUnit": "ms", "otherData": dict(meta or {})}


def _lane(intervals, t0, scale, width, prefix):
    row = [" "] * width
    for idx, s, e in intervals:
        c0 = int(round((s - t0) * scale))
        c1 = max(int(round((e - t0) * scale)), c0 + 1)
        if c0 >= width:
            continue
        for c in range(c0 + 1, min(c1, width)):
            row[c] = "="
        row[c0] = "|"
        if c1 < width:
            row[c1] = "|"
        label = f"{prefix}{idx}"
        inner = c1 - c0 - 1
        if inner >= len(label):
            at = c0 + 1 + (inner - len(label)) // 2
            for i, ch in enumerate(label):
                if at + i < width:
                    row[at + i] = ch
    return "".join(row).rstrip()


def ascii_timeline(batches, *, width=100, first=0, count=12, waits=True) -> str:
    """Text lanes of ``count`` batches from the ``first``-th: copies ``bK``, augments ``aK``.

    ``width``: characters for the time axis. ``waits``: add a lane of consumer waits
    (host clock, aligned to the GPU clock at the run's origin).
    """
    bs = sorted(batches, key=lambda b: b.index)[first:first + count]
    if not bs:
        return "(no batches recorded)"
    t0 = min(min(b.copy[0], b.compute[0]) for b in bs)
    t1 = max(max(b.copy[1], b.compute[1]) for b in bs)
    span = max(t1 - t0, 1e-9)
    scale = (width - 1) / span
    lines = [
        "copy    " + _lane([(b.index, *b.copy) for b in bs], t0, scale, width, "b"),
        "compute " + _lane([(b.index, *b.compute) for b in bs], t0, scale, width, "a"),
    ]
    if waits:
        w = [(b.index, *b.wait) for b in bs if b.wait is not None and b.wait[1] > t0]
        w = [(i, max(s, t0), e) for i, s, e in w if e - s > span / width / 2]  # hide blips
        lines.append("wait    " + _lane(w, t0, scale, width, "w"))
    lines.append(f"        0{'':{width - 12}}{span * 1e3:8.2f} ms  "
                 f"(batches {bs[0].index}..{bs[-1].index}, 1 char = {span / width * 1e3:.3f} ms)")
    return "\n".join(lines)
