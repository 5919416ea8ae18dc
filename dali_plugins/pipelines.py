"""Ready-made DALI pipelines: an image folder (one subfolder per class) to normalised
``(images, labels)`` batches, DALI doing the reading, decoding and resizing and gpuaug the
augmentation, in one fused operator per batch.

Training::

    fn.readers.file
      -> fn.decoders.image_random_crop (device="mixed", or "cpu" with device_id=None):
         decodes only a random resized crop's box (nvJPEG's fused region-of-interest decode;
         ``roi="gpuaug"``: fn.decoders.image_slice with the boxes drawn by
         :func:`random_resized_crop_boxes`, torchvision's rule exactly, at about half the
         images/s on the H100)
      -> fn.resize to ``size`` (DALI's resampling, uint8)
      -> gpuaug, ONE python_function per batch on the uniform (size x size) uint8 batch:
         the augment (default: random flip, rotation, brightness and contrast) fused with
         crop_mirror_normalize (float32, CHW); a horizontal flip that ends the augment is
         folded into crop_mirror_normalize's per-sample ``mirror``.

Validation: the same without random ops, the box a centre square of ``crop_pct`` of the
shorter side. ``augment="flip"`` gives random resized crop + flip + normalize: one DALI
decoder, one resize and one gpuaug kernel launch per batch.

Why (issue 12, H100, batch 256, 4,096 JPEGs of ~500x375): the first version decoded every
JPEG in full on the mixed decoder, then ran resized_crop (a varshape batch: per-sample
descriptors and per-sample boxes read back on the host), the augment and the
normalisation in a python_function (every Python operator costs ~2-10 ms per batch, and
its outputs are copied back per sample): 897 images/s, against 16,994 for DALI's built-ins
(decoders.image_random_crop -> resize -> crop_mirror_normalize). Decoding only the crop
(nvJPEG ROI decoding) and resizing with DALI leaves the gpuaug operator a uniform batch,
one launch per op, and lets DALI's executor overlap it with the next batch's decoding.
"""
from __future__ import annotations

import math

IMAGENET_MEAN = (123.675, 116.28, 103.53)  # uint8 units, as DALI's crop_mirror_normalize takes them
IMAGENET_STD = (58.395, 57.12, 57.375)


def _float(node):
    from nvidia.dali import fn, types

    return fn.cast(node, dtype=types.FLOAT)


def _uniform(lo, hi):
    """U(lo, hi) per sample; the constant where the range is one point (DALI refuses [a, a))."""
    from nvidia.dali import fn

    lo, hi = float(lo), float(hi)
    if not lo <= hi:
        raise ValueError(f"range: got ({lo}, {hi}); expected low <= high")
    return lo if lo == hi else fn.random.uniform(range=[lo, hi])


def random_resized_crop_boxes(shape, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), *, parts=False):
    """Per-sample boxes ``(top, left, height, width)`` (float32 DataNode, CPU) for a random
    resized crop, from a DataNode of image shapes ``(H, W, C)`` (``fn.peek_image_shape``).

    One draw per sample: area fraction ``s ~ U(scale)``, aspect ``r = exp(U(log ratio))``,
    ``w = sqrt(s H W r)``, ``h = sqrt(s H W / r)`` clamped to the image, position uniform
    inside it (torchvision tries 10 times before its fallback; clamping replaces that).
    ``parts=True`` returns the four DataNodes ``(top, left, h, w)`` instead of their stack.
    Call inside a pipeline definition.
    """
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    h_img, w_img = _float(shape[0]), _float(shape[1])
    area = h_img * w_img * _uniform(*scale)
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    r = math.exp(lo) if lo == hi else dmath.exp(_uniform(lo, hi))
    w = dmath.clamp(dmath.sqrt(area * r), 1.0, w_img)
    h = dmath.clamp(dmath.sqrt(area / r), 1.0, h_img)
    top = fn.random.uniform(range=[0.0, 1.0]) * (h_img - h)
    left = fn.random.uniform(range=[0.0, 1.0]) * (w_img - w)
    return (top, left, h, w) if parts else fn.stack(top, left, h, w)


def center_boxes(shape, crop_pct=0.875, *, parts=False):
    """Per-sample centred square boxes of side ``crop_pct * min(H, W)`` (validation);
    ``parts=True`` returns ``(top, left, h, w)`` as four DataNodes."""
    from nvidia.dali import fn
    from nvidia.dali import math as dmath

    h_img, w_img = _float(shape[0]), _float(shape[1])
    side = dmath.min(h_img, w_img) * float(crop_pct)
    top, left = (h_img - side) * 0.5, (w_img - side) * 0.5
    return (top, left, side, side) if parts else fn.stack(top, left, side, side)


def default_augment(flip=0.5, degrees=15.0, brightness=0.2, contrast=0.2, border="reflect"):
    """The default training policy as a :class:`gpuaug.dali.Compose`: per sample, a
    horizontal flip with probability ``flip``, a rotation by ``U(-degrees, degrees)``
    (``border`` rule outside the image), and brightness and contrast factors drawn from
    ``U(1 - b, 1 + b)`` and ``U(1 - c, 1 + c)`` (one colour_jitter pass). Zero disables a
    step. Call inside a pipeline definition (the random draws are DALI operators)."""
    from nvidia.dali import fn

    from ._compose import Compose

    items = []
    if flip:
        items.append(("flip", {"horizontal": fn.random.coin_flip(probability=float(flip))}))
    if degrees:
        items.append(("rotate", {"angle": fn.random.uniform(range=[-float(degrees), float(degrees)]),
                                 "border": border}))
    jitter = {}
    if brightness:
        jitter["brightness"] = fn.random.uniform(range=[1 - brightness, 1 + brightness])
    if contrast:
        jitter["contrast"] = fn.random.uniform(range=[1 - contrast, 1 + contrast])
    if jitter:
        items.append(("color_jitter", jitter))
    return Compose(items)


def _items(augment):
    """The augment argument -> compose items (fusable) or one callable."""
    from ._compose import Compose

    if augment is None:
        return []
    if isinstance(augment, str):
        if augment != "default":
            raise ValueError(f"augment: got {augment!r}; expected 'default', None, a list of gpuaug.dali.compose "
                             "items, a Compose, or a callable DataNode -> DataNode")
        augment = default_augment()
    if isinstance(augment, Compose):
        return list(augment.items)
    if isinstance(augment, (list, tuple)):
        return Compose(list(augment)).items
    if callable(augment):
        return [(None, augment, None)]
    raise TypeError(f"augment: got {type(augment).__name__}; expected 'default', None, a list, a Compose or a callable")


def int_boxes(boxes_fn, shape, *args):
    """Boxes as int32 ``(top, left, h, w)`` inside the image: floor of the size, then of the
    corner (image_slice has no out-of-bounds policy for decoders: an outside box is an error)."""
    from nvidia.dali import fn, types
    from nvidia.dali import math as dmath

    top, left, h, w = boxes_fn(shape, *args, parts=True)
    h_img, w_img = _float(shape[0]), _float(shape[1])
    h = dmath.clamp(dmath.floor(h), 1.0, h_img)
    w = dmath.clamp(dmath.floor(w), 1.0, w_img)
    top = dmath.clamp(dmath.floor(top), 0.0, h_img - h)
    left = dmath.clamp(dmath.floor(left), 0.0, w_img - w)
    anchor = fn.cast(fn.stack(top, left), dtype=types.INT32)
    extent = fn.cast(fn.stack(h, w), dtype=types.INT32)
    return anchor, extent


#: interpolation -> fn.resize arguments. "bilinear" is plain bilinear as gpuaug.resized_crop
#: does it (no antialiasing); "area" averages the source pixels when downscaling (DALI's
#: antialiased linear filter, a triangle of the scale's width).
_RESIZE = {"bilinear": ("INTERP_LINEAR", False), "area": ("INTERP_LINEAR", True), "nearest": ("INTERP_NN", False)}


def _augment_items(augment):
    """The augment argument -> parsed compose items; "flip" is a coin-flip horizontal flip."""
    if isinstance(augment, str) and augment == "flip":
        from nvidia.dali import fn

        return [("flip", {"horizontal": fn.random.coin_flip(probability=0.5)}, None)]
    return _items(augment)


def _fold_mirror(items, cmn):
    """Fold a final horizontal-only flip into crop_mirror_normalize's per-sample ``mirror``
    (one kernel instead of two). Returns the new items list."""
    if items and items[-1][0] == "flip":
        params = items[-1][1]
        if set(params) == {"horizontal"} and items[-1][2] in (None, "HWC", "NHWC"):
            cmn = dict(cmn, mirror=params["horizontal"])
            return items[:-1] + [("crop_mirror_normalize", cmn, None)]
    return items + [("crop_mirror_normalize", cmn, None)]


def _pipeline(file_root, augment, size, batch_size, device_id, shard_id, num_shards, mean, std, *, training,
              num_threads, seed, random_shuffle, scale, ratio, crop_pct, dtype, output_layout, backend,
              interpolation, reader_name, reader_kwargs, pipeline_kwargs, roi="dali", decoder_kwargs=None):
    from nvidia.dali import fn, pipeline_def, types

    from ._compose import Compose

    size = (int(size), int(size)) if isinstance(size, (int, float)) else tuple(int(s) for s in size)
    if interpolation not in _RESIZE:
        raise ValueError(f"interpolation: got {interpolation!r}; expected one of {', '.join(map(repr, _RESIZE))}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed: got {seed!r}; expected None (a random seed) or an int")
    if seed is not None and seed < 0:
        seed = None  # -1 meant "random" before DALI 2.4 deprecated it
    interp, antialias = _RESIZE[interpolation]
    if roi not in ("dali", "gpuaug"):
        raise ValueError(f"roi: got {roi!r}; expected 'dali' (decoders.image_random_crop draws the boxes) "
                         "or 'gpuaug' (gpuaug.dali.random_resized_crop_boxes + decoders.image_slice)")
    device = "cpu" if device_id is None else "mixed"

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id, seed=seed,
                  **pipeline_kwargs)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=file_root, shard_id=shard_id, num_shards=num_shards,
                                        random_shuffle=training if random_shuffle is None else random_shuffle,
                                        name=reader_name, **reader_kwargs)
        if training and roi == "dali":
            # nvJPEG's fused random-crop decode: measured 20,803 img/s on the H100 where
            # image_slice with the same kind of boxes gave 11,026 (bench/results, 2026-11-24).
            images = fn.decoders.image_random_crop(jpegs, device=device, output_type=types.RGB,
                                                   random_area=[float(v) for v in scale],
                                                   random_aspect_ratio=[float(v) for v in ratio], **decoder_kwargs)
        else:
            shape = fn.peek_image_shape(jpegs)
            if training:
                anchor, extent = int_boxes(random_resized_crop_boxes, shape, scale, ratio)
            else:
                anchor, extent = int_boxes(center_boxes, shape, crop_pct)
            images = fn.decoders.image_slice(jpegs, anchor, extent, axis_names="HW", normalized_anchor=False,
                                             normalized_shape=False, device=device, output_type=types.RGB,
                                             **decoder_kwargs)
        images = fn.resize(images, resize_y=float(size[0]), resize_x=float(size[1]),
                           interp_type=getattr(types, interp), antialias=antialias)
        items = _augment_items(augment) if training else []
        cmn = {"mean": list(mean), "std": list(std), "dtype": dtype, "output_layout": output_layout}
        images = Compose.from_parsed(_fold_mirror(items, cmn), backend=backend)(images)
        if device_id is not None:
            labels = labels.gpu()
        return images, labels

    return pipe()


def image_folder_pipeline(file_root, augment="default", size=224, batch_size=64, device_id=0, shard_id=0,
                          num_shards=1, mean=IMAGENET_MEAN, std=IMAGENET_STD, *, training=True, num_threads=4,
                          seed=None, random_shuffle=None, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), crop_pct=0.875,
                          dtype="float32", output_layout="CHW", backend=None, interpolation="bilinear",
                          reader_name="Reader", reader_kwargs=None, roi="dali", decoder_kwargs=None,
                          **pipeline_kwargs):
    """A DALI training pipeline over a class-per-folder image tree -> ``(images, labels)``.

    Per sample: decode only the random resized crop's box (DALI's region-of-interest
    decoding: ``fn.decoders.image_random_crop`` by default, ``fn.decoders.image_slice`` with
    gpuaug's boxes for ``roi="gpuaug"``; nvJPEG on the GPU with ``device_id`` set), resize
    it to ``size`` with ``fn.resize``, then one gpuaug operator per batch runs ``augment``
    and the normalisation on the uniform uint8 batch (see the module docstring).

    Args:
        file_root: a folder with one subfolder per class (labels 0.. in sorted order), as
            ``fn.readers.file`` / torchvision's ImageFolder read it.
        augment: "default" (:func:`default_augment`), "flip" (a horizontal flip with
            probability 0.5, folded into the normalisation: RandomResizedCrop + flip +
            normalize), None, a list of :func:`gpuaug.dali.compose` items, a Compose, or
            any callable DataNode -> DataNode (called on the (size x size) uint8 HWC crops).
        size: output height and width (int or (h, w)).
        batch_size, device_id, num_threads: the pipeline's; ``device_id=None`` makes a CPU
            pipeline (CPU decode, Numba njit twins; no GPU needed).
        seed: the pipeline's seed (its random boxes and augment draws); None (default)
            draws one. (A negative seed is taken as None: DALI 2.4 deprecates -1.)
        shard_id, num_shards: this process's shard (one per GPU / rank).
        mean, std: per channel, in uint8 units (ImageNet's by default).
        training: False gives :func:`validation_pipeline`.
        scale, ratio: the random resized crop's area fraction and aspect ranges.
        crop_pct: validation centre crop, as a fraction of the shorter side.
        dtype, output_layout: of the images, "float32"/"float16" and "CHW"/"HWC".
        backend: gpuaug backend (None: CUDA C on GPU, njit on CPU; "numba").
        interpolation: of the crop's resize (``fn.resize``): "bilinear" (default, no
            antialiasing), "area" (antialiased: averages the source pixels when
            downscaling) or "nearest".
        reader_name: name of the reader (the PyTorch iterator sizes epochs by it).
        reader_kwargs: more ``fn.readers.file`` arguments; other keywords go to the pipeline.
        decoder_kwargs: more arguments of the decoder (``fn.decoders.image_random_crop`` /
            ``image_slice``), e.g. ``{"hw_decoder_load": 0.9}``: the share of images nvJPEG's
            hardware decoder takes on GPUs that have one (A100, H100, H200), the rest going
            to the CUDA decoder and CPU threads.
        roi: who draws the training crop boxes. "dali" (default): DALI's fused random-crop
            decoder (``random_area=scale``, ``random_aspect_ratio=ratio``, log-uniform aspect
            as torchvision; after 10 failed draws it falls back to the whole image where
            torchvision takes a centre crop), the fastest decode on nvJPEG. "gpuaug":
            :func:`random_resized_crop_boxes` (torchvision's rule exactly) decoded with
            ``fn.decoders.image_slice``, about half the images/s on the H100.

    Returns:
        An unbuilt ``nvidia.dali.Pipeline`` with outputs ``images`` ((3, h, w) float32 per
        sample) and ``labels`` ((1,) int32), on the GPU unless ``device_id`` is None.

    Example::

        pipe = gpuaug.dali.image_folder_pipeline("data/train", size=224, batch_size=128, device_id=0)
        pipe.build()
        images, labels = pipe.run()
    """
    return _pipeline(file_root, augment, size, batch_size, device_id, shard_id, num_shards, mean, std,
                     training=training, num_threads=num_threads, seed=seed, random_shuffle=random_shuffle,
                     scale=scale, ratio=ratio, crop_pct=crop_pct, dtype=dtype, output_layout=output_layout,
                     backend=backend, interpolation=interpolation, reader_name=reader_name,
                     reader_kwargs=dict(reader_kwargs or {}),
                     pipeline_kwargs=pipeline_kwargs, roi=roi, decoder_kwargs=dict(decoder_kwargs or {}))


def validation_pipeline(file_root, size=224, batch_size=64, device_id=0, shard_id=0, num_shards=1,
                        mean=IMAGENET_MEAN, std=IMAGENET_STD, **kwargs):
    """:func:`image_folder_pipeline` without random ops: files in order, a centre crop of
    ``crop_pct`` (default 0.875) of the shorter side resized to ``size``, normalised."""
    kwargs.setdefault("reader_kwargs", {})
    return image_folder_pipeline(file_root, None, size, batch_size, device_id, shard_id, num_shards, mean, std,
                                 training=False, **kwargs)


class TorchLoader:
    """A DALI pipeline as a PyTorch data loader: iterating gives ``(images, labels)`` torch
    tensors (labels as int64 of shape (N,)), one epoch per ``for`` loop; ``len()`` is the
    number of batches per epoch for this shard."""

    def __init__(self, pipe, *, reader_name="Reader", drop_last=True):
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        self.pipe = pipe
        policy = LastBatchPolicy.DROP if drop_last else LastBatchPolicy.PARTIAL
        self._it = DALIGenericIterator(pipe, ["images", "labels"], reader_name=reader_name,
                                       last_batch_policy=policy, auto_reset=True)

    def __iter__(self):
        for batch in self._it:
            b = batch[0]
            yield b["images"], b["labels"].reshape(-1).long()

    def __len__(self):
        return len(self._it)


def torch_loader(file_root, size=224, batch_size=64, device_id=0, shard_id=0, num_shards=1, *, training=True,
                 augment="default", drop_last=None, **kwargs):
    """:func:`image_folder_pipeline` (or :func:`validation_pipeline` with ``training=False``)
    wrapped in DALI's PyTorch iterator: a drop-in for a ``torch.utils.data.DataLoader``.

    Example::

        loader = gpuaug.dali.torch_loader("data/train", size=224, batch_size=128, device_id=0)
        for epoch in range(epochs):
            for images, labels in loader:      # CUDA tensors: float32 (N, 3, 224, 224), int64 (N,)
                loss = criterion(model(images), labels)
    """
    if training:
        pipe = image_folder_pipeline(file_root, augment, size, batch_size, device_id, shard_id, num_shards,
                                     **kwargs)
    else:
        pipe = validation_pipeline(file_root, size, batch_size, device_id, shard_id, num_shards, **kwargs)
    pipe.build()
    return TorchLoader(pipe, reader_name=kwargs.get("reader_name", "Reader"),
                       drop_last=training if drop_last is None else drop_last)
