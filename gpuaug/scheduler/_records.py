"""What one batch is inside a run: its record (:class:`_Rec`), the delivered
:class:`DeviceBatch`, and the checks and copies made on host batches and augment results."""
from __future__ import annotations

import sys
import time

import numpy as np


def _copy_batch(x):
    """The default augment: a copy, so delivered batches own their memory."""
    if isinstance(x, list):
        return [a.copy() for a in x]
    return x.copy()


def _copy_into(dst, y):
    if isinstance(y, list):
        raise ValueError("out: a varshape (list) batch cannot be written into a fixed output buffer")
    if tuple(dst.shape) != tuple(y.shape) or dst.dtype != y.dtype:
        raise ValueError(f"out: an out buffer has shape {tuple(dst.shape)} and dtype {dst.dtype}, but the "
                         f"augmented batch has shape {tuple(y.shape)} and dtype {y.dtype}")
    dst[...] = y
    return dst



def _split_item(item):
    if isinstance(item, tuple):
        if len(item) != 2:
            raise ValueError(f"source: a tuple item must be (images, labels); got a tuple of {len(item)}")
        return item
    return item, None


def _host_batch(x, top=True):
    """A host batch as a NumPy array or a list of NumPy arrays (no copy when possible)."""
    what = "a batch" if top else "an image of a varshape batch"
    if x is None or isinstance(x, (str, bytes, dict, set)):
        raise TypeError(f"source: got {what} of type {type(x).__name__}; expected a NumPy array, "
                        "a list of arrays, a CPU tensor or a CUDA array")
    if isinstance(x, list) and top:
        if not x:
            raise ValueError("source: got an empty list; a varshape batch needs at least one image")
        return [_host_batch(a, False) for a in x]
    if not isinstance(x, np.ndarray):
        try:
            x = np.asarray(x)  # PyTorch CPU tensors, array-likes
        except Exception as e:  # noqa: BLE001
            raise TypeError(f"source: got {what} of type {type(x).__name__}; expected a NumPy array, "
                            "a list of arrays, a CPU tensor or a CUDA array") from e
    if x.dtype.kind not in "biuf":
        raise TypeError(f"source: got {what} of dtype {x.dtype}; expected a numeric array (e.g. uint8)")
    if x.ndim < (1 if top else 2):
        raise ValueError(f"source: got {what} of shape {x.shape}; expected "
                         + ("(N, ...) samples, e.g. (N, H, W, C)" if top else "an HWC (or HW) image"))
    return x


def _check_result(y):
    """The augment's result must be a device array or a list of them (varshape)."""
    ok = (isinstance(y, (list, tuple)) and all(hasattr(a, "shape") and not isinstance(a, (str, bytes))
                                               for a in y)) or (
        y is not None and hasattr(y, "shape") and not isinstance(y, (str, bytes, dict)))
    if not ok:
        raise TypeError(f"augment: returned {type(y).__name__}; expected a device array (or a list of "
                        "them, for a varshape batch)")
    return y

class DeviceBatch(tuple):
    """One delivered batch: the tuple ``(images, labels)``, plus ``index`` and ``release()``.

    ``images``: a CuPy array (or a list of them for a varshape batch), a PyTorch tensor
    with ``output="torch"``, or the caller's own ``out[i]`` buffer. ``labels``: what the
    source gave, untouched (None without labels).
    """

    def __new__(cls, images, labels, index, run):
        self = tuple.__new__(cls, (images, labels))
        self.index = index
        self._run = run
        return self

    @property
    def images(self):
        return self[0]

    @property
    def labels(self):
        return self[1]

    def release(self, stream=None):
        """Give the batch's memory back once the work queued so far on ``stream`` is done.

        ``stream``: the consumer's stream (None: the scheduler's ``stream`` setting, else
        the current PyTorch/CuPy stream). Needed with ``recycle="manual"``; harmless twice.
        """
        self._run.release(self.index, stream)


class _Rec:
    """Book-keeping of one batch inside a run."""

    def __init__(self, k, layout, labels, kind):
        self.k, self.layout, self.labels, self.kind = k, layout, labels, kind
        self.idx = self.x = self.host = self.flat = self.rows = None
        self.dev_in = self.dbuf = self.output = self.export = None
        self.chunks, self.next_chunk, self.left = [], 0, 0
        self.filled = False
        self.ev = {}            # copy0, copy1, comp0, comp1, release
        self.released = self.delivered = self.harvested = self.aliased = False
        self.fill, self.wait, self.launch = [], None, None
        self.nbytes = 0
        self.bad = []            # (position, path, reason) of samples a source skipped
        self.skipped = []        # (path, reason), after compaction
        self.buf = self.encoded = self.finish = None
        self.n = layout.n if layout is not None else 0


class _Progress:
    """tqdm when importable, else a line on stderr at most twice a second."""

    def __init__(self, total, desc):
        try:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="batch")
        except Exception:  # noqa: BLE001 - tqdm is optional
            self._bar = None
        self.total, self.desc, self.n, self._t = total, desc, 0, 0.0

    def update(self, images):
        self.n += 1
        if self._bar is not None:
            self._bar.update(1)
            return
        now = time.perf_counter()
        if now - self._t > 0.5 or self.n == self.total:
            self._t = now
            of = f"/{self.total}" if self.total else ""
            print(f"\r{self.desc}: {self.n}{of} batches", end="", file=sys.stderr, flush=True)

    def close(self):
        if self._bar is not None:
            self._bar.close()
        elif self.n:
            print(file=sys.stderr)


__all__ = ["DeviceBatch"]
