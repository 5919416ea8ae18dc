"""The scheduler: host batches in, augmented device batches out, copies overlapping kernels.

:class:`Scheduler` holds the settings, the staging resources (:mod:`._staging`) kept from
epoch to epoch, and the current epoch's run (:class:`~gpuaug.scheduler._run._Run`, where
the pipeline is described); :mod:`._epochs` says which samples each batch holds.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import sys
import threading

import numpy as np

from gpuaug.scheduler import telemetry as T
from gpuaug.scheduler._device import Device
from gpuaug.scheduler._epochs import epoch_batches
from gpuaug.scheduler._records import DeviceBatch
from gpuaug.scheduler._run import _Run
from gpuaug.scheduler._staging import Resources
from gpuaug.scheduler.sources import ArraySource, Source, as_source

OUTPUTS = ("cupy", "torch")
RECYCLE = ("next", "manual")
STAGING = ("auto", "chunks", "batch")
#: Default chunk of staging="chunks": 4 MiB stayed in the H100 host's caches between the
#: gather and the DMA (41 GB/s through a ring of 8 x 2 chunks; 1 MiB chunks: 11 GB/s).
DEFAULT_CHUNK_BYTES = 4 << 20
#: Upper bounds of Scheduler(workers=, depth=): more only costs memory and contention.
MAX_WORKERS, MAX_DEPTH = 256, 64


def _takes_out(fn):
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False



class Scheduler:
    """Host batches in, augmented device batches out, H2D copies overlapping the kernels.

    Iterating yields one :class:`DeviceBatch` ``(images, labels)`` per batch, in order:
    ``images`` on the GPU (CuPy, or a zero-copy PyTorch tensor with ``output="torch"``),
    ready for work queued on the consumer's stream (which is made to wait on the batch's
    event - no host synchronisation); ``labels`` exactly as the source gave them.

    Args:
        source: a NumPy array / ``np.memmap`` (N, ...) of samples (e.g. uint8 N×H×W×C);
            an ``(images, labels)`` tuple of arrays; a directory of class folders or a list
            of image files (decoded on the workers, varshape; use
            ``sources.ImageFolder(root, size=(h, w))`` for uniform batches); any iterable of
            host batches (array, list of HWC arrays, or ``(images, labels)``) or a
            zero-argument callable returning one; or a :mod:`~gpuaug.scheduler.sources` object.
        augment: a function of one device batch returning a device batch (a gpuaug op,
            a Compose, any CuPy/PyTorch code; it runs with the compute stream as CuPy's
            current stream, so gpuaug ops launch there), or the name of a gpuaug op.
            None: the batch is copied to fresh memory (delivered batches own their memory).
        batch_size: samples per batch, required for indexable sources (arrays, files).
        labels: labels of an array source or file list (one per sample).
        depth: staging slots: pinned host buffers, device input buffers and undelivered
            outputs in flight (>= 2 to overlap; 3 is enough when one batch's copy is
            shorter than two augments).
        workers: threads filling the pinned slots (decode, gather, NumPy copy with the
            GIL released). Default min(8, CPUs); min(4, CPUs) for an in-memory array source.
        device: the CUDA device ordinal, or a :class:`~gpuaug.scheduler._device.Device`
            (``FakeDevice()`` runs everything on the CPU).
        output: "cupy" or "torch" (a zero-copy DLPack view; PyTorch's current stream waits).
        stream: the consumer's stream (any handle: PyTorch, CuPy, pycuda, Numba, int, or
            ``__cuda_stream__``). None: PyTorch's (output="torch") or CuPy's current stream
            at each ``next()``.
        shuffle, seed: reshuffle indexable sources every epoch with ``default_rng([seed, epoch])``.
        shard_id, num_shards: this process's share of the samples (shards partition them).
        drop_last: drop each shard's last short batch (and even out shard sizes).
        recycle: "next" - a batch's memory may be reused once the consumer asks for the
            next one (after the work it queued on its stream by then); "manual" - only
            after ``batch.release()``.
        out: optional list of the caller's device arrays (any ``__cuda_array_interface__``
            / DLPack object: CuPy, PyTorch, Numba, pycuda GPUArray) written in turn; each
            delivered ``images`` is then that object itself (a TensorRT-style input binding).
        pin_source: page-lock an in-memory array source in place (``cudaHostRegister``) and
            copy batches straight from it: no staging copy on the host. The array stays
            page-locked from the first epoch until ``close()`` (registering it again every
            epoch cost most of the copy rate).
        copy_stream, compute_stream: run the copies / augments on these streams instead
            of two new non-blocking ones.
        keep_buffers: keep streams and device buffers between epochs (default: freed at
            the end of each epoch, when the loop is left, and by ``close()``). The pinned
            ring is kept between epochs anyway (cudaHostAlloc is slow) and ``close()``
            hands it to the process's pinned pool for the next scheduler on the device (at
            most 1 GiB idle per device: ``gpuaug.scheduler.set_pinned_pool_limit``,
            ``free_pinned_pool``); a FakeDevice does so only with ``pinned_pool_bytes``.
        staging: how an in-memory array source reaches the GPU. "batch" (the default,
            "auto"): the whole batch is gathered into a pinned ring slot and copied in one
            H2D (the only way for other sources). "chunks" (in-memory arrays without
            ``pin_source``; experimental): each worker gathers its share of a batch
            ``chunk_bytes`` at a time into one of its own two small pinned buffers and
            copies each chunk to the batch's device buffer on its own stream. On the H100
            it was slower than "batch" (13.8 vs 15.8 GB/s, epochs 2+, 4 workers), so it is
            not the default.
        chunk_bytes: the chunk of staging="chunks" (default 4 MiB; whole samples: a
            chunk holds at least one).
        progress: show a progress bar (tqdm if importable).
        max_timings: per-batch telemetry kept for ``stats()``/``timings()``/``timeline()``:
            the most recent batches of the epoch (about 0.6 kB each, so an endless
            iterable source does not grow memory without bound). None: every batch.

    Example (GPU, a training loop)::

        >>> data = np.load("train_u8.npy", mmap_mode="r")  # (N, 224, 224, 3) uint8  # doctest: +SKIP
        >>> sched = gpuaug.Scheduler(data, gpuaug.flip, batch_size=256, labels=targets,
        ...                          shuffle=True, seed=0, output="torch")  # doctest: +SKIP
        >>> for images, labels in sched:  # images: torch.cuda uint8 (256, 224, 224, 3)  # doctest: +SKIP
        ...     loss = model(images.permute(0, 3, 1, 2).float(), labels)
        >>> print(sched.stats()); sched.print_timeline()  # doctest: +SKIP

    Example (CPU, the same scheduler driven by a FakeDevice)::

        >>> import numpy as np, gpuaug
        >>> from gpuaug.scheduler import FakeDevice
        >>> x = np.arange(6 * 2 * 2 * 1, dtype=np.uint8).reshape(6, 2, 2, 1)
        >>> sched = gpuaug.Scheduler(x, lambda b: b + 1, batch_size=4, labels=list("abcdef"),
        ...                          device=FakeDevice())
        >>> [(images.shape, labels.tolist()) for images, labels in sched]
        [((4, 2, 2, 1), ['a', 'b', 'c', 'd']), ((2, 2, 2, 1), ['e', 'f'])]
        >>> sched.stats().images
        6
    """

    def __init__(self, source, augment=None, *, batch_size=None, labels=None, depth=3, workers=None,
                 device=0, output="cupy", stream=None, shuffle=False, seed=None, shard_id=0,
                 num_shards=1, drop_last=False, recycle="next", out=None, pin_source=False,
                 copy_stream=None, compute_stream=None, keep_buffers=False, progress=False,
                 max_timings=100_000, staging="auto", chunk_bytes=DEFAULT_CHUNK_BYTES):
        self.source = as_source(source, labels)
        if isinstance(augment, str):
            from gpuaug._registry import REGISTRY  # downward: the registry, not the package

            if augment not in REGISTRY:
                raise ValueError(f"augment: got {augment!r}; expected a callable, None or an op name: "
                                 f"{', '.join(sorted(REGISTRY))}")
            augment = REGISTRY[augment].call
        if augment is not None and not callable(augment):
            raise TypeError(f"augment: got {type(augment).__name__}; expected a callable, an op name or None")
        self.augment = augment
        self._augment_takes_out = augment is not None and _takes_out(augment)
        for name, v, lo in (("depth", depth, 1), ("num_shards", num_shards, 1)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"{name}: got {v!r}; expected an int >= {lo}")
        if depth > MAX_DEPTH:  # each slot holds a pinned and a device batch; overlap needs 2-3
            raise ValueError(f"depth: got {depth!r}; expected an int in [1, {MAX_DEPTH}] (each slot holds "
                             "a pinned host batch and a device batch; 2-4 already overlap copy and compute)")
        self.depth = int(depth)
        default_workers = workers is None
        if workers is None:
            workers = min(8, os.cpu_count() or 1)
        if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or not 1 <= workers <= MAX_WORKERS:
            raise ValueError(f"workers: got {workers!r}; expected an int in [1, {MAX_WORKERS}] (threads "
                             "beyond the CPU cores only contend)")
        self.workers = int(workers)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise (ValueError if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) else TypeError)(
                f"seed: got {seed!r}; expected None or an int >= 0 (the shuffle of each epoch is "
                "numpy.random.default_rng([seed, epoch]))")
        if isinstance(shard_id, bool) or not isinstance(shard_id, (int, np.integer)) or not 0 <= shard_id < num_shards:
            raise ValueError(f"shard_id: got {shard_id!r}; expected an int in [0, num_shards={num_shards})")
        self.shard_id, self.num_shards = int(shard_id), int(num_shards)
        if output not in OUTPUTS:
            raise ValueError(f"output: got {output!r}; expected one of {', '.join(map(repr, OUTPUTS))}")
        if output == "torch":
            import importlib.util

            if importlib.util.find_spec("torch") is None:
                raise ImportError("output: got 'torch', but PyTorch is not installed (pip install torch); "
                                  "output='cupy' needs only CuPy")
        if recycle not in RECYCLE:
            raise ValueError(f"recycle: got {recycle!r}; expected one of {', '.join(map(repr, RECYCLE))}")
        self.output, self.recycle, self.stream = output, recycle, stream
        indexable = isinstance(self.source, Source)
        if indexable:
            if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
                raise ValueError(f"batch_size: got {batch_size!r}; an indexable source (array, files) "
                                 "needs an int >= 1")
        elif batch_size is not None:
            raise ValueError(f"batch_size: got {batch_size!r}; an iterable source yields whole batches, "
                             "so leave batch_size None")
        self.batch_size = None if batch_size is None else int(batch_size)
        if shuffle and not indexable:
            raise ValueError("shuffle: an iterable source has no random access; pass an array, "
                             "ImageFolder or ImageFiles source, or shuffle the iterable yourself")
        if shuffle and num_shards > 1 and seed is None:
            raise ValueError("seed: shuffling with num_shards > 1 needs a seed shared by all shards "
                             "(otherwise the shards would not partition the data)")
        self.shuffle, self.seed, self.drop_last = bool(shuffle), seed, bool(drop_last)
        self._seed = seed if seed is not None else int(np.random.SeedSequence().entropy)
        if pin_source and not isinstance(self.source, ArraySource):
            raise ValueError(f"pin_source: got True with a {type(self.source).__name__}; only an "
                             "in-memory array source can be page-locked in place")
        self.pin_source = bool(pin_source)
        if staging not in STAGING:
            raise ValueError(f"staging: got {staging!r}; expected one of {', '.join(map(repr, STAGING))}")
        in_memory = isinstance(self.source, ArraySource)
        if staging == "chunks" and (not in_memory or self.pin_source):
            raise ValueError(f"staging: got 'chunks' with a {type(self.source).__name__}"
                             + (" and pin_source=True" if in_memory else "")
                             + "; chunked staging takes an in-memory array source without pin_source "
                             "(use 'batch' or 'auto')")
        # "auto" is "batch": chunks lost on the H100 (13.8 vs 15.8 GB/s, bench/results/2026-11-25-h100-s5)
        self.staging = "batch" if staging == "auto" else staging
        if isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, (int, np.integer)) or chunk_bytes < 1:
            raise ValueError(f"chunk_bytes: got {chunk_bytes!r}; expected an int >= 1 (bytes per staging chunk, "
                             "e.g. 4 << 20)")
        self.chunk_bytes = int(chunk_bytes)
        self.source_heavy = bool(getattr(self.source, "heavy", False))
        if default_workers and isinstance(self.source, ArraySource):
            # in-memory copies: 4 staging threads beat 8 and 14 on an H100 host (12.4 / 9.9 / 9.1
            # GB/s over 3.7 GB; more threads only slow the compute thread's Python down)
            self.workers = min(4, self.workers)
        if hasattr(self.source, "use_workers"):  # default process count of decode="process"
            self.source.use_workers(self.workers)
        self.keep_buffers, self.progress = bool(keep_buffers), bool(progress)
        if max_timings is not None and (isinstance(max_timings, bool) or not isinstance(
                max_timings, (int, np.integer)) or max_timings < 1):
            raise ValueError(f"max_timings: got {max_timings!r}; expected an int >= 1 or None")
        self.max_timings = None if max_timings is None else int(max_timings)
        self.device = device if isinstance(device, Device) else _cuda_device(device)
        self.out = list(out) if out is not None else None
        if self.out is not None and not self.out:
            raise ValueError("out: got an empty list; expected one or more device arrays")
        self._out_views = [self.device.as_device_array(o) for o in self.out] if self.out else []
        self._res = Resources(self.device, self.depth, copy_stream, compute_stream)
        self._run = None
        self._lock = threading.Lock()  # the resources handed from run to run
        self._timings = []
        self.epoch = 0

    # ---- iteration ---------------------------------------------------------------------
    def __iter__(self):
        if self._run is not None:
            self._end_run(self._run)
        try:
            run = self._run = _Run(self, self.epoch)
        except BaseException:  # the source's iterator, pin_source registration...: nothing runs
            self._run = None
            if not self.keep_buffers:
                with self.device.context():
                    self._res.free(keep_pinned=True)
            raise
        self.epoch += 1
        try:
            while True:
                try:
                    b = run.next()
                except StopIteration:
                    return
                yield b
        finally:
            self._end_run(run)

    def _end_run(self, run):
        try:
            run.close()
        finally:
            with self._lock:
                if run.orphaned and run.res is self._res:
                    # threads of the run are still running (a blocked source): they keep the
                    # run's buffers and streams and free them when they end; new ones here
                    old = self._res
                    self._res = Resources(self.device, self.depth, *old._given)
                    for c in ("pinned_reallocs", "device_reallocs", "pinned_allocs"):
                        setattr(self._res, c, getattr(old, c))
                if run is self._run:  # not an older epoch's iterator finalised late
                    self._timings = run.timings

    def __len__(self):
        """Batches per epoch for this shard."""
        if isinstance(self.source, Source):
            return len(epoch_batches(len(self.source), self.batch_size, shard_id=self.shard_id,
                                     num_shards=self.num_shards, drop_last=self.drop_last))
        n = len(self.source)  # TypeError when the iterable has no length
        if self.drop_last:  # at most: a short last group is dropped when it is read
            return n // self.num_shards
        return len(range(self.shard_id, n, self.num_shards))

    def set_epoch(self, epoch):
        """Set the epoch number that seeds the next shuffle (it also advances by itself)."""
        self.epoch = int(epoch)

    def release(self, batch, stream=None):
        """Same as ``batch.release(stream)``."""
        batch.release(stream)

    def close(self):
        """Stop the threads, wait for queued copies and kernels, free every buffer and stream.

        Safe to call twice, from any thread (also while another thread is in ``next()``: it
        then raises RuntimeError). A thread that does not stop within 30 s (a source blocked
        in a read) is left running with a warning; it frees its buffers when it ends.
        """
        run = self._run
        if run is not None:
            self._end_run(run)
        with self._lock:
            if self._run is run:
                self._run = None
        with self.device.context():
            self._res.free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # ---- telemetry ------------------------------------------------------------------------
    def timings(self):
        """Per-batch :class:`~gpuaug.scheduler.telemetry.BatchTiming` of the current or last epoch."""
        if self._run is not None and not self._run.closed:
            self._run.harvest()
            return list(self._run.timings)
        return list(self._timings)

    def stats(self, warmup=0):
        """:class:`~gpuaug.scheduler.telemetry.Stats` of the current or last epoch.

        ``warmup``: leave out the first batches (allocations, kernel compilation). Example::

            print(sched.stats())
            # 44 batches, 11264 images, 1.696 GB in ... ms: ... images/s, ... GB/s host to device
            # copy busy ..%, compute busy ..%, overlap ..%; consumer waited ...
        """
        return T.summarize(self.timings(), warmup=warmup, pinned_reallocs=self._res.pinned_reallocs,
                           device_reallocs=self._res.device_reallocs)

    def skipped(self):
        """(path, reason) of every sample left out (``on_error="skip"``) in the current or
        last epoch's recorded batches."""
        return [sk for t in self.timings() for sk in t.skipped]

    def timeline(self, path):
        """Write a Chrome trace JSON of the current or last epoch to ``path`` (open in Perfetto)."""
        import json

        st = self.stats()
        trace = T.chrome_trace(self.timings(), device=getattr(self.device, "name", "gpu"),
                               meta={"stats": dataclasses.asdict(st), "depth": self.depth, "workers": self.workers})
        with open(path, "w", encoding="utf-8") as f:
            json.dump(trace, f)
        return path

    def print_timeline(self, width=100, first=0, count=12, file=None):
        """Print (and return) an ASCII timeline of copy and compute lanes, ``count`` batches."""
        text = T.ascii_timeline(self.timings(), width=width, first=first, count=count)
        print(text, file=file if file is not None else sys.stdout)
        return text


def _cuda_device(device):
    if isinstance(device, bool) or not isinstance(device, (int, np.integer)):
        raise TypeError(f"device: got {device!r}; expected a CUDA device ordinal (int) or a Device")
    from gpuaug.scheduler._device import CudaDevice

    try:
        return CudaDevice(int(device))
    except ImportError as e:
        raise RuntimeError("device: the scheduler needs CuPy on a CUDA machine (install gpuaug[cuda12] "
                           "or gpuaug[cuda13]); device=FakeDevice() runs it on the CPU") from e
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - CUDA runtime errors: no driver, no device
        raise RuntimeError(f"device: no usable CUDA device {device} ({type(e).__name__}: {e}); "
                           "device=FakeDevice() runs the scheduler on the CPU") from e


__all__ = ["Scheduler", "DeviceBatch", "epoch_batches"]
