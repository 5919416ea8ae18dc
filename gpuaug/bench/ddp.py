"""One rank of a data-parallel input pipeline, under torchrun: ``python -m gpuaug.bench.ddp``.

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m gpuaug.bench.ddp \\
        --loader scheduler --folder /data/train --decode gpu --steps 20 --batch 256
    python -m torch.distributed.run --standalone --nproc_per_node=2 -m gpuaug.bench.ddp \\
        --loader dali --folder /data/train --steps 20 --batch 256

The input pipeline alone (no model): what ``gpuaug bench --e2e FOLDER --gpus 1,2,4``
(:mod:`gpuaug.bench.scaling`) launches once per GPU count, and the parts that
``examples/ddp_train.py`` (the same with a model under DistributedDataParallel) is built
from. Each rank owns GPU ``LOCAL_RANK`` (``torch.cuda.set_device``,
``cupy.cuda.Device(r).use()``, before anything touches CUDA) and reads its own shard:

- ``--loader scheduler``: ``gpuaug.Scheduler(device=r, shard_id=rank, num_shards=world,
  shuffle=True, seed=S, drop_last=True)`` over an in-memory uint8 array (the default:
  synthetic images, page-locked in place) or a class-per-folder tree (``--folder``; decoded
  on the workers, or on the GPU with ``--decode gpu``), augmented by ``gpuaug.Compose``
  (random resized crop, flip, normalize -> float32 NCHW) seeded with
  ``SeedSequence([S, rank])``: the shuffle is the same on every rank (one seed), the
  augmentation draws differ (a seed per rank);
- ``--loader dali``: ``gpuaug.dali.torch_loader`` (``image_folder_pipeline`` with
  ``device_id=r, shard_id=rank, num_shards=world, seed=S + rank``), mixed JPEG decode.
  Without ``--folder`` rank 0 writes a synthetic JPEG folder first.

Before the timed steps, one epoch of sample indices is read on every rank and
all-gathered (each loader's labels are sample indices): rank 0 checks that the ranks'
samples are disjoint and cover the data set, with ``drop_last`` leaving out exactly
``N - world * batch * ((N // world) // batch)`` samples (:func:`check_partition`); the exit
status is 1 if the check fails. Every rank prints its images/s and data-wait (host time
blocked in the loader's ``next()``) and the GPUs on which it holds a CUDA context
(:func:`contexts`); rank 0 the total, and last ``RESULT {json}`` (also written to
``--json``). ``--cpu`` runs it without a GPU (gloo, the Scheduler on a FakeDevice, DALI CPU
pipelines): the sharding and the machinery on a laptop or in CI.

NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are set unless already set
(NVLink multicast is unavailable on the lent machines). Nothing here imports torch, CuPy or
DALI at import time.
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import inspect
import json
import os
import sys
import tempfile
import time

import numpy as np

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


# ---------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------
def synthetic_array(n, size, classes, seed=0):
    """(n, size, size, 3) uint8 images whose tint depends on the class ``i % classes``
    (learnable), noise from 16 random tiles; built the same on every rank."""
    rng = np.random.default_rng(seed)
    tints = rng.integers(0, 160, (classes, 3)).astype(np.uint8)
    tiles = rng.integers(0, 96, (16, size, size, 3), dtype=np.uint8)
    x = np.empty((n, size, size, 3), np.uint8)
    for a in range(0, n, 256):
        i = np.arange(a, min(a + 256, n))
        np.add(tiles[i % 16], tints[i % classes][:, None, None, :], out=x[a:a + len(i)])
    return x, np.arange(n) % classes


def write_folder(root, n, classes, seed=0, shape=(375, 500)):
    """A synthetic class-per-folder JPEG tree (``n`` images, ``classes`` folders, half of
    them ``shape`` and half transposed)."""
    from concurrent.futures import ThreadPoolExecutor

    from PIL import Image

    rng = np.random.default_rng(seed)
    tints = rng.integers(0, 160, (classes, 3))
    tiles = [rng.integers(0, 96, (max(shape), max(shape), 3)).astype(np.uint8) for _ in range(8)]

    def one(i):
        c = i % classes
        h, w = shape if i % 2 == 0 else shape[::-1]
        img = (tiles[i % 8][:h, :w] + tints[c]).astype(np.uint8)
        d = os.path.join(root, f"class_{c:03d}")
        Image.fromarray(img).save(os.path.join(d, f"{i:06d}.jpg"), quality=90)

    for c in range(classes):
        os.makedirs(os.path.join(root, f"class_{c:03d}"), exist_ok=True)
    with ThreadPoolExecutor(os.cpu_count() or 4) as ex:
        list(ex.map(one, range(n)))
    open(os.path.join(root, ".complete"), "w").close()
    return root


def list_folder(root):
    """(relative file paths, class of each, number of classes) in sorted class / file order."""
    exts = (".jpg", ".jpeg", ".png")
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    files, cls = [], []
    for k, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, c))):
            if f.lower().endswith(exts):
                files.append(os.path.join(c, f))
                cls.append(k)
    if not files:
        raise SystemExit(f"--folder: {root!r} has no class folders with images")
    return files, np.asarray(cls), len(classes)


def scheduler_loader(args, rank, world, local_rank, files, classes_of):
    """A gpuaug.Scheduler on GPU ``local_rank`` reading shard ``rank``; labels = indices."""
    import gpuaug
    from gpuaug.scheduler import ImageFiles

    steps = [gpuaug.RandomHorizontalFlip(), gpuaug.Normalize(MEAN, STD)]
    rrc = gpuaug.RandomResizedCrop(args.size)
    per_rank = np.random.SeedSequence([args.seed, rank])
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    workers = args.workers or max(1, min(14, (os.cpu_count() or 2) // max(1, local) - 2))
    if args.cpu:
        from gpuaug.scheduler import FakeDevice
    kw = dict(batch_size=args.batch, device=FakeDevice() if args.cpu else local_rank, shard_id=rank, num_shards=world, shuffle=True,
              seed=args.seed, drop_last=args.drop_last, output="torch", depth=4, workers=workers,
              keep_buffers=True)  # no re-pinning / re-allocation at each epoch start
    how = ""
    if files is None:
        x, _ = synthetic_array(args.synthetic, args.load_size, args.classes, seed=args.seed)
        src, how = (x, np.arange(len(x))), f"in-memory uint8 {x.shape}, pin_source"
        kw["pin_source"] = True
        steps.insert(0, rrc)
    else:
        paths = [os.path.join(args.folder, f) for f in files]
        decode = args.decode
        has = "decode" in inspect.signature(ImageFiles).parameters
        if decode == "auto":
            decode = "gpu" if has else "cpu"
        if decode != "cpu" and not has:
            raise SystemExit(f"--decode: got {decode!r}, but this gpuaug's ImageFiles has no decode= "
                             "argument (CPU decoding only); use --decode cpu")
        if decode == "gpu":
            crop_seed = int(np.random.SeedSequence([args.seed, rank, 1]).generate_state(1)[0])
            src = ImageFiles(paths, labels=np.arange(len(paths)), size=(args.size, args.size), decode="gpu",
                             crop="random", seed=crop_seed)
            how = "folder, GPU decode (nvImageCodec) + random resized crop in the decode step"
        else:
            extra = {"decode": decode} if has else {}
            src = ImageFiles(paths, labels=np.arange(len(paths)), size=(args.load_size, args.load_size), **extra)
            how = f"folder, {decode} decode to {args.load_size}x{args.load_size}"
            steps.insert(0, rrc)
    policy = gpuaug.Compose(steps, seed=per_rank)
    sched = gpuaug.Scheduler(src, policy, **kw)
    return sched, f"gpuaug.Scheduler ({how}; workers={workers})"


def dali_loader(args, rank, world, local_rank, files, classes_of):
    """gpuaug.dali.torch_loader on GPU ``local_rank`` reading shard ``rank``; labels = indices
    (the reader's ``files``/``labels``: the same file order on every rank)."""
    import gpuaug.dali as gd

    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    threads = args.workers or max(1, min(8, (os.cpu_count() or 2) // max(1, local)))
    loader = gd.torch_loader(args.folder, size=args.size, batch_size=args.batch,
                             device_id=None if args.cpu else local_rank,
                             shard_id=rank, num_shards=world, training=True, augment="flip",
                             drop_last=args.drop_last, seed=args.seed + rank, num_threads=threads,
                             reader_kwargs={"files": list(files), "labels": list(range(len(files)))})
    return loader, (f"gpuaug.dali.torch_loader ({'CPU' if args.cpu else 'mixed'} decode, RRC + flip + "
                    f"normalize; num_threads={threads})")


LOADERS = {"scheduler": scheduler_loader, "dali": dali_loader}


# ---------------------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------------------
def contexts():
    """GPUs on which this process has an active primary CUDA context (driver API:
    cuDevicePrimaryCtxGetState), or None when libcuda cannot be loaded."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if cu.cuInit(0) != 0:
        return None
    n = ctypes.c_int()
    cu.cuDeviceGetCount(ctypes.byref(n))
    active = []
    for i in range(n.value):
        dev, flags, on = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        if cu.cuDeviceGet(ctypes.byref(dev), i) == 0 and \
                cu.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(on)) == 0 and on.value:
            active.append(i)
    return active


def as_images(images, torch):
    """A batch's images as a torch tensor (FakeDevice, ``--cpu``, delivers NumPy arrays)."""
    return images if isinstance(images, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(images))


def as_indices(idx, torch):
    """A batch's labels (= sample indices) as an int64 torch tensor: DALI gives CUDA tensors,
    the Scheduler passes the source's labels through untouched (a NumPy array)."""
    if isinstance(idx, torch.Tensor):
        return idx.reshape(-1).long()
    return torch.from_numpy(np.asarray(idx, np.int64).reshape(-1))


def digest(indices):
    return hashlib.sha1(np.sort(np.asarray(indices, np.int64)).tobytes()).hexdigest()[:12]


def check_partition(per_rank, n, world, batch, drop_last):
    """Rank 0's check of one epoch: disjoint, covering (up to drop_last's documented tail)."""
    allx = np.concatenate([np.asarray(p, np.int64) for p in per_rank])
    union = np.unique(allx)
    dup = len(allx) - len(union)
    outside = int(((union < 0) | (union >= n)).sum())
    expect_dropped = n - world * batch * ((n // world) // batch) if drop_last else 0
    dropped = n - len(union) + outside
    ok = dup == 0 and outside == 0 and dropped == expect_dropped
    return ok, {"samples": [len(p) for p in per_rank], "duplicates": int(dup), "outside": outside,
                "dropped": int(dropped), "expected_dropped": int(expect_dropped), "n": int(n),
                "rank_digests": [digest(p) for p in per_rank], "union_digest": digest(union),
                "full_digest": digest(np.arange(n))}


# ---------------------------------------------------------------------------------------
# one rank's run, in parts: start, data, check, timed steps, report
# ---------------------------------------------------------------------------------------
def add_arguments(ap):
    """The options of a rank (everything but a model); returns ``ap``."""
    ap.add_argument("--loader", choices=tuple(LOADERS), required=True)
    ap.add_argument("--folder", default=None, help="class-per-folder image tree (default: synthetic data)")
    ap.add_argument("--steps", type=int, default=50, help="training steps per rank")
    ap.add_argument("--warmup", type=int, default=None, help="steps left out of the timing (default: min(5, steps//4))")
    ap.add_argument("--batch", type=int, default=128, help="per-rank batch size")
    ap.add_argument("--size", type=int, default=224, help="training crop size")
    ap.add_argument("--load-size", type=int, default=256, help="synthetic / CPU-decoded image size")
    ap.add_argument("--synthetic", type=int, default=2048, help="samples in the synthetic data set")
    ap.add_argument("--classes", type=int, default=8)
    ap.add_argument("--decode", choices=("auto", "cpu", "gpu", "process"), default="auto",
                    help="scheduler + --folder: where images are decoded (auto: gpu if available)")
    ap.add_argument("--workers", type=int, default=None, help="scheduler workers / DALI threads per rank")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-drop-last", dest="drop_last", action="store_false")
    ap.add_argument("--no-check", dest="check", action="store_false", help="skip the one-epoch index check")
    ap.add_argument("--json", default=None, help="rank 0 writes the result here")
    ap.add_argument("--cpu", action="store_true", help="no GPU: gloo, the Scheduler on a FakeDevice, DALI CPU "
                    "pipelines, the model on the CPU (checks the recipe and the sharding on a laptop or in CI)")
    return ap


class Rank:
    """This process's place in the job (torchrun's ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``;
    one process alone without them) and its device. On a GPU, GPU ``LOCAL_RANK`` is made
    current in torch and CuPy before anything touches CUDA (no context on GPU 0), then the
    NCCL process group is started with a gloo group beside it for host-side objects; with
    ``cpu``, gloo alone."""

    def __init__(self, cpu=False):
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.cpu = torch, dist, cpu
        self.rank = int(os.environ.get("RANK", 0))
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.distributed = "RANK" in os.environ
        self.gloo = None
        if cpu:
            self.device = torch.device("cpu")
            if self.distributed:
                dist.init_process_group("gloo")
                self.gloo = dist.group.WORLD
        else:
            import cupy

            if not torch.cuda.is_available():
                raise SystemExit("this needs CUDA GPUs (one per rank); --cpu runs it without")
            torch.cuda.set_device(self.local_rank)
            cupy.cuda.Device(self.local_rank).use()
            self.device = torch.device("cuda", self.local_rank)
            if self.distributed:
                dist.init_process_group("nccl", device_id=self.device)
                self.gloo = dist.new_group(backend="gloo")  # host-side objects (indices, stats)

    def say(self, *a):
        """Print on rank 0 only."""
        if self.rank == 0:
            print(*a, flush=True)

    def sync(self):
        if not self.cpu:
            self.torch.cuda.synchronize()

    def gather(self, obj):
        """``obj`` of every rank, in rank order (all-gathered over gloo)."""
        if not self.distributed:
            return [obj]
        out = [None] * self.world
        self.dist.all_gather_object(out, obj, group=self.gloo)
        return out

    def finish(self, status):
        """Every rank returns rank 0's ``status``; ends the process group."""
        if self.distributed:
            status_t = self.torch.tensor([status], device=self.device)
            self.dist.broadcast(status_t, 0)
            status = int(status_t.item())
            self.dist.destroy_process_group()
        return status


@dataclasses.dataclass
class Data:
    """A rank's loader and what it reads: ``n`` samples, ``classes_of[i]`` the class of
    sample ``i`` (the loaders' labels are sample indices), ``files`` (None: in memory)."""
    loader: object
    what: str
    n: int
    n_classes: int
    classes_of: np.ndarray
    files: list | None


def open_data(args, rk):
    """The rank's loader (``args.loader``) over ``args.folder`` or synthetic data; with the
    DALI loader and no folder, rank 0 writes a synthetic JPEG folder first."""
    if args.folder is None and args.loader == "dali":
        args.folder = os.path.join(tempfile.gettempdir(), f"gpuaug-ddp-synthetic-{args.synthetic}-{args.seed}")
        if rk.rank == 0 and not os.path.exists(os.path.join(args.folder, ".complete")):
            t = time.perf_counter()
            write_folder(args.folder, args.synthetic, args.classes, seed=args.seed)
            rk.say(f"wrote {args.synthetic} synthetic JPEGs to {args.folder} in {time.perf_counter() - t:.1f} s")
        if rk.distributed:
            rk.dist.barrier(group=rk.gloo)
    files = None
    if args.folder is not None:
        files, classes_of, n_classes = list_folder(args.folder)
        n = len(files)
    else:
        n, n_classes = args.synthetic, args.classes
        classes_of = np.arange(n) % n_classes
    t = time.perf_counter()
    loader, what = LOADERS[args.loader](args, rk.rank, rk.world, rk.local_rank, files, classes_of)
    rk.say(f"world {rk.world}, {n} samples, {n_classes} classes, per-rank batch {args.batch}, "
           f"drop_last={args.drop_last}; loader: {what}; built in {time.perf_counter() - t:.1f} s")
    return Data(loader, what, n, n_classes, classes_of, files)


def check_epoch(args, rk, data):
    """Epoch 0's sample indices of every rank, all-gathered; rank 0 checks them
    (:func:`check_partition`) and returns the check's dict, the other ranks None. Also the
    warm-up: kernels compile, buffers fill."""
    torch = rk.torch
    t = time.perf_counter()
    if hasattr(data.loader, "set_epoch"):
        data.loader.set_epoch(0)
    mine = [as_indices(idx, torch).cpu().numpy() for _, idx in data.loader]
    mine = np.concatenate(mine) if mine else np.zeros(0, np.int64)
    parts = rk.gather(mine)
    took = time.perf_counter() - t
    if rk.rank != 0:
        return None
    ok, info = check_partition(parts, data.n, rk.world, args.batch, args.drop_last)
    rk.say(f"CHECK epoch 0: samples per rank {info['samples']}, duplicates {info['duplicates']}, "
           f"outside {info['outside']}, dropped {info['dropped']} (expected {info['expected_dropped']} "
           f"with drop_last={args.drop_last}); digests {info['rank_digests']}, union {info['union_digest']} "
           f"(all {data.n}: {info['full_digest']}) -> {'OK' if ok else 'FAILED'}")
    return {"ok": bool(ok), **info, "seconds": round(took, 2)}


def batches(loader, epoch=0):
    """Endless (images, indices) over epochs from ``epoch`` on; the Scheduler is told its epoch.
    An epoch without a batch (a shard smaller than one batch) is an error, not an endless loop."""
    while True:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        got = False
        for images, idx in loader:
            got = True
            yield images, idx
        if not got:
            raise SystemExit(f"epoch {epoch} gave this rank no batch: its shard holds fewer samples than one "
                             "batch (--batch per rank x ranks must not exceed the data set)")
        epoch += 1


def timed_steps(args, rk, data, step=None, first_epoch=0):
    """``args.warmup`` untimed then ``args.steps`` timed steps, each one ``next()`` of the
    loader (the data-wait) and ``step(images, indices)`` (a training step returning its loss
    tensor; None: the input pipeline alone). Returns ``{"images", "seconds", "wait_s",
    "losses" (at the first and last timed step), "warmup"}``."""
    warmup = args.warmup if args.warmup is not None else min(5, args.steps // 4)
    it = batches(data.loader, first_epoch)
    wait = images_seen = 0
    losses = []
    rk.sync()
    t_start = time.perf_counter()
    for i in range(args.steps + warmup):
        if i == warmup:
            rk.sync()
            t_start, wait, images_seen = time.perf_counter(), 0.0, 0
        t0 = time.perf_counter()
        images, idx = next(it)
        wait += time.perf_counter() - t0
        images_seen += images.shape[0]
        if step is not None:
            loss = step(images, idx)
            if loss is not None and (i == warmup or i == args.steps + warmup - 1):
                losses.append(round(loss.item(), 4))
    rk.sync()
    return {"images": images_seen, "seconds": time.perf_counter() - t_start, "wait_s": wait,
            "losses": losses, "warmup": warmup}


def report(args, rk, data, check, timing, model="none"):
    """Every rank prints its line; rank 0 the total and ``RESULT {json}`` (and writes it to
    ``args.json``). Closes the loader and the process group; returns the exit status (1 if
    the epoch check failed)."""
    wall, wait, images_seen, losses = timing["seconds"], timing["wait_s"], timing["images"], timing["losses"]
    ctx = None if args.cpu else contexts()
    mine = {"rank": rk.rank, "device": rk.local_rank, "images": images_seen, "seconds": round(wall, 3),
            "images_per_s": round(images_seen / wall, 1) if wall > 0 else 0.0,
            "data_wait_s": round(wait, 3), "data_wait_pct": round(100 * wait / wall, 1) if wall > 0 else 0.0,
            "losses": losses, "contexts": ctx}
    print(f"[rank {rk.rank}/{rk.world} {rk.device}] {args.loader}: {images_seen} images in {wall:.2f} s = "
          f"{mine['images_per_s']:.0f} images/s; data-wait {wait:.3f} s ({mine['data_wait_pct']:.0f}% of the "
          f"time); loss {losses}; CUDA contexts on GPUs {ctx}", flush=True)
    stats = rk.gather(mine)
    if hasattr(data.loader, "close"):
        data.loader.close()
    status = 0
    if rk.rank == 0:
        total = sum(s["images_per_s"] for s in stats)
        placement = all(s["contexts"] is None or s["contexts"] == [s["device"]] for s in stats)
        rk.say(f"TOTAL {args.loader} world {rk.world}: {total:.0f} images/s (sum over ranks; slowest rank "
               f"{min(s['images_per_s'] for s in stats):.0f}); placement: each rank's contexts only on its own GPU: "
               f"{placement}")
        result = {"loader": args.loader, "world": rk.world, "model": model, "batch": args.batch,
                  "size": args.size, "n": data.n, "steps": args.steps, "warmup": timing["warmup"], "what": data.what,
                  "images_per_s": round(total, 1), "ranks": stats, "check": check, "placement_ok": placement}
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(result, f, indent=1)
        rk.say("RESULT " + json.dumps(result))
        status = 0 if check is None or check["ok"] else 1
    return rk.finish(status)


def main(argv=None):
    """The input pipeline alone on this rank: start, data, the epoch check, timed steps, report."""
    ap = add_arguments(argparse.ArgumentParser(
        prog="python -m gpuaug.bench.ddp",
        description="One rank of a data-parallel input pipeline (run it under torchrun); no model."))
    args = ap.parse_args(argv)
    rk = Rank(cpu=args.cpu)
    data = open_data(args, rk)
    check = check_epoch(args, rk, data) if args.check else None
    timing = timed_steps(args, rk, data, first_epoch=1 if args.check else 0)
    return report(args, rk, data, check, timing)


if __name__ == "__main__":
    sys.exit(main())
