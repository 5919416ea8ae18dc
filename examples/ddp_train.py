"""Data-parallel training with gpuaug input pipelines: one process per GPU under torchrun.

    torchrun --nproc_per_node=2 examples/ddp_train.py --loader scheduler --steps 50
    torchrun --nproc_per_node=2 examples/ddp_train.py --loader dali --folder /data/train --steps 50
    torchrun --nproc_per_node=2 examples/ddp_train.py --loader scheduler --folder /data/train --decode gpu

Each rank owns GPU ``LOCAL_RANK`` (``torch.cuda.set_device``, ``cupy.cuda.Device(r).use()``)
and reads its own shard of the data:

- ``--loader scheduler``: ``gpuaug.Scheduler(device=r, shard_id=rank, num_shards=world,
  shuffle=True, seed=S, drop_last=True)`` over an in-memory uint8 array (the default:
  synthetic images, page-locked in place) or a class-per-folder tree (``--folder``; decoded
  on the workers, or on the GPU with ``--decode gpu`` when this gpuaug has it), augmented by
  ``gpuaug.Compose`` (random resized crop, flip, normalize -> float32 NCHW) seeded with
  ``SeedSequence([S, rank])``: the shuffle is the same on every rank (one seed), the
  augmentation draws differ (a seed per rank);
- ``--loader dali``: ``gpuaug.dali.torch_loader`` (``image_folder_pipeline`` with
  ``device_id=r, shard_id=rank, num_shards=world, seed=S + rank``), mixed JPEG decode. Without
  ``--folder`` rank 0 writes a synthetic JPEG folder first.

A small model (torchvision resnet18, ``--model tiny`` a 3-layer CNN, ``--model none`` the
input pipeline alone) trains with DistributedDataParallel over NCCL. Every rank prints its
images/s and its data-wait (host time blocked in the loader's ``next()``); rank 0 the total.

Before training, one epoch of sample indices is read on every rank and all-gathered (each
loader's labels are sample indices; the class is looked up from a table): rank 0 checks that
the ranks' samples are disjoint and cover the data set, with ``drop_last`` leaving out
exactly ``N - world * batch * ((N // world) // batch)`` samples (the tail of the epoch's
order: every rank takes the same number of full batches). The script exits with status 1
if the check fails. It also reports on which GPUs each process holds a CUDA context.

The last line printed by rank 0 is ``RESULT {json}`` (also written to ``--json``).
NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are set unless already set
(NVLink multicast is unavailable on the lent machines).
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import inspect
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import numpy as np  # noqa: E402

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
    them ``shape`` and half transposed, as the end-to-end benchmark's)."""
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
    """(relative file paths, class of each) in sorted class / file order."""
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
# model
# ---------------------------------------------------------------------------------------
def make_model(kind, classes):
    import torch

    if kind == "resnet18":
        try:
            import torchvision
        except ImportError as e:
            raise SystemExit("--model resnet18 needs torchvision (pip install torchvision); "
                             "or use --model tiny") from e
        return torchvision.models.resnet18(num_classes=classes)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 128, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, classes))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loader", choices=("scheduler", "dali"), required=True)
    ap.add_argument("--folder", default=None, help="class-per-folder image tree (default: synthetic data)")
    ap.add_argument("--steps", type=int, default=50, help="training steps per rank")
    ap.add_argument("--warmup", type=int, default=None, help="steps left out of the timing (default: min(5, steps//4))")
    ap.add_argument("--batch", type=int, default=128, help="per-rank batch size")
    ap.add_argument("--size", type=int, default=224, help="training crop size")
    ap.add_argument("--load-size", type=int, default=256, help="synthetic / CPU-decoded image size")
    ap.add_argument("--synthetic", type=int, default=2048, help="samples in the synthetic data set")
    ap.add_argument("--classes", type=int, default=8)
    ap.add_argument("--model", choices=("resnet18", "tiny", "none"), default="resnet18")
    ap.add_argument("--decode", choices=("auto", "cpu", "gpu", "process"), default="auto",
                    help="scheduler + --folder: where images are decoded (auto: gpu if available)")
    ap.add_argument("--workers", type=int, default=None, help="scheduler workers / DALI threads per rank")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-drop-last", dest="drop_last", action="store_false")
    ap.add_argument("--no-check", dest="check", action="store_false", help="skip the one-epoch index check")
    ap.add_argument("--json", default=None, help="rank 0 writes the result here")
    ap.add_argument("--cpu", action="store_true", help="no GPU: gloo, the Scheduler on a FakeDevice, DALI CPU "
                    "pipelines, the model on the CPU (checks the recipe and the sharding on a laptop or in CI)")
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    distributed = "RANK" in os.environ
    if args.cpu:
        device = torch.device("cpu")
        if distributed:
            dist.init_process_group("gloo")
            gloo = dist.group.WORLD
    else:
        import cupy

        if not torch.cuda.is_available():
            raise SystemExit("this example needs CUDA GPUs (one per rank); --cpu runs it without")
        # the rank's GPU is made current before anything touches CUDA: no context on GPU 0
        torch.cuda.set_device(local_rank)
        cupy.cuda.Device(local_rank).use()
        device = torch.device("cuda", local_rank)
        if distributed:
            dist.init_process_group("nccl", device_id=device)
            gloo = dist.new_group(backend="gloo")  # host-side objects (indices, stats)

    def sync():
        if not args.cpu:
            torch.cuda.synchronize()
    say = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)

    def gather(obj):
        if not distributed:
            return [obj]
        out = [None] * world
        dist.all_gather_object(out, obj, group=gloo)
        return out

    # ---- data ----------------------------------------------------------------------------
    files = classes_of = None
    if args.folder is None and args.loader == "dali":
        args.folder = os.path.join(tempfile.gettempdir(), f"gpuaug-ddp-synthetic-{args.synthetic}-{args.seed}")
        if rank == 0 and not os.path.exists(os.path.join(args.folder, ".complete")):
            t = time.perf_counter()
            write_folder(args.folder, args.synthetic, args.classes, seed=args.seed)
            say(f"wrote {args.synthetic} synthetic JPEGs to {args.folder} in {time.perf_counter() - t:.1f} s")
        if distributed:
            dist.barrier(group=gloo)
    if args.folder is not None:
        files, classes_of, n_classes = list_folder(args.folder)
        n = len(files)
    else:
        n, n_classes = args.synthetic, args.classes
        classes_of = np.arange(n) % n_classes
    class_table = torch.as_tensor(classes_of, dtype=torch.int64, device=device)
    make = scheduler_loader if args.loader == "scheduler" else dali_loader
    t = time.perf_counter()
    loader, what = make(args, rank, world, local_rank, files, classes_of)
    say(f"world {world}, {n} samples, {n_classes} classes, per-rank batch {args.batch}, "
        f"drop_last={args.drop_last}; loader: {what}; built in {time.perf_counter() - t:.1f} s")
    epoch = 0

    def batches():
        """Endless (images, indices) over epochs; the Scheduler is told its epoch."""
        nonlocal epoch
        while True:
            if hasattr(loader, "set_epoch"):
                loader.set_epoch(epoch)
            for images, idx in loader:
                yield images, idx
            epoch += 1

    # ---- the one-epoch index check (also the warm-up: kernels compile, buffers fill) -----
    check = None
    if args.check:
        t = time.perf_counter()
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(0)
        mine = [as_indices(idx, torch).cpu().numpy() for _, idx in loader]
        mine = np.concatenate(mine) if mine else np.zeros(0, np.int64)
        epoch = 1
        parts = gather(mine)
        took = time.perf_counter() - t
        if rank == 0:
            ok, info = check_partition(parts, n, world, args.batch, args.drop_last)
            check = {"ok": bool(ok), **info, "seconds": round(took, 2)}
            say(f"CHECK epoch 0: samples per rank {info['samples']}, duplicates {info['duplicates']}, "
                f"outside {info['outside']}, dropped {info['dropped']} (expected {info['expected_dropped']} "
                f"with drop_last={args.drop_last}); digests {info['rank_digests']}, union {info['union_digest']} "
                f"(all {n}: {info['full_digest']}) -> {'OK' if ok else 'FAILED'}")

    # ---- training ------------------------------------------------------------------------
    model = None
    if args.model != "none":
        model = make_model(args.model, n_classes).to(device, memory_format=torch.channels_last)
        if distributed:
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=None if args.cpu else [local_rank])
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
    warmup = args.warmup if args.warmup is not None else min(5, args.steps // 4)
    it = batches()
    wait = images_seen = 0
    losses = []
    sync()
    t_start = time.perf_counter()
    for step in range(args.steps + warmup):
        if step == warmup:
            sync()
            t_start, wait, images_seen = time.perf_counter(), 0.0, 0
        t0 = time.perf_counter()
        images, idx = next(it)
        wait += time.perf_counter() - t0
        images_seen += images.shape[0]
        if model is not None:
            target = class_table[as_indices(idx, torch).to(device, non_blocking=True)]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=not args.cpu):
                loss = loss_fn(model(as_images(images, torch).contiguous(memory_format=torch.channels_last)),
                               target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step == warmup or step == args.steps + warmup - 1:
                losses.append(round(loss.item(), 4))
    sync()
    wall = time.perf_counter() - t_start
    ctx = None if args.cpu else contexts()
    mine = {"rank": rank, "device": local_rank, "images": images_seen, "seconds": round(wall, 3),
            "images_per_s": round(images_seen / wall, 1) if wall > 0 else 0.0,
            "data_wait_s": round(wait, 3), "data_wait_pct": round(100 * wait / wall, 1) if wall > 0 else 0.0,
            "losses": losses, "contexts": ctx}
    print(f"[rank {rank}/{world} {device}] {args.loader}: {images_seen} images in {wall:.2f} s = "
          f"{mine['images_per_s']:.0f} images/s; data-wait {wait:.3f} s ({mine['data_wait_pct']:.0f}% of the "
          f"time); loss {losses}; CUDA contexts on GPUs {ctx}", flush=True)
    stats = gather(mine)
    if hasattr(loader, "close"):
        loader.close()
    status = 0
    if rank == 0:
        total = sum(s["images_per_s"] for s in stats)
        placement = all(s["contexts"] is None or s["contexts"] == [s["device"]] for s in stats)
        say(f"TOTAL {args.loader} world {world}: {total:.0f} images/s (sum over ranks; slowest rank "
            f"{min(s['images_per_s'] for s in stats):.0f}); placement: each rank's contexts only on its own GPU: "
            f"{placement}")
        result = {"loader": args.loader, "world": world, "model": args.model, "batch": args.batch,
                  "size": args.size, "n": n, "steps": args.steps, "warmup": warmup, "what": what,
                  "images_per_s": round(total, 1), "ranks": stats, "check": check, "placement_ok": placement}
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(result, f, indent=1)
        say("RESULT " + json.dumps(result))
        status = 0 if check is None or check["ok"] else 1
    if distributed:
        status_t = torch.tensor([status], device=device)
        dist.broadcast(status_t, 0)
        status = int(status_t.item())
        dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
