"""gpuaug.targets: boxes, keypoints and masks through the same per-sample geometric transforms
as the images.

    >>> import numpy as np, gpuaug
    >>> from gpuaug import targets as T
    >>> x = np.zeros((2, 8, 10, 3), np.uint8)
    >>> boxes = T.Boxes(np.array([[[1, 1, 4, 5]], [[0, 0, 10, 8]]], np.float32))
    >>> masks = np.zeros((2, 8, 10), np.uint8)
    >>> y = gpuaug.flip(x, horizontal=[True, False])
    >>> r = T.flip(x, horizontal=[True, False], boxes=boxes, masks=masks)
    >>> r.boxes.data[:, 0].tolist(), r.masks.data.shape
    ([[6.0, 1.0, 9.0, 5.0], [0.0, 0.0, 10.0, 8.0]], (2, 8, 10))

Why a module of its own rather than ``boxes=`` / ``keypoints=`` / ``masks=`` keywords on
every op:

- **The op contract stays one array in, one array out.** Every op returns an array like its
  input, and the registry, the benchmarks, the DALI adapters, ``out=`` checks and the
  central test tables are driven by that; keywords that change what an op returns (a tuple
  when a target is given) would touch all of them and every op's file.
- **Targets are not images.** Boxes and keypoints are a few floats per sample (one small
  launch over the whole batch, or NumPy), not a pass over pixels; they have formats, counts,
  visibilities and drop rules that the image ops know nothing about; and they can be mapped
  without the pixels (a dataloader that augments annotations before decoding needs only
  the sizes).
- **Masks reuse the ops.** A mask is warped by calling the op itself on it with nearest
  sampling and the mask's fill, so "the mask equals the image's nearest-neighbour warp"
  holds by construction, on every backend and layout the op supports.

So ``gpuaug.targets.<op>(images, <the op's own arguments>, boxes=..., keypoints=...,
masks=...)`` mirrors each geometric op with the same signature, and
``Compose(...)(images, boxes=..., keypoints=..., masks=...)`` applies a policy's drawn
parameters to all of them (:mod:`gpuaug.targets._policy`). Crops that choose their window
from the boxes, :class:`RandomIoUCrop` (SSD) and :class:`RandomSizedBBoxSafeCrop`, are
policy transforms defined here (:mod:`gpuaug.targets.safe_crops`).

Conventions (see the containers): boxes in continuous pixel coordinates (the image spans
``[0, W]``, torchvision's convention); keypoints at pixel centres by default (the images'
convention: a point stays on the pixel it marks), ``coords="continuous"`` as boxes; masks
as label maps (N, H, W) or one-hot (N, K, H, W), uint8, int32 or bool.
"""
from gpuaug.targets._apply import map_boxes, map_keypoints, map_targets, target_matrices
from gpuaug.targets._policy import sample_policy
from gpuaug.targets._types import FORMATS, Boxes, Keypoints, Masks
from gpuaug.targets.ops import (Targets, apply_matrices, center_crop, crop, flip, pad, resize, resized_crop, rot90,
                                rotate, transpose, warp_affine, warp_perspective)
from gpuaug.targets.safe_crops import RandomIoUCrop, RandomSizedBBoxSafeCrop, bbox_safe_windows, iou_crop_windows

__all__ = ["Boxes", "Keypoints", "Masks", "Targets", "FORMATS", "map_boxes", "map_keypoints", "map_targets",
           "target_matrices",
           "apply_matrices", "flip", "crop", "center_crop", "pad", "resize", "resized_crop", "rot90", "transpose",
           "rotate", "warp_affine", "warp_perspective",
           "RandomIoUCrop", "RandomSizedBBoxSafeCrop", "iou_crop_windows", "bbox_safe_windows", "sample_policy"]
