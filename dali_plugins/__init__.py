"""gpuaug.dali: every gpuaug op as an NVIDIA DALI operator, and ready-made DALI pipelines.

Inside a ``@pipeline_def``, ``gpuaug.dali.<op>(images, **params)`` runs ``gpuaug.<op>`` on
a DataNode of images (one HWC sample each), with the standalone op's parameter names. A
parameter is a constant or a DataNode with one value per sample, as DALI's own argument
inputs::

    from nvidia.dali import fn, pipeline_def
    import gpuaug.dali as gd

    @pipeline_def(batch_size=64, num_threads=4, device_id=0)
    def pipe():
        jpegs, labels = fn.readers.file(file_root="train/")
        images = fn.decoders.image(jpegs, device="mixed")
        images = gd.resize(images, size=(224, 224))
        images = gd.rotate(images, angle=fn.random.uniform(range=(-15, 15)), border="reflect")
        images = gd.flip(images, horizontal=fn.random.coin_flip())
        return images, labels

- GPU data: one ``fn.python_function(device="gpu", batch_processing=True)`` per op (or
  per :func:`compose` chain): the CUDA C kernel runs on DALI's stream, once per batch,
  with no host synchronisation (per-sample DataNode values are used on the device).
- CPU data (``device_id=None`` pipelines, CPU decoders): the Numba njit twins, in
  ``fn.python_function(device="cpu")``; no GPU needed.
- ``backend="numba"``: DALI's ``numba_function`` on the Numba twins (CPU always; GPU where
  DALI accepts the CUDA toolkit, else the Numba CUDA twin inside python_function, with a
  warning that says why).

Also: :func:`compose` (several ops as one DALI operator), :func:`policy` (a random
``gpuaug.Compose`` policy, fused passes, as one DALI operator), :func:`rand_augment`,
:func:`trivial_augment`, :func:`auto_augment`, :func:`augmix`, :func:`mixup`, :func:`cutmix`,
:func:`mosaic` (one operator each, :mod:`gpuaug.dali._auto`), :func:`image_folder_pipeline`,
:func:`validation_pipeline`, :func:`default_augment` and :func:`torch_loader`; boxes, keypoints
and masks with the images: :func:`with_targets`, :func:`random_iou_crop`, :func:`bbox_safe_crop`,
:func:`bb_flip` (:mod:`gpuaug.dali._targets`).

Importing this module does not import DALI; the first op call does.
"""
from __future__ import annotations

import importlib

from gpuaug._registry import REGISTRY as registry

_LAZY = {
    "compose": "gpuaug.dali._compose",
    "Compose": "gpuaug.dali._compose",
    "image_folder_pipeline": "gpuaug.dali.pipelines",
    "validation_pipeline": "gpuaug.dali.pipelines",
    "default_augment": "gpuaug.dali.pipelines",
    "random_resized_crop_boxes": "gpuaug.dali.pipelines",
    "torch_loader": "gpuaug.dali.pipelines",
    "IMAGENET_MEAN": "gpuaug.dali.pipelines",
    "IMAGENET_STD": "gpuaug.dali.pipelines",
    "numba_support": "gpuaug.dali._numba",
    "policy": "gpuaug.dali._policy",
    # automatic policies and mixing, one operator each (gpuaug.policy.auto / .mixing)
    "rand_augment": "gpuaug.dali._auto",
    "trivial_augment": "gpuaug.dali._auto",
    "auto_augment": "gpuaug.dali._auto",
    "augmix": "gpuaug.dali._auto",
    "mixup": "gpuaug.dali._auto",
    "cutmix": "gpuaug.dali._auto",
    "mosaic": "gpuaug.dali._auto",
    # boxes, keypoints and masks with the images (gpuaug.targets)
    "with_targets": "gpuaug.dali._targets",
    "random_iou_crop": "gpuaug.dali._targets",
    "bbox_safe_crop": "gpuaug.dali._targets",
    "bb_flip": "gpuaug.dali._targets",
}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is not None:
        return getattr(importlib.import_module(mod), name)
    if not name.startswith("_") and name in registry:
        from gpuaug.dali._ops import operator

        return operator(name)
    raise AttributeError(f"module 'gpuaug.dali' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(registry) | set(_LAZY))


__all__ = sorted(set(_LAZY)) + sorted(registry)
