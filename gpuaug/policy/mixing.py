"""Batch mixing: MixUp and CutMix with per-sample partners and lambdas, soft labels out.

torchvision's v2 MixUp/CutMix draw one lambda per batch and pair each sample with its
neighbour (``roll(1)``); here every sample gets its own lambda and a partner from a random
permutation of the batch, and the images are mixed in one launch (kernels/mixing.cu), with
the labels mixed the same way (a few small array ops on the labels' own device).

- MixUp:  ``lam ~ Beta(alpha, alpha)``; ``x'[i] = lam[i] x[i] + (1 - lam[i]) x[p[i]]``
  (float32; uint8 rounds half up and saturates); ``y'[i] = lam[i] y[i] + (1 - lam[i]) y[p[i]]``.
- CutMix: ``lam ~ Beta(alpha, alpha)``; a box centred at a uniform point with sides
  ``sqrt(1 - lam)`` times the image's (torchvision's ``_get_params``: half-sides
  ``int(0.5 sqrt(1 - lam) W)``, clipped to the image), pasted from ``x[p[i]]``; the label
  weight is the kept area, ``lam' = 1 - box area / (H W)``.

Labels: int class ids (N,) with ``num_classes``, or one-hot / soft labels (N, K); returned
as float32 (N, K), NumPy or CuPy like the labels.

    >>> import numpy as np, gpuaug
    >>> x = np.zeros((4, 8, 8, 3), np.uint8); x[1] = 255
    >>> y, soft = gpuaug.MixUp(alpha=0.4, num_classes=3, seed=0)(x, np.array([0, 1, 2, 0]))
    >>> soft.shape, bool(np.allclose(soft.sum(1), 1))
    ((4, 3), True)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuaug import random as R

__all__ = ["MixUp", "CutMix", "MixParams"]


@dataclass
class MixParams:
    """One call's draws: ``partner`` (N,) int (a permutation), ``lam`` (N,) float64 label
    weights of the sample itself, ``boxes`` (N, 4) int (y0, x0, y1, x1) for CutMix, else None."""

    partner: np.ndarray
    lam: np.ndarray
    boxes: np.ndarray | None = None


def _check_alpha(alpha):
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise TypeError(f"alpha: got {alpha!r}; expected a number > 0") from None
    if not np.isfinite(a) or a <= 0:
        raise ValueError(f"alpha: got {alpha!r}; expected a finite number > 0")
    return a


def _as_array(a):
    """(array, module): NumPy as it is, CUDA arrays (PyTorch, Numba, ...) as zero-copy CuPy
    views, anything else through numpy.asarray."""
    if isinstance(a, np.ndarray):
        return a, np
    if hasattr(a, "__cuda_array_interface__"):
        import cupy

        return cupy.asarray(a), cupy
    return np.asarray(a), np


def _soft_labels(labels, n, num_classes):
    """(N, K) float32 labels from int ids (N,) + num_classes or from (N, K) labels."""
    lab, xp = _as_array(labels)
    want = (f"expected ({n},) int class ids in [0, num_classes) with num_classes given, "
            f"or ({n}, K) one-hot / soft labels")
    if lab.ndim == 1 and lab.shape[0] == n and lab.dtype.kind in "iu":
        if num_classes is None:
            raise ValueError(f"labels: got int class ids of shape {lab.shape} and num_classes=None; {want}")
        # The range is checked for host labels only: on device labels it would wait for the
        # device each call (out-of-range device ids give all-zero rows).
        if n and xp is np and (int(lab.min()) < 0 or int(lab.max()) >= num_classes):
            raise ValueError(f"labels: got class ids in [{int(lab.min())}, {int(lab.max())}]; "
                             f"expected ids in [0, {num_classes}) (num_classes={num_classes})")
        return (lab[:, None] == xp.arange(num_classes)[None, :]).astype(xp.float32)
    if lab.ndim == 2 and lab.shape[0] == n and lab.dtype.kind in "fiub":
        return lab.astype(xp.float32)
    raise ValueError(f"labels: got {lab.dtype} array of shape {lab.shape}; {want}")


def _shape(x, layout):
    if layout not in ("NHWC", "NCHW"):
        raise ValueError(f"layout: got {layout!r}; expected 'NHWC' or 'NCHW'")
    if getattr(x, "ndim", 0) != 4 or np.dtype(x.dtype).name not in ("uint8", "float16", "float32"):
        raise ValueError(f"x: got {getattr(x, 'dtype', type(x).__name__)} array of shape {getattr(x, 'shape', None)}; "
                         f"expected a 4-D {layout} batch of uint8, float16 or float32")
    n = x.shape[0]
    h, w, c = (x.shape[1], x.shape[2], x.shape[3]) if layout == "NHWC" else (x.shape[2], x.shape[3], x.shape[1])
    return n, h, w, c


class _Mix:
    kind = ""

    def __init__(self, alpha=1.0, num_classes=None, *, seed=None):
        self.alpha = _check_alpha(alpha)
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer))
                                        or num_classes < 1):
            raise ValueError(f"num_classes: got {num_classes!r}; expected None or an int >= 1")
        self.num_classes = None if num_classes is None else int(num_classes)
        self._rng = R.generator(seed)
        self.last_params = None

    def draw(self, n, size, seed=None):
        """Draw :class:`MixParams` for ``n`` images of ``size = (H, W)``."""
        rng = self._rng if seed is None else R.generator(seed)
        return self._draw(rng, int(n), int(size[0]), int(size[1]))

    def __call__(self, x, labels, seed=None, *, params=None, layout="NHWC", stream=None):
        """Mix the batch ``x`` ((N, H, W, C) / (N, C, H, W), uint8 / float16 / float32, NumPy or
        CuPy) and its ``labels``; returns ``(images, soft_labels)``. ``params`` replays a call
        (e.g. ``last_params``); the draws are kept in ``last_params``."""
        x, _ = _as_array(x)
        n, h, w, c = _shape(x, layout)
        soft = _soft_labels(labels, n, self.num_classes)
        if params is None:
            params = self.draw(n, (h, w), seed)
        elif seed is not None:
            raise ValueError("seed: got a seed and params; pass one of them (params replays a call)")
        partner = np.asarray(params.partner, np.int64)
        if partner.shape != (n,) or (n and (partner.min() < 0 or partner.max() >= n)):
            raise ValueError(f"params.partner: got shape {partner.shape}; expected ({n},) ints in [0, {n})")
        rows = np.zeros((n, 6), np.float32)
        rows[:, 0] = partner
        rows[:, 1] = params.lam
        if params.boxes is not None:
            rows[:, 2:6] = params.boxes
        rows_dev = None
        if isinstance(x, np.ndarray):
            y = self._numpy(x, rows, h, w, layout)
        else:
            y, rows_dev = self._cuda(x, rows, h, w, c, layout, stream)
        if isinstance(soft, np.ndarray):
            lam, pidx = rows[:, 1:2], partner
            soft = lam * soft + (1 - lam) * soft[pidx]
        else:  # on the labels' device and the caller's stream, from the rows uploaded once
            from gpuaug._stream import on_stream

            with on_stream(stream):
                if rows_dev is None:
                    from gpuaug.kernels._cuda import upload

                    (rows_dev,) = upload(rows)
                lam, pidx = rows_dev[:, 1:2], rows_dev[:, 0].astype(np.int32)
                soft = lam * soft + (1 - lam) * soft[pidx]
        self.last_params = params
        return y, soft

    def _cuda(self, x, rows, h, w, c, layout, stream):
        from gpuaug._stream import on_stream
        from gpuaug._util import cupy_module
        from gpuaug.kernels._cuda import get_function, upload

        cp = cupy_module()
        n = x.shape[0]
        if n > 65535:  # blockIdx.y walks the samples
            raise ValueError(f"x: got a batch of {n} images; expected at most 65535 per call (split the batch)")
        if self.kind == "mixup" and x.dtype == np.float16:
            raise ValueError("x: float16 MixUp runs on NumPy input only for now; got a CUDA float16 batch "
                             "(use uint8 or float32)")
        with cp.cuda.Device(x.device.id), on_stream(stream):
            x = cp.ascontiguousarray(x)
            out = cp.empty_like(x)
            if n == 0:
                return out, None
            (p,) = upload(rows)
            e = h * w * c
            name = np.dtype(x.dtype).name
            vec = name == "uint8" and e % 16 == 0 and x.data.ptr % 16 == 0
            if vec:
                grid = (-(-(e // 16) // 256), n)
                if self.kind == "mixup":
                    get_function("mixing.cu", "gpuaug_mixup_u8v")(grid, (256,), (x, out, np.int64(e // 16), p,
                                                                              np.int32(n)))
                else:
                    get_function("mixing.cu", "gpuaug_cutmix_u8v")(
                        grid, (256,), (x, out, np.int32(h), np.int32(w), np.int32(c), np.int32(layout == "NCHW"), p,
                                       np.int32(n)))
                return out, p
            grid = (-(-e // 1024), n)
            if self.kind == "mixup":
                t = "unsigned char" if name == "uint8" else "float"
                get_function("mixing.cu", f"gpuaug_mixup<{t}>")(grid, (256,), (x, out, np.int64(e), p, np.int32(n)))
            else:
                t = {"uint8": "unsigned char", "float16": "unsigned short", "float32": "float"}[name]
                get_function("mixing.cu", f"gpuaug_cutmix<{t}>")(
                    grid, (256,), (x, out, np.int32(h), np.int32(w), np.int32(c), np.int32(layout == "NCHW"), p,
                                   np.int32(n)))
            return out, p


class MixUp(_Mix):
    """MixUp (Zhang et al. 2018) with a lambda and a partner per sample.

    Args:
        alpha: the Beta(alpha, alpha) parameter, > 0.
        num_classes: the number of classes when labels are int class ids.
        seed: seeds the generator.

    Call: ``mix(x, labels, seed=None, *, params=None, layout="NHWC", stream=None)`` ->
    ``(images, soft_labels)``.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.stack([np.zeros((2, 2, 3), np.uint8), np.full((2, 2, 3), 100, np.uint8)])
        >>> m = gpuaug.MixUp(1.0, num_classes=2, seed=0)
        >>> y, s = m(x, np.array([0, 1]))
        >>> p = m.last_params; lam = np.float32(p.lam[0])
        >>> int(y[0, 0, 0, 0]) == int(np.floor(lam * 0 + (1 - lam) * x[p.partner[0], 0, 0, 0] + 0.5))
        True
    """

    kind = "mixup"

    def _draw(self, rng, n, h, w):
        partner = rng.permutation(n)
        lam = rng.beta(self.alpha, self.alpha, n)
        return MixParams(partner, lam)

    def _numpy(self, x, rows, h, w, layout):
        lam = rows[:, 1].astype(np.float32)[:, None, None, None]
        v = lam * x.astype(np.float32) + (np.float32(1) - lam) * x[rows[:, 0].astype(np.int64)].astype(np.float32)
        if x.dtype == np.uint8:
            return np.clip(np.floor(v + np.float32(0.5)), 0, 255).astype(np.uint8)
        return v.astype(x.dtype)


class CutMix(_Mix):
    """CutMix (Yun et al. 2019) with a lambda, a box and a partner per sample.

    Args:
        alpha: the Beta(alpha, alpha) parameter, > 0.
        num_classes: the number of classes when labels are int class ids.
        seed: seeds the generator.

    The label weight ``last_params.lam`` is the kept area fraction, as torchvision's.

    Example::

        >>> import numpy as np, gpuaug
        >>> x = np.stack([np.zeros((8, 8, 1), np.uint8), np.ones((8, 8, 1), np.uint8)])
        >>> y, s = gpuaug.CutMix(1.0, num_classes=2, seed=3)(x, np.array([0, 1]))
        >>> bool(np.allclose(s[:, 1], np.asarray(y, float).mean(axis=(1, 2, 3))))
        True
    """

    kind = "cutmix"

    def _draw(self, rng, n, h, w):
        partner = rng.permutation(n)
        lam = rng.beta(self.alpha, self.alpha, n)
        rx = rng.uniform(0, w, n).astype(np.int64)  # torch.randint(W)
        ry = rng.uniform(0, h, n).astype(np.int64)
        r = 0.5 * np.sqrt(1.0 - lam)
        rw, rh = (r * w).astype(np.int64), (r * h).astype(np.int64)
        x0, y0 = np.clip(rx - rw, 0, None), np.clip(ry - rh, 0, None)
        x1, y1 = np.clip(rx + rw, None, w), np.clip(ry + rh, None, h)
        boxes = np.stack([y0, x0, y1, x1], 1)
        lam_adj = 1.0 - (x1 - x0) * (y1 - y0) / float(h * w)
        return MixParams(partner, lam_adj, boxes)

    def _numpy(self, x, rows, h, w, layout):
        y = x.copy()
        partner = rows[:, 0].astype(np.int64)
        for i, (y0, x0, y1, x1) in enumerate(rows[:, 2:6].astype(np.int64)):
            if layout == "NHWC":
                y[i, y0:y1, x0:x1] = x[partner[i], y0:y1, x0:x1]
            else:
                y[i, :, y0:y1, x0:x1] = x[partner[i], :, y0:y1, x0:x1]
        return y
