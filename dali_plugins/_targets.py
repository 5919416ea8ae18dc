"""Boxes, keypoints and masks in DALI pipelines: gpuaug's geometric ops with their targets as
DALI operators (:mod:`gpuaug.targets` inside ``fn.python_function``).

DALI's own box operators (``fn.bb_flip`` on the GPU; ``fn.random_bbox_crop``, ``fn.bbox_paste``
on the CPU) transform boxes apart from the images and leave the images to other operators.
Here one operator takes the images and their targets and returns both, transformed by the
same per-sample parameters:

- :func:`with_targets`: any of gpuaug's geometric ops (flip, crop, center_crop, pad, resize,
  resized_crop, rot90, transpose, rotate, warp_affine, warp_perspective) with the op's own
  arguments (constants or per-sample DataNodes, as ``gpuaug.dali.<op>``) and ``bboxes=``,
  ``labels=``, ``keypoints=``, ``masks=`` DataNodes;
- :func:`random_iou_crop`: SSD's random IoU crop and a resize (what ``fn.random_bbox_crop`` +
  ``fn.slice`` + ``fn.resize`` do in DALI's SSD example), the crop chosen per sample from the
  boxes (on the GPU for GPU data: ``gpuaug_iou_crop_select``);
- :func:`bbox_safe_crop`: a random crop holding every box, resized;
- :func:`bb_flip`: DALI's ``fn.bb_flip`` (normalised boxes only, no images).

Per sample: boxes ``(M_i, 4)`` float (``M_i`` may be 0), labels ``(M_i,)``, keypoints
``(K, 2)``, masks ``(H, W)`` uint8/int32 label maps of the image's size. Outputs, in this
order: the images, then the boxes, labels, keypoints and their visibility ``(K,)`` uint8, and
masks, each only where given. Boxes dropped by a transform (``min_visibility``, a crop) are
gone from the sample; labels follow them.

On GPU data the boxes are mapped on the device, and the per-sample box counts are read back
once per batch (DALI's outputs are per sample).

Example::

    from nvidia.dali import fn, pipeline_def
    import gpuaug.dali as gd

    @pipeline_def(batch_size=32, num_threads=4, device_id=0)
    def pipe():
        jpegs, boxes, labels = fn.readers.coco(file_root=..., annotations_file=..., ltrb=True,
                                               ratio=True)
        images = fn.decoders.image(jpegs, device="mixed")
        images, boxes, labels = gd.random_iou_crop(images, boxes.gpu(), labels.gpu(), size=300,
                                                   normalized=True)
        images, boxes, labels = gd.with_targets("flip", images, bboxes=boxes, labels=labels,
                                                normalized=True, horizontal=fn.random.coin_flip())
        return images, boxes, labels
"""
from __future__ import annotations

import inspect

import numpy as np

from ._steps import SAMPLE_LAYOUT, is_node, make_step, op_error

#: The geometric ops that carry targets (gpuaug.targets.<op>).
TARGET_OPS = ("flip", "crop", "center_crop", "pad", "resize", "resized_crop", "rot90", "transpose", "rotate",
              "warp_affine", "warp_perspective")


# ------------------------------------------------------------------------------ graph side
def _check_nodes(op, data, named):
    """Every DataNode on the data's device (GPU targets with CPU images cannot meet)."""
    if not is_node(data):
        raise op_error(op, f"data: got {type(data).__name__}; expected a DALI DataNode (the images)", TypeError)
    out = []
    for name, node in named:
        if node is None:
            continue
        if not is_node(node):
            raise op_error(op, f"{name}: got {type(node).__name__}; expected a DataNode (one array per sample)",
                           TypeError)
        if node.device == "gpu" and data.device == "cpu":
            raise op_error(op, f"{name}: is a GPU DataNode but the images are on the CPU; give CPU targets "
                               "or move the images to the GPU", TypeError)
        out.append((name, node.gpu() if data.device == "gpu" else node))
    return out


def _format(op, format, normalized, min_visibility):
    from gpuaug.targets._types import FORMATS

    if format not in FORMATS:
        raise op_error(op, f"format: got {format!r}; expected one of {', '.join(map(repr, FORMATS))}")
    if not isinstance(normalized, (bool, np.bool_)):
        raise op_error(op, f"normalized: got {normalized!r}; expected True or False", TypeError)
    if min_visibility is not None and (not isinstance(min_visibility, (int, float)) or isinstance(min_visibility, bool)
                                       or not 0.0 <= min_visibility <= 1.0):
        raise op_error(op, f"min_visibility: got {min_visibility!r}; expected None or a number in [0, 1]")
    return format, bool(normalized), min_visibility


def _node(op, callback, data, named, extra_nodes, layout_out):
    from nvidia.dali import fn

    outs = ["images"] + [n for n, _ in named] + (["visibility"] if any(n == "keypoints" for n, _ in named) else [])
    order = {"images": 0, "bboxes": 1, "labels": 2, "keypoints": 3, "visibility": 4, "masks": 5}
    outs.sort(key=order.get)
    callback.outputs = tuple(outs)
    nodes = [nd for _, nd in named] + [nd.gpu() if data.device == "gpu" else nd for nd in extra_nodes]
    res = fn.python_function(data, *nodes, function=callback, batch_processing=True, device=data.device,
                             num_outputs=len(outs))
    res = list(res) if isinstance(res, (list, tuple)) else [res]
    res[0] = fn.reshape(res[0], layout=layout_out)
    return tuple(res) if len(res) > 1 else res[0]


def with_targets(op, data, *, bboxes=None, labels=None, keypoints=None, masks=None, format="xyxy",
                 normalized=False, min_visibility=0.0, layout="HWC", backend=None, **params):
    """``gpuaug.<op>`` on the images and ``gpuaug.targets.<op>`` on their targets, one DALI
    operator, the same per-sample parameters for both.

    Args:
        op: one of :data:`TARGET_OPS`.
        data: DataNode of images (HWC, or CHW with ``layout="CHW"``), CPU or GPU.
        bboxes: DataNode of ``(M_i, 4)`` float boxes per sample, in ``format`` (xyxy, xywh,
            cxcywh), pixels or ``normalized`` to [0, 1]; ``min_visibility`` as
            :class:`gpuaug.targets.Boxes` (None: clip only).
        labels: DataNode of ``(M_i,)`` per sample (needs ``bboxes``): follow the boxes.
        keypoints: DataNode of ``(K, 2)`` float (x, y) pixel-centre coordinates per sample.
        masks: DataNode of ``(H, W)`` uint8/int32 label maps (ignore fill 255 for uint8).
        backend: as ``gpuaug.dali.<op>`` (None: CUDA C on GPU data, the CPU twins on CPU data).
        **params: the op's own arguments, constants or per-sample DataNodes (its
            ``boxes`` argument, for resized_crop, is the crop windows).

    Returns:
        A tuple of DataNodes: images, then boxes, labels, keypoints, keypoint visibility
        (uint8), masks, each where given (a single DataNode when only images).
    """
    if op not in TARGET_OPS:
        raise op_error("with_targets", f"op: got {op!r}; expected one of {', '.join(TARGET_OPS)}")
    if labels is not None and bboxes is None:
        raise op_error(op, "labels: given without bboxes; labels follow the boxes")
    fmt = _format(op, format, normalized, min_visibility)
    step, param_nodes = make_step(op, params, layout)
    named = _check_nodes(op, data, (("bboxes", bboxes), ("labels", labels), ("keypoints", keypoints),
                                    ("masks", masks)))
    from ._ops import check_backend

    be = check_backend(op, backend, data.device)
    cb = TargetsCallback(op, step, be, data.device, fmt, tuple(n for n, _ in named))
    return _node(op, cb, data, named, param_nodes, SAMPLE_LAYOUT[step.layout])


def random_iou_crop(data, bboxes, labels=None, *, size, format="xyxy", normalized=False, min_visibility=0.0,
                    sampler_options=None, min_scale=0.3, max_scale=1.0, min_aspect_ratio=0.5,
                    max_aspect_ratio=2.0, trials=40, rounds=16, interpolation="bilinear", seed=None,
                    layout="HWC", backend=None):
    """SSD's random IoU crop (torchvision v2's RandomIoUCrop rules, see
    :func:`gpuaug.targets.iou_crop_windows`) and a resize to ``size``, on the images and their
    boxes (and labels) in one DALI operator. Boxes centred outside the crop are dropped.

    ``seed``: the crops' random keys; batch ``i`` uses ``seed + i`` (default: one drawn from
    the pipeline's seed). Returns ``(images, boxes)`` or ``(images, boxes, labels)``.
    """
    from gpuaug.policy import _args as A
    from gpuaug.targets.safe_crops import check_iou_args

    op = "random_iou_crop"
    fmt = _format(op, format, normalized, min_visibility)
    try:
        sz = A.size("size", size)
        args = check_iou_args(sampler_options, min_scale, max_scale, min_aspect_ratio, max_aspect_ratio, trials,
                               rounds)
        A.interpolation("interpolation", interpolation)
    except (ValueError, TypeError) as e:
        raise op_error(op, str(e), type(e)) from None
    named = _check_nodes(op, data, (("bboxes", bboxes), ("labels", labels)))
    cb = CropCallback(op, "iou", sz, interpolation, args, _seed(op, seed), _crop_backend(op, backend, data),
                      data.device, fmt, tuple(n for n, _ in named), _layout(op, layout))
    return _node(op, cb, data, named, (), SAMPLE_LAYOUT[cb.layout])


def bbox_safe_crop(data, bboxes, labels=None, *, size, erosion_rate=0.0, format="xyxy", normalized=False,
                   min_visibility=0.0, interpolation="bilinear", seed=None, layout="HWC", backend=None):
    """A random crop holding every box (:func:`gpuaug.targets.bbox_safe_windows`) and a resize
    to ``size``, on the images and their boxes (and labels). ``seed`` as
    :func:`random_iou_crop`. Returns ``(images, boxes)`` or ``(images, boxes, labels)``."""
    from gpuaug.policy import _args as A

    op = "bbox_safe_crop"
    fmt = _format(op, format, normalized, min_visibility)
    try:
        sz = A.size("size", size)
        er = A.number("erosion_rate", erosion_rate, low=0.0)
        if not er < 1.0:
            raise ValueError(f"erosion_rate: got {erosion_rate!r}; expected a number in [0, 1)")
        A.interpolation("interpolation", interpolation)
    except (ValueError, TypeError) as e:
        raise op_error(op, str(e), type(e)) from None
    named = _check_nodes(op, data, (("bboxes", bboxes), ("labels", labels)))
    cb = CropCallback(op, "safe", sz, interpolation, er, _seed(op, seed), _crop_backend(op, backend, data),
                      data.device, fmt, tuple(n for n, _ in named), _layout(op, layout))
    return _node(op, cb, data, named, (), SAMPLE_LAYOUT[cb.layout])


def bb_flip(bboxes, *, horizontal=1, vertical=0, ltrb=False):
    """DALI's ``fn.bb_flip``: normalised boxes ``(M_i, 4)`` per sample, ``[x, y, w, h]`` (or
    ``[l, t, r, b]`` with ``ltrb``), flipped where ``horizontal`` / ``vertical`` (constants or
    per-sample int DataNodes) are non-zero. CPU or GPU DataNodes; returns the boxes."""
    from nvidia.dali import fn

    op = "bb_flip"
    if not is_node(bboxes):
        raise op_error(op, f"bboxes: got {type(bboxes).__name__}; expected a DataNode", TypeError)
    nodes, names = [], []
    for name, v in (("horizontal", horizontal), ("vertical", vertical)):
        if is_node(v):
            nodes.append(v.gpu() if bboxes.device == "gpu" else v)
            names.append(name)
        elif isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise op_error(op, f"{name}: got {v!r}; expected an int (0 or 1) or a DataNode", TypeError)
    consts = {"horizontal": horizontal, "vertical": vertical}
    cb = FlipBoxesCallback(consts, tuple(names), "xyxy" if ltrb else "xywh", bboxes.device)
    return fn.python_function(bboxes, *nodes, function=cb, batch_processing=True, device=bboxes.device,
                              num_outputs=1)


def _seed(op, seed):
    from ._steps import _base_seed

    return _base_seed(op, seed)


def _layout(op, layout):
    from ._steps import LAYOUTS

    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise op_error(op, f"layout: got {layout!r}; expected 'HWC' (default) or 'CHW'")
    return LAYOUTS[layout]


def _crop_backend(op, backend, data):
    from ._ops import check_backend

    return check_backend(op, backend, data.device)


# ------------------------------------------------------------------------------ run side
def _xp(device):
    if device == "gpu":
        import cupy

        return cupy
    return np


def _boxes(samples, labels, fmt):
    from gpuaug.targets import Boxes

    f, norm, mv = fmt
    for i, a in enumerate(samples):
        if a.ndim != 2 or a.shape[-1] != 4:
            raise ValueError(f"bboxes: sample {i} has shape {tuple(a.shape)}; expected (M, 4) ({f})")
    return Boxes(list(samples), f, norm, min_visibility=mv, labels=None if labels is None else list(labels))


def _n_check(name, samples, n):
    if len(samples) != n:
        raise ValueError(f"{name}: has {len(samples)} samples; the images have {n}")


class _Base:
    """What the target callbacks share: inputs by name, outputs as per-sample lists."""

    outputs = ("images",)

    def _inputs(self, images, rest):
        from ._callback import batch_view

        xp = _xp(self.device)
        x = batch_view(images, xp, self.op, self.layout)
        n = len(images)
        got = dict(zip(self.names, rest[:len(self.names)]))
        for k, v in got.items():
            _n_check(k, v, n)
        return xp, x, n, got, rest[len(self.names):]

    def _targets(self, got):
        from gpuaug.targets import Keypoints, Masks

        xp = _xp(self.device)
        kw = {}
        if "bboxes" in got:
            kw["boxes"] = _boxes(got["bboxes"], got.get("labels"), self.fmt)
        if "keypoints" in got:
            kw["keypoints"] = Keypoints(xp.stack([xp.asarray(k) for k in got["keypoints"]]))
        if "masks" in got:
            kw["masks"] = Masks([m for m in got["masks"]])
        return kw

    def _outputs(self, y, res):
        out = {"images": y if isinstance(y, list) else list(y)}
        b = getattr(res, "boxes", None)
        if b is not None:
            out["bboxes"] = list(b.data)
            if b.labels is not None:
                out["labels"] = list(b.labels)
        k = getattr(res, "keypoints", None)
        if k is not None:
            out["keypoints"] = list(k.data)
            out["visibility"] = list(k.visibility.astype(np.uint8))
        m = getattr(res, "masks", None)
        if m is not None:
            out["masks"] = list(m.data)
        ret = [out[name] for name in self.outputs]
        return ret[0] if len(ret) == 1 else tuple(ret)

    def _fail(self, e):
        from ._callback import wrap_error

        err = wrap_error(self.op, e)
        if self.device == "gpu":  # as _callback.Chain: say it before DALI may take the process down
            import sys

            print(f"{type(err).__name__}: {err}", file=sys.stderr, flush=True)
        return err


class TargetsCallback(_Base):
    """``python_function`` callback of :func:`with_targets`: ``(images, *targets, *params)``."""

    def __init__(self, op, step, backend, device, fmt, names):
        self.op, self.step, self.backend, self.device, self.fmt, self.names = op, step, backend, device, fmt, names
        self.layout = step.layout
        self.calls = 0
        self._host = set()

    def __call__(self, images, *rest):
        from gpuaug import targets as T
        from gpuaug._registry import REGISTRY

        from ._callback import call_op, op_kwargs

        try:
            xp, x, n, got, plists = self._inputs(images, rest)
            kw = dict(op_kwargs(self.step, x, plists, n, xp, self.calls), layout=self.layout, backend=self.backend)
            spec = REGISTRY[self.op]
            y = call_op(spec.func, x, kw, spec.changes_shape, self._host)
            tfn = getattr(T, self.op)
            allowed = inspect.signature(tfn).parameters
            tkw = {}
            for k, v in kw.items():
                if k in self._host and hasattr(v, "get") and not isinstance(v, np.ndarray):
                    v = v.get()
                name = "boxes_" if (self.op == "resized_crop" and k == "boxes") else k
                if name in allowed:
                    tkw[name] = v
            res = tfn(x, **tkw, **self._targets(got))
            self.calls += 1
            return self._outputs(y, res)
        except Exception as e:  # noqa: BLE001 - re-raised, naming the op
            raise self._fail(e) from e


class CropCallback(_Base):
    """``python_function`` callback of :func:`random_iou_crop` / :func:`bbox_safe_crop`."""

    def __init__(self, op, kind, size, interpolation, args, seed, backend, device, fmt, names, layout):
        self.op, self.kind, self.size, self.interpolation, self.args = op, kind, size, interpolation, args
        self.seed, self.backend, self.device, self.fmt, self.names = seed, backend, device, fmt, names
        self.layout = layout
        self.calls = 0

    def __call__(self, images, *rest):
        import gpuaug
        from gpuaug import random as R
        from gpuaug import targets as T
        from gpuaug.targets.ops import image_sizes
        from gpuaug.targets.safe_crops import bbox_safe_windows, iou_crop_windows, mix64

        try:
            xp, x, n, got, _ = self._inputs(images, rest)
            sizes = image_sizes(x, self.layout)
            tg = self._targets(got)
            b = tg["boxes"]
            batch_seed = (self.seed + self.calls) % 2 ** 64
            keep = None
            if self.kind == "iou":
                opts, mn, mx, amin, amax, trials, rounds = self.args
                keys = mix64(np.uint64(batch_seed), np.arange(n, dtype=np.uint64))
                win, keep = iou_crop_windows(b, sizes, keys, sampler_options=opts, min_scale=mn, max_scale=mx,
                                             min_aspect_ratio=amin, max_aspect_ratio=amax, trials=trials,
                                             rounds=rounds)
            else:
                u = R.uniform(R.generator(batch_seed), 0.0, 1.0, 4 * n).reshape(n, 4)
                win = bbox_safe_windows(b, sizes, u, erosion_rate=self.args)
            y = gpuaug.resized_crop(x, win, self.size, self.interpolation, layout=self.layout, backend=self.backend)
            res = T.resized_crop(sizes, win, self.size, boxes=b, keep=keep, check=False)
            self.calls += 1
            return self._outputs(y, res)
        except Exception as e:  # noqa: BLE001 - re-raised, naming the op
            raise self._fail(e) from e


class FlipBoxesCallback:
    """``python_function`` callback of :func:`bb_flip`."""

    def __init__(self, consts, node_names, fmt, device):
        self.consts, self.node_names, self.fmt, self.device = consts, node_names, fmt, device

    def __call__(self, boxes, *nodes):
        from gpuaug import targets as T

        try:
            n = len(boxes)
            kw = dict(self.consts)
            for name, vals in zip(self.node_names, nodes):
                _n_check(name, vals, n)
                kw[name] = np.array([int(v.get() if hasattr(v, "get") else v) for v in vals]) != 0
            b = _boxes(boxes, None, (self.fmt, True, None))
            res = T.flip(np.ones((n, 2), np.int64), kw["horizontal"], kw["vertical"], boxes=b)
            return list(res.boxes.data)
        except Exception as e:  # noqa: BLE001
            from ._callback import wrap_error

            raise wrap_error("bb_flip", e) from e
