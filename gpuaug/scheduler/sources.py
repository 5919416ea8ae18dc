"""Where the scheduler's host batches come from.

Indexable sources (random access: shuffling, sharding and parallel reads work on them):

- :class:`ArraySource`: a NumPy array or ``np.memmap`` of samples, e.g. uint8 (N, H, W, C),
  with optional labels (any array-like of length N);
- :class:`ImageFiles`: a list of image files, decoded on the CPU by the worker threads
  (simplejpeg for JPEGs when it is installed, else Pillow with JPEG draft mode), resized
  to a fixed ``size`` for uniform batches or kept at their own size (varshape batches);
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
from dataclasses import dataclass

import numpy as np

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
            if not hasattr(labels, "__getitem__") or not hasattr(labels, "__len__"):
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
        pos = 0
        for a, b in _runs(indices):
            # plain slice copies (memcpy, GIL released) for consecutive runs
            np.copyto(out[pos:pos + b - a], self.images[a:b])
            pos += b - a

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
def _simplejpeg():
    try:
        import simplejpeg  # noqa: F401

        return simplejpeg
    except Exception:  # noqa: BLE001 - optional accelerator
        return None


_MODES = {"RGB": 3, "L": 1, "RGBA": 4}


def decode_image(path, size=None, mode="RGB"):
    """Decode one image file to a uint8 HWC array, optionally resized to ``size`` (h, w).

    JPEGs go through simplejpeg when it is installed, else Pillow, which with a
    ``size`` uses draft mode (DCT-domain downscale by 1/2, 1/4, 1/8 to at least ``size``)
    before a bilinear resize. ``mode``: "RGB" (3 channels), "L" (1) or "RGBA" (4).
    """
    from PIL import Image

    path = os.fspath(path)
    arr = None
    sj = _simplejpeg() if mode in ("RGB", "L") else None
    if sj is not None and path.lower().endswith((".jpg", ".jpeg")):
        with open(path, "rb") as f:
            data = f.read()
        kw = {"min_height": size[0], "min_width": size[1]} if size else {}
        arr = sj.decode_jpeg(data, colorspace="GRAY" if mode == "L" else "RGB", **kw)
        if size is not None and arr.shape[:2] != tuple(size):
            im = Image.fromarray(arr[..., 0] if mode == "L" else arr)
            arr = np.asarray(im.resize((size[1], size[0]), Image.BILINEAR))
    else:
        with Image.open(path) as im:
            if size is not None:  # JPEG: decode at 1/2, 1/4 or 1/8 scale when that is still >= size
                im.draft(mode if mode in ("RGB", "L") else None, (size[1], size[0]))
            im = im.convert(mode)
            if size is not None and im.size != (size[1], size[0]):
                im = im.resize((size[1], size[0]), Image.BILINEAR)
            arr = np.asarray(im)
    if arr.ndim == 2:
        arr = arr[..., None]
    return arr


def image_shape(path, mode="RGB"):
    """(h, w, c) of an image file as :func:`decode_image` returns it without ``size`` (header only)."""
    from PIL import Image

    with Image.open(os.fspath(path)) as im:
        w, h = im.size
    return (h, w, _MODES[mode])


class ImageFiles(Source):
    """A list of image files, decoded by the scheduler's worker threads.

    Args:
        files: paths (str or PathLike).
        labels: None or an array-like of one label per file.
        size: (h, w): every image is resized to it and batches are uniform
            uint8 (N, h, w, C); None: images keep their size and a batch is a list of
            HWC arrays (a varshape batch, which gpuaug ops accept).
        mode: "RGB" (C=3), "L" (C=1) or "RGBA" (C=4).

    Example::

        >>> from gpuaug.scheduler import ImageFiles
        >>> src = ImageFiles(["a.jpg", "b.jpg"], labels=[0, 1], size=(224, 224))  # doctest: +SKIP
    """

    heavy = True

    def __init__(self, files, labels=None, size=None, mode="RGB"):
        self.files = [os.fspath(f) for f in files]
        if not self.files:
            raise ValueError("files: got an empty list; expected at least one image file")
        if mode not in _MODES:
            raise ValueError(f"mode: got {mode!r}; expected one of 'RGB', 'L', 'RGBA'")
        if size is not None:
            if isinstance(size, int):
                size = (size, size)
            size = tuple(int(s) for s in size)
            if len(size) != 2 or min(size) < 1:
                raise ValueError(f"size: got {size!r}; expected (height, width) of positive ints, or None")
        self.size, self.mode = size, mode
        if labels is not None:
            if len(labels) != len(self.files):
                raise ValueError(f"labels: got {len(labels)} labels for {len(self.files)} files; expected one per file")
            labels = np.asarray(labels)
        self._labels = labels

    def __len__(self):
        return len(self.files)

    def describe(self, indices):
        c = _MODES[self.mode]
        if self.size is not None:
            return Layout.uniform((len(indices), *self.size, c), np.uint8)
        return Layout.varshape([image_shape(self.files[i], self.mode) for i in indices], np.uint8)

    def read(self, indices, out):
        for j, i in enumerate(indices):
            img = decode_image(self.files[i], self.size, self.mode)
            if img.shape != out[j].shape:
                raise ValueError(f"{self.files[i]}: decoded to shape {img.shape}, but its header "
                                 f"said {out[j].shape}")
            np.copyto(out[j], img)

    def labels(self, indices):
        return None if self._labels is None else self._labels[np.asarray(indices, np.int64)]


class ImageFolder(ImageFiles):
    """Images in ``root/<class name>/...``; labels are class indices (sorted class names).

    ``classes``: the class names, ``classes[label]``. Other arguments as :class:`ImageFiles`.

    Example::

        >>> from gpuaug.scheduler import ImageFolder
        >>> src = ImageFolder("/data/train", size=(224, 224))  # doctest: +SKIP
        >>> src.classes[:2]  # doctest: +SKIP
        ['cat', 'dog']
    """

    def __init__(self, root, size=None, mode="RGB", extensions=IMAGE_EXTENSIONS):
        root = os.fspath(root)
        if not os.path.isdir(root):
            raise ValueError(f"root: got {root!r}; expected a directory of class folders")
        self.root = root
        self.classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
        if not self.classes:
            raise ValueError(f"root: {root!r} has no class folders; expected root/<class>/<image>")
        files, labels = [], []
        for ci, c in enumerate(self.classes):
            for dirpath, _, names in sorted(os.walk(os.path.join(root, c))):
                for name in sorted(names):
                    if name.lower().endswith(tuple(extensions)):
                        files.append(os.path.join(dirpath, name))
                        labels.append(ci)
        if not files:
            raise ValueError(f"root: {root!r} holds no images with extensions {', '.join(extensions)}")
        super().__init__(files, np.asarray(labels, np.int64), size=size, mode=mode)


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

    def __iter__(self):
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
