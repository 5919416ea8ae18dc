"""Where the scheduler's host batches come from.

Indexable sources (random access: shuffling, sharding and parallel reads work on them):

- :class:`ArraySource`: a NumPy array or ``np.memmap`` of samples, e.g. uint8 (N, H, W, C),
  with optional labels (any array-like of length N);
- :class:`ImageFiles`: a list of image files, decoded by the worker threads (simplejpeg
  for JPEGs when it is installed, else Pillow with JPEG draft mode), by worker processes
  (``decode="process"``) or on the GPU by nvImageCodec (``decode="gpu"``), resized to a
  fixed ``size`` for uniform batches or kept at their own size (varshape batches); bad
  files raise naming the file or are skipped (``on_error``), headers over ``max_pixels``
  are refused before decoding;
- :class:`ImageFolder`: ``root/<class>/<image>`` folders; the label is the class index.

And :class:`IterableSource`: any Python iterable (or a zero-argument callable returning
a fresh iterator each epoch) of host batches: an array (N, ...), a list of HWC arrays
(varshape), or a tuple ``(images, labels)`` whose labels are passed through untouched.
CUDA arrays (``__cuda_array_interface__`` / DLPack) are accepted too and skip the copy.

:func:`as_source` picks one for whatever is passed to ``Scheduler``.

Batches are described by a :class:`Layout` (the shapes, dtype and byte offsets of the
samples packed in one staging buffer).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np

from gpuaug._util import check_flag
from gpuaug.scheduler._decode import (_MODES, DECODE, DEFAULT_MAX_PIXELS, ON_ERROR, ImageDecodeError,
                                     ProcessDecoder, check_pixels, decode_file, file_shape, header_size,
                                     nvimgcodec_module, read_file)

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".pgm", ".tif", ".tiff")
ALIGN = 256  # bytes between packed varshape samples: aligned device views


@dataclass(frozen=True)
class Layout:
    """How one batch lies in a staging buffer.

    ``shape``: the full shape of a uniform batch (N, ...), or None for a varshape batch,
    whose per-sample ``shapes`` are packed at ``offsets`` (bytes, 256-aligned).
    """

    dtype: np.dtype
    shape: tuple | None = None
    shapes: tuple | None = None
    offsets: tuple | None = None
    nbytes: int = 0

    @staticmethod
    def uniform(shape, dtype):
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        return Layout(dtype, shape, None, None, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)

    @staticmethod
    def varshape(shapes, dtype):
        dtype = np.dtype(dtype)
        offs, pos = [], 0
        shapes = tuple(tuple(int(s) for s in sh) for sh in shapes)
        for sh in shapes:
            offs.append(pos)
            n = int(np.prod(sh, dtype=np.int64)) * dtype.itemsize
            pos += (n + ALIGN - 1) // ALIGN * ALIGN
        return Layout(dtype, None, shapes, tuple(offs), pos)

    @property
    def varshape_batch(self):
        return self.shape is None

    @property
    def n(self):
        return len(self.shapes) if self.shape is None else self.shape[0]

    def sample_nbytes(self, i):
        sh = self.shape[1:] if self.shape is not None else self.shapes[i]
        return int(np.prod(sh, dtype=np.int64)) * self.dtype.itemsize

    def host_views(self, buf: np.ndarray):
        """The batch as NumPy views of the uint8 buffer ``buf`` (array, or list for varshape)."""
        if self.shape is not None:
            return buf[:self.nbytes].view(self.dtype).reshape(self.shape)
        return [buf[o:o + self.sample_nbytes(i)].view(self.dtype).reshape(sh)
                for i, (o, sh) in enumerate(zip(self.offsets, self.shapes))]

    def device_views(self, device, dbuf):
        """The batch as device arrays over the DeviceBuffer ``dbuf``."""
        if self.shape is not None:
            return device.view(dbuf, 0, self.shape, self.dtype)
        return [device.view(dbuf, o, sh, self.dtype) for o, sh in zip(self.offsets, self.shapes)]


def layout_of(x) -> Layout:
    """Layout of a host batch: an array (uniform) or a list of arrays (varshape)."""
    if isinstance(x, list):
        dts = {a.dtype for a in x}
        if len(dts) != 1:
            raise TypeError(f"batch: a varshape batch mixes dtypes {sorted(map(str, dts))}; expected one")
        return Layout.varshape([a.shape for a in x], dts.pop())
    return Layout.uniform(x.shape, x.dtype)


class Source:
    """Base of the indexable sources: ``len()`` samples, read by index.

    Subclasses implement ``__len__``, :meth:`describe`, :meth:`read` and, when they have
    labels, :meth:`labels`. ``heavy``: reading is CPU work (decoding), so a batch is split
    into small chunks across the workers.
    """

    heavy = False

    def __len__(self):
        raise NotImplementedError

    def describe(self, indices) -> Layout:
        """The Layout of the batch made of these sample ``indices``."""
        raise NotImplementedError

    def read(self, indices, out):
        """Write the samples ``indices`` into ``out`` (an array with len(indices) rows, or a list)."""
        raise NotImplementedError

    def labels(self, indices):
        """Labels of the samples (whatever type the source holds), or None."""
        return None

    def rows(self, indices):
        """Host views of the samples as contiguous memory, for copies without staging, or None."""
        return None


#: Up to this many runs of consecutive indices, a chunk is read with one slice copy per run;
#: beyond, with one gather (np.take).
_FEW_RUNS = 8


def _runs(idx):
    """Split an index array into (start, stop) runs of consecutive indices."""
    idx = np.asarray(idx, np.int64)
    if idx.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks, [idx.size]))
    return [(int(idx[a]), int(idx[b - 1]) + 1) for a, b in zip(starts, stops)]


class ArraySource(Source):
    """Samples of an array: ``images[i]`` is sample i; ``labels[i]`` its label.

    Args:
        images: NumPy array or ``np.memmap``, shape (N, ...) (e.g. uint8 (N, H, W, C)),
            any dtype; C-contiguous rows (a memmap of a .npy file is).
        labels: None or an array-like of length N (batches get ``labels[indices]``).

    Example::

        >>> import numpy as np
        >>> from gpuaug.scheduler import ArraySource
        >>> src = ArraySource(np.zeros((10, 8, 8, 3), np.uint8), labels=np.arange(10))
        >>> len(src), src.describe(np.arange(4)).shape
        (10, (4, 8, 8, 3))
    """

    def __init__(self, images, labels=None):
        if not isinstance(images, np.ndarray):
            raise TypeError(f"images: got {type(images).__name__}; expected a NumPy array or np.memmap")
        if images.ndim < 2:
            raise ValueError(f"images: got shape {images.shape}; expected (N, ...) samples, e.g. (N, H, W, C)")
        self.images = images
        if labels is not None:
            if isinstance(labels, (str, bytes)) or not hasattr(labels, "__getitem__") or not hasattr(labels, "__len__"):
                raise TypeError(f"labels: got {type(labels).__name__}; expected an array-like of length N")
            if len(labels) != len(images):
                raise ValueError(f"labels: got {len(labels)} labels for {len(images)} images; expected one per image")
            if not isinstance(labels, np.ndarray):
                labels = np.asarray(labels)
        self._labels = labels

    def __len__(self):
        return len(self.images)

    def describe(self, indices):
        return Layout.uniform((len(indices),) + self.images.shape[1:], self.images.dtype)

    def read(self, indices, out):
        runs = _runs(indices)
        flags = self.images.flags
        # np.take makes a C-contiguous, aligned copy of the whole source first when it is not one
        if len(runs) <= _FEW_RUNS or not (flags.c_contiguous and flags.aligned):
            pos = 0
            for a, b in runs:
                # plain slice copies (memcpy, GIL released) for consecutive runs
                np.copyto(out[pos:pos + b - a], self.images[a:b])
                pos += b - a
            return
        # shuffled or sharded: one gather for the whole chunk. np.take releases the GIL for
        # all of it (a copyto per sample took and released the GIL once per sample, and each
        # take-back can wait out the interpreter's switch interval behind a busy thread);
        # mode="clip" because "raise" with out= gathers into a temporary first.
        idx = np.asarray(indices, np.intp)
        if idx.min() < 0 or idx.max() >= len(self.images):
            raise IndexError(f"indices: got {int(idx.min())}..{int(idx.max())}; expected indices in "
                             f"[0, {len(self.images)})")
        np.take(self.images, idx, axis=0, out=out, mode="clip")

    def labels(self, indices):
        if self._labels is None:
            return None
        return self._labels[np.asarray(indices, np.int64)]

    def rows(self, indices):
        if not self.images.flags.c_contiguous:
            return None
        return [self.images[a:b] for a, b in _runs(indices)]


# --------------------------------------------------------------------------------------
# Image files
# --------------------------------------------------------------------------------------
def decode_image(path, size=None, mode="RGB", max_pixels=DEFAULT_MAX_PIXELS):
    """Decode one image file to a uint8 HWC array, optionally resized to ``size`` (h, w).

    JPEGs go through simplejpeg when it is installed (``pip install gpuaug[cpu-decode]``;
    libjpeg-turbo with the GIL released), else Pillow; with a ``size`` both decode in the
    DCT domain at a reduced scale still >= ``size`` (simplejpeg: any M/8; Pillow's draft
    mode: 1/2, 1/4, 1/8), then resize bilinearly. ``mode``: "RGB" (3 channels), "L" (1) or "RGBA" (4). A header claiming
    more than ``max_pixels`` pixels is refused before decoding. Every failure (missing,
    empty, truncated, corrupt, not an image, not a regular file) raises
    :class:`ImageDecodeError` (a ValueError) whose message starts with the path.
    """
    return decode_file(os.fspath(path), size, mode, max_pixels)


def image_shape(path, mode="RGB", max_pixels=DEFAULT_MAX_PIXELS):
    """(h, w, c) of an image file as :func:`decode_image` returns it without ``size`` (header only)."""
    return file_shape(os.fspath(path), mode, max_pixels)


def _warn_skip(path, reason):
    warnings.warn(f"gpuaug: skipped {path}: {reason}", RuntimeWarning, stacklevel=3)


class ImageFiles(Source):
    """A list of image files, decoded by the scheduler's workers (or on the GPU).

    Args:
        files: paths (str or PathLike).
        labels: None or an array-like of one label per file.
        size: (h, w): every image is resized to it and batches are uniform
            uint8 (N, h, w, C); None: images keep their size and a batch is a list of
            HWC arrays (a varshape batch, which gpuaug ops accept).
        mode: "RGB" (C=3), "L" (C=1) or "RGBA" (C=4).
        decode: where images are decoded:

            - ``"cpu"`` (default): on the scheduler's worker threads (simplejpeg, which
              releases the GIL, when installed: ``pip install gpuaug[cpu-decode]``; else Pillow);
            - ``"process"``: in ``processes`` worker processes writing into shared memory
              (decoding never holds the training process's GIL); the threads copy into the
              pinned staging slots;
            - ``"gpu"``: the workers only read the files; nvImageCodec decodes each batch
              in one batched call into device memory on the scheduler's copy stream
              (``pip install gpuaug[gpu-decode12]`` or ``[gpu-decode13]``), then one
              ``gpuaug.resized_crop`` launch makes the dense (N, h, w, C) batch (with
              ``size``; else the augment gets the list of decoded images).
        on_error: a file that cannot be read or decoded (missing, empty, truncated, corrupt,
            not an image, not a regular file, over ``max_pixels``): ``"raise"`` (default) -
            the batch fails with :class:`ImageDecodeError` naming the file; ``"skip"`` - a
            RuntimeWarning naming the file, the sample is left out of its batch (which is
            then shorter; its labels too) and counted in ``Scheduler.stats().skipped``.
        max_pixels: the most pixels (h * w) an image's header may claim; checked before
            decoding or allocating. Default 2**26 = 67,108,864 (8192 x 8192); None: no limit
            (Pillow's own decompression-bomb check still applies on the CPU paths).
        processes: worker processes for ``decode="process"`` (None: the scheduler's
            ``workers``).
        crop: with ``decode="gpu"`` and a ``size``: None - the whole image is resized to
            ``size``; ``"random"`` - a random resized crop (torchvision's RandomResizedCrop
            boxes from :func:`gpuaug.random.resized_crop_boxes`, ``scale`` / ``ratio``)
            resized to ``size`` in the same launch.
        scale, ratio: the random resized crop's area and aspect-ratio ranges.
        roi: with ``crop="random"``: decode only each image's crop box (nvImageCodec's
            region-of-interest decoding, as DALI's image_random_crop), then resize it. The
            crop's outermost output pixels then blend with the box's own edge instead of the
            pixels just outside it (at most half a pixel away). Ignored, with a warning, by an
            nvImageCodec without regions.
        seed: seed of the crop boxes (None: fresh entropy).
        gpu_processes: with ``decode="gpu"`` and a ``size``: decode in that many GPU worker
            processes instead of this one (each reads its batches' files, decodes them with its
            own nvImageCodec decoder, makes the crop and hands the dense batch over by CUDA
            IPC; the crop boxes come from a per-batch seed drawn from ``seed``). nvImageCodec's
            decode hands the GIL over per image, so in this process every other Python thread
            running beside it (the training loop's too) slows it down, by up to 100x; in a
            process of its own nothing does. Each process holds a CUDA context (a few hundred
            MB of GPU memory) and up to 2N + 2 batch buffers (N = gpu_processes; 38.5 MB each
            for 256x224x224x3). None (default): decode in this process.

    Example::

        >>> from gpuaug.scheduler import ImageFiles
        >>> src = ImageFiles(["a.jpg", "b.jpg"], labels=[0, 1], size=(224, 224))  # doctest: +SKIP
        >>> src = ImageFiles(files, size=(224, 224), decode="gpu", crop="random")  # doctest: +SKIP
    """

    heavy = True

    def __init__(self, files, labels=None, size=None, mode="RGB", *, decode="cpu", on_error="raise",
                 max_pixels=DEFAULT_MAX_PIXELS, processes=None, crop=None, scale=(0.08, 1.0),
                 ratio=(3 / 4, 4 / 3), roi=False, seed=None, gpu_processes=None):
        if isinstance(files, (str, bytes, os.PathLike)):
            raise TypeError(f"files: got a single path {files!r}; expected a list of image files "
                            "(or ImageFolder(root) for a directory)")
        self.files = [os.fspath(f) for f in files]
        if not self.files:
            raise ValueError("files: got an empty list; expected at least one image file")
        if mode not in _MODES:
            raise ValueError(f"mode: got {mode!r}; expected one of 'RGB', 'L', 'RGBA'")
        self.size, self.mode = _check_size(size), mode
        if decode not in DECODE:
            raise ValueError(f"decode: got {decode!r}; expected one of {', '.join(map(repr, DECODE))}")
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error: got {on_error!r}; expected one of {', '.join(map(repr, ON_ERROR))}")
        if max_pixels is not None and (isinstance(max_pixels, bool) or not isinstance(
                max_pixels, (int, np.integer)) or max_pixels < 1):
            raise ValueError(f"max_pixels: got {max_pixels!r}; expected an int >= 1 or None")
        if processes is not None and (isinstance(processes, bool) or not isinstance(
                processes, (int, np.integer)) or not 1 <= processes <= 1024):
            raise ValueError(f"processes: got {processes!r}; expected an int in [1, 1024] or None")
        if gpu_processes is not None:
            if isinstance(gpu_processes, bool) or not isinstance(gpu_processes, (int, np.integer)) or not (
                    1 <= gpu_processes <= 64):
                raise ValueError(f"gpu_processes: got {gpu_processes!r}; expected an int in [1, 64] or None")
            if decode != "gpu" or self.size is None:
                raise ValueError(f"gpu_processes: got {gpu_processes} with decode={decode!r}, size={self.size}; "
                                 "decoding processes need decode='gpu' and a size (they hand over dense batches)")
            if roi:
                raise ValueError("roi: got True with gpu_processes; the decoding processes decode whole images "
                                 "(leave gpu_processes=None to decode regions in this process)")
        if decode == "gpu" and mode == "RGBA":
            raise ValueError("mode: got 'RGBA' with decode='gpu'; nvImageCodec decodes JPEGs (no alpha) to "
                             "'RGB' or 'L' only; use decode='cpu' or 'process' for RGBA")
        if crop not in (None, "random"):
            raise ValueError(f"crop: got {crop!r}; expected None or 'random'")
        if crop is not None and (decode != "gpu" or self.size is None):
            raise ValueError(f"crop: got {crop!r} with decode={decode!r}, size={self.size}; a crop is made "
                             "by the GPU decode path and needs decode='gpu' and a size (on the CPU paths "
                             "put gpuaug.RandomResizedCrop in the augment)")
        check_flag("roi", roi)
        if roi and crop != "random":
            raise ValueError(f"roi: got True with crop={crop!r}; region-of-interest decoding needs crop='random'")
        self.roi = bool(roi)
        self.decode, self.on_error, self.max_pixels = decode, on_error, max_pixels
        self.processes, self.crop, self.gpu_processes = processes, crop, gpu_processes
        self.scale, self.ratio = tuple(float(v) for v in scale), tuple(float(v) for v in ratio)
        self._rng = np.random.default_rng(seed)
        self._proc = None
        self._gproc = None
        self._workers = None
        if labels is not None:
            if isinstance(labels, (str, bytes)):
                raise TypeError(f"labels: got a {type(labels).__name__}; expected an array-like of one label per file")
            if len(labels) != len(self.files):
                raise ValueError(f"labels: got {len(labels)} labels for {len(self.files)} files; expected one per file")
            labels = np.asarray(labels)
        self._labels = labels
        if decode == "gpu":
            nvimgcodec_module()  # ImportError naming the extra, now rather than mid-epoch

    # the scheduler tells the source how many workers it runs (the default process count)
    def use_workers(self, workers):
        self._workers = int(workers)

    def begin(self):
        """Called by the scheduler before its threads start: starts the decoding processes
        (``decode="process"``) while this process has no other scheduler thread to fork."""
        if self.decode == "process":
            if self._proc is None:
                self._proc = ProcessDecoder(self.processes or self._workers or min(8, os.cpu_count() or 1))
            self._proc.start()

    @property
    def device_decode(self):
        return self.decode == "gpu"

    @property
    def decodes_in_processes(self):
        """``decode="gpu"`` with ``gpu_processes``: files are read and decoded in GPU worker
        processes (the scheduler's workers read nothing)."""
        return self.gpu_processes is not None

    def gpu_process_decoder(self, device_id):
        """The :class:`GpuProcessDecoder` of ``decode="gpu", gpu_processes=N`` (made at first use)."""
        if self._gproc is None:
            from gpuaug.scheduler._decode import GpuProcessDecoder

            self._gproc = GpuProcessDecoder(device_id, self.gpu_processes, self.mode, self.size, self.crop,
                                            self.scale, self.ratio, self.max_pixels)
        return self._gproc

    def batch_seed(self):
        """A seed for one batch's crops in a decoding process (drawn in batch order)."""
        return int(self._rng.integers(2 ** 63))

    @property
    def batch_reads(self):
        """Samples per worker job: processes and the GPU path amortise a round trip."""
        return self.decode != "cpu"

    def __len__(self):
        return len(self.files)

    def _skip_or_raise(self, err: ImageDecodeError):
        if self.on_error == "raise":
            raise err
        _warn_skip(err.path, err.reason)
        return (err.path, err.reason)

    def screen(self, indices):
        """(kept indices, skipped [(path, reason)]): samples whose header is unusable are
        left out here (with ``on_error="skip"``) when the layout needs their shapes."""
        if self.size is not None or self.decode == "gpu":
            return indices, []
        keep, bad = [], []
        shapes = {}
        for i in indices:
            try:
                shapes[int(i)] = file_shape(self.files[i], self.mode, self.max_pixels)
                keep.append(i)
            except ImageDecodeError as e:
                bad.append(self._skip_or_raise(e))
        self._shapes = shapes
        return np.asarray(keep, np.int64), bad

    def describe(self, indices):
        c = _MODES[self.mode]
        if self.size is not None:
            return Layout.uniform((len(indices), *self.size, c), np.uint8)
        known = getattr(self, "_shapes", {})
        return Layout.varshape([known.get(int(i)) or file_shape(self.files[i], self.mode, self.max_pixels)
                                for i in indices], np.uint8)

    def read(self, indices, out):
        """Decode ``indices`` into ``out``; returns the positions skipped, [(pos, path, reason)]."""
        bad = []
        if self.decode == "process":
            if self._proc is None:
                self._proc = ProcessDecoder(self.processes or self._workers or min(8, os.cpu_count() or 1))
            outs = [out[j] for j in range(len(indices))]
            errs = self._proc.decode_into([self.files[i] for i in indices], outs, self.size, self.mode,
                                          self.max_pixels)
            for j, (i, err) in enumerate(zip(indices, errs)):
                if err is not None:
                    bad.append((j, *self._skip_or_raise(ImageDecodeError(self.files[i], err))))
            return bad
        for j, i in enumerate(indices):
            path = self.files[i]
            try:
                img = decode_file(path, self.size, self.mode, self.max_pixels)
                if img.shape != out[j].shape:
                    raise ImageDecodeError(path, f"decoded to shape {img.shape}, but its header "
                                                 f"said {out[j].shape}")
            except ImageDecodeError as e:
                bad.append((j, *self._skip_or_raise(e)))
                continue
            np.copyto(out[j], img)
        return bad

    def read_encoded(self, indices):
        """For GPU decoding: (list of (bytes, (h, w)) or None where skipped; skipped [(pos, path,
        reason)]). Headers are checked (recognisable image, ``max_pixels``) before the bytes go
        to the GPU."""
        datas, bad = [], []
        for j, i in enumerate(indices):
            path = self.files[i]
            try:
                d = read_file(path)
                hw = header_size(d, path)
                check_pixels(hw, self.max_pixels, path)
                datas.append((d, hw))
            except ImageDecodeError as e:
                bad.append((j, *self._skip_or_raise(e)))
                datas.append(None)
        return datas, bad

    def plan_decode(self, sizes, roi_ok):
        """Before a batch is decoded on the GPU (copy thread, batches in order): (boxes for
        :meth:`finish`, regions to decode or None) from the headers' (h, w) ``sizes``.
        ``roi_ok``: the decoder can decode regions."""
        if self.size is None:
            return None, None
        from gpuaug import random as R

        sizes = np.asarray(sizes, np.int64).reshape(-1, 2)
        if self.crop != "random":
            return np.concatenate([np.zeros_like(sizes), sizes], axis=1), None
        boxes = R.resized_crop_boxes(self._rng, sizes, self.scale, self.ratio)
        if not self.roi:
            return boxes, None
        if not roi_ok:
            if not getattr(self, "_roi_warned", False):
                self._roi_warned = True
                warnings.warn("roi=True: this nvImageCodec cannot decode regions; decoding whole images",
                              RuntimeWarning, stacklevel=2)
            return boxes, None
        regions = [tuple(int(v) for v in b) for b in boxes]  # (top, left, height, width)
        return np.concatenate([np.zeros_like(boxes[:, 2:]), boxes[:, 2:]], axis=1), regions

    def finish(self, images, boxes=None):
        """On the compute stream, after GPU decoding: the list of decoded HWC device images
        to the dense (N, h, w, C) batch (one ``gpuaug.resized_crop`` launch of ``boxes``, by
        default the whole images), or the list itself without a ``size``."""
        if self.size is None or not images:
            return images
        from gpuaug._registry import REGISTRY

        resized_crop = REGISTRY["resized_crop"].func

        if boxes is None:
            sizes = np.asarray([a.shape[:2] for a in images], np.int64)
            boxes = np.concatenate([np.zeros_like(sizes), sizes], axis=1)
        if isinstance(images[0], np.ndarray):  # FakeDevice (tests)
            xp = np
        else:
            import cupy as xp
        c = images[0].shape[2]
        dense = xp.empty((len(images), *self.size, c), np.uint8)
        # one launch over the decoded (varshape) images, written into the dense batch (one out=
        # check for the batch: a list of row views cost one check per image, ~5 ms per batch)
        resized_crop(images, boxes.astype(np.float32), self.size, out=dense)
        return dense

    def close(self):
        """Stop the decoding processes (``decode="process"``); they restart when needed."""
        if self._proc is not None:
            self._proc.close()
        if self._gproc is not None:
            self._gproc.close()
            self._gproc = None
            self._proc = None

    def __getstate__(self):
        st = dict(self.__dict__)
        st["_proc"] = None
        return st

    def labels(self, indices):
        return None if self._labels is None else self._labels[np.asarray(indices, np.int64)]


def _check_size(size):
    if size is None:
        return None
    if isinstance(size, (bool, np.bool_)):
        raise TypeError(f"size: got {size!r}; expected (height, width) of positive ints, one int, or None")
    if isinstance(size, (int, np.integer)):
        size = (size, size)
    if isinstance(size, (str, bytes)) or not hasattr(size, "__len__") or len(size) != 2 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in size):
        raise TypeError(f"size: got {size!r}; expected (height, width) of positive ints, one int, or None")
    size = tuple(int(v) for v in size)
    if min(size) < 1 or max(size) > 65535:
        raise ValueError(f"size: got {size!r}; expected (height, width) in [1, 65535]")
    return size


def _scan(top, exts):
    """Regular files under ``top`` whose names end in ``exts``, sorted (FIFOs, sockets and
    devices are never listed: opening a FIFO would block forever)."""
    out = []
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except OSError:
        return out
    for e in entries:
        try:
            if e.is_dir():
                out.extend(_scan(e.path, exts))
            elif e.is_file() and e.name.lower().endswith(exts):
                out.append(e.path)
        except OSError:
            continue
    return out


class ImageFolder(ImageFiles):
    """Images in ``root/<class name>/...``; labels are class indices (sorted class names).

    ``classes``: the class names, ``classes[label]``. ``extensions``: file name endings
    (case-insensitive; a str or a sequence of str). Only regular files are listed. Other
    arguments (``size``, ``mode``, ``decode``, ``on_error``, ``max_pixels``, ``crop``...)
    as :class:`ImageFiles`.

    Example::

        >>> from gpuaug.scheduler import ImageFolder
        >>> src = ImageFolder("/data/train", size=(224, 224))  # doctest: +SKIP
        >>> src.classes[:2]  # doctest: +SKIP
        ['cat', 'dog']
    """

    def __init__(self, root, size=None, mode="RGB", extensions=IMAGE_EXTENSIONS, **kwargs):
        root = os.fspath(root)
        if not os.path.isdir(root):
            raise ValueError(f"root: got {root!r}; expected a directory of class folders")
        if isinstance(extensions, str):
            extensions = (extensions,)
        extensions = tuple(extensions)
        if not extensions or not all(isinstance(e, str) and e for e in extensions):
            raise TypeError(f"extensions: got {extensions!r}; expected file name endings such as '.jpg' "
                            "(a str or a sequence of str)")
        exts = tuple(e.lower() for e in extensions)
        self.root = root
        self.classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        if not self.classes:
            raise ValueError(f"root: {root!r} has no class folders; expected root/<class>/<image>")
        files, labels = [], []
        for ci, c in enumerate(self.classes):
            found = _scan(os.path.join(root, c), exts)
            files += found
            labels += [ci] * len(found)
        if not files:
            raise ValueError(f"root: {root!r} holds no images with extensions {', '.join(extensions)}")
        super().__init__(files, np.asarray(labels, np.int64), size=size, mode=mode, **kwargs)


class IterableSource:
    """Any iterable of host batches, read in order by one worker at a time.

    Args:
        iterable: a re-iterable (list, or object with ``__iter__``) or a zero-argument
            callable returning a fresh iterator each epoch. Items: an array (N, ...),
            a list of HWC arrays (varshape), or ``(images, labels)`` (a tuple of two).

    No shuffling (no random access); sharding takes every ``num_shards``-th batch.

    Example::

        >>> import numpy as np
        >>> from gpuaug.scheduler import IterableSource
        >>> src = IterableSource(lambda: ((np.zeros((4, 8, 8, 3), np.uint8), i) for i in range(3)))
    """

    def __init__(self, iterable):
        if callable(iterable) and not hasattr(iterable, "__iter__"):
            self._factory = iterable
        elif hasattr(iterable, "__iter__"):
            self._factory = lambda: iter(iterable)
        else:
            raise TypeError(f"source: got {type(iterable).__name__}; expected an iterable of batches "
                            "or a callable returning one")
        self._length = len(iterable) if hasattr(iterable, "__len__") else None
        # a generator / iterator can be walked once: its second epoch would be silently empty
        self._one_shot = hasattr(iterable, "__next__") and iter(iterable) is iterable
        self._epochs = 0

    def __iter__(self):
        if self._one_shot and self._epochs >= 1:
            warnings.warn("source: this iterable source is a one-shot iterator (e.g. a generator), already "
                          "used up by an earlier epoch, so this epoch is empty; pass a zero-argument "
                          "callable returning a fresh iterator (e.g. lambda: make_batches())",
                          RuntimeWarning, stacklevel=3)
        self._epochs += 1
        return iter(self._factory())

    def __len__(self):
        if self._length is None:
            raise TypeError("this iterable source has no length")
        return self._length


def as_source(source, labels=None):
    """A Source (or IterableSource) for ``source``; see the module docstring.

    ``labels`` go with an array or a list of files. A ``(images, labels)`` tuple whose
    first element is a NumPy array is an ArraySource; a str/PathLike directory an
    ImageFolder (varshape); a list of str/PathLike files ImageFiles (varshape).
    """
    if isinstance(source, (Source, IterableSource)):
        if labels is not None:
            raise ValueError("labels: the source already carries its labels; pass labels to the source")
        return source
    if isinstance(source, np.ndarray):
        return ArraySource(source, labels)
    if isinstance(source, tuple) and len(source) == 2 and isinstance(source[0], np.ndarray):
        if labels is not None:
            raise ValueError("labels: got labels and an (images, labels) tuple; pass one")
        return ArraySource(source[0], source[1])
    if isinstance(source, (str, os.PathLike)):
        if labels is not None:
            raise ValueError("labels: an ImageFolder takes its labels from the class folders")
        return ImageFolder(source)
    if isinstance(source, (list, tuple)) and source and all(isinstance(f, (str, os.PathLike)) for f in source):
        return ImageFiles(source, labels)
    if labels is not None:
        raise ValueError("labels: an iterable source yields (images, labels) tuples itself")
    return IterableSource(source)
