"""Soak: 10,000 batches through gpuaug.Scheduler on the CPU (FakeDevice), checksummed.

The source computes a CRC-32 of every batch it yields and passes ``(k, crc)`` as the
labels; the consumer undoes the augment and checks the CRC, and that the batch indices
run 0, 1, 2, ... with nothing lost, duplicated, reordered or corrupted. Shapes change
now and then (three uniform shapes and a varshape list, all seen in the first 100
batches), the consumer is slow now and then (the ring fills up), the augment's time
jitters. Memory must be flat: FakeDevice's pinned/device bytes and buffers, the threads,
the scheduler's batch records and (with ``max_timings``) its telemetry are the same at
batch 100 and at batch 9,950, and Python's allocated block count does not grow with the
batch count. Afterwards nothing is left.

Also: shuffled epochs of an indexed source with per-sample checksums, and a smoke run of
the GPU soak script (tests/gpu/soak.py) in its ``--fake`` (CPU) mode.
"""
import gc
import json
import os
import subprocess
import sys
import threading
import time
import zlib

import numpy as np
import pytest

import gpuaug
from gpuaug.scheduler import ArraySource, FakeDevice, epoch_batches

Scheduler = gpuaug.Scheduler
N = 10_000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def aug(b):
    if isinstance(b, list):
        return [a[::-1] ^ np.uint8(0x5A) for a in b]
    return b[:, ::-1] ^ np.uint8(0x5A)


def unaug(y):
    """The augment undone (it is its own inverse), as C-contiguous host arrays."""
    return [np.ascontiguousarray(a) for a in aug(y)] if isinstance(y, list) else np.ascontiguousarray(aug(y))


def crc(x):
    if isinstance(x, list):
        c = 0
        for a in x:
            c = zlib.crc32(a, c)
        return c
    return zlib.crc32(x)


def soak_source(n, seed=0):
    """Batch k: random bytes of one of four shapes; labels (k, CRC-32 of the batch)."""
    def gen():
        rng = np.random.default_rng(seed)
        for k in range(n):
            if k % 13 == 5:
                x = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((3, 5), (4, 2), (2, 6))]
            elif k % 7 == 3:
                x = rng.integers(0, 256, (3, 5, 4, 3), dtype=np.uint8)
            elif k % 11 == 4:
                x = rng.integers(0, 256, (1, 2, 3, 3), dtype=np.uint8)
            else:
                x = rng.integers(0, 256, (2, 4, 4, 3), dtype=np.uint8)
            yield x, (k, crc(x))
    return gen


def snapshot(s, dev):
    run = s._run
    gc.collect()  # count live blocks, not cyclic garbage waiting for a collection
    return {"usage": dev.usage(), "threads": len(threading.enumerate()), "records": len(run.recs),
            "timings": len(run.timings), "blocks": sys.getallocatedblocks()}


def test_soak_10000_batches_checksummed_flat_memory():
    dev = FakeDevice(compute_jitter_ms=0.05, seed=1, max_log=1000)
    threads0 = set(threading.enumerate())
    s = Scheduler(soak_source(N), aug, depth=3, workers=2, device=dev, max_timings=1000)
    t0 = time.perf_counter()
    seen, bad, marks = 0, [], {}
    for i, (images, (k, want)) in enumerate(s):
        if k != i:
            bad.append(f"batch {i}: got index {k} (lost, duplicated or out of order)")
            break
        if crc(unaug(images)) != want:
            bad.append(f"batch {k}: checksum mismatch (corrupted)")
        seen += 1
        if i % 97 == 0:
            time.sleep(0.002)  # a slow consumer now and then: the ring fills up
        if i in (100, 2000, N - 50):  # N - 50: the ring still full (at the end the threads have ended)
            marks[i] = snapshot(s, dev)
    wall = time.perf_counter() - t0
    assert bad == []
    assert seen == N
    st = s.stats()
    a, b = marks[100], marks[N - 50]
    print(json.dumps({"batches": seen, "wall_s": round(wall, 2), "at_100": a, "at_2000": marks[2000],
                      "at_end": b, "stats_batches": st.batches, "pinned_reallocs": st.pinned_reallocs}))
    assert a["usage"] == b["usage"] and a["usage"]["pinned_buffers"] == 3 and a["usage"]["streams"] == 2
    assert a["threads"] == b["threads"]
    assert a["records"] <= 20 and b["records"] <= 20
    assert marks[2000]["timings"] == b["timings"] == 1000  # telemetry bounded by max_timings
    # no per-batch growth: 8,000 batches would leave ~200,000 blocks if anything were kept per batch
    assert b["blocks"] - marks[2000]["blocks"] < 2000, (marks[2000]["blocks"], b["blocks"])
    assert dev.errors == []
    # afterwards: nothing allocated, no thread left
    assert dev.usage() == {"pinned_bytes": 0, "pinned_buffers": 0, "device_bytes": 0, "device_buffers": 0,
                           "streams": 0, "registered": 0}
    assert [t.name for t in threading.enumerate() if t not in threads0] == []
    assert wall < 60


def test_soak_indexed_shuffled_epochs():
    """4 shuffled epochs of 1,500 batches (keep_buffers): per-sample checksums, each epoch
    a permutation of all samples, buffers allocated once."""
    n, bs, epochs = 3000, 2, 4
    x = np.random.default_rng(3).integers(0, 256, (n, 3, 4, 3), dtype=np.uint8)
    sums = np.array([zlib.crc32(a) for a in x])
    dev = FakeDevice(compute_jitter_ms=0.05, max_log=1000)
    s = Scheduler(ArraySource(x, np.arange(n)), aug, batch_size=bs, shuffle=True, seed=11, depth=3, workers=2,
                  device=dev, keep_buffers=True, max_timings=1000)
    for e in range(epochs):
        order = np.concatenate(epoch_batches(n, bs, epoch=e, shuffle=True, seed=11))
        got = []
        for images, labels in s:
            back = unaug(images)
            for a, lab in zip(back, labels):
                assert zlib.crc32(a) == sums[lab], f"epoch {e}: sample {lab} corrupted"
            got.append(labels)
        got = np.concatenate(got)
        np.testing.assert_array_equal(got, order)  # the epoch's order, every sample once
        assert dev.pinned_allocs == (3 if s.staging == "batch" else 2 * len(s._res.stagers)) and dev.device_allocs == 3  # allocated once, for all epochs (chunks: 2 per worker)
    s.close()
    assert dev.errors == [] and dev.usage()["pinned_buffers"] == dev.usage()["device_buffers"] == 0


def test_gpu_soak_script_fake_mode(tmp_path):
    """tests/gpu/soak.py runs on the CPU with --fake: the same code path as on the GPU."""
    env = dict(os.environ, OUT=str(tmp_path))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "soak.py"), "--fake",
                          "--batches", "400", "--shape", "4x12x10x3"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rep = json.loads((tmp_path / "soak.json").read_text())
    assert rep["ok"] is True and rep["batches"] == 400 and rep["problems"] == []
    assert rep["verified_host"] >= 4 and rep["checksummed"] == 400
    assert rep["at_100"]["scheduler"] == rep["at_end"]["scheduler"]
    assert rep["after_close"]["scheduler"] == {"pinned_bytes": 0, "pinned_buffers": 0, "device_bytes": 0,
                                               "device_buffers": 0}
    assert rep["after_close"]["threads"] == rep["before"]["threads"]


def test_max_timings_argument():
    x = np.zeros((40, 2, 2, 1), np.uint8)
    s = Scheduler(x, batch_size=2, device=FakeDevice(), max_timings=5)
    assert len(list(s)) == 20
    assert [b.index for b in s.timings()] == list(range(15, 20)) and s.stats().batches == 5
    s = Scheduler(x, batch_size=2, device=FakeDevice(), max_timings=None)
    assert len(list(s)) == 20 and len(s.timings()) == 20
    for bad in (0, True, 1.5, "3"):
        with pytest.raises(ValueError, match="max_timings"):
            Scheduler(x, batch_size=2, device=FakeDevice(), max_timings=bad)
