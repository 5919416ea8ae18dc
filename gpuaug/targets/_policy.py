"""Targets through a :class:`gpuaug.Compose` policy: ``policy(x, boxes=..., keypoints=..., masks=...)``.

The policy's planner packs runs of geometric transforms into fused stages, each ONE
resampling by the composition of its transforms' per-sample matrices (see
:mod:`gpuaug.policy.compose`). The targets follow the images stage by stage:

- per fused stage with geometry, the composed matrix, its inverse and the output size that
  :func:`gpuaug.policy._fused.build` computed for the images (``Built.maps`` and the rows, handed
  on by the call; from the drawn parameters in ``last_params``): boxes and keypoints are mapped
  once per stage (boxes clipped and filtered
  at the end of the stage, where the image's pixels are cut; on the GPU both in one launch),
  masks are warped once per stage
  with nearest sampling from the exact destination -> source map the fused kernel uses, the
  stage's border rule (constant with the masks' fill where the stage's geometry reads
  outside the image, replicate otherwise). On the GPU, with dense masks, boxes, keypoints and
  masks go in ONE upload and ONE launch per stage (gpuaug_target_all, after the stage's image
  launch); otherwise one launch for boxes and keypoints and one warp for the masks;
- box-aware crops (:class:`RandomIoUCrop`, :class:`RandomSizedBBoxSafeCrop`) choose their
  windows from the boxes at their point of the policy (:meth:`PolicyTargets.resolve`, after
  the draw and before any pixel is written; :func:`sample_policy` does both);
- colour, write and op stages (ColorJitter, Normalize, GaussianBlur, RandomErasing ...)
  leave the targets alone.

So replaying ``last_params`` replays the targets too.
"""
from __future__ import annotations

import numpy as np

from gpuaug._util import cupy_module
from gpuaug.targets._apply import _fused_masks_ok, map_stage, map_targets
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

    def resolve(self, policy, params, dtype, stream=None):
        """Choose the windows of the policy's box-aware crops (:class:`RandomIoUCrop`,
        :class:`RandomSizedBBoxSafeCrop`) from the boxes as they are at each of them: mapped
        through the stages before it as :meth:`run` maps them, and through the geometry before
        it in its own stage (clipped, nothing dropped). The windows (and RandomIoUCrop's kept
        rows, as rows of the stage's input boxes) go into ``params``, so ``last_params``
        replays them. Returns ``params``."""
        aware = [i for i, t in enumerate(policy.transforms) if _aware(t)]
        if not aware:
            return params
        if self.boxes is None:
            raise ValueError(f"boxes: {type(policy.transforms[aware[0]]).__name__} chooses its crop from the boxes; "
                             "pass boxes= (an (N, 0, 4) array for images without any)")
        bx, sizes = self.boxes, self.sizes
        for kind, spec in policy._items(dtype):
            if kind != "fused" or not spec.geometry:
                continue
            if spec.geometry[0] > aware[-1]:
                break
            m, out, keep = None, sizes, None
            for i in spec.geometry:
                t = policy.transforms[i]
                if _aware(t):
                    at = bx if m is None else _unfiltered(bx, m, sizes, out, stream)
                    t.resolve(params.values[i], at, out, stream)
                    w = params.values[i].get("within")
                    if w is not None:
                        if m is not None:
                            w = params.values[i]["within"] = _rows_back(w, at, bx)
                        keep = w if keep is None else _and(keep, w)
                mi = t.matrices(params.values[i], out)
                m = mi if m is None else np.matmul(mi, m)
                out = np.asarray(t.out_sizes(out), np.int64)
            if spec.geometry[-1] < aware[-1]:
                bx, _ = map_targets(bx, None, m, sizes, out, check=False, stream=stream, keep=keep)
            sizes = out
        return params

    def fusable(self, backend):
        """Whether the targets' kinds let the stages go through :func:`map_stage` (one launch:
        dense device masks, device boxes and keypoints), so that :meth:`run` may put them on a
        side stream (a stage whose output sizes differ across samples still goes the other way:
        :meth:`run` joins the fork there)."""
        return backend == "cuda" and _fused_masks_ok(self.masks, self.boxes, self.keypoints)

    def run(self, policy, params, dtype, stream=None, backend=None, built=None, fork=None):
        """Apply the policy's stages to the targets; returns them in the order given
        (boxes, keypoints, masks). ``built``: the (StageSpec, Built) of each fused stage the
        images just ran (:meth:`Compose._run`), whose maps and inverses the targets take
        (else they are composed here again, :func:`_stages`). ``fork``: a started
        :class:`gpuaug._stream.Fork` from the stream of the images: the stages that go through
        :func:`map_stage` run on its side stream, beside the images' kernels, with their
        outputs allocated on the images' stream; at the first that does not, the fork is
        joined and the rest runs on the images' stream. The caller joins it at the end."""
        from gpuaug._stream import _NOTHING, on_stream

        bx, kp, ms = self.boxes, self.keypoints, self.masks
        sizes = self.sizes
        stages = _stages(policy, params, dtype, sizes) if built is None else _built_stages(built, len(sizes))
        side = fork.side if fork is not None else None
        for geo, m, out, constant, inv in stages:
            one = None
            with on_stream(side) if side is not None else _NOTHING:
                keep = _stage_keep(policy, params, geo) if bx is not None else None
                if ms is not None and backend == "cuda":  # boxes, keypoints and masks in one launch
                    one = map_stage(bx, kp, ms, m, _stage_inverse(m) if inv is None else inv, sizes, out,
                                    constant, stream=stream if side is None else None, keep=keep,
                                    out_stream=fork.main if side is not None else None)
            if one is None and side is not None:  # the rest on the images' stream, after the side's work
                fork.join()
                side = None
            if one is not None:
                bx, kp, ms = one
            else:
                if bx is not None or kp is not None:
                    bx, kp = map_targets(bx, kp, m, sizes, out, check=False, stream=stream, keep=keep)
                if ms is not None:
                    ms = _stage_masks(ms, m, out, constant, stream, backend, inv)
            sizes = out
        res = {"boxes": bx, "keypoints": kp, "masks": ms}
        return tuple(res[k] for k in self.given)


def _stages(policy, params, dtype, sizes):
    """Per fused stage with geometry: (policy indices, composed matrix, output sizes, whether
    the stage has a fill (constant border), None): the composition
    :func:`gpuaug.policy._fused.build` makes."""
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
        yield list(spec.geometry), m, out, fill is not None, None
        sizes = out


def _built_stages(built, n):
    """:func:`_stages` from the images' own stages (``built``: their (StageSpec, Built)), with
    the inverse maps the fused kernel got ((n, 9) float64 views of its rows): nothing composed
    or inverted again."""
    from gpuaug.policy import _fused as F

    for spec, b in built:
        if not spec.geometry:
            continue
        hw = getattr(b.shapes, "hw", None)
        out = F.uniform_sizes(n, *hw) if hw is not None else np.asarray(b.shapes, np.int64).reshape(n, 2)
        yield spec.geometry, b.maps, out, b.border == 0, b.rows[:, F.P_MAP:F.P_MAP + 9]


def _aware(t):
    return getattr(t, "box_aware", False)


def _unfiltered(bx, m, sizes, out, stream):
    """``bx`` mapped by ``m`` and clipped, no row dropped (but by a perspective that sends a
    corner to infinity); the result's ``index`` gives each row's row in ``bx``."""
    tmp = bx.like(bx.data, counts=bx.counts)
    tmp.min_visibility = None
    return map_targets(tmp, None, m, sizes, out, check=False, stream=stream)[0]


def _rows_back(w, at, bx):
    """Per-row flags of ``at`` (rows ``at.index`` of ``bx``) as flags of ``bx``'s rows."""
    if isinstance(w, list):
        res = []
        for wi, ii, bi in zip(w, at.index, bx.data):
            xp = np if isinstance(wi, np.ndarray) else cupy_module()
            r = xp.zeros(bi.shape[0], bool)
            r[ii] = wi[:len(ii)]
            res.append(r)
        return res
    xp = np if isinstance(w, np.ndarray) else cupy_module()
    idx = xp.asarray(at.index)
    res = xp.zeros(bx.data.shape[:2], bool)
    ii, rr = xp.nonzero(idx >= 0)
    res[ii, idx[ii, rr]] = w[ii, rr]
    return res


def _stage_keep(policy, params, geo):
    """The AND of the stage's box-aware crops' kept rows (rows of the stage's input), or None."""
    keep = None
    for i in geo:
        w = params.values[i].get("within") if getattr(policy.transforms[i], "box_aware", False) else None
        if w is not None:
            keep = w if keep is None else _and(keep, w)
    return keep


def _and(a, b):
    return [x & y for x, y in zip(a, b)] if isinstance(a, list) else a & b


def _stage_inverse(m):
    """The stage's destination -> source maps, (N, 9) float64: the inverse the fused kernel gets
    (F._inverse), so masks and images sample the same source pixel."""
    from gpuaug.policy import _fused as F

    return F._inverse(np.ascontiguousarray(m, np.float64))[0]


def _stage_masks(ms, m, out, constant, stream, backend, inv=None):
    """One nearest warp of every mask plane by the stage's destination -> source map (``inv``,
    (n, 9); None: the inverse of ``m``)."""
    inv = (_stage_inverse(m) if inv is None else np.asarray(inv)).reshape(-1, 3, 3)
    views, k, fill, back = _planes(ms)
    p = len(inv) * k
    data = warp_masks(views, np.repeat(inv, k, axis=0), np.repeat(out, k, axis=0),
                      "constant" if constant else "replicate", np.tile(fill, (p, 1)),
                      dict(stream=stream, backend=backend), inverse_map=True)
    return ms.like(back(data))


def sample_policy(policy, x, *, boxes, seed=None, layout="NHWC", stream=None):
    """Draw a policy's parameters for ``x`` and resolve its box-aware crops from ``boxes``
    (:class:`RandomIoUCrop`, :class:`RandomSizedBBoxSafeCrop`): the :class:`PolicyParams` to
    pass as ``policy(x, params=p, boxes=boxes, ...)``.

    Example::

        >>> import numpy as np, gpuaug
        >>> from gpuaug.targets import RandomSizedBBoxSafeCrop, sample_policy
        >>> pol = gpuaug.Compose([RandomSizedBBoxSafeCrop(16)])
        >>> x = np.zeros((1, 32, 32, 3), np.uint8)
        >>> p = sample_policy(pol, x, boxes=np.array([[[4.0, 4.0, 20.0, 12.0]]]), seed=0)
        >>> p[0]["window"].shape
        (1, 4)
    """
    from gpuaug._batch import as_batch
    from gpuaug.policy.compose import batch_sizes

    b = as_batch(x, layout)
    sizes = batch_sizes(b)
    params = policy._sample(b.n, sizes, seed)
    return PolicyTargets(b, sizes, boxes).resolve(policy, params, b.dtype.name, stream)
