"""Train a torchvision ResNet-18 on a JPEG folder with each loader, a few steps each, and
print what the loader costs the training loop: images/s, GPU busy % and the time every step
waits for its batch (mean, and as % of the step time).

    python3 examples/train_loop.py                          # generated 4096-JPEG folder, GPU
    python3 examples/train_loop.py --root /data/train --steps 100 --loaders dali,gpuaug_dali_rrc

Loaders (the same ones ``gpuaug bench --e2e`` times, from :mod:`gpuaug.bench_e2e`), each
giving float32 (N, 3, 224, 224) normalised images on the GPU (random resized crop + flip):

- ``dali``: DALI's built-ins (decoders.image_random_crop -> resize -> crop_mirror_normalize);
- ``gpuaug_dali_rrc``: ``gpuaug.dali.image_folder_pipeline(root, "flip")``; ``gpuaug_dali``:
  the same with its default policy (flip, rotation, brightness/contrast);
- ``scheduler_cpu`` / ``scheduler_gpu``: ``gpuaug.Scheduler`` over
  ``gpuaug.scheduler.ImageFolder`` with CPU / GPU (nvImageCodec) decoding;
- ``torchvision``: a ``DataLoader`` with worker processes (RandomResizedCrop + flip on the
  CPU), normalised on the GPU.

Per step: ``next()`` plus the wait for the batch's device work is the *data wait*; then the
forward and backward pass (bf16 autocast, channels_last) and the optimiser step, ended by a
synchronisation so each step's time is its own. GPU busy % is NVML's utilisation sampled
over the timed steps (pynvml or nvidia-smi). A loader that is not available (a missing
library, an older gpuaug) is reported and skipped.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

LOADERS = ("dali", "gpuaug_dali_rrc", "gpuaug_dali", "scheduler_cpu", "scheduler_gpu", "scheduler_gpu_procs",
           "torchvision")


def batches(loader):
    """The loader's batches, epoch after epoch."""
    while True:
        n = 0
        for b in loader.epoch():
            n += 1
            yield b
        if n == 0:
            raise RuntimeError("the loader gave an empty epoch")


def train(name, loader, model, opt, steps, warmup, print_every):
    import torch

    from gpuaug.bench_e2e import GpuBusy

    loss_fn = torch.nn.CrossEntropyLoss()
    dev = torch.device("cuda")
    it = batches(loader)
    waits, times, n_images = [], [], 0
    busy = None
    for step in range(warmup + steps):
        if step == warmup:
            busy = GpuBusy(torch.cuda.current_device()).start()
            t_all = time.perf_counter()
        t0 = time.perf_counter()
        images, labels = next(it)
        torch.cuda.current_stream().synchronize()  # the batch's device work is done: part of the wait
        t1 = time.perf_counter()
        labels = labels if torch.is_tensor(labels) else torch.as_tensor(np.asarray(labels))
        labels = labels.reshape(-1).to(dev, torch.long, non_blocking=True)
        images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_v = loss.item()  # synchronises: the step's time is its own
        t2 = time.perf_counter()
        if step >= warmup:
            waits.append(t1 - t0)
            times.append(t2 - t0)
            n_images += images.shape[0]
            k = step - warmup + 1
            if print_every and (k % print_every == 0 or k == steps):
                print(f"  {name:<16} step {k:4d}  {images.shape[0] / (t2 - t0):8,.0f} img/s  "
                      f"wait {1000 * (t1 - t0):7.2f} ms ({100 * (t1 - t0) / (t2 - t0):5.1f} %)  "
                      f"step {1000 * (t2 - t0):7.2f} ms  loss {loss_v:.3f}", flush=True)
    wall = time.perf_counter() - t_all
    gpu = busy.stop()
    it.close()  # ends the loader's epoch in progress (the Scheduler's run, DALI's iterator)
    return {"loader": name, "images_per_s": n_images / wall, "gpu_busy_pct": gpu,
            "wait_ms": 1000 * float(np.mean(waits)), "wait_pct": 100 * float(np.sum(waits) / np.sum(times)),
            "step_ms": 1000 * float(np.mean(times)), "steps": steps,
            "waits_ms": [round(1000 * w, 3) for w in waits]}  # per step: where the wait falls (epoch starts?)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None, help="class-per-folder JPEGs (default: the generated folder of "
                                                 "gpuaug bench --e2e, cached)")
    ap.add_argument("--images", type=int, default=4096, help="images in the generated folder")
    ap.add_argument("--loaders", default=",".join(LOADERS), help=f"comma-separated, from {', '.join(LOADERS)}")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per loader")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation, allocation)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", type=int, default=min(14, os.cpu_count() or 1))
    ap.add_argument("--print-every", type=int, default=10, help="print every N-th step (0: summary only)")
    ap.add_argument("--json", default=None, help="also write the summary as JSON here")
    args = ap.parse_args(argv)

    import torch
    import torchvision

    from gpuaug import bench_e2e as B

    if not torch.cuda.is_available():
        raise SystemExit("examples/train_loop.py: needs a CUDA GPU (PyTorch sees none)")
    names = [n.strip() for n in args.loaders.split(",") if n.strip()]
    bad = [n for n in names if n not in LOADERS]
    if bad:
        raise SystemExit(f"--loaders: got {bad}; expected names from {', '.join(LOADERS)}")
    root = args.root or B.synthetic_folder(args.images, workers=args.workers)
    info = B.folder_info(root)
    classes = info["classes"]
    print(f"{root}: {info['images']} images, {classes} classes; ResNet-18, batch {args.batch}, "
          f"{args.warmup} + {args.steps} steps per loader, {args.workers} workers, {torch.cuda.get_device_name()}")
    torch.backends.cudnn.benchmark = True
    st = B.Settings(root=root, batch=args.batch, workers=args.workers, size=224, seed=0)
    results = []
    for name in names:
        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=classes).cuda().to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        loader = None
        t = time.perf_counter()
        try:
            loader = B.PATH_FUNCS[name](st)
            res = train(name, loader, model, opt, args.steps, args.warmup, args.print_every)
            res["status"] = "ok"
        except B.Unavailable as e:
            res = {"loader": name, "status": f"unavailable: {e}"}
        except Exception as e:  # noqa: BLE001 - one loader failing must not stop the others
            res = {"loader": name, "status": f"error: {type(e).__name__}: {e}"[:400]}
        finally:
            if loader is not None:
                loader.close()
            del model, opt
            B._free_gpu()
        print(f"{name}: {res['status']} [{time.perf_counter() - t:.1f} s]", flush=True)
        results.append(res)

    print()
    print("| loader | images/s | GPU busy % | data wait ms/step | data wait % of step | step ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        if r["status"] != "ok":
            print(f"| {r['loader']} | - | - | - | - | - | {r['status']}")
            continue
        gpu = "-" if r["gpu_busy_pct"] is None else f"{r['gpu_busy_pct']:.0f}"
        print(f"| {r['loader']} | {r['images_per_s']:,.0f} | {gpu} | {r['wait_ms']:.2f} | {r['wait_pct']:.1f} | "
              f"{r['step_ms']:.1f} |")
    if args.json:
        import json

        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"root": root, "batch": args.batch, "workers": args.workers, "steps": args.steps,
                       "gpu": torch.cuda.get_device_name(), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
