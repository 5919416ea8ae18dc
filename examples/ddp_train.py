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
The loaders, the check, the timed loop and the report are :mod:`gpuaug.bench.ddp`'s
(``python -m gpuaug.bench.ddp`` is this script without a model: what ``gpuaug bench --e2e
FOLDER --gpus 1,2,4`` launches); what is here is the model and its DDP training step.
NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are set unless already set
(NVLink multicast is unavailable on the lent machines).
"""
from __future__ import annotations

import argparse
import sys

from gpuaug.bench import ddp


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
    ap = ddp.add_arguments(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--model", choices=("resnet18", "tiny", "none"), default="resnet18")
    args = ap.parse_args(argv)

    rk = ddp.Rank(cpu=args.cpu)              # torchrun's rank, its GPU made current, NCCL (gloo with --cpu)
    data = ddp.open_data(args, rk)           # this rank's shard: gpuaug.Scheduler or gpuaug.dali.torch_loader
    check = ddp.check_epoch(args, rk, data) if args.check else None   # one epoch all-gathered: disjoint?

    # ---- training ------------------------------------------------------------------------
    step = None                              # --model none: the input pipeline alone
    if args.model != "none":
        import torch

        device = rk.device
        model = make_model(args.model, data.n_classes).to(device, memory_format=torch.channels_last)
        if rk.distributed:
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=None if args.cpu else [rk.local_rank])
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        class_table = torch.as_tensor(data.classes_of, dtype=torch.int64, device=device)

        def train_step(images, idx):
            """One DDP step on a batch; the labels are sample indices, the class comes from a table."""
            target = class_table[ddp.as_indices(idx, torch).to(device, non_blocking=True)]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=not args.cpu):
                loss = loss_fn(model(ddp.as_images(images, torch).contiguous(memory_format=torch.channels_last)),
                               target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss

        step = train_step

    # warm-up steps, then timed ones: images/s and the time blocked in the loader's next()
    timing = ddp.timed_steps(args, rk, data, step, first_epoch=1 if args.check else 0)
    return ddp.report(args, rk, data, check, timing, model=args.model)


if __name__ == "__main__":
    sys.exit(main())
