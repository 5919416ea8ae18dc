"""``gpuaug demo``: augment the bundled photo with every registered op, write a contact sheet.

Runs on the GPU (CUDA C kernels through CuPy) when one is usable, else on the CPU (the
Numba twins), and says which. Each tile is labelled with its op and parameters, wrapped to
the tile's width (never cut). Ops are shown with the parameters in :data:`DEMO_OPS`; an op
registered later without an entry there is shown with its registry example, so the sheet
always holds every op in ``gpuaug.registry``.

    >>> from gpuaug.demo import run_demo
    >>> info = run_demo("/tmp/sheet.png", device="cpu")   # doctest: +SKIP
    >>> info["device"]                                    # doctest: +SKIP
    'cpu (Numba njit twins)'
"""
from __future__ import annotations

import os
import time

import numpy as np


def demo_ops():
    """(op, parameters) per tile, in registry order: each OpSpec's ``demo`` (a dict, or a tuple
    of dicts for several tiles); ops without one are left to :func:`demo_plan`, which shows them
    with their registry example."""
    import gpuaug

    ops = []
    for name, spec in gpuaug.registry.items():
        demo = spec.demo
        for params in (demo if isinstance(demo, tuple) else () if demo is None else (demo,)):
            ops.append((name, dict(params)))
    return tuple(ops)


def __getattr__(name):
    # DEMO_OPS: (op, parameters) shown in the demo, in order, read from the registry on first
    # use (so importing this module imports no op). Registered ops missing there are appended
    # with their registry example; names there that are not registered are skipped. A caller
    # may set its own DEMO_OPS.
    if name == "DEMO_OPS":
        return demo_ops()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _in_use():
    chosen = globals().get("DEMO_OPS")  # set by a caller, else the registry's
    return demo_ops() if chosen is None else chosen


TILE = 256          # tile width and height in pixels
MARGIN = 6          # around each label
FONT_SIZE = 13


class NoGPU(RuntimeError):
    """``device="gpu"`` was asked for but no GPU is usable (the message says what is missing)."""


def sample_image() -> np.ndarray:
    """The bundled 256x256 RGB photo (NASA, public domain) as HWC uint8."""
    from PIL import Image

    path = os.path.join(os.path.dirname(__file__), "data", "astronaut.png")
    return np.asarray(Image.open(path).convert("RGB"))


def _fmt(v):
    a = np.asarray(v)
    if a.ndim == 0:
        return f"{a.item():g}" if a.dtype.kind == "f" else str(a.item())
    return "[" + ",".join(_fmt(e) for e in a) + "]"


def _label(name, params):
    """``name k=v k=v``: every value in full (long ones are wrapped, not cut)."""
    return name + (" " + " ".join(f"{k}={_fmt(v)}" for k, v in params.items()) if params else "")


def demo_plan():
    """[(op, params)]: DEMO_OPS entries (each OpSpec's ``demo``) whose op is registered, then every other registered op
    with its registry example for one 256x256 image (no parameters if it has none)."""
    import gpuaug

    plan = [(n, p) for n, p in _in_use() if n in gpuaug.registry]
    shown = {n for n, _ in plan}
    for name, spec in gpuaug.registry.items():
        if name in shown:
            continue
        params = {}
        if spec.example is not None:
            per = {p.name: p.per_sample for p in spec.params}
            for k, v in spec.example(np.random.default_rng(0), 1, TILE, TILE).items():
                a = np.asarray(v)
                params[k] = a[0] if per.get(k) and a.ndim >= 1 and a.shape[0] == 1 else v
        plan.append((name, params))
    return plan


def _pick_device(device):
    if device not in (None, "auto", "gpu", "cpu"):
        raise ValueError(f"device: got {device!r}; expected 'auto', 'gpu' or 'cpu'")
    from gpuaug._util import why_no_gpu

    if device in (None, "auto"):
        return "gpu" if why_no_gpu() is None else "cpu"
    if device == "gpu":
        why = why_no_gpu()
        if why is not None:
            raise NoGPU(f"device 'gpu' was asked for but {why}; use --device cpu (or auto)")
    return device


def _font(size=FONT_SIZE):
    from PIL import ImageFont

    try:  # Pillow >= 10.1: a scalable font, legible at any size
        return ImageFont.load_default(size=size)
    except TypeError:  # older Pillow: its small bitmap font
        return ImageFont.load_default()


def wrap(text, width, measure):
    """Split ``text`` into lines of at most ``width`` pixels by ``measure(str) -> pixels``:
    at spaces, then after commas, then anywhere. Joining the lines gives ``text`` back."""
    lines, cur = [], ""
    for word in text.split(" "):
        cand = f"{cur} {word}" if cur else word
        if measure(cand) <= width:
            cur = cand
            continue
        if cur:
            lines.append(cur)
            cur = ""
        while measure(word) > width:  # a long value: break after a comma, else anywhere
            cut = max((i + 1 for i, ch in enumerate(word) if ch == "," and measure(word[:i + 1]) <= width),
                      default=0)
            if cut == 0:
                cut = max([1] + [i for i in range(1, len(word) + 1) if measure(word[:i]) <= width])
            lines.append(word[:cut])
            word = word[cut:]
        cur = word
    if cur:
        lines.append(cur)
    return lines


def _to_rgb8(y, note):
    """HWC uint8 RGB for the sheet (1 channel repeated; CHW transposed; floats outside 0..255
    min-max scaled, which the label then says)."""
    if y.ndim == 3 and y.shape[0] in (1, 3, 4) and y.shape[-1] not in (1, 3, 4):
        y = y.transpose(1, 2, 0)
    if y.shape[-1] == 1:
        y = np.repeat(y, 3, axis=-1)
    y = y[..., :3]
    if y.dtype != np.uint8:
        y = y.astype(np.float32)
        lo, hi = float(y.min()), float(y.max())
        if lo < 0 or hi <= 1.5:
            y = (y - lo) * (255.0 / max(hi - lo, 1e-12))
            note.append(f"(shown scaled from {lo:.2f}..{hi:.2f})")
        y = np.clip(y + 0.5, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(y)


def run_demo(out="gpuaug-demo.png", device="auto", columns=6):
    """Augment the sample photo with every registered op and write a labelled PNG sheet.

    Returns a dict: ``path``, ``device`` (what ran), ``ops`` and ``tiles`` (op name and
    label per tile, the original first), ``lines`` (each label as drawn, wrapped),
    ``boxes`` ((x, y) of each tile's 256x256 cell on the sheet; smaller results are
    centred in it), ``skipped`` (DEMO_OPS names not registered), ``seconds``.
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
    t0 = time.perf_counter()
    tiles, labels, ops = [img], ["original"], ["original"]
    for name, params in demo_plan():
        y = gpuaug.registry[name].func(batch, **params)
        y = y.get() if hasattr(y, "get") else np.asarray(y)
        note = []
        tiles.append(_to_rgb8(y[0], note))
        labels.append(" ".join([_label(name, params)] + note))
        ops.append(name)
    seconds = time.perf_counter() - t0
    skipped = [n for n, _ in _in_use() if n not in gpuaug.registry]

    font = _font()
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    measure = lambda s: probe.textlength(s, font=font)  # noqa: E731
    wrapped = [wrap(lab, TILE - 2 * MARGIN, measure) for lab in labels]
    asc, desc = font.getmetrics() if hasattr(font, "getmetrics") else (FONT_SIZE, 3)
    line_h = asc + desc + 2
    band = 2 * MARGIN + line_h * max(len(w) for w in wrapped)
    title = f"gpuaug demo: {len(tiles) - 1} variants of the sample photo, {len(set(ops[1:]))} ops, on {where}"
    head = 2 * MARGIN + line_h
    rows = (len(tiles) + columns - 1) // columns
    sheet = Image.new("RGB", (columns * TILE, head + rows * (TILE + band)), "white")
    draw = ImageDraw.Draw(sheet)
    draw.text((MARGIN, MARGIN), title, fill="black", font=font)
    boxes = []
    for i, (t, lines) in enumerate(zip(tiles, wrapped)):
        r, c = divmod(i, columns)
        x0, y0 = c * TILE, head + r * (TILE + band)   # the image, its caption below it
        im = Image.fromarray(t)
        im.thumbnail((TILE, TILE))
        sheet.paste(im, (x0 + (TILE - im.width) // 2, y0 + (TILE - im.height) // 2))
        boxes.append((x0, y0))
        for j, line in enumerate(lines):
            draw.text((x0 + MARGIN, y0 + TILE + MARGIN + j * line_h), line, fill="black", font=font)
    out = os.path.abspath(out)
    sheet.save(out)
    return {"path": out, "device": where, "ops": ops, "tiles": labels, "lines": wrapped,
            "boxes": boxes, "skipped": skipped, "seconds": seconds,
            "line_widths": [[measure(s) for s in w] for w in wrapped]}


def main(args) -> int:
    info = run_demo(args.out, args.device, columns=getattr(args, "columns", 6))
    n_ops = len(set(info["ops"][1:]))
    print(f"gpuaug demo: {len(info['tiles']) - 1} augmented variants of the sample photo "
          f"({n_ops} ops, {info['seconds']:.1f} s)")
    print(f"device: {info['device']}")
    if info["device"].startswith("cpu") and info["seconds"] > 5:
        print("(most of that is Numba compiling each CPU twin once; it is cached on disk, so the "
              "next run starts fast)")
    if info["skipped"]:
        print(f"skipped (not in this build): {', '.join(info['skipped'])}")
    print(f"wrote {info['path']}")
    return 0
