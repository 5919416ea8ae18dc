"""Train a tiny PyTorch model for a few steps on a generated image folder, with the data
loaded, decoded and augmented by DALI + gpuaug (``gpuaug.dali.torch_loader``).

    python3 examples/dali_train.py                 # GPU if there is one, else CPU
    python3 examples/dali_train.py --steps 50 --root /tmp/imgs --cpu

The folder holds one subfolder per class (JPEGs of different sizes whose colour depends
on the class, so the model has something to learn). The loader is a drop-in for a
``torch.utils.data.DataLoader``: it yields ``(images, labels)``, float32 (N, 3, S, S)
normalised images and int64 labels, on the GPU with ``device_id=0`` (mixed JPEG decode,
gpuaug CUDA C kernels in DALI) or on the CPU with ``device_id=None`` (CPU decode, the
Numba njit twins).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def make_folder(root, classes=4, per_class=32, seed=0):
    """Write ``classes`` x ``per_class`` JPEGs of random sizes; class k is tinted by hue k."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    tints = rng.integers(0, 256, (classes, 3))
    for k in range(classes):
        d = os.path.join(root, f"class_{k}")
        os.makedirs(d, exist_ok=True)
        for i in range(per_class):
            h, w = rng.integers(48, 160, 2)
            noise = rng.integers(0, 96, (h, w, 3))
            img = np.clip(tints[k] * 0.7 + noise, 0, 255).astype(np.uint8)
            Image.fromarray(img).save(os.path.join(d, f"{i:04d}.jpg"), quality=90)
    return root


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=None, help="image folder (default: a generated one in a temp dir)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--cpu", action="store_true", help="CPU pipeline and model even with a GPU")
    args = ap.parse_args(argv)

    import torch

    import gpuaug.dali as gd

    gpu = torch.cuda.is_available() and not args.cpu
    device = torch.device("cuda" if gpu else "cpu")
    tmp = None
    root = args.root
    if root is None:
        tmp = tempfile.TemporaryDirectory()
        root = make_folder(tmp.name)
    classes = len([d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))])

    loader = gd.torch_loader(root, size=args.size, batch_size=args.batch, device_id=0 if gpu else None,
                             num_threads=4, seed=0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, classes)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    print(f"{classes} classes, {len(loader)} batches per epoch of {args.batch}, "
          f"{'GPU (mixed decode, CUDA C kernels)' if gpu else 'CPU (CPU decode, Numba njit twins)'}")

    step, first, t0 = 0, None, time.perf_counter()
    while step < args.steps:
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            loss = loss_fn(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            first = loss.item() if first is None else first
            step += 1
            if step % 5 == 0 or step == 1:
                print(f"step {step:4d}  loss {loss.item():.4f}  images {tuple(images.shape)} on {images.device}")
            if step >= args.steps:
                break
    dt = time.perf_counter() - t0
    print(f"{step} steps in {dt:.1f} s ({step * args.batch / dt:.0f} images/s); loss {first:.4f} -> {loss.item():.4f}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
