"""Chunked staging (staging="chunks", the default for in-memory array sources) on the CPU.

The FakeDevice checks that a pinned buffer is not refilled while a copy from it is pending
(the copy checksums its source at enqueue and at run time: ``dev.errors``) and poisons new
memory, so an unwritten byte changes a checksum.
"""
import threading
import zlib

import numpy as np
import pytest

import gpuaug
from gpuaug.scheduler import FakeDevice, epoch_batches
from gpuaug.scheduler._staging import Resources
from test_scheduler import our_threads


def aug(b):
    return b[:, ::-1] ^ np.uint8(0x5A)


def crcs(batches):
    return [zlib.crc32(np.ascontiguousarray(b).tobytes()) for b in batches]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("n,bs,workers,chunk", [
    (37, 10, 3, 300),    # several chunks per worker, the last one partial (90 B rows)
    (23, 4, 2, 1 << 20), # a batch smaller than a chunk
    (17, 5, 4, 1),       # chunk smaller than a sample: one sample per chunk
    (9, 9, 1, 200),      # one worker, one batch
])
def test_bytes_in_order_with_checksums(shuffle, n, bs, workers, chunk):
    x = np.random.default_rng(n).integers(0, 256, (n, 5, 6, 3), dtype=np.uint8)
    dev = FakeDevice(copy_ms=0.2, compute_ms=0.1)
    s = gpuaug.Scheduler(x, aug, batch_size=bs, depth=2, workers=workers, device=dev, shuffle=shuffle,
                         seed=3, chunk_bytes=chunk, staging="chunks")
    assert s.staging == "chunks"
    for e in range(2):
        got = crcs(np.array(b, copy=True) for b, _ in s)
        idx = epoch_batches(n, bs, epoch=e, shuffle=shuffle, seed=s._seed)
        assert got == crcs(aug(x[i]) for i in idx), f"epoch {e}"
    st = s.stats()
    assert st.bytes == x.nbytes and st.images == n
    s.close()
    assert dev.errors == []
    assert dev.usage()["device_bytes"] == 0 and dev.usage()["pinned_bytes"] == 0 and dev.streams_live == 0
    assert our_threads() == []


def test_sharded_chunks_partition_the_data():
    x = np.random.default_rng(0).integers(0, 256, (31, 4, 4, 3), dtype=np.uint8)
    seen = []
    for sid in range(3):
        s = gpuaug.Scheduler(x, None, batch_size=4, device=FakeDevice(), shuffle=True, seed=5, shard_id=sid,
                             num_shards=3, workers=2, chunk_bytes=100, staging="chunks")
        seen += [bytes(r) for b, _ in s for r in np.array(b)]
        s.close()
    assert sorted(seen) == sorted(bytes(r) for r in x)


def test_staging_argument_errors_name_it():
    x = np.zeros((4, 2, 2, 3), np.uint8)
    with pytest.raises(ValueError, match="staging"):
        gpuaug.Scheduler(x, batch_size=2, device=FakeDevice(), staging="rows")
    with pytest.raises(ValueError, match="staging"):
        gpuaug.Scheduler(x, batch_size=2, device=FakeDevice(), staging="chunks", pin_source=True)
    with pytest.raises(ValueError, match="staging"):
        gpuaug.Scheduler([x], device=FakeDevice(), staging="chunks")
    with pytest.raises(ValueError, match="chunk_bytes"):
        gpuaug.Scheduler(x, batch_size=2, device=FakeDevice(), chunk_bytes=0)
    assert gpuaug.Scheduler(x, batch_size=2, device=FakeDevice(), pin_source=True).staging == "batch"
    assert gpuaug.Scheduler([x], device=FakeDevice()).staging == "batch"
    assert gpuaug.Scheduler(x, batch_size=2, device=FakeDevice()).staging == "batch"  # the default (H100: faster)


def test_pinned_buffer_reuse_waits_for_its_event():
    """A stager with 2 buffers: the 3rd fill needs buffer 0 again and blocks until the copy
    out of it (held back on the stream by a gate) has run."""
    dev = FakeDevice()
    res = Resources(dev, 2, None, None)
    st = res.stager(0)
    assert st.prepare(100, 10) == 10
    gate = threading.Event()
    st.stream.put(gate.wait)  # the stream stalls: no copy completes
    dbuf = dev.alloc_device(300)
    progress = []

    def stage():
        for c in range(3):
            i, buf = st.next_buffer()
            buf[:100] = c
            dev.copy_h2d(dbuf, 100 * c, buf[:100], st.stream)
            st.copied(i)
            progress.append(c)

    t = threading.Thread(target=stage)
    t.start()
    t.join(0.3)
    assert progress == [0, 1] and t.is_alive()  # blocked on buffer 0's event
    gate.set()
    t.join(5)
    assert progress == [0, 1, 2]
    dev.sync_stream(st.stream)
    assert [int(dbuf.mem[100 * c]) for c in range(3)] == [0, 1, 2]
    assert dev.errors == []
    dev.free_device(dbuf)
    res.free()
    assert dev.usage()["pinned_bytes"] == 0 and dev.streams_live == 0


def test_no_host_wait_on_the_copy_and_compute_threads():
    """The copy and compute threads join the workers' chunk copies on the device (stream
    waits), never by a host synchronize."""
    host_waits = []

    class Dev(FakeDevice):
        def synchronize(self, event):
            host_waits.append(threading.current_thread().name)
            super().synchronize(event)

    x = np.random.default_rng(1).integers(0, 256, (40, 8, 8, 3), dtype=np.uint8)
    dev = Dev(copy_ms=0.5, compute_ms=0.2)
    s = gpuaug.Scheduler(x, aug, batch_size=8, depth=2, workers=3, device=dev, chunk_bytes=400, staging="chunks")
    got = crcs(np.array(b, copy=True) for b, _ in s)
    assert got == crcs(aug(x[i:i + 8]) for i in range(0, 40, 8))
    s.close()
    assert not [n for n in host_waits if n in ("gpuaug-copy", "gpuaug-compute")], host_waits
    assert any(n.startswith("gpuaug-worker") for n in host_waits)  # pinned buffers were reused behind events
    assert dev.errors == []
