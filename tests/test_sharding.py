"""Sharding guarantees for data-parallel training (one process per GPU), checked on the CPU.

What a DDP job needs from its input pipeline, per epoch: the ranks' samples are disjoint
and together cover the data set (``drop_last=True`` drops the tail of the epoch's order so
that every rank gets the same number of full batches, and nothing else); the shuffle
differs from epoch to epoch and is the same on every rank for a given seed and epoch; and
each rank's augmentation draws differ. Checked here for

- :func:`gpuaug.scheduler.epoch_batches`, the arithmetic (many sizes, no device);
- :class:`gpuaug.Scheduler` with ``FakeDevice`` (several shards in one process: array,
  image-file and iterable sources; sample identity travels in the images and the labels);
- ``gpuaug.Compose`` as the Scheduler's augment, seeded per rank;
- :func:`gpuaug.dali.image_folder_pipeline` on DALI CPU pipelines (``device_id=None``),
  one class folder per sample so that a label names its sample.

The GPU side (device placement on GPU 1, torchrun with NCCL) is tests/test_multi_gpu.py
and tests/gpu/multi_gpu.sh.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import gpuaug
from gpuaug.scheduler import FakeDevice, ImageFiles, ImageFolder, Scheduler, epoch_batches


def _check_partition(parts, n, *, complete=True):
    """``parts``: one flat list of sample indices per shard. Disjoint, inside range(n), no
    duplicate within a shard; with ``complete`` their union is range(n)."""
    allx = np.concatenate([np.asarray(p, np.int64) for p in parts]) if parts else np.zeros(0, np.int64)
    assert len(np.unique(allx)) == len(allx), "a sample was delivered twice (within or across shards)"
    assert allx.size == 0 or (allx.min() >= 0 and allx.max() < n)
    if complete:
        assert sorted(allx.tolist()) == list(range(n)), "samples were lost"
    return set(allx.tolist())


# ---------------------------------------------------------------------------------------
# epoch_batches: the arithmetic behind every indexable source
# ---------------------------------------------------------------------------------------
SIZES = [1, 2, 7, 10, 64, 101]
BATCH = [1, 3, 8]
SHARDS = [1, 2, 3, 4, 8]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("n,bs,ns", list(itertools.product(SIZES, BATCH, SHARDS)))
def test_epoch_batches_partition_without_drop_last(n, bs, ns, shuffle):
    """No drop_last: every sample exactly once over the shards; only a shard's last batch
    may be short; shard sizes differ by at most one sample and one batch."""
    for epoch in (0, 1):
        per = [epoch_batches(n, bs, epoch=epoch, shuffle=shuffle, seed=11, shard_id=i, num_shards=ns)
               for i in range(ns)]
        _check_partition([np.concatenate(b) if b else [] for b in per], n)
        for b in per:
            assert all(len(x) == bs for x in b[:-1]) and all(0 < len(x) <= bs for x in b)
        counts = [sum(len(x) for x in b) for b in per]
        assert max(counts) - min(counts) <= 1
        nbatches = [len(b) for b in per]
        assert max(nbatches) - min(nbatches) <= 1


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("n,bs,ns", list(itertools.product(SIZES, BATCH, SHARDS)))
def test_epoch_batches_partition_with_drop_last(n, bs, ns, shuffle):
    """drop_last: full batches only, the same number on every shard (a DDP step count),
    disjoint; what is left out is exactly the tail of the epoch's order, fewer than
    num_shards * (batch_size + 1) samples."""
    for epoch in (0, 1, 2):
        per = [epoch_batches(n, bs, epoch=epoch, shuffle=shuffle, seed=5, shard_id=i, num_shards=ns,
                             drop_last=True) for i in range(ns)]
        k = (n // ns) // bs
        assert [len(b) for b in per] == [k] * ns
        assert all(len(x) == bs for b in per for x in b)
        kept = _check_partition([np.concatenate(b) if b else [] for b in per], n, complete=False)
        assert len(kept) == ns * bs * k
        assert n - len(kept) < ns * (bs + 1)
        order = np.random.default_rng([5, epoch]).permutation(n) if shuffle else np.arange(n)
        assert kept == set(order[:ns * bs * k].tolist())


def test_epoch_batches_shuffle_per_epoch_and_same_on_every_rank():
    """The order of an epoch is one permutation, ``default_rng([seed, epoch])``, that every
    rank computes alike (shard i reads positions i, i + num_shards, ...); it changes with the
    epoch and with the seed."""
    n, bs, ns, seed = 97, 4, 3, 1234
    orders = []
    for epoch in range(4):
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        for i in range(ns):
            got = np.concatenate(epoch_batches(n, bs, epoch=epoch, shuffle=True, seed=seed, shard_id=i,
                                               num_shards=ns))
            np.testing.assert_array_equal(got, perm[i::ns])
            # a second "rank process" computing the same shard agrees bit for bit
            again = np.concatenate(epoch_batches(n, bs, epoch=epoch, shuffle=True, seed=seed, shard_id=i,
                                                 num_shards=ns))
            np.testing.assert_array_equal(got, again)
        orders.append(perm)
    for a, b in itertools.combinations(orders, 2):
        assert not np.array_equal(a, b)
    other = np.concatenate(epoch_batches(n, bs, epoch=0, shuffle=True, seed=seed + 1, shard_id=0, num_shards=ns))
    assert not np.array_equal(other, orders[0][0::ns])


def test_epoch_batches_drop_last_leaves_out_different_samples_each_epoch():
    """With shuffling, the samples drop_last leaves out change with the epoch, so over a few
    epochs every sample is seen."""
    n, bs, ns = 23, 4, 2  # 16 kept, 7 left out per epoch
    seen = set()
    left = []
    for epoch in range(8):
        kept = set(np.concatenate([np.concatenate(epoch_batches(n, bs, epoch=epoch, shuffle=True, seed=3,
                                                                 shard_id=i, num_shards=ns, drop_last=True))
                                   for i in range(ns)]).tolist())
        seen |= kept
        left.append(frozenset(range(n)) - kept)
    assert seen == set(range(n))
    assert len(set(left)) > 1


# ---------------------------------------------------------------------------------------
# the Scheduler, several shards in one process (FakeDevice)
# ---------------------------------------------------------------------------------------
def _indexed_images(n, h=2, w=3):
    """(n, h, w, 1) uint8 whose pixels hold the sample index (n <= 256)."""
    assert n <= 256
    return np.broadcast_to(np.arange(n, dtype=np.uint8)[:, None, None, None], (n, h, w, 1)).copy()


def _run_epoch(sched):
    """(labels of every batch, per-batch sizes); checks the images carry the labels' index."""
    batches, labels = [], []
    for images, lab in sched:
        lab = np.asarray(lab)
        imgs = np.asarray(images)
        # every pixel of sample j holds its index: the delivered data is the labelled sample
        assert (imgs.reshape(len(imgs), -1) == (lab % 256).astype(np.uint8)[:, None]).all()
        batches.append(len(lab))
        labels.extend(lab.tolist())
    return labels, batches


@pytest.mark.parametrize("ns", [2, 3, 4])
@pytest.mark.parametrize("shuffle,drop_last", [(False, False), (True, False), (False, True), (True, True)])
def test_scheduler_shards_partition_an_epoch(ns, shuffle, drop_last):
    n, bs = 101, 8
    x = _indexed_images(n)
    per_epoch = {0: [], 1: []}
    for i in range(ns):
        sched = Scheduler(x, batch_size=bs, labels=np.arange(n), device=FakeDevice(), workers=2, shard_id=i,
                          num_shards=ns, shuffle=shuffle, seed=7, drop_last=drop_last)
        for epoch in (0, 1):
            labels, sizes = _run_epoch(sched)
            assert len(sizes) == len(sched), "len(scheduler) must be the batches it delivers"
            want = epoch_batches(n, bs, epoch=epoch, shuffle=shuffle, seed=7, shard_id=i, num_shards=ns,
                                 drop_last=drop_last)
            assert labels == np.concatenate(want).tolist()
            per_epoch[epoch].append((labels, sizes))
        sched.close()
    for epoch, runs in per_epoch.items():
        _check_partition([r[0] for r in runs], n, complete=not drop_last)
        if drop_last:
            assert len({len(r[1]) for r in runs}) == 1, "every rank must take the same number of steps"
            assert all(s == bs for r in runs for s in r[1])
    if shuffle:
        assert per_epoch[0][0][0] != per_epoch[1][0][0], "epoch 1 must be shuffled anew"


def test_scheduler_set_epoch_replays_an_epoch_on_every_rank():
    """``set_epoch(e)`` (as torch's DistributedSampler.set_epoch) gives epoch e's order, so a
    resumed rank agrees with the others."""
    n, bs, ns = 64, 5, 2
    x = _indexed_images(n)
    first = {}
    for i in range(ns):
        s = Scheduler(x, batch_size=bs, labels=np.arange(n), device=FakeDevice(), workers=1, shard_id=i,
                      num_shards=ns, shuffle=True, seed=99, drop_last=True)
        first[i] = [_run_epoch(s)[0] for _ in range(3)]
        s.close()
    for i in range(ns):
        s = Scheduler(x, batch_size=bs, labels=np.arange(n), device=FakeDevice(), workers=1, shard_id=i,
                      num_shards=ns, shuffle=True, seed=99, drop_last=True)
        for e in (2, 0, 1):
            s.set_epoch(e)
            assert _run_epoch(s)[0] == first[i][e]
        s.close()


def test_scheduler_shuffled_shards_need_a_seed():
    """Without a shared seed each rank would draw its own permutation: refused."""
    with pytest.raises(ValueError, match=r"^seed: shuffling with num_shards > 1 needs a seed"):
        Scheduler(_indexed_images(8), batch_size=2, device=FakeDevice(), shuffle=True, shard_id=0, num_shards=2)


def _png_folder(root, n, per_class=1):
    from PIL import Image

    files = []
    for c in range(n):
        d = root / f"c{c:03d}"
        d.mkdir(parents=True)
        for j in range(per_class):
            f = d / f"{j}.png"
            Image.fromarray(np.full((3 + c % 4, 5, 3), c, np.uint8)).save(f)
            files.append(str(f))
    return files


@pytest.mark.parametrize("drop_last", [False, True])
def test_scheduler_image_folder_shards(tmp_path, drop_last):
    """Files decoded by the workers (ImageFolder: one class per file, so a label names its
    file; ImageFiles with index labels): the same partition as arrays."""
    n, bs, ns = 13, 2, 3
    files = _png_folder(tmp_path / "f", n)
    for make in (lambda: ImageFolder(str(tmp_path / "f"), size=(4, 4)),
                 lambda: ImageFiles(files, labels=np.arange(n), size=(4, 4))):
        parts, steps = [], []
        for i in range(ns):
            s = Scheduler(make(), batch_size=bs, device=FakeDevice(), workers=2, shard_id=i, num_shards=ns,
                          shuffle=True, seed=1, drop_last=drop_last)
            labels = []
            for images, lab in s:
                imgs = np.asarray(images)
                assert imgs.shape[1:] == (4, 4, 3)
                assert (imgs.reshape(len(imgs), -1) == np.asarray(lab, np.uint8)[:, None]).all()
                labels.extend(np.asarray(lab).tolist())
            parts.append(labels)
            steps.append(len(s))
            s.close()
        _check_partition(parts, n, complete=not drop_last)
        if drop_last:
            assert len(set(steps)) == 1


def _iterable(sizes):
    """A re-iterable source of batches of the given sizes; pixels hold a running index."""
    def gen():
        i = 0
        for s in sizes:
            yield np.arange(i, i + s, dtype=np.uint8).reshape(s, 1, 1, 1)
            i += s
    return gen


@pytest.mark.parametrize("sizes", [[4] * 5, [4, 4, 4, 4, 2], [4, 4, 4, 2], [3]])
def test_scheduler_iterable_shards_partition_batches(sizes):
    """An iterable source is sharded by whole batches (batch j to shard j % num_shards):
    without drop_last the shards still partition the samples."""
    ns = 2
    parts = []
    for i in range(ns):
        s = Scheduler(_iterable(sizes), device=FakeDevice(), shard_id=i, num_shards=ns)
        parts.append([int(v) for x, _ in s for v in np.asarray(x).ravel()])
    _check_partition(parts, sum(sizes))


@pytest.mark.parametrize("sizes", [[4] * 5, [4, 4, 4, 2]])
def test_scheduler_iterable_drop_last_evens_out_shards(sizes):
    ns = 2
    steps = []
    for i in range(ns):
        s = Scheduler(_iterable(sizes), device=FakeDevice(), shard_id=i, num_shards=ns, drop_last=True)
        got = [len(x) for x, _ in s]
        assert all(g == max(sizes) for g in got)
        steps.append(len(got))
    assert len(set(steps)) == 1, f"steps per shard {steps}"


# ---------------------------------------------------------------------------------------
# augmentation draws: one seed per rank
# ---------------------------------------------------------------------------------------
def _policy(seed):
    return gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(20),
                           gpuaug.ColorJitter(0.3, 0.3)], seed=seed, draws="host")


def _flat_params(p):
    return np.concatenate([np.asarray(v, np.float64).ravel() for d in p.values for v in d.values()])


def _draws(rank, seed_of_rank, n=24, bs=6, ns=2):
    """Run one rank's Scheduler (FakeDevice) over identical images with a Compose augment;
    return its parameter draws per batch and its output batches."""
    x = np.full((n, 6, 7, 3), 120, np.uint8)  # every sample alike: any difference is the draws
    pol = _policy(seed_of_rank(rank))
    draws = []

    def augment(b):  # runs on the scheduler's compute thread, one batch at a time, in order
        y = pol(b)
        draws.append(_flat_params(pol.last_params))
        return y

    s = Scheduler(x, augment, batch_size=bs, device=FakeDevice(), workers=1, shard_id=rank, num_shards=ns,
                  shuffle=True, seed=0, drop_last=True)
    outs = [np.asarray(images).copy() for images, _ in s]
    s.close()
    return draws, outs


def test_augment_draws_differ_per_rank_with_a_per_rank_seed():
    """The recipe (examples/ddp_train.py, README): ``Compose(..., seed=SeedSequence([seed,
    rank]))``. Each rank draws other parameters and so makes other images from the same
    input; a rank's draws are reproducible."""
    per_rank = lambda r: np.random.SeedSequence([2024, r])  # noqa: E731
    d0, o0 = _draws(0, per_rank)
    d1, o1 = _draws(1, per_rank)
    assert len(d0) == len(d1) == 2
    for a, b in zip(d0, d1):
        assert not np.allclose(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(o0, o1))
    d0b, o0b = _draws(0, per_rank)
    for a, b in zip(d0, d0b):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(o0, o0b):
        np.testing.assert_array_equal(a, b)


def test_augment_draws_with_one_seed_for_all_ranks_are_identical():
    """The pitfall the recipe avoids: the Scheduler does not reseed the augment per shard,
    so one fixed seed on every rank gives every rank the same draws (correlated augmentation
    across the global batch)."""
    same = lambda r: 2024  # noqa: E731, ARG005
    d0, _ = _draws(0, same)
    d1, _ = _draws(1, same)
    for a, b in zip(d0, d1):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------
# gpuaug.dali.image_folder_pipeline: shard_id / num_shards on DALI CPU pipelines
# ---------------------------------------------------------------------------------------
def _jpeg_per_class_tree(root, n, seed=0):
    """n class folders c000.. with one identical JPEG each: label k is sample k, and any
    difference between outputs comes from the random draws."""
    from PIL import Image

    a = np.random.default_rng(seed).integers(0, 256, (20, 20, 3), dtype=np.uint8)
    for k in range(n):
        d = root / f"c{k:03d}"
        d.mkdir(parents=True)
        Image.fromarray(a).save(d / "0.jpg", quality=95)
    return str(root)


def _dali_shard_stream(root, shard_id, ns, bs, n_samples, seed, augment=None, **kw):
    """Labels (= sample indices) of the first ``n_samples`` samples a shard's CPU pipeline
    reads, and its first output batch."""
    import gpuaug.dali as gd

    pipe = gd.image_folder_pipeline(root, augment=augment, size=8, batch_size=bs, device_id=None,
                                    shard_id=shard_id, num_shards=ns, num_threads=1, seed=seed, **kw)
    pipe.build()
    meta = pipe.reader_meta("Reader")
    labels, first = [], None
    while len(labels) < n_samples:
        images, lab = pipe.run()
        if first is None:
            first = np.stack([np.array(t) for t in images])
        labels.extend(int(np.array(t).ravel()[0]) for t in lab)
    del pipe
    return labels[:n_samples], first, meta


def _dali_shard_size(n, s, ns):
    """Samples in DALI reader shard s of ns (contiguous split of the file list)."""
    return (s + 1) * n // ns - s * n // ns


@pytest.mark.dali
@pytest.mark.parametrize("ns", [2, 3])
def test_dali_shards_partition_each_epoch(tmp_path, ns):
    """DALI's reader splits its (fixed-seed shuffled) file list into contiguous shards; a
    rank's epoch is its shard (size (s+1)*n//ns - s*n//ns, which differs by one between
    ranks), and with stick_to_shard off (the default) rank r reads shard (r + e) % ns in
    epoch e. Per epoch the ranks' samples are disjoint and cover the folder, with a
    different pipeline seed per rank (the recipe: seed + rank) and random_shuffle on."""
    n, bs, epochs = 23, 4, 3
    root = _jpeg_per_class_tree(tmp_path / "imgs", n)
    streams = []
    for r in range(ns):
        total = sum(_dali_shard_size(n, (r + e) % ns, ns) for e in range(epochs))
        labels, _, meta = _dali_shard_stream(root, r, ns, bs, total, seed=100 + r)
        assert meta["epoch_size"] == n and meta["number_of_shards"] == ns and meta["shard_id"] == r
        assert not meta["stick_to_shard"] and not meta["pad_last_batch"]
        streams.append(labels)
    orders = []
    for e in range(epochs):
        parts = []
        for r in range(ns):
            off = sum(_dali_shard_size(n, (r + k) % ns, ns) for k in range(e))
            parts.append(streams[r][off:off + _dali_shard_size(n, (r + e) % ns, ns)])
        _check_partition(parts, n)
        orders.append(parts)
    # the shuffle differs between epochs (rank 0 reads shard 0 again in epoch ns, in another order)
    if epochs > ns:
        assert orders[ns][0] != orders[0][0] and sorted(orders[ns][0]) == sorted(orders[0][0])
    assert any(orders[e][0] != sorted(orders[e][0]) for e in range(epochs)), "random_shuffle had no effect"


@pytest.mark.dali
def test_dali_augment_draws_differ_per_rank(tmp_path):
    """Identical images on every rank: the outputs differ between ranks exactly when their
    pipeline seeds differ (the recipe: seed + shard_id), and repeat with the same seed."""
    n, bs, ns = 8, 4, 2
    root = _jpeg_per_class_tree(tmp_path / "imgs", n)
    out = {}
    for r, seed in ((0, 10), (1, 11), (1, 10), (0, 10)):
        _, first, _ = _dali_shard_stream(root, r, ns, bs, bs, seed=seed, augment="default")
        assert first.shape == (bs, 3, 8, 8)
        if (r, seed) in out:
            np.testing.assert_array_equal(first, out[(r, seed)])  # reproducible
        out[(r, seed)] = first
    # random_shuffle may order the identical images differently: compare as multisets
    key = lambda a: sorted(a.reshape(len(a), -1).round(4).tolist())  # noqa: E731
    assert key(out[(0, 10)]) != key(out[(1, 11)])
    assert key(out[(0, 10)]) == key(out[(1, 10)]), "same seed on two ranks: same draws (the pitfall)"


# ---------------------------------------------------------------------------------------
# the check a rank runs under torchrun (gpuaug.bench.ddp: examples/ddp_train.py's and
# gpuaug bench --e2e --gpus's), its pure-NumPy part
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_example_check_accepts_real_shards_and_catches_faults(world, drop_last):
    """The all-gathered check of gpuaug.bench.ddp (examples/ddp_train.py) on what FakeDevice
    Schedulers with the example's settings deliver: OK; a duplicated, a lost or a foreign
    sample: FAILED."""
    from gpuaug.bench import ddp as ex

    n, bs = 103, 8
    parts = []
    for r in range(world):
        s = Scheduler(_indexed_images(n), batch_size=bs, labels=np.arange(n), device=FakeDevice(), workers=1,
                      shard_id=r, num_shards=world, shuffle=True, seed=0, drop_last=drop_last)
        parts.append(np.concatenate([np.asarray(lab) for _, lab in s]))
        s.close()
    ok, info = ex.check_partition(parts, n, world, bs, drop_last)
    assert ok, info
    assert info["dropped"] == (n - world * bs * ((n // world) // bs) if drop_last else 0)
    if not drop_last:
        assert info["union_digest"] == info["full_digest"]
    dup = [p.copy() for p in parts]
    dup[-1] = np.append(dup[-1], dup[0][0])
    assert not ex.check_partition(dup, n, world, bs, drop_last)[0]
    lost = [p.copy() for p in parts]
    lost[0] = lost[0][1:]
    assert not ex.check_partition(lost, n, world, bs, drop_last)[0]
    foreign = [p.copy() for p in parts]
    foreign[0] = np.append(foreign[0][1:], n + 5)
    assert not ex.check_partition(foreign, n, world, bs, drop_last)[0]


def test_example_synthetic_data_and_folder_listing(tmp_path):
    """The ranks' synthetic array (same on every rank, class tint learnable) and file listing
    (sorted classes and files: the order the DALI reader and the Scheduler share), in
    gpuaug.bench.ddp."""
    from gpuaug.bench import ddp as ex

    x, cls = ex.synthetic_array(40, 8, 4, seed=3)
    x2, _ = ex.synthetic_array(40, 8, 4, seed=3)
    np.testing.assert_array_equal(x, x2)
    assert x.shape == (40, 8, 8, 3) and x.dtype == np.uint8
    means = np.array([x[cls == c].mean(axis=(0, 1, 2)) for c in range(4)])
    assert len({tuple(np.round(m)) for m in means}) == 4
    root = ex.write_folder(str(tmp_path / "f"), 12, 3, shape=(10, 14))
    files, classes_of, k = ex.list_folder(root)
    assert k == 3 and len(files) == 12
    assert files == sorted(files) and [int(f.split("_")[1][:3]) for f in files] == classes_of.tolist()
    assert ex.contexts() is None or isinstance(ex.contexts(), list)


def _has_torch():
    import importlib.util

    return importlib.util.find_spec("torch") is not None


@pytest.mark.skipif(not _has_torch(), reason="needs PyTorch (torch.distributed, gloo) for torchrun")
@pytest.mark.parametrize("loader", ["scheduler", pytest.param("dali", marks=pytest.mark.dali)])
@pytest.mark.parametrize("nproc,drop_last", [(2, True), (3, False)])
def test_example_under_torchrun_on_the_cpu(tmp_path, loader, nproc, drop_last):
    """examples/ddp_train.py --cpu under torchrun (gloo, FakeDevice Scheduler or DALI CPU
    pipeline, DDP on the CPU): the all-gathered one-epoch check passes, every rank trains."""
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           os.path.join(root, "examples", "ddp_train.py"), "--cpu", "--loader", loader, "--steps", "2",
           "--warmup", "0", "--batch", "8", "--size", "16", "--load-size", "20", "--synthetic", "60",
           "--model", "tiny", "--workers", "1", "--json", str(out)]
    if not drop_last:
        cmd.append("--no-drop-last")
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the DALI path writes its synthetic folder there
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=root, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    res = json.loads(out.read_text())
    chk = res["check"]
    assert chk["ok"] and chk["duplicates"] == 0 and chk["outside"] == 0, chk
    assert chk["dropped"] == (60 - nproc * 8 * ((60 // nproc) // 8) if drop_last else 0)
    assert sum(chk["samples"]) == 60 - chk["dropped"]
    assert [x["rank"] for x in res["ranks"]] == list(range(nproc))
    assert all(x["images"] == 16 and len(x["losses"]) == 2 for x in res["ranks"])
