"""``gpuaug bench --e2e [FOLDER]``: a JPEG folder to augmented training batches, every path.

The job: a class-per-folder tree of JPEGs in, batches of random resized crop (224) +
horizontal flip + normalize out, float32 NCHW on the GPU. Each path runs it in this
process, one after the other, on the same folder, batch 256 by default; a warm-up epoch,
then at least ``epochs`` epochs (more until ``min_seconds`` have passed) are measured:

====================  ==========================================================================
``dali``              DALI built-ins: readers.file -> decoders.image_random_crop (mixed) ->
                      resize -> crop_mirror_normalize (mirror = coin flip)
``gpuaug_dali_rrc``   :func:`gpuaug.dali.image_folder_pipeline` with ``augment="flip"``
``gpuaug_dali``       :func:`gpuaug.dali.image_folder_pipeline`, default policy (flip, rotate,
                      brightness/contrast)
``scheduler_cpu``     :class:`gpuaug.Scheduler` over ``scheduler.ImageFolder(root, size=(256, 256),
                      decode="process")`` (CPU decode in worker processes), augment
                      ``gpuaug.Compose([RandomResizedCrop(224), RandomHorizontalFlip(), Normalize])``
``scheduler_cpu_threads``  the same with ``decode="cpu"`` (the scheduler's threads)
``scheduler_gpu``     ``ImageFolder(root, size=(224, 224), decode="gpu", crop="random")``
                      (nvImageCodec, the random resized crop made in the decode's one
                      resized_crop launch), augment flip + Normalize
``torchvision``       ``torch.utils.data.DataLoader`` over torchvision's ImageFolder
                      (RandomResizedCrop + flip on the CPU, ``workers`` processes, pin_memory),
                      normalize on the GPU
====================  ==========================================================================

Columns: images/s; GPU busy % (NVML's utilisation - the fraction of time a kernel ran -
sampled through pynvml or ``nvidia-smi`` over the measured epochs); CPU cores used (CPU
time of this process and its child processes over wall time); data wait (mean ms the
consumer waited for each batch, ``next()`` plus the wait for the batch's device work; the
consumer here does nothing else, so it is close to the batch period - the training example
``examples/train_loop.py`` measures it under a model). A path whose library or API is
missing is a row with status ``unavailable: <reason>``; one that fails, ``error: <reason>``.

With ``gpus`` (``--gpus 1,2,4``) the paths that have a multi-GPU twin (``scheduler_gpu``,
``gpuaug_dali_rrc`` by default) are also run on that many GPUs, one torchrun of
:mod:`gpuaug.bench.ddp` per count (:mod:`gpuaug.bench.scaling`): images/s summed over the
ranks, the scaling efficiency, data wait per rank, the epoch's disjointness check and the
placement, as ``doc["scaling"]`` and a second table.

Without a FOLDER a synthetic ImageNet-like one is generated (:func:`synthetic_folder`) and
cached. ``dry_run=True`` runs the whole machinery on the CPU (DALI CPU pipelines, the
Scheduler on a FakeDevice, torchvision without a GPU) on a tiny folder: what CI tests.

Example::

    gpuaug bench --e2e --images 4096 --workers 14 --out bench/results/e2e
    gpuaug bench --e2e /data/imagenet/train --paths dali,gpuaug_dali_rrc --epochs 2
    gpuaug bench --e2e --dry-run --out /tmp/e2e        # CPU only, seconds
    gpuaug bench --e2e --paths scheduler_gpu,gpuaug_dali_rrc --gpus 1,2,4 --out out/e2e
"""
from __future__ import annotations

import dataclasses
import datetime
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

SCHEMA = "gpuaug-bench-e2e/1"

#: path name -> label (table, chart)
PATHS = {
    "dali": "DALI built-ins (image_random_crop mixed -> resize -> crop_mirror_normalize)",
    "gpuaug_dali_rrc": "gpuaug.dali.image_folder_pipeline, RRC + flip + normalize",
    "gpuaug_dali": "gpuaug.dali.image_folder_pipeline, default policy",
    "scheduler_cpu": "gpuaug Scheduler, CPU decode in processes",
    "scheduler_cpu_threads": "gpuaug Scheduler, CPU decode on threads",
    "scheduler_gpu": "gpuaug Scheduler, GPU decode (nvImageCodec)",
    "scheduler_gpu_procs": "gpuaug Scheduler, GPU decode in 4 processes (nvImageCodec)",
    "torchvision": "torchvision DataLoader (CPU RRC + flip, GPU normalize)",
}

#: paths run only when named (``--paths``): where the time of gpuaug's DALI pipeline goes
EXTRA_PATHS = {
    "dali_slice": "DALI built-ins with gpuaug's boxes (image_slice mixed -> resize -> DALI crop_mirror_normalize)",
}
_ALL = {**PATHS, **EXTRA_PATHS}

#: row keys and types of the JSON schema (tests check them)
ROW_KEYS = {"path": str, "label": str, "status": str, "images_per_s": (float, type(None)),
            "gpu_busy_pct": (float, type(None)), "cpu_cores": (float, type(None)),
            "wait_ms": (float, type(None)), "wait_pct": (float, type(None)), "batches": int, "images": int,
            "seconds": float, "epochs": int, "notes": list}

MEAN01 = (0.485, 0.456, 0.406)
STD01 = (0.229, 0.224, 0.225)
MEAN255 = tuple(255 * m for m in MEAN01)
STD255 = tuple(255 * s for s in STD01)

_FOLDER_VERSION = 1  # bump when the generator's output changes (invalidates the cache)


# ----------------------------------------------------------------------------- folder
def _shape_for(rng, min_side, max_side):
    """An ImageNet-like size: mostly 500x375 / 375x500 (scaled into the range), else uniform."""
    u = rng.random()
    if u < 0.8:
        long_side = min(max_side, max(min_side, 500))
        short = max(min_side, int(round(long_side * 0.75)))
        return (short, long_side) if u < 0.4 else (long_side, short)
    h, w = rng.integers(min_side, max_side + 1, 2)
    return int(h), int(w)


def _base_image():
    from PIL import Image

    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "astronaut.png")
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def synth_image(i, seed=0, min_side=300, max_side=640, base=None):
    """Synthetic photo ``i`` of the folder with ``seed``: a random crop of the bundled
    astronaut photo resized to an ImageNet-like size (mostly 500x375 or 375x500, else
    uniform in [min_side, max_side]), per-channel colour gains U(0.7, 1.3) and Gaussian
    noise (sigma 5), uint8 HWC. Deterministic in ``(seed, i)``.

    Example::

        >>> from gpuaug.bench.e2e import synth_image
        >>> synth_image(0, seed=1, min_side=40, max_side=80).dtype
        dtype('uint8')
    """
    from PIL import Image

    base = _base_image() if base is None else base
    rng = np.random.default_rng([int(seed), int(i)])
    h, w = _shape_for(rng, min_side, max_side)
    bh, bw = base.shape[:2]
    s = rng.uniform(0.35, 1.0)
    ch, cw = max(8, int(bh * s)), max(8, int(bw * s * rng.uniform(0.75, 1.0)))
    y, x = int(rng.integers(0, bh - ch + 1)), int(rng.integers(0, bw - cw + 1))
    img = Image.fromarray(np.ascontiguousarray(base[y:y + ch, x:x + cw])).resize((w, h), Image.BILINEAR)
    a = np.asarray(img, np.float32) * rng.uniform(0.7, 1.3, 3).astype(np.float32)
    a += rng.standard_normal(a.shape, dtype=np.float32) * 5.0
    return np.clip(a + 0.5, 0, 255).astype(np.uint8)


def _write_images(args):
    root, indices, seed, classes, min_side, max_side, quality = args
    from PIL import Image

    base = _base_image()
    for i in indices:
        a = synth_image(i, seed, min_side, max_side, base)
        Image.fromarray(a).save(os.path.join(root, f"class_{i % classes}", f"img_{i:06d}.jpg"), quality=quality)
    return len(indices)


def make_folder(root, n=4096, *, seed=0, classes=8, min_side=300, max_side=640, quality=90, workers=None):
    """Write ``n`` synthetic JPEGs (:func:`synth_image`, quality 90: ~50 KB at 500x375)
    into ``root/class_<k>/img_<i>.jpg``, image ``i`` in class ``i % classes``; uses
    ``workers`` processes (default: the CPU count, at most 16). Returns ``root``.

    Example::

        >>> import tempfile
        >>> from gpuaug.bench.e2e import make_folder
        >>> root = make_folder(tempfile.mkdtemp(), n=4, classes=2, min_side=32, max_side=48, workers=1)
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n: got {n!r}; expected an int >= 1")
    if isinstance(classes, bool) or not isinstance(classes, (int, np.integer)) or not 1 <= classes <= n:
        raise ValueError(f"classes: got {classes!r}; expected an int in [1, n={n}]")
    if not 8 <= min_side <= max_side:
        raise ValueError(f"min_side, max_side: got {min_side}, {max_side}; expected 8 <= min_side <= max_side")
    for k in range(classes):
        os.makedirs(os.path.join(root, f"class_{k}"), exist_ok=True)
    workers = min(16, os.cpu_count() or 1) if workers is None else max(1, int(workers))
    workers = min(workers, max(1, n // 32))
    chunks = [list(range(j, n, workers)) for j in range(workers)]
    jobs = [(root, c, seed, classes, min_side, max_side, quality) for c in chunks]
    if workers == 1:
        _write_images(jobs[0])
    else:
        import multiprocessing as mp

        # fork: no re-import of the caller's __main__ (a script without a main guard, python3 -);
        # the children only run PIL and NumPy
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        with mp.get_context(method).Pool(workers) as pool:
            pool.map(_write_images, jobs)
    return root


def cache_dir():
    """Where generated folders are kept: ``$GPUAUG_CACHE`` or ``<tempdir>/gpuaug-cache``."""
    return os.environ.get("GPUAUG_CACHE") or os.path.join(tempfile.gettempdir(), "gpuaug-cache")


def synthetic_folder(n=4096, *, seed=0, classes=8, min_side=300, max_side=640, quality=90, cache=None,
                     workers=None):
    """The synthetic folder for these settings, generated once (:func:`make_folder`) and kept
    under ``cache`` (default :func:`cache_dir`); returns its path. A folder is published by an
    atomic rename, so a crashed generation is never reused.

    Example::

        root = synthetic_folder(4096)      # /tmp/gpuaug-cache/e2e-v1-n4096-c8-s0-300-640-q90
    """
    cache = cache_dir() if cache is None else os.fspath(cache)
    name = f"e2e-v{_FOLDER_VERSION}-n{n}-c{classes}-s{seed}-{min_side}-{max_side}-q{quality}"
    root = os.path.join(cache, name)
    if os.path.isdir(root):
        return root
    os.makedirs(cache, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=name + ".tmp-", dir=cache)
    try:
        make_folder(tmp, n, seed=seed, classes=classes, min_side=min_side, max_side=max_side, quality=quality,
                    workers=workers)
        try:
            os.rename(tmp, root)
        except OSError:  # another process published it first
            if not os.path.isdir(root):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return root


def folder_info(root):
    """``{"images", "classes", "mean_bytes", "mean_h", "mean_w"}`` of an image folder (sizes from
    the headers of at most 512 files)."""
    from PIL import Image

    classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
    files = []
    for c in classes:
        for dirpath, _, names in os.walk(os.path.join(root, c)):
            files += [os.path.join(dirpath, f) for f in names if f.lower().endswith((".jpg", ".jpeg", ".png"))]
    files.sort()
    nbytes = [os.path.getsize(f) for f in files]
    hw = []
    for f in files[:: max(1, len(files) // 512)]:
        with Image.open(f) as im:
            hw.append(im.size[::-1])
    hw = np.array(hw if hw else [(0, 0)], float)
    return {"root": os.path.abspath(root), "images": len(files), "classes": len(classes),
            "mean_bytes": float(np.mean(nbytes)) if nbytes else 0.0,
            "mean_h": float(hw[:, 0].mean()), "mean_w": float(hw[:, 1].mean())}


# ----------------------------------------------------------------------------- meters
def _proc_tree_cpu():
    """{pid: CPU seconds} of this process's live descendants (Linux /proc; {} elsewhere)."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        ppid, cpu = {}, {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat", "rb") as f:
                    rest = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            ppid[int(d)] = int(rest[1])
            cpu[int(d)] = (int(rest[11]) + int(rest[12])) / tick
        me, out, todo = os.getpid(), {}, [os.getpid()]
        kids = {}
        for p, pp in ppid.items():
            kids.setdefault(pp, []).append(p)
        while todo:
            for k in kids.get(todo.pop(), ()):
                if k != me and k not in out:
                    out[k] = cpu[k]
                    todo.append(k)
        return out
    except Exception:  # noqa: BLE001 - not Linux: waited-for children only
        return {}


class CpuMeter:
    """CPU seconds of this process + its children (live ones through /proc, ended ones
    through ``os.times``) between :meth:`start` and :meth:`stop`."""

    def start(self):
        t = os.times()
        self._self0, self._kids0 = t.user + t.system, t.children_user + t.children_system
        self._live0 = _proc_tree_cpu()
        return self

    def stop(self):
        t = os.times()
        live = _proc_tree_cpu()
        used = (t.user + t.system - self._self0) + (t.children_user + t.children_system - self._kids0)
        used += sum(v - self._live0.get(p, 0.0) for p, v in live.items())
        # a child alive at start and gone now is counted whole by children_*: take off its start
        used -= sum(v for p, v in self._live0.items() if p not in live)
        return max(0.0, used)


class GpuBusy:
    """Mean GPU utilisation (NVML: % of time a kernel was running) over a window, sampled
    every ``period`` s through pynvml, else ``nvidia-smi``; :meth:`stop` returns None where
    neither works (no GPU, dry run)."""

    def __init__(self, index=0, period=0.05):
        self.index, self.period = index, period
        self.source, self._samples, self._stop = None, [], threading.Event()
        self._thread = self._proc = None

    def start(self):
        self._samples, self._stop = [], threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(self.index)

            def poll():
                while not self._stop.wait(self.period):
                    self._samples.append(float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))

            self.source = "pynvml"
            self._thread = threading.Thread(target=poll, daemon=True)
            self._thread.start()
            return self
        except Exception:  # noqa: BLE001 - optional: fall back to nvidia-smi
            pass
        exe = shutil.which("nvidia-smi")
        if exe is None:
            return self
        try:
            self._proc = subprocess.Popen([exe, "-i", str(self.index), "--query-gpu=utilization.gpu",
                                           "--format=csv,noheader,nounits", f"--loop-ms={max(50, int(self.period * 1000))}"],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return self
        self.source = "nvidia-smi"

        def read():
            for line in self._proc.stdout:
                if self._stop.is_set():
                    break
                try:
                    self._samples.append(float(line.strip()))
                except ValueError:
                    pass

        self._thread = threading.Thread(target=read, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        # nvidia-smi's first line reports the window before start: drop it when we have more
        s = self._samples[1:] if self.source == "nvidia-smi" and len(self._samples) > 2 else self._samples
        return float(np.mean(s)) if s else None


# ----------------------------------------------------------------------------- paths
class Unavailable(Exception):
    """A path whose library or API is missing (a row with status ``unavailable: ...``)."""


@dataclasses.dataclass
class Settings:
    root: str
    batch: int = 256
    workers: int = 14
    size: int = 224
    resize: int = 256           # the Scheduler CPU path's decode size, as in issue 12
    seed: int = 0
    dry_run: bool = False
    device_id: int = 0


class Loader:
    """One path, ready to iterate: ``epoch()`` yields batches, ``sync(batch)`` waits for the
    batch's device work, ``count(batch)`` its images, ``close()`` frees it."""

    def __init__(self, epoch, sync=None, count=None, close=None, notes=()):
        self.epoch = epoch
        self.sync = sync or (lambda b: None)
        self.count = count or (lambda b: len(b[0]))
        self._close = close
        self.notes = list(notes)

    def close(self):
        if self._close is not None:
            self._close()


def _need(module, extra):
    import importlib

    try:
        return importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure is "unavailable"
        raise Unavailable(f"{module} not importable ({type(e).__name__}: {e}); install {extra}") from e


def _torch_sync(torch):
    return lambda b: torch.cuda.current_stream().synchronize()


def _dali_loader(pipe, st, notes=()):
    """A built DALI pipeline as a Loader: on the GPU through DALI's PyTorch iterator (what a
    training loop uses; it waits for the batch), on the CPU by ``run()`` per batch."""
    pipe.build()
    if not st.dry_run:
        torch = _need("torch", "PyTorch")
        from gpuaug.dali.pipelines import TorchLoader

        loader = TorchLoader(pipe, reader_name="Reader", drop_last=True)
        return Loader(lambda: iter(loader), _torch_sync(torch), close=lambda: None, notes=notes)
    per_epoch = max(1, pipe.epoch_size("Reader") // st.batch)

    def epoch():
        for _ in range(per_epoch):
            yield pipe.run()

    return Loader(epoch, count=lambda b: len(b[0]), notes=notes)


def _dali_builtin(st, decode, notes=()):
    """DALI's built-ins after ``decode(fn, types, jpegs, device)``: resize to the output size
    (linear, no antialiasing: gpuaug's pipeline default), crop_mirror_normalize with a coin-flip
    mirror, float32 CHW."""
    _need("nvidia.dali", "gpuaug[cuda12] or gpuaug[cuda13] (DALI)")
    from nvidia.dali import fn, pipeline_def, types

    gpu = not st.dry_run

    @pipeline_def(batch_size=st.batch, num_threads=st.workers, device_id=st.device_id if gpu else None,
                  seed=st.seed)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=st.root, random_shuffle=True, name="Reader")
        images = decode(fn, types, jpegs, "mixed" if gpu else "cpu")
        images = fn.resize(images, resize_x=float(st.size), resize_y=float(st.size),
                           interp_type=types.INTERP_LINEAR, antialias=False)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=list(MEAN255),
                                          std=list(STD255), mirror=fn.random.coin_flip(probability=0.5))
        return images, (labels.gpu() if gpu else labels)

    return _dali_loader(pipe(), st, notes)


def path_dali(st):
    """DALI's built-ins, the reference."""
    def decode(fn, types, jpegs, device):
        return fn.decoders.image_random_crop(jpegs, device=device, output_type=types.RGB,
                                             random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3],
                                             num_attempts=10)

    return _dali_builtin(st, decode, ["resize: INTERP_LINEAR, antialias=False (as gpuaug's default)"])


def path_dali_slice(st):
    """DALI's built-ins after a region-of-interest decode of gpuaug's boxes (``image_slice``,
    as ``image_folder_pipeline(roi="gpuaug")`` decodes): what that decoder costs against
    ``image_random_crop``."""
    def decode(fn, types, jpegs, device):
        from gpuaug.dali.pipelines import int_boxes, random_resized_crop_boxes

        anchor, extent = int_boxes(random_resized_crop_boxes, fn.peek_image_shape(jpegs), (0.08, 1.0),
                                    (3 / 4, 4 / 3))
        return fn.decoders.image_slice(jpegs, anchor, extent, axis_names="HW", normalized_anchor=False,
                                       normalized_shape=False, device=device, output_type=types.RGB)

    return _dali_builtin(st, decode)


def _gpuaug_dali(st, augment):
    _need("nvidia.dali", "gpuaug[cuda12] or gpuaug[cuda13] (DALI)")
    import gpuaug.dali as gd

    pipe = gd.image_folder_pipeline(st.root, augment, size=st.size, batch_size=st.batch,
                                    device_id=None if st.dry_run else st.device_id, num_threads=st.workers,
                                    seed=st.seed, mean=MEAN255, std=STD255)
    return _dali_loader(pipe, st, [f"augment={augment!r}"])


def path_gpuaug_dali_rrc(st):
    return _gpuaug_dali(st, "flip")


def path_gpuaug_dali(st):
    return _gpuaug_dali(st, "default")


def _policy(st, crop=True):
    """The Scheduler's augment: [RandomResizedCrop +] horizontal flip + Normalize (float32 NCHW)."""
    import gpuaug

    ts = [gpuaug.RandomResizedCrop(st.size)] if crop else []
    return gpuaug.Compose(ts + [gpuaug.RandomHorizontalFlip(), gpuaug.Normalize(MEAN01, STD01)], seed=st.seed)


def _scheduler(st, source, notes, crop=True):
    import gpuaug
    from gpuaug.scheduler import FakeDevice

    kw = dict(batch_size=st.batch, workers=st.workers, shuffle=True, seed=st.seed, drop_last=True)
    if st.dry_run:
        sched = gpuaug.Scheduler(source, _policy(st, crop), device=FakeDevice(), **kw)
        sync = None
    else:
        torch = _need("torch", "PyTorch")
        sched = gpuaug.Scheduler(source, _policy(st, crop), device=st.device_id, output="torch", **kw)
        sync = _torch_sync(torch)

    def close():
        sched.close()
        if hasattr(source, "close"):
            source.close()

    return Loader(lambda: iter(sched), sync, close=close, notes=notes)


def _image_folder(root, **kw):
    """scheduler.ImageFolder(root, **kw); Unavailable where this gpuaug does not take the keywords
    (``decode=``, ``crop=``) or their library is missing."""
    from gpuaug.scheduler import ImageFolder

    try:
        return ImageFolder(root, **kw)
    except TypeError as e:
        if any(k in str(e) for k in kw):
            raise Unavailable(f"gpuaug.scheduler.ImageFolder does not take {', '.join(kw)} ({e})") from e
        raise
    except ImportError as e:
        raise Unavailable(f"{type(e).__name__}: {e}") from e


def _cpu_decode(st, decode):
    size = (st.resize, st.resize)
    src = _image_folder(st.root, size=size, decode=decode)
    return _scheduler(st, src, [f"decode={decode!r}, {st.workers} workers, decoded to {size}, then "
                                f"RandomResizedCrop({st.size}) + flip + Normalize"])


def path_scheduler_cpu(st):
    """CPU decode in worker processes (``decode="process"``: not held by the GIL)."""
    return _cpu_decode(st, "process")


def path_scheduler_cpu_threads(st):
    """CPU decode on the scheduler's threads (``decode="cpu"``: simplejpeg releases the GIL)."""
    return _cpu_decode(st, "cpu")


def path_scheduler_gpu(st):
    """nvImageCodec decode; the random resized crop made from the decoded images in the same
    launch as the dense batch (``crop="random"``), flip + Normalize as the augment."""
    if st.dry_run:
        raise Unavailable("dry run (no GPU)")
    try:
        src = _image_folder(st.root, size=(st.size, st.size), decode="gpu", crop="random", seed=st.seed)
        return _scheduler(st, src, ["decode='gpu', crop='random' (RRC in the decode's resized_crop launch), "
                                    "then flip + Normalize"], crop=False)
    except Unavailable as e:
        if "crop" not in str(e):
            raise
    src = _image_folder(st.root, decode="gpu")
    return _scheduler(st, src, ["decode='gpu' (varshape), then RandomResizedCrop + flip + Normalize"])


def path_scheduler_gpu_procs(st):
    """As ``scheduler_gpu``, decoding in four processes (``gpu_processes=4``): nvImageCodec's
    decode away from this process's Python threads (on the H100: 1 / 2 / 3 / 4 processes gave
    7.7k / 13.5-16.3k / 17-17.7k / 19.7-20k images/s)."""
    if st.dry_run:
        raise Unavailable("dry run (no GPU)")
    src = _image_folder(st.root, size=(st.size, st.size), decode="gpu", crop="random", seed=st.seed,
                        gpu_processes=4)
    return _scheduler(st, src, ["decode='gpu', gpu_processes=4, crop='random' (read, decode and RRC in the "
                                "decoding processes, batches over CUDA IPC), then flip + Normalize"], crop=False)


def path_torchvision(st):
    torch = _need("torch", "PyTorch")
    tv = _need("torchvision", "torchvision")
    from torchvision import transforms as T

    tf = T.Compose([T.RandomResizedCrop(st.size), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = tv.datasets.ImageFolder(st.root, transform=tf)
    torch.manual_seed(st.seed)
    gpu = not st.dry_run
    dl = torch.utils.data.DataLoader(ds, batch_size=st.batch, shuffle=True, num_workers=st.workers,
                                     pin_memory=gpu, drop_last=True, persistent_workers=st.workers > 0)
    dev = torch.device(f"cuda:{st.device_id}" if gpu else "cpu")
    mean = torch.tensor(MEAN255, device=dev).view(1, 3, 1, 1)
    inv_std = (1.0 / torch.tensor(STD255, device=dev)).view(1, 3, 1, 1)

    def epoch():
        for x, y in dl:
            x = x.to(dev, non_blocking=True).float().sub_(mean).mul_(inv_std)
            yield x, y.to(dev, non_blocking=True)

    def close():
        it = getattr(dl, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()

    return Loader(epoch, _torch_sync(torch) if gpu else None, close=close,
                  notes=[f"{st.workers} worker processes, pin_memory={gpu}"])


PATH_FUNCS = {"dali": path_dali, "gpuaug_dali_rrc": path_gpuaug_dali_rrc, "gpuaug_dali": path_gpuaug_dali,
              "scheduler_cpu": path_scheduler_cpu, "scheduler_cpu_threads": path_scheduler_cpu_threads,
              "scheduler_gpu": path_scheduler_gpu, "scheduler_gpu_procs": path_scheduler_gpu_procs,
              "torchvision": path_torchvision, "dali_slice": path_dali_slice}


# ----------------------------------------------------------------------------- measure
def _row(name, status, **kw):
    row = {"path": name, "label": _ALL[name], "status": status, "images_per_s": None, "gpu_busy_pct": None,
           "cpu_cores": None, "wait_ms": None, "wait_pct": None, "batches": 0, "images": 0, "seconds": 0.0,
           "epochs": 0, "notes": []}
    row.update(kw)
    return row


def measure(loader, *, epochs=1, warmup_epochs=1, min_seconds=0.0, max_epochs=50, busy=None):
    """Run ``warmup_epochs`` untimed epochs, then at least ``epochs`` (and more, up to
    ``max_epochs``, until ``min_seconds`` have passed) timed; returns the row's numbers."""
    for _ in range(warmup_epochs):
        for b in loader.epoch():
            loader.sync(b)
    cpu = CpuMeter().start()
    if busy is not None:
        busy.start()
    waits, images, done = [], 0, 0
    t0 = time.perf_counter()
    while done < epochs or (time.perf_counter() - t0 < min_seconds and done < max_epochs):
        it = iter(loader.epoch())
        while True:
            t = time.perf_counter()
            try:
                b = next(it)
            except StopIteration:
                break
            loader.sync(b)
            waits.append(time.perf_counter() - t)
            images += loader.count(b)
        done += 1
    wall = time.perf_counter() - t0
    gpu_busy = busy.stop() if busy is not None else None
    used = cpu.stop()
    if not waits:
        raise RuntimeError("the loader gave no batch in an epoch (fewer images than one batch?)")
    return {"images_per_s": images / wall, "gpu_busy_pct": gpu_busy, "cpu_cores": used / wall,
            "wait_ms": 1000 * float(np.mean(waits)), "wait_pct": 100 * float(np.sum(waits)) / wall,
            "batches": len(waits), "images": images, "seconds": wall, "epochs": done}


def _free_gpu():
    gc.collect()
    for mod, fn in (("torch", lambda m: m.cuda.empty_cache() if m.cuda.is_available() else None),
                    ("cupy", lambda m: m.get_default_memory_pool().free_all_blocks())):
        if mod in sys.modules:
            try:
                fn(sys.modules[mod])
            except Exception:  # noqa: BLE001 - best effort between paths
                pass


def _device_doc(dry_run):
    doc = {"cpu_count": os.cpu_count(), "gpu": None}
    if not dry_run:
        try:
            from gpuaug import bench

            doc["gpu"] = bench.device_info("gpu").get("name")
        except Exception as e:  # noqa: BLE001
            doc["gpu"] = f"unknown ({type(e).__name__})"
    return doc


def _versions():
    out = {}
    for m in ("gpuaug", "nvidia.dali", "torch", "torchvision", "cupy", "nvidia.nvimgcodec", "numpy"):
        try:
            mod = __import__(m, fromlist=["__version__"])
            out[m] = getattr(mod, "__version__", "?")
        except Exception:  # noqa: BLE001
            out[m] = None
    return out


def run(folder=None, *, images=4096, batch=256, workers=14, epochs=3, warmup_epochs=1, min_seconds=2.0,
        paths=None, dry_run=False, size=224, seed=0, cache=None, gpus=None, steps=20, warmup_steps=5,
        rank_workers=None, scaling_dir=None, scaling_timeout=600, scaling_repeat=1, log=print):
    """Run the end-to-end benchmark; returns the JSON document (schema ``gpuaug-bench-e2e/1``).

    Args:
        folder: a class-per-folder image tree; None generates :func:`synthetic_folder` with
            ``images`` JPEGs (cached).
        batch, workers: batch size; worker processes / threads of every path (DALI's
            ``num_threads``, the Scheduler's workers, the DataLoader's processes).
        epochs, warmup_epochs, min_seconds: timed epochs (at least; more until
            ``min_seconds``), after untimed warm-up ones.
        paths: names from :data:`PATHS` (default: all) and :data:`EXTRA_PATHS`.
        dry_run: everything on the CPU, on a tiny folder (see the module docstring); with
            ``gpus``, the multi-GPU commands are listed, not run.
        size: output height and width.
        gpus: GPU counts (``"1,2,4"``): also scale the paths that have a multi-GPU runner over
            that many GPUs (:mod:`gpuaug.bench.scaling`, one torchrun per count and path, before
            the single-process rows), into ``doc["scaling"]``; a count above the visible GPUs is
            an error before anything runs. None: no scaling.
        steps, warmup_steps, rank_workers, scaling_dir, scaling_timeout: the scaling's timed and
            untimed steps per rank, workers per rank (None: the runner's share of the CPUs),
            where its runs' logs and RESULT files go (None: a temporary folder), and the
            seconds one of its torchruns may take before it is ended.
        scaling_repeat: runs of every path and count (:func:`gpuaug.bench.scaling.run`'s ``repeat``).

    Example::

        doc = run(images=4096, workers=14)
        print(format_table(doc))
    """
    from . import scaling

    named = paths is not None
    paths = list(PATHS) if paths is None else list(paths)
    bad = [p for p in paths if p not in _ALL and p not in scaling.ONLY]
    if bad:
        raise ValueError(f"paths: got {bad}; expected names from {', '.join([*_ALL, *scaling.ONLY])}")
    only = [p for p in paths if p in scaling.ONLY]
    if gpus is not None:
        scaling.check(gpus, paths if named else None, dry_run=dry_run)  # before anything runs
    elif only:
        raise ValueError(f"paths: {only[0]} is a path of the multi-GPU scaling only; name GPU counts (gpus, "
                         "--gpus) or leave it out")
    t_start = time.perf_counter()
    if folder is None:
        if dry_run:
            folder = synthetic_folder(images, seed=seed, classes=min(8, images), min_side=64, max_side=128,
                                      cache=cache, workers=1)
        else:
            log(f"generating / reusing a synthetic folder of {images} JPEGs under {cache or cache_dir()} ...")
            folder = synthetic_folder(images, seed=seed, cache=cache, workers=workers)
    elif not os.path.isdir(folder):
        raise ValueError(f"folder: got {folder!r}; expected a directory of class folders")
    info = folder_info(folder)
    if info["images"] < batch:
        raise ValueError(f"batch: got {batch} for a folder of {info['images']} images; expected at most that")
    log(f"folder {info['root']}: {info['images']} images, {info['classes']} classes, "
        f"{info['mean_bytes'] / 1e3:.1f} KB and {info['mean_h']:.0f}x{info['mean_w']:.0f} px on average")
    st = Settings(root=folder, batch=batch, workers=workers, size=size, seed=seed, dry_run=dry_run,
                  resize=max(size, int(round(size * 256 / 224))))
    scaled = None
    if gpus is not None:
        scaled = scaling.run(folder, gpus, paths=paths if named else None, images=info["images"], batch=batch,
                             size=size, load_size=st.resize, steps=steps, warmup=warmup_steps, workers=rank_workers,
                             seed=seed, dry_run=dry_run, log_dir=scaling_dir, timeout=scaling_timeout,
                             repeat=scaling_repeat, log=log)
    rows = []
    for name in (p for p in paths if p in _ALL):
        t = time.perf_counter()
        loader = None
        try:
            loader = PATH_FUNCS[name](st)
            res = measure(loader, epochs=epochs, warmup_epochs=warmup_epochs, min_seconds=min_seconds,
                          busy=None if dry_run else GpuBusy(st.device_id))
            row = _row(name, "ok", notes=loader.notes, **res)
        except Unavailable as e:
            row = _row(name, f"unavailable: {e}")
        except ImportError as e:
            row = _row(name, f"unavailable: {type(e).__name__}: {e}"[:500])
        except Exception as e:  # noqa: BLE001 - one path failing must not lose the others
            row = _row(name, f"error: {type(e).__name__}: {e}"[:500], notes=list(getattr(loader, "notes", [])))
        finally:
            if loader is not None:
                try:
                    loader.close()
                except Exception:  # noqa: BLE001
                    pass
            loader = None
            _free_gpu()
        rows.append(row)
        log(_row_line(row) + f"   [{time.perf_counter() - t:.1f} s]")
    ref = next((r["images_per_s"] for r in rows if r["path"] == "dali" and r["images_per_s"]), None)
    for r in rows:
        r["vs_dali"] = (r["images_per_s"] / ref) if (ref and r["images_per_s"]) else None
    doc = {"schema": SCHEMA, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": _device_doc(dry_run), "versions": _versions(),
           "config": {"batch": batch, "workers": workers, "epochs": epochs, "warmup_epochs": warmup_epochs,
                      "min_seconds": min_seconds, "size": size, "seed": seed, "dry_run": bool(dry_run),
                      "paths": paths},
           "folder": info, "rows": rows, "seconds": time.perf_counter() - t_start}
    if scaled is not None:
        doc["scaling"] = scaled
    return doc


# ----------------------------------------------------------------------------- report
def _fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def _row_line(r):
    if r["status"] != "ok":
        return f"{r['path']:<21} {r['status']}"
    return (f"{r['path']:<21} {r['images_per_s']:10,.0f} img/s  GPU busy {_fmt(r['gpu_busy_pct'], '5.1f')} %  "
            f"CPU {r['cpu_cores']:5.2f} cores  wait {r['wait_ms']:7.2f} ms/batch")


def format_table(doc):
    """The document as a Markdown table (one row per path)."""
    c = doc["config"]
    f = doc["folder"]
    gpu = doc["device"].get("gpu") or "CPU (dry run)"
    lines = [f"gpuaug bench --e2e: {f['images']} JPEGs ({f['classes']} classes, {f['mean_bytes'] / 1e3:.1f} KB, "
             f"{f['mean_h']:.0f}x{f['mean_w']:.0f} px on average), batch {c['batch']}, RRC {c['size']} + flip + "
             f"normalize -> float32 NCHW, {c['workers']} workers, {gpu}, {doc['date']}", "",
             "| path | images/s | vs DALI | GPU busy % | CPU cores | data wait ms/batch | status |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['label']} | {_fmt(r['images_per_s'], ',.0f')} | {_fmt(r.get('vs_dali'), '.2f')} | "
                     f"{_fmt(r['gpu_busy_pct'], '.1f')} | {_fmt(r['cpu_cores'], '.2f')} | "
                     f"{_fmt(r['wait_ms'], '.2f')} | {r['status']} |")
    if doc.get("scaling") is not None:
        from . import scaling

        lines += ["", scaling.format_table(doc["scaling"])]
    return "\n".join(lines)


def validate(doc):
    """Problems with a document against the schema (empty list: fine)."""
    out = []
    if doc.get("schema") != SCHEMA:
        out.append(f"schema: {doc.get('schema')!r}")
    for key in ("date", "device", "versions", "config", "folder", "rows"):
        if key not in doc:
            out.append(f"missing {key}")
    from .schema import row_errors

    rows = doc.get("rows", [])
    out += row_errors(rows, ROW_KEYS, ok_nonnegative=("images_per_s", "cpu_cores", "wait_ms"))
    out += [f"rows[{i}].images: {r.get('images')!r} for an ok row" for i, r in enumerate(rows)
            if r.get("status") == "ok" and r.get("images", 0) <= 0]
    if doc.get("scaling") is not None:
        from . import scaling

        out += [f"scaling: {p}" for p in scaling.validate(doc["scaling"])]
    return out


def plot(doc, path):
    """A horizontal bar chart of images/s per path (GPU busy % and CPU cores on the bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(rows) + 1.6))
    ys = np.arange(len(rows))[::-1]
    vals = [r["images_per_s"] or 0.0 for r in rows]
    colors = ["#76b900" if r["path"] == "dali" else "#1f77b4" if r["path"].startswith(("gpuaug", "scheduler"))
              else "#7f7f7f" for r in rows]
    ax.barh(ys, vals, color=colors)
    top = max(vals) if any(vals) else 1.0
    for y, v, r in zip(ys, vals, rows):
        text = (f"{v:,.0f}  (GPU {_fmt(r['gpu_busy_pct'], '.0f')}%, {r['cpu_cores']:.1f} cores)"
                if r["status"] == "ok" else r["status"][:60])
        ax.text(v + top * 0.01, y, text, va="center", fontsize=8)
    ax.set_yticks(ys)
    ax.set_yticklabels([r["label"] for r in rows], fontsize=8)
    ax.set_xlim(0, top * 1.45)
    ax.set_xlabel("images/s (higher is better)")
    f = doc["folder"]
    ax.set_title(f"JPEG folder -> RRC {doc['config']['size']} + flip + normalize, batch {doc['config']['batch']}, "
                 f"{f['images']} images; {doc['device'].get('gpu') or 'CPU dry run'}", fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(doc, out_dir):
    """Write ``e2e.json``, ``e2e.md`` (the table) and ``e2e.png`` under ``out_dir``; returns
    the three paths (the PNG's is None where matplotlib is missing)."""
    os.makedirs(out_dir, exist_ok=True)
    jp, mp, pp = (os.path.join(out_dir, f"e2e.{ext}") for ext in ("json", "md", "png"))
    with open(jp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    with open(mp, "w", encoding="utf-8") as f:
        f.write(format_table(doc) + "\n")
    try:
        plot(doc, pp)
    except ImportError:
        pp = None
    return jp, mp, pp
