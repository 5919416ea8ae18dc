"""Automatic policies and batch mixing as DALI operators: ``gd.rand_augment``,
``gd.trivial_augment``, ``gd.auto_augment``, ``gd.augmix``, ``gd.mixup``, ``gd.cutmix``.

DALI's ``nvidia.dali.auto_aug`` picks an op per sample through conditional execution: a tree
of split/merge nodes over ~14 op subgraphs. Here each policy is **one** operator: one
``fn.python_function(batch_processing=True)`` whose callback runs the gpuaug policy
(:mod:`gpuaug.policy.auto`) on the whole batch. Every sample still draws its own ops and
magnitudes; on GPU data the policy's CUDA kernels run on DALI's stream (a launch per step,
plus statistics launches where some sample drew Contrast, AutoContrast or Equalize), with no host synchronisation; on CPU data the NumPy twin runs (the same bits).

Randomness: the operator holds its own policy object, seeded by ``seed`` (default: one drawn
from the pipeline's seed, so a seeded pipeline repeats). Batch after batch it draws from that
generator, as the standalone policy does call after call: ``gd.rand_augment(images, seed=5)``
gives, batch by batch, what ``gpuaug.RandAugment(seed=5)`` gives on the same batches.

Batches: HWC uint8 samples, 1 or 3 channels. A batch whose samples have different shapes runs
as one policy call per shape (in the order the shapes first appear), since the translate
magnitudes scale with the image size.

Mixing (``mixup``, ``cutmix``) pairs samples *within a batch*: DALI's per-sample model hands
a ``batch_processing`` operator the whole batch, so every sample gets a partner from a
permutation of its batch and its own lambda (partners never cross batches; under DALI
conditionals the partner comes from the samples that reach the operator). Both take the
images and a labels DataNode and return ``(images, soft_labels)``. The samples must share one
shape (mix after resizing/cropping). ``mosaic`` (:class:`gpuaug.Mosaic`, detection) draws its
three partners per sample from the batch the same way, and takes and returns per-sample boxes
and labels.

Example::

    from nvidia.dali import fn, pipeline_def
    import gpuaug.dali as gd

    @pipeline_def(batch_size=256, num_threads=4, device_id=0, seed=1)
    def pipe():
        jpegs, labels = fn.readers.file(file_root="train/", random_shuffle=True)
        images = fn.decoders.image_random_crop(jpegs, device="mixed")
        images = fn.resize(images, size=(224, 224))
        images = gd.rand_augment(images, num_ops=2, magnitude=9)
        images, soft = gd.mixup(images, labels.gpu(), alpha=0.2, num_classes=1000)
        return images, soft
"""
from __future__ import annotations

import numpy as np

from ._steps import LAYOUTS, SAMPLE_LAYOUT, is_node, op_error

__all__ = ["rand_augment", "trivial_augment", "auto_augment", "augmix", "mixup", "cutmix", "mosaic"]


def _xp(device):
    if device == "gpu":
        import cupy

        return cupy
    return np


def _report(device, err):
    """On the GPU DALI 2.4 can crash the process after an exception out of a python_function
    (see :class:`gpuaug.dali._callback.Chain`): print the cause first."""
    if device == "gpu":
        import sys

        print(f"{type(err).__name__}: {err}", file=sys.stderr, flush=True)


class AutoCallback:
    """``python_function`` callback of one automatic policy: ``(images) -> list of samples``.

    ``policy``: a :class:`gpuaug.RandAugment` / :class:`~gpuaug.TrivialAugmentWide` /
    :class:`~gpuaug.AutoAugment` / :class:`~gpuaug.AugMix` (its generator advances per batch).
    """

    def __init__(self, op, policy, device):
        self.op, self.policy, self.device = op, policy, device
        self.calls = 0

    def __call__(self, images):
        from ._callback import batch_view, wrap_error

        try:
            xp = _xp(self.device)
            x = batch_view(images, xp, self.op, "NHWC")
            self.calls += 1
            if not isinstance(x, list):
                _check_images(self.op, x.dtype, x.shape[-1])
                return list(self.policy(x))
            return self._grouped(x, xp)
        except Exception as e:  # noqa: BLE001 - re-raised, naming the operator
            err = wrap_error(self.op, e)
            _report(self.device, err)
            raise err from e

    def _grouped(self, samples, xp):
        """Samples of different shapes: one policy call per shape, in order of first appearance."""
        groups = {}
        for i, s in enumerate(samples):
            groups.setdefault((tuple(s.shape), s.dtype.str), []).append(i)
        out = [None] * len(samples)
        for (shape, _), idx in groups.items():
            _check_images(self.op, samples[idx[0]].dtype, shape[-1])
            y = self.policy(xp.stack([samples[i] for i in idx]))
            for j, i in enumerate(idx):
                out[i] = y[j]
        return out


def _check_images(op, dtype, channels):
    if np.dtype(dtype) != np.uint8 or channels not in (1, 3):
        raise op_error(op, f"data: got {np.dtype(dtype)} samples with {channels} channels; expected uint8 HWC "
                           "images with 1 or 3 channels (put the policy before normalisation)")


def _data_device(op, data):
    if not is_node(data):
        raise op_error(op, f"data: got {type(data).__name__}; expected a DALI DataNode (the images), "
                           "inside a pipeline definition", TypeError)
    return data.device


def _seed(op, seed):
    from ._steps import _base_seed

    return _base_seed(op, seed)


def _policy_node(op, data, cls, layout, seed, kwargs):
    from nvidia.dali import fn

    device = _data_device(op, data)
    if not isinstance(layout, str) or LAYOUTS.get(layout) != "NHWC":
        raise op_error(op, f"layout: got {layout!r}; expected 'HWC' (the policies run on HWC uint8 images; "
                           "transpose CHW data first)")
    try:
        policy = cls(**kwargs, seed=_seed(op, seed))
    except (TypeError, ValueError) as e:
        raise type(e)(f"gpuaug.dali.{op}: {e}") from None
    cb = AutoCallback(op, policy, device)
    return fn.python_function(data, function=cb, batch_processing=True, device=device, num_outputs=1,
                              output_layouts="HWC")


def rand_augment(data, num_ops=2, magnitude=9, num_magnitude_bins=31, *, interpolation="nearest", seed=None,
                 layout="HWC"):
    """RandAugment (:class:`gpuaug.RandAugment`, torchvision's op set, a draw per sample) as one
    DALI operator.

    Args:
        data: DataNode of uint8 HWC images (1 or 3 channels), GPU or CPU.
        num_ops: ops per sample, >= 0.
        magnitude: the magnitude bin, in [0, num_magnitude_bins).
        num_magnitude_bins: >= 1.
        interpolation: "nearest" (torchvision's default) or "bilinear" for the geometric ops.
        seed: the policy's seed, an int in [0, 2**64); default: drawn from the pipeline's seed.
        layout: "HWC" (the only one accepted).

    Returns:
        DataNode of the augmented images (same shapes, uint8 HWC).

    Example::

        images = gd.rand_augment(images, num_ops=2, magnitude=9)
    """
    from gpuaug.policy.auto import RandAugment

    return _policy_node("rand_augment", data, RandAugment, layout, seed,
                        dict(num_ops=num_ops, magnitude=magnitude, num_magnitude_bins=num_magnitude_bins,
                             interpolation=interpolation))


def trivial_augment(data, num_magnitude_bins=31, *, interpolation="nearest", seed=None, layout="HWC"):
    """TrivialAugmentWide (:class:`gpuaug.TrivialAugmentWide`: one op per sample at a uniform
    magnitude bin) as one DALI operator. Arguments as :func:`rand_augment`.

    Example::

        images = gd.trivial_augment(images)
    """
    from gpuaug.policy.auto import TrivialAugmentWide

    return _policy_node("trivial_augment", data, TrivialAugmentWide, layout, seed,
                        dict(num_magnitude_bins=num_magnitude_bins, interpolation=interpolation))


def auto_augment(data, policy="imagenet", *, interpolation="nearest", seed=None, layout="HWC"):
    """AutoAugment (:class:`gpuaug.AutoAugment`, torchvision's learned sub-policies, one per
    sample) as one DALI operator.

    Args:
        data: DataNode of uint8 HWC images.
        policy: "imagenet", "cifar10" or "svhn".
        interpolation, seed, layout: as :func:`rand_augment`.

    Example::

        images = gd.auto_augment(images, policy="imagenet")
    """
    from gpuaug.policy.auto import AutoAugment

    return _policy_node("auto_augment", data, AutoAugment, layout, seed,
                        dict(policy=policy, interpolation=interpolation))


def augmix(data, severity=3, mixture_width=3, chain_depth=-1, alpha=1.0, all_ops=True, *,
           interpolation="bilinear", seed=None, layout="HWC"):
    """AugMix (:class:`gpuaug.AugMix`: per sample, ``mixture_width`` chains mixed with Dirichlet
    weights) as one DALI operator; on GPU data the chains and the mix run in one launch (chains
    of up to 4 ops).

    Args:
        data: DataNode of uint8 HWC images.
        severity: in [1, 10]. mixture_width: >= 1. chain_depth: > 0, or <= 0 for 1 to 3 per chain.
        alpha: the Dirichlet parameter, > 0. all_ops: include Brightness, Color, Contrast, Sharpness.
        interpolation: "bilinear" (default, as torchvision's AugMix) or "nearest".
        seed, layout: as :func:`rand_augment`.

    Example::

        images = gd.augmix(images, severity=3)
    """
    from gpuaug.policy.auto import AugMix

    return _policy_node("augmix", data, AugMix, layout, seed,
                        dict(severity=severity, mixture_width=mixture_width, chain_depth=chain_depth, alpha=alpha,
                             all_ops=all_ops, interpolation=interpolation))


# -- mixing --------------------------------------------------------------------------------

class MixCallback:
    """``python_function`` callback of MixUp/CutMix: ``(images, labels) -> (images, soft labels)``."""

    def __init__(self, op, mixer, layout, device):
        self.op, self.mixer, self.layout, self.device = op, mixer, layout, device

    def __call__(self, images, labels):
        from ._callback import _dense, batch_view, wrap_error

        try:
            xp = _xp(self.device)
            x = batch_view(images, xp, self.op, self.layout)
            if isinstance(x, list):
                if len({(tuple(s.shape), s.dtype.str) for s in x}) != 1:
                    raise op_error(self.op, f"data: got samples of shapes {sorted({tuple(s.shape) for s in x})}; "
                                            "expected one shape (mix after resizing or cropping to one size)")
                x = xp.stack(x)
            n = len(images)
            if len(labels) != n:
                raise op_error(self.op, f"labels: got {len(labels)} samples; the data has {n}")
            l0 = labels[0]
            if len({(tuple(v.shape), v.dtype.str) for v in labels}) != 1:
                raise op_error(self.op, "labels: got samples of different shapes or dtypes; expected one class id "
                                        "per sample (shape () or (1,)) or one (K,) row of soft labels per sample")
            lab = _dense(list(labels), xp) if n > 1 else l0[None]
            if lab is None:
                lab = xp.stack(list(labels))
            if l0.dtype.kind in "iu" and l0.size == 1 and l0.ndim <= 1:
                lab = lab.reshape(n)
            elif l0.ndim == 1:
                lab = lab.reshape(n, l0.shape[0])
            else:
                raise op_error(self.op, f"labels: got {l0.dtype} samples of shape {tuple(l0.shape)}; expected one "
                                        "int class id per sample (shape () or (1,), with num_classes) or a (K,) row "
                                        "of one-hot / soft labels")
            y, soft = self.mixer(x, lab, layout=self.layout)
            return list(y), list(soft)
        except Exception as e:  # noqa: BLE001 - re-raised, naming the operator
            err = wrap_error(self.op, e)
            _report(self.device, err)
            raise err from e


def _mix_node(op, cls, data, labels, alpha, num_classes, seed, layout):
    from nvidia.dali import fn

    device = _data_device(op, data)
    if not is_node(labels):
        raise op_error(op, f"labels: got {type(labels).__name__}; expected a DALI DataNode (one class id or one "
                           "row of soft labels per sample)", TypeError)
    if labels.device != device:
        raise op_error(op, f"labels: a {labels.device} DataNode with {device} images; give both on one device "
                           "(labels.gpu() for GPU images)")
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise op_error(op, f"layout: got {layout!r}; expected 'HWC' (default) or 'CHW'")
    try:
        mixer = cls(alpha, num_classes, seed=_seed(op, seed))
    except (TypeError, ValueError) as e:
        raise type(e)(f"gpuaug.dali.{op}: {e}") from None
    lay = LAYOUTS[layout]
    cb = MixCallback(op, mixer, lay, device)
    images, soft = fn.python_function(data, labels, function=cb, batch_processing=True, device=device,
                                      num_outputs=2, output_layouts=[SAMPLE_LAYOUT[lay], ""])
    return images, soft


def mixup(data, labels, alpha=1.0, num_classes=None, *, seed=None, layout="HWC"):
    """MixUp (:class:`gpuaug.MixUp`: a partner from a permutation of the batch and a Beta(alpha,
    alpha) lambda per sample) as one DALI operator.

    Args:
        data: DataNode of images (HWC, or CHW with ``layout="CHW"``), uint8/float16/float32, one
            shape across the batch.
        labels: DataNode on the images' device: an int class id per sample (shape () or (1,),
            as ``fn.readers.file`` gives) with ``num_classes``, or a (K,) one-hot/soft row.
        alpha: > 0. num_classes: for int labels.
        seed: an int in [0, 2**64); default: drawn from the pipeline's seed.

    Returns:
        ``(images, soft_labels)``: DataNodes; soft labels are float32 (K,) per sample.

    Example::

        images, soft = gd.mixup(images, labels.gpu(), alpha=0.2, num_classes=1000)
    """
    from gpuaug.policy.mixing import MixUp

    return _mix_node("mixup", MixUp, data, labels, alpha, num_classes, seed, layout)


def cutmix(data, labels, alpha=1.0, num_classes=None, *, seed=None, layout="HWC"):
    """CutMix (:class:`gpuaug.CutMix`: a partner, a box and a lambda per sample; label weights
    are the kept areas) as one DALI operator. Arguments and outputs as :func:`mixup`.

    Example::

        images, soft = gd.cutmix(images, labels.gpu(), alpha=1.0, num_classes=1000)
    """
    from gpuaug.policy.mixing import CutMix

    return _mix_node("cutmix", CutMix, data, labels, alpha, num_classes, seed, layout)


# -- Mosaic (detection) --------------------------------------------------------------------

class MosaicCallback:
    """``python_function`` callback of :func:`mosaic`: ``(images[, bboxes[, labels]])`` ->
    ``images[, bboxes[, labels]]``."""

    def __init__(self, mosaic, fmt, layout, device, with_boxes, with_labels):
        self.mosaic, self.fmt, self.layout, self.device = mosaic, fmt, layout, device
        self.with_boxes, self.with_labels = with_boxes, with_labels

    def __call__(self, images, *targets):
        from gpuaug.targets import Boxes

        from ._callback import batch_view, wrap_error

        op = "mosaic"
        try:
            xp = _xp(self.device)
            x = batch_view(images, xp, op, self.layout)
            n = len(images)
            if isinstance(x, list):
                if len({(tuple(s.shape), s.dtype.str) for s in x}) != 1:
                    raise op_error(op, f"data: got samples of shapes {sorted({tuple(s.shape) for s in x})}; "
                                       "expected one shape (resize first)")
                x = xp.stack(x)
            boxes = None
            lab_col = False
            if self.with_boxes:
                bx = list(targets[0])
                if len(bx) != n:
                    raise op_error(op, f"bboxes: has {len(bx)} samples; the images have {n}")
                for i, a in enumerate(bx):
                    if a.ndim != 2 or a.shape[-1] != 4:
                        raise op_error(op, f"bboxes: sample {i} has shape {tuple(a.shape)}; expected (M, 4) "
                                           f"({self.fmt[0]})")
                labels = None
                if self.with_labels:
                    labels = list(targets[1])
                    if len(labels) != n:
                        raise op_error(op, f"labels: has {len(labels)} samples; the images have {n}")
                    lab_col = any(v.ndim == 2 for v in labels)
                    labels = [v.reshape(-1) if v.ndim == 2 and v.shape[-1] == 1 else v for v in labels]
                fmt, norm, mv = self.fmt
                boxes = Boxes(bx, fmt, norm, min_visibility=mv, labels=labels)
            y, b = self.mosaic(x, boxes, layout=self.layout)
            out = [list(y)]
            if b is not None:
                out.append(list(b.data))
                if self.with_labels:
                    out.append([v.reshape(-1, 1) if lab_col else v for v in b.labels])
            return out[0] if len(out) == 1 else tuple(out)
        except Exception as e:  # noqa: BLE001 - re-raised, naming the operator
            err = wrap_error(op, e)
            _report(self.device, err)
            raise err from e


def mosaic(data, bboxes=None, labels=None, *, size=None, center=(0.25, 0.75), fill=114, format="xyxy",
           normalized=False, min_visibility=0.0, seed=None, layout="HWC"):
    """Mosaic for detection (:class:`gpuaug.Mosaic`: per sample, itself and three samples of its
    batch in the four quadrants of a canvas split at a random centre) as one DALI operator,
    with the boxes and labels.

    Args:
        data: DataNode of images (HWC, or CHW with ``layout="CHW"``), uint8/float16/float32, one
            shape across the batch.
        bboxes: DataNode of per-sample ``(M_i, 4)`` float boxes (``format``: "xyxy" (ltrb),
            "xywh", "cxcywh"; pixels, or ``normalized`` to [0, 1] as ``fn.readers.coco(ratio=True)``
            gives), on the images' device; or None (images only).
        labels: DataNode of per-sample ``(M_i,)`` or ``(M_i, 1)`` labels following the boxes, or None.
        size: (OH, OW) of the output, or None for the input's size.
        center, fill: as :class:`gpuaug.Mosaic`.
        min_visibility: boxes keeping less than this fraction of their area are dropped (None:
            only clipped).
        seed: an int in [0, 2**64); default: drawn from the pipeline's seed.

    Returns:
        The images DataNode, then the boxes and labels DataNodes where given.

    Example::

        jpegs, boxes, labels = fn.readers.coco(file_root=..., annotations_file=..., ltrb=True, ratio=True)
        images = fn.resize(fn.decoders.image(jpegs, device="mixed"), size=(640, 640))
        images, boxes, labels = gd.mosaic(images, boxes.gpu(), labels.gpu(), size=(1280, 1280),
                                          normalized=True)
    """
    from nvidia.dali import fn

    from gpuaug.policy.mixing import Mosaic
    from gpuaug.targets._types import FORMATS

    op = "mosaic"
    device = _data_device(op, data)
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise op_error(op, f"layout: got {layout!r}; expected 'HWC' (default) or 'CHW'")
    if format not in FORMATS:
        raise op_error(op, f"format: got {format!r}; expected one of {', '.join(map(repr, FORMATS))}")
    if not isinstance(normalized, (bool, np.bool_)):
        raise op_error(op, f"normalized: got {normalized!r}; expected True or False", TypeError)
    if min_visibility is not None and (isinstance(min_visibility, bool) or not isinstance(min_visibility, (int, float))
                                       or not 0.0 <= min_visibility <= 1.0):
        raise op_error(op, f"min_visibility: got {min_visibility!r}; expected None or a number in [0, 1]")
    if labels is not None and bboxes is None:
        raise op_error(op, "labels: given without bboxes; labels follow the boxes", TypeError)
    nodes = []
    for name, node in (("bboxes", bboxes), ("labels", labels)):
        if node is None:
            continue
        if not is_node(node):
            raise op_error(op, f"{name}: got {type(node).__name__}; expected a DataNode (one array per sample)",
                           TypeError)
        if node.device == "gpu" and device == "cpu":
            raise op_error(op, f"{name}: a GPU DataNode with CPU images; give CPU targets or move the images "
                               "to the GPU", TypeError)
        nodes.append(node.gpu() if device == "gpu" else node)
    try:
        mo = Mosaic(size=size, center=center, fill=fill, seed=_seed(op, seed))
    except (TypeError, ValueError) as e:
        raise type(e)(f"gpuaug.dali.{op}: {e}") from None
    lay = LAYOUTS[layout]
    cb = MosaicCallback(mo, (format, bool(normalized), min_visibility), lay, device, bboxes is not None,
                        labels is not None)
    k = 1 + len(nodes)
    res = fn.python_function(data, *nodes, function=cb, batch_processing=True, device=device, num_outputs=k,
                             output_layouts=[SAMPLE_LAYOUT[lay]] + [""] * (k - 1))
    return tuple(res) if k > 1 else res
