"""``gpuaug demo``: augment the bundled photo with a handful of ops, write a contact sheet.

Runs on the GPU (CUDA C kernels through CuPy) when one is usable, else on the CPU (the
Numba twins), and says which. Each tile is labelled with its op and parameters.

    >>> from gpuaug.demo import run_demo
    >>> info = run_demo("/tmp/sheet.png", device="cpu")   # doctest: +SKIP
    >>> info["device"]                                    # doctest: +SKIP
    'cpu (Numba njit twins)'
"""
from __future__ import annotations

import os

import numpy as np

#: (op, parameters) shown in the demo, in order; ops not in the registry are skipped.
DEMO_OPS = (
    ("flip", {"horizontal": True}),
    ("flip", {"horizontal": False, "vertical": True}),
    ("rot90", {"k": 1}),
    ("rotate", {"angle": 30.0}),
    ("warp_affine", {"matrix": [[1.0, 0.3, -30.0], [0.1, 1.0, 0.0]]}),
    ("warp_perspective", {"matrix": [[1.0, 0.2, 0.0], [0.05, 1.0, 0.0], [0.0008, 0.0006, 1.0]]}),
    ("resized_crop", {"boxes": [60.0, 70.0, 120.0, 120.0], "size": (256, 256)}),
    ("pad", {"padding": (32, 32, 32, 32), "mode": "reflect"}),
    ("color_jitter", {"brightness": 1.3, "contrast": 1.4, "saturation": 1.8, "hue": 0.1}),
    ("hue", {"shift": 0.3}),
    ("grayscale", {"num_output_channels": 3}),
    ("solarize", {"threshold": 128}),
    ("posterize", {"bits": 3}),
    ("equalize", {}),
    ("gaussian_blur", {"sigma": 3.0}),
    ("sharpen", {"factor": 4.0}),
    ("gaussian_noise", {"std": 25.0, "seed": 1}),
    ("erase", {"boxes": [[40, 40, 60, 80]], "value": 0}),
    ("grid_mask", {"tile": 48, "ratio": 0.4, "angle": 20.0}),
)

TILE = 256


def sample_image() -> np.ndarray:
    """The bundled 256x256 RGB photo (NASA, public domain) as HWC uint8."""
    from PIL import Image

    path = os.path.join(os.path.dirname(__file__), "data", "astronaut.png")
    return np.asarray(Image.open(path).convert("RGB"))


def _label(name, params):
    def fmt(v):
        a = np.asarray(v)
        if a.ndim == 0:
            return f"{a.item():g}" if a.dtype.kind == "f" else str(a.item())
        return "[" + ",".join(fmt(e) for e in a.reshape(-1)[:6]) + ("..." if a.size > 6 else "") + "]"

    return name + (" " + " ".join(f"{k}={fmt(v)}" for k, v in params.items()) if params else "")


def _pick_device(device):
    if device not in (None, "auto", "gpu", "cpu"):
        raise ValueError(f"device: got {device!r}; expected 'auto', 'gpu' or 'cpu'")
    from gpuaug._util import gpu_available

    if device in (None, "auto"):
        return "gpu" if gpu_available() else "cpu"
    if device == "gpu" and not gpu_available():
        raise RuntimeError("device: 'gpu' asked for, but CuPy sees no CUDA device here")
    return device


def run_demo(out="gpuaug-demo.png", device="auto", columns=5):
    """Augment the sample photo with DEMO_OPS and write a labelled PNG contact sheet.

    Returns a dict: ``path``, ``device`` (what ran), ``tiles`` (labels), ``skipped``.
    """
    import gpuaug
    from PIL import Image, ImageDraw

    dev = _pick_device(device)
    img = sample_image()
    batch = img[None]
    if dev == "gpu":
        import cupy

        batch = cupy.asarray(batch)
        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())["name"]
        where = f"gpu ({name.decode() if isinstance(name, bytes) else name}, CUDA C kernels)"
    else:
        where = "cpu (Numba njit twins)"
    tiles, labels, skipped = [img], ["original"], []
    for name, params in DEMO_OPS:
        if name not in gpuaug.registry:
            skipped.append(name)
            continue
        y = gpuaug.registry[name].func(batch, **params)
        y = y.get() if hasattr(y, "get") else np.asarray(y)
        y = y[0]
        if y.shape[-1] == 1:
            y = np.repeat(y, 3, axis=-1)
        if y.dtype != np.uint8:
            y = np.clip(y, 0, 255).astype(np.uint8)
        tiles.append(y)
        labels.append(_label(name, params))
    rows = (len(tiles) + columns - 1) // columns
    pad = 22
    sheet = Image.new("RGB", (columns * TILE, rows * (TILE + pad)), "white")
    draw = ImageDraw.Draw(sheet)
    for i, (t, lab) in enumerate(zip(tiles, labels)):
        r, c = divmod(i, columns)
        im = Image.fromarray(np.ascontiguousarray(t))
        im.thumbnail((TILE, TILE))
        sheet.paste(im, (c * TILE, r * (TILE + pad) + pad))
        draw.text((c * TILE + 4, r * (TILE + pad) + 5), lab[:44], fill="black")
    out = os.path.abspath(out)
    sheet.save(out)
    return {"path": out, "device": where, "tiles": labels, "skipped": skipped}


def main(args) -> int:
    info = run_demo(args.out, args.device)
    print(f"gpuaug demo: {len(info['tiles']) - 1} augmented variants of the sample photo")
    print(f"device: {info['device']}")
    if info["skipped"]:
        print(f"skipped (not in this build): {', '.join(info['skipped'])}")
    print(f"wrote {info['path']}")
    return 0
