"""gpuaug.scheduler: host batches in, augmented device batches out, copies overlapping kernels.

:class:`Scheduler` fills a ring of pinned host buffers on worker threads, copies each batch
to the GPU on a copy stream, augments it on a compute stream (CUDA events in between, so the
copy of batch i+1 runs while batch i is augmented), and hands it to the consumer's stream
(CuPy, or PyTorch through DLPack without a copy). It records what happened and reports it:
``stats()``, ``timeline(path)`` (Chrome trace / Perfetto), ``print_timeline()`` (ASCII).
Example (on a GPU)::

    x = np.random.randint(0, 256, (4096, 224, 224, 3), np.uint8)
    sched = gpuaug.Scheduler(x, gpuaug.flip, batch_size=256, labels=np.arange(4096))
    for images, labels in sched:          # images: cupy uint8 (256, 224, 224, 3)
        ...
    print(sched.stats())
    sched.print_timeline()

Sources live in :mod:`gpuaug.scheduler.sources`; the device calls behind
:class:`~gpuaug.scheduler._device.Device` (:class:`CudaDevice`, and :class:`FakeDevice`,
which runs the whole scheduler on the CPU for tests). Nothing here imports CuPy until a
Scheduler is made for a GPU.
"""
from gpuaug.scheduler._core import DeviceBatch, Scheduler, epoch_batches
from gpuaug.scheduler._decode import DEFAULT_MAX_PIXELS, ImageDecodeError
from gpuaug.scheduler._device import CudaDevice, Device, FakeDevice
from gpuaug.scheduler._pinned import free_pinned_pool, set_pinned_pool_limit
from gpuaug.scheduler.sources import (ArraySource, ImageFiles, ImageFolder, IterableSource, Layout, Source,
                                      as_source, decode_image)
from gpuaug.scheduler.telemetry import BatchTiming, Stats, ascii_timeline, chrome_trace, summarize

__all__ = ["Scheduler", "DeviceBatch", "epoch_batches", "Device", "CudaDevice", "FakeDevice",
           "ArraySource", "ImageFiles", "ImageFolder", "IterableSource", "Layout", "Source", "as_source",
           "decode_image", "BatchTiming", "Stats", "ascii_timeline", "chrome_trace", "summarize",
           "ImageDecodeError", "DEFAULT_MAX_PIXELS", "set_pinned_pool_limit", "free_pinned_pool"]
