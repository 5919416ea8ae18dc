"""Targets through a :class:`gpuaug.Compose` policy: ``policy(x, boxes=..., keypoints=..., masks=...)``.

The policy's planner packs runs of geometric transforms into fused stages, each ONE
resampling by the composition of its transforms' per-sample matrices (see
:mod:`gpuaug.policy.compose`). The targets follow the images stage by stage:

- per fused stage with geometry, the same composed matrix and output size that
  :func:`gpuaug.policy._fused.build` computes (from the same drawn parameters, in
  ``last_params``): boxes and keypoints are mapped once per stage (boxes clipped and filtered
  at the end of the stage, where the image's pixels are cut; on the GPU both in one launch),
  masks are warped once per stage
  with nearest sampling from the exact destination -> source map the fused kernel uses, the
  stage's border rule (constant with the masks' fill where the stage's geometry reads
  outside the image, replicate otherwise): one extra launch per stage for the masks;
- colour, write and op stages (ColorJitter, Normalize, GaussianBlur, RandomErasing ...)
  leave the targets alone.

So replaying ``last_params`` replays the targets too.
"""
from __future__ import annotations

import numpy as np

from gpuaug.targets._apply import map_targets
from gpuaug.targets._types import as_boxes, as_keypoints, as_masks, check_boxes_values, check_keypoints_values
from gpuaug.targets.ops import _check_masks, _planes, warp_masks


class PolicyTargets:
    """The targets of one policy call, checked before any pixel is written."""

    def __init__(self, b, sizes, boxes=None, keypoints=None, masks=None):
        n = b.n
        self.given = [name for name, v in (("boxes", boxes), ("keypoints", keypoints), ("masks", masks))
                      if v is not None]
        self.boxes = as_boxes(boxes) if boxes is not None else None
        self.keypoints = as_keypoints(keypoints) if keypoints is not None else None
        self.masks = as_masks(masks) if masks is not None else None
        for name, t in (("boxes", self.boxes), ("keypoints", self.keypoints)):
            if t is not None and t.n != n:
                raise ValueError(f"{name}: holds {t.n} samples; the batch has {n}; expected one entry per image")
        if self.boxes is not None and self.boxes.check:
            check_boxes_values(self.boxes)
        if self.keypoints is not None and self.keypoints.check:
            check_keypoints_values(self.keypoints)
        if self.masks is not None:
            _check_masks(self.masks, np.asarray(sizes))
        self.sizes = np.asarray(sizes, np.int64)

    def run(self, policy, params, dtype, stream=None, backend=None):
        """Apply the policy's stages to the targets; returns them in the order given
        (boxes, keypoints, masks)."""
        from gpuaug.policy import _fused as F

        bx, kp, ms = self.boxes, self.keypoints, self.masks
        sizes = self.sizes
        for kind, spec in policy._items(dtype):
            if kind != "fused" or not spec.geometry:
                continue
            m, out, fill = None, sizes, None
            for i in spec.geometry:
                t = policy.transforms[i]
                mi = t.matrices(params.values[i], out)
                m = mi if m is None else np.matmul(mi, m)
                out = np.asarray(t.out_sizes(out), np.int64)
                if t.needs_fill() and fill is None:
                    fill = t.fill
            if bx is not None or kp is not None:
                bx, kp = map_targets(bx, kp, m, sizes, out, check=False, stream=stream)
            if ms is not None:
                ms = _stage_masks(ms, m, out, fill is not None, stream, backend)
            sizes = out
        res = {"boxes": bx, "keypoints": kp, "masks": ms}
        return tuple(res[k] for k in self.given)


def _stage_masks(ms, m, out, constant, stream, backend):
    """One nearest warp of every mask plane by the stage's destination -> source map: the
    float64 inverse the fused kernel gets (F._inverse), so both sample the same source pixel."""
    from gpuaug.policy import _fused as F

    inv, _ = F._inverse(np.ascontiguousarray(m, np.float64))
    inv = inv.reshape(-1, 3, 3)
    views, k, fill, back = _planes(ms)
    p = len(inv) * k
    data = warp_masks(views, np.repeat(inv, k, axis=0), np.repeat(out, k, axis=0),
                      "constant" if constant else "replicate", np.tile(fill, (p, 1)),
                      dict(stream=stream, backend=backend), inverse_map=True)
    return ms.like(back(data))
