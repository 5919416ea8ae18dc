"""The geometric ops for targets: ``gpuaug.targets.<op>(images, <the op's arguments>,
boxes=..., keypoints=..., masks=...)`` maps the targets exactly as ``gpuaug.<op>(images,
<the same arguments>)`` moves the pixels.

Each function builds the op's per-sample 3x3 map (source -> destination pixel centres) from
the same arguments, with the same defaults and the same rounding the op applies (the float32
box of ``resized_crop``, ``center_crop``'s offsets, ``rot90``'s quarter turns, ``rotate``'s
default centre and exact multiples of 90 degrees), then:

- boxes and keypoints go through :func:`map_targets` (one upload and one launch for both on
  the GPU, vectorised NumPy on the CPU);
- masks run through the op itself, as single-channel uint8 images (int32 label maps as
  4-channel uint8 images: nearest sampling copies whole pixels, so every byte of a label
  moves together), with ``interpolation="nearest"`` and the masks' ``fill`` wherever the op
  reads outside the image (constant borders, padding). So a mask equals the op's nearest
  result on an image holding the labels, bit for bit, on every backend.

``images`` is the batch the op runs on (only its sizes are read; any batch an op takes) or
an ``(N, 2)`` int NumPy array of (height, width).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gpuaug._params import host_size, per_sample
from gpuaug._util import check_choice, cupy_module, is_cuda_array
from gpuaug.geometry import cos_sin, box_matrices
from gpuaug.targets._apply import map_targets
from gpuaug.targets._types import Boxes, Keypoints, Masks, as_boxes, as_keypoints, as_masks

__all__ = ["Targets", "flip", "crop", "center_crop", "pad", "resize", "resized_crop", "rot90", "transpose",
           "rotate", "warp_affine", "warp_perspective", "apply_matrices", "warp_masks"]


class Targets(NamedTuple):
    """What a targets op returns: the transformed boxes, keypoints and masks (None where none
    were given)."""

    boxes: Boxes | None
    keypoints: Keypoints | None
    masks: Masks | None


def image_sizes(images, layout="NHWC"):
    """(N, 2) int64 (h, w) of ``images`` (a batch, or an (N, 2) int NumPy array of sizes)."""
    if isinstance(images, np.ndarray) and images.ndim == 2 and images.shape[1] == 2 and images.dtype.kind in "iu":
        if np.any(images <= 0):
            raise ValueError("images: got sizes with a zero or negative entry; expected (N, 2) positive (h, w)")
        return images.astype(np.int64)
    from gpuaug._batch import as_batch

    b = as_batch(images, layout, name="images")
    h, w = b.sizes()
    return np.stack([h, w], axis=1)


def _translation(tx, ty):
    m = np.zeros((len(tx), 3, 3))
    m[:, 0, 0] = m[:, 1, 1] = m[:, 2, 2] = 1.0
    m[:, 0, 2], m[:, 1, 2] = tx, ty
    return m


def _uniform(sizes):
    return bool((sizes == sizes[0]).all()) if len(sizes) else True


# ------------------------------------------------------------------------------ masks
def _planes(masks: Masks):
    """(batch for the ops, per-sample repeat K, fill per channel, back(out) -> mask data)."""
    data = masks.data
    if isinstance(data, list):
        dt = data[0].dtype
        views = [_pix(a) for a in data]
        k = 1
    else:
        dt = data.dtype
        k = data.shape[1] if masks.onehot else 1
        flat = data.reshape((-1,) + data.shape[-2:])
        views = _pix(flat)
    c = 4 if dt == np.int32 else 1
    if c == 4:
        fill = np.frombuffer(np.array([masks.fill], "<i4").tobytes(), np.uint8).astype(np.float64)
    else:
        fill = np.array([float(masks.fill)])

    def back(out):
        if isinstance(out, list):
            return [_unpix(o, dt) for o in out]
        r = _unpix(out, dt)
        return r.reshape((-1, k) + r.shape[-2:]) if masks.onehot else r

    return views, k, fill, back


def _pix(a):
    """(..., H, W) uint8/bool/int32 -> (..., H, W, C) uint8 view, C = 1 or 4."""
    if a.dtype == np.int32:
        return a.view(np.uint8).reshape(a.shape + (4,))
    return (a.view(np.uint8) if a.dtype == np.bool_ else a)[..., None]


def _unpix(o, dt):
    if dt == np.int32:
        return o.view(np.int32)[..., 0] if o.flags.c_contiguous else o.copy().view(np.int32)[..., 0]
    r = o[..., 0]
    return r.view(np.bool_) if dt == np.bool_ else r


def _rep(v, k, nd):
    """Per-sample values repeated for each of a one-hot mask's k planes."""
    if k == 1 or v is None or isinstance(v, (bool, int, float, str)):
        return v
    xp = cupy_module() if is_cuda_array(v) else np
    a = xp.asarray(v)
    return xp.repeat(a, k, axis=0) if a.ndim > nd else v


def _fills(fill, p):
    """The masks' fill as a (P, C) array (one row per plane) for the warps' ``fill``."""
    return np.tile(fill, (p, 1))


def _check_masks(masks, sizes):
    if masks.n != len(sizes):
        raise ValueError(f"masks: holds {masks.n} samples; the images are {len(sizes)}; expected one mask per image")
    if (not isinstance(masks.data, list) and isinstance(sizes, np.ndarray) and sizes.ndim == 2 and sizes.strides[0] == 0
            and tuple(masks.data.shape[-2:]) == tuple(sizes[0])):
        return  # a dense batch of masks and images of one size (a broadcast, as the policies' sizes are)
    ms = masks.sizes
    bad = np.nonzero((ms != sizes).any(axis=1))[0]
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"masks: sample {i} is {ms[i, 0]}x{ms[i, 1]}, its image {sizes[i, 0]}x{sizes[i, 1]}; "
                         "expected each mask to have its image's height and width")


def _masks_run(masks, sizes, run, stream, backend):
    """``run(views, k, fill)`` -> the op's output on the mask planes; back to Masks."""
    if masks is None:
        return None
    masks = as_masks(masks)
    _check_masks(masks, sizes)
    views, k, fill, back = _planes(masks)
    return masks.like(back(run(views, k, fill, dict(stream=stream, backend=backend))))


def _finish(sizes, out_sizes, m, boxes, keypoints, masks, mask_run, stream, backend, check, keep=None):
    """Validate every target, then map boxes and keypoints and run the masks."""
    n = len(sizes)
    bx = kp = ms = None
    if boxes is not None:
        bx = as_boxes(boxes)
        if bx.n != n:
            raise ValueError(f"boxes: holds {bx.n} samples; the images are {n}; expected one entry per image")
    if keypoints is not None:
        kp = as_keypoints(keypoints)
        if kp.n != n:
            raise ValueError(f"keypoints: holds {kp.n} samples; the images are {n}; expected one entry per image")
    if masks is not None:
        ms = as_masks(masks)
        _check_masks(ms, sizes)
    if check:  # every target is checked before anything is computed
        from gpuaug.targets._types import check_boxes_values, check_keypoints_values

        if bx is not None and bx.check:
            check_boxes_values(bx)
        if kp is not None and kp.check:
            check_keypoints_values(kp)
    if keep is not None and bx is None:
        raise ValueError("keep: given without boxes; keep selects box rows")
    rb, rk = map_targets(bx, kp, m, sizes, out_sizes, check=False, stream=stream, keep=keep)
    rm = _masks_run(ms, sizes, mask_run, stream, backend) if ms is not None else None
    return Targets(rb, rk, rm)


# ------------------------------------------------------------------------------ the ops
def flip(images, horizontal=True, vertical=False, *, boxes=None, keypoints=None, masks=None, layout="NHWC",
         stream=None, backend=None, check=True):
    """Targets of :func:`gpuaug.flip`: ``x -> w - 1 - x`` (pixel centres) where ``horizontal``,
    ``y -> h - 1 - y`` where ``vertical``.

    Args:
        images: the batch (or (N, 2) sizes).
        horizontal, vertical: as :func:`gpuaug.flip` (device flags are read back to the host).
        boxes, keypoints, masks: :class:`Boxes` / :class:`Keypoints` / :class:`Masks` (or
            plain arrays: xyxy pixel boxes (N, M, 4), pixel keypoints (N, K, 2), label maps).
        layout: of ``images``. stream, backend: as for every op (masks run the op itself).
        check: refuse NaN / inverted boxes and NaN keypoints (device: one synchronisation).

    Returns:
        :class:`Targets` ``(boxes, keypoints, masks)``.

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> img = np.zeros((1, 4, 10, 3), np.uint8)
        >>> T.flip(img, boxes=np.array([[[1.0, 0.0, 3.0, 2.0]]])).boxes.data[0, 0]
        array([7., 0., 9., 2.])
    """
    sizes = image_sizes(images, layout)
    n = len(sizes)
    h = per_sample(horizontal, n, "horizontal", boolean=True) != 0
    v = per_sample(vertical, n, "vertical", boolean=True) != 0
    m = np.zeros((n, 3, 3))
    m[:, 0, 0] = np.where(h, -1.0, 1.0)
    m[:, 1, 1] = np.where(v, -1.0, 1.0)
    m[:, 0, 2] = np.where(h, sizes[:, 1] - 1.0, 0.0)
    m[:, 1, 2] = np.where(v, sizes[:, 0] - 1.0, 0.0)
    m[:, 2, 2] = 1.0

    def run(x, k, fill, kw):
        import gpuaug

        return gpuaug.flip(x, _rep(h, k, 0), _rep(v, k, 0), **kw)

    return _finish(sizes, sizes, m, boxes, keypoints, masks, run, stream, backend, check)


def crop(images, top, left, height, width, *, boxes=None, keypoints=None, masks=None, layout="NHWC",
         stream=None, backend=None, check=True, keep=None):
    """Targets of :func:`gpuaug.crop`: a shift by ``(-left, -top)``, clipped to ``height x width``.
    ``keep``: per box row, bools (padded (N, M), ragged a list): False drops the row (e.g.
    the ``within`` of :func:`gpuaug.targets.iou_crop_windows`).

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> T.crop(np.array([[8, 8]]), 2, 2, 4, 4, boxes=np.array([[[1.0, 1.0, 5.0, 3.0]]])).boxes.data[0, 0]
        array([0., 0., 3., 1.])
    """
    sizes = image_sizes(images, layout)
    n = len(sizes)
    hs = per_sample(height, n, "height", integer=True, low=1)
    ws = per_sample(width, n, "width", integer=True, low=1)
    t = per_sample(top, n, "top", integer=True, low=0)
    le = per_sample(left, n, "left", integer=True, low=0)
    for name, off, size, dim, axis in (("top", t, hs, "height", 0), ("left", le, ws, "width", 1)):
        bad = np.nonzero(off > sizes[:, axis] - size)[0]  # as gpuaug.crop: the window lies inside
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{name}, {dim}: sample {i} has {name}={int(off[i])} and {dim}={int(size[i])}, which "
                             f"ends outside its {sizes[i, 0]}x{sizes[i, 1]} image; expected 0 <= {name} <= "
                             f"{sizes[i, axis]} - {dim}")
    m = _translation(-le.astype(np.float64), -t.astype(np.float64))
    out = np.stack([hs, ws], axis=1)

    def run(x, k, fill, kw):
        import gpuaug

        return gpuaug.crop(x, _rep(t, k, 0), _rep(le, k, 0), _rep(hs, k, 0), _rep(ws, k, 0), **kw)

    return _finish(sizes, out, m, boxes, keypoints, masks, run, stream, backend, check, keep)


def center_crop(images, size, *, boxes=None, keypoints=None, masks=None, layout="NHWC", stream=None,
                backend=None, check=True):
    """Targets of :func:`gpuaug.center_crop` (torchvision's offsets). Where the crop is larger
    than the image, the image is padded with zeros and the masks with their ``fill``.

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> T.center_crop(np.array([[8, 8]]), 4, keypoints=np.array([[[3.0, 5.0]]])).keypoints.data[0, 0]
        array([1., 3.])
    """
    from gpuaug.ops.crop import center_offset

    sizes = image_sizes(images, layout)
    ch, cw = host_size(size, "size")
    top = np.array([center_offset(int(h), ch) for h in sizes[:, 0]], np.float64)
    left = np.array([center_offset(int(w), cw) for w in sizes[:, 1]], np.float64)
    m = _translation(-left, -top)
    out = np.broadcast_to(np.array([ch, cw], np.int64), sizes.shape)

    def run(x, k, fill, kw):
        import gpuaug

        if np.all(top >= 0) and np.all(left >= 0):
            return gpuaug.center_crop(x, (ch, cw), **kw)
        return _warp_by(x, np.repeat(m, k, axis=0), (ch, cw), "constant", _fills(fill, len(m) * k), kw)

    return _finish(sizes, out, m, boxes, keypoints, masks, run, stream, backend, check)


def pad(images, padding, mode="constant", value=0, *, boxes=None, keypoints=None, masks=None, layout="NHWC",
        stream=None, backend=None, check=True):
    """Targets of :func:`gpuaug.pad`: a shift by ``(left, top)``. Masks are padded with the
    same ``mode``; with ``"constant"`` they take their own ``fill``, not ``value``.

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> r = T.pad(np.array([[4, 4]]), (1, 0, 2, 0), masks=np.zeros((1, 4, 4), np.uint8))
        >>> r.masks.data[0, 0].tolist()
        [255, 255, 255, 255, 255, 255]
    """
    from gpuaug.ops.pad import MODES

    sizes = image_sizes(images, layout)
    n = len(sizes)
    check_choice("mode", mode, tuple(MODES))
    if is_cuda_array(padding):
        raise TypeError("padding: got a CUDA array; expected host ints (top, bottom, left, right)")
    if isinstance(padding, (int, float, np.integer, np.floating)):
        p = np.repeat(per_sample(padding, n, "padding", integer=True, low=0)[:, None], 4, axis=1)
    else:
        p = per_sample(padding, n, "padding", shape=(4,), integer=True, low=0)
    m = _translation(p[:, 2].astype(np.float64), p[:, 0].astype(np.float64))
    out = np.stack([sizes[:, 0] + p[:, 0] + p[:, 1], sizes[:, 1] + p[:, 2] + p[:, 3]], axis=1)

    def run(x, k, fill, kw):
        import gpuaug

        if mode != "constant" or len(fill) == 1:
            return gpuaug.pad(x, np.repeat(p, k, axis=0), mode, float(fill[0]) if len(fill) == 1 else 0, **kw)
        # int32 labels: a per-byte fill, which pad's one value cannot hold; a whole-pixel
        # shift through warp_affine (nearest) copies the same pixels and fills by channel.
        mk = np.repeat(m, k, axis=0)
        if isinstance(x, list):  # varshape (label maps: k = 1): one warp per image
            return [_warp_by([xi], mk[i:i + 1], tuple(out[i]), "constant", fill[None], kw)[0]
                    for i, xi in enumerate(x)]
        return _warp_by(x, mk, tuple(out[0]), "constant", _fills(fill, len(mk)), kw)

    return _finish(sizes, out, m, boxes, keypoints, masks, run, stream, backend, check)


def _warp_by(x, m, size, border, fill, kw):
    """Nearest warp of the mask planes ``x`` by source -> destination ``m`` (P, 3, 3)."""
    import gpuaug

    if np.allclose(m[:, 2, :2], 0) and np.all(m[:, 2, 2] == 1):
        return gpuaug.warp_affine(x, m[:, :2], size, "nearest", border, fill, **kw)
    return gpuaug.warp_perspective(x, m, size, "nearest", border, fill, **kw)


def resize(images, size, interpolation="bilinear", *, boxes=None, keypoints=None, masks=None, layout="NHWC",
           stream=None, backend=None, check=True):
    """Targets of :func:`gpuaug.resize`: a scale by ``out / in`` per axis (OpenCV's pixel
    centres: ``x' = (x + 0.5) * out / in - 0.5``; boxes, in continuous coordinates, just
    scale). ``interpolation`` is the images'; masks always resize with "nearest".

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> T.resize(np.array([[10, 20]]), (20, 10), boxes=np.array([[[2.0, 2.0, 4.0, 4.0]]])).boxes.data[0, 0]
        array([1., 4., 2., 8.])
    """
    from gpuaug.ops.resize import interpolation_mode

    sizes = image_sizes(images, layout)
    oh, ow = host_size(size, "size")
    interpolation_mode(interpolation)
    n = len(sizes)
    boxes_ = np.concatenate([np.zeros((n, 2)), sizes.astype(np.float64)], axis=1)
    m = box_matrices(boxes_, (oh, ow))
    out = np.broadcast_to(np.array([oh, ow], np.int64), sizes.shape)

    def run(x, k, fill, kw):
        import gpuaug

        return gpuaug.resize(x, (oh, ow), "nearest", **kw)

    return _finish(sizes, out, m, boxes, keypoints, masks, run, stream, backend, check)


def resized_crop(images, boxes_, size, interpolation="bilinear", *, boxes=None, keypoints=None, masks=None,
                 layout="NHWC", stream=None, backend=None, check=True, keep=None):
    """Targets of :func:`gpuaug.resized_crop` (its ``boxes`` argument is ``boxes_`` here, the
    crop windows (top, left, height, width); ``boxes=`` are the targets). The windows are
    rounded to float32 as the op rounds them. ``keep``: as :func:`crop`'s.

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> T.resized_crop(np.array([[8, 8]]), (2, 2, 4, 4), (8, 8),
        ...                boxes=np.array([[[2.0, 2.0, 4.0, 4.0]]])).boxes.data[0, 0]
        array([0., 0., 4., 4.])
    """
    sizes = image_sizes(images, layout)
    n = len(sizes)
    oh, ow = host_size(size, "size")
    bx = per_sample(boxes_, n, "boxes_", shape=(4,))
    bx = bx.astype(np.float32).astype(np.float64)  # what every backend of the op uses
    if np.any(bx[:, 2:] <= 0):
        raise ValueError(f"boxes_: got {bx.tolist()[:4]}; expected rows (top, left, height, width) with height > 0 "
                         "and width > 0")
    m = box_matrices(bx, (oh, ow))
    out = np.broadcast_to(np.array([oh, ow], np.int64), sizes.shape)

    def run(x, k, fill, kw):
        import gpuaug

        return gpuaug.resized_crop(x, _rep(bx, k, 1), (oh, ow), "nearest", **kw)

    return _finish(sizes, out, m, boxes, keypoints, masks, run, stream, backend, check, keep)


def rot90(images, k=1, *, boxes=None, keypoints=None, masks=None, layout="NHWC", stream=None, backend=None,
          check=True):
    """Targets of :func:`gpuaug.rot90` (``k`` quarter turns counter-clockwise, as numpy.rot90).

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> T.rot90(np.array([[2, 3]]), 1, keypoints=np.array([[[2.0, 0.0]]])).keypoints.data[0, 0]
        array([0., 0.])
    """
    sizes = image_sizes(images, layout)
    n = len(sizes)
    kk = per_sample(k, n, "k", integer=True)
    if np.any(kk < -3) or np.any(kk > 3):
        raise ValueError(f"k: got {kk.tolist()[:8]}; expected integers in -3..3")
    q = kk % 4
    h, w = sizes[:, 0].astype(np.float64), sizes[:, 1].astype(np.float64)
    m = np.zeros((n, 3, 3))
    m[:, 2, 2] = 1.0
    # q=1: x' = y, y' = w-1-x; q=2: x' = w-1-x, y' = h-1-y; q=3: x' = h-1-y, y' = x
    for qq, rows in ((0, ((1, 0, 0), (0, 1, 0))), (1, ((0, 1, 0), (-1, 0, None))),
                     (2, ((-1, 0, None), (0, -1, "h"))), (3, ((0, -1, "h"), (1, 0, 0)))):
        sel = q == qq
        for r, (a, b, c) in enumerate(rows):
            m[sel, r, 0], m[sel, r, 1] = a, b
            m[sel, r, 2] = (w[sel] - 1) if c is None else (h[sel] - 1) if c == "h" else c
    out = np.where((q % 2 == 1)[:, None], sizes[:, ::-1], sizes)

    def run(x, kr, fill, kw):
        import gpuaug

        return gpuaug.rot90(x, _rep(kk, kr, 0), **kw)

    return _finish(sizes, out, m, boxes, keypoints, masks, run, stream, backend, check)


def transpose(images, *, boxes=None, keypoints=None, masks=None, layout="NHWC", stream=None, backend=None,
              check=True):
    """Targets of :func:`gpuaug.transpose`: ``(x, y) -> (y, x)``.

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> T.transpose(np.array([[2, 5]]), boxes=np.array([[[1.0, 0.0, 4.0, 2.0]]])).boxes.data[0, 0]
        array([0., 1., 2., 4.])
    """
    sizes = image_sizes(images, layout)
    n = len(sizes)
    m = np.zeros((n, 3, 3))
    m[:, 0, 1] = m[:, 1, 0] = m[:, 2, 2] = 1.0

    def run(x, k, fill, kw):
        import gpuaug

        return gpuaug.transpose(x, **kw)

    return _finish(sizes, sizes[:, ::-1].copy(), m, boxes, keypoints, masks, run, stream, backend, check)


def _borders(border):
    from gpuaug.ops._warp import BORDERS

    check_choice("border", border, tuple(BORDERS))
    return border


def rotate(images, angle, center=None, scale=1.0, interpolation="bilinear", border="constant", fill=0, *,
           boxes=None, keypoints=None, masks=None, layout="NHWC", stream=None, backend=None, check=True):
    """Targets of :func:`gpuaug.rotate` (OpenCV's getRotationMatrix2D about ``center``, default
    each image's centre ``((w - 1) / 2, (h - 1) / 2)``; exact at multiples of 90 degrees).
    ``interpolation`` and ``fill`` are the images'; masks use "nearest", the same ``border``
    and their own fill.

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> r = T.rotate(np.array([[3, 3]]), 90, keypoints=np.array([[[2.0, 1.0]]]))
        >>> r.keypoints.data[0, 0]
        array([1., 0.])
    """
    sizes = image_sizes(images, layout)
    n = len(sizes)
    border = _borders(border)
    a = per_sample(angle, n, "angle")
    s = per_sample(scale, n, "scale")
    if not (s != 0).all():
        raise ValueError("scale: got a zero; expected non-zero numbers")
    if center is None:
        cx, cy = (sizes[:, 1] - 1) / 2.0, (sizes[:, 0] - 1) / 2.0
    else:
        ctr = per_sample(center, n, "center", shape=(2,))
        cx, cy = ctr[:, 0], ctr[:, 1]
    c, sn = cos_sin(a)
    al, be = s * c, s * sn
    m = np.zeros((n, 3, 3))
    m[:, 0, 0], m[:, 0, 1], m[:, 0, 2] = al, be, (1 - al) * cx - be * cy
    m[:, 1, 0], m[:, 1, 1], m[:, 1, 2] = -be, al, be * cx + (1 - al) * cy
    m[:, 2, 2] = 1.0

    def run(x, k, f, kw):
        import gpuaug

        return gpuaug.rotate(x, _rep(a, k, 0), None if center is None else _rep(np.stack([cx, cy], 1), k, 1),
                             _rep(s, k, 0), "nearest", border, _fills(f, n * k), **kw)

    return _finish(sizes, sizes, m, boxes, keypoints, masks, run, stream, backend, check)


def _matrices(matrix, n, shape, inverse_map):
    mat = per_sample(matrix, n, "matrix", shape=shape)
    m = np.zeros((n, 3, 3))
    m[:, :shape[0], :] = mat
    if shape[0] == 2:
        m[:, 2, 2] = 1.0
    if inverse_map:
        try:
            m = np.linalg.inv(m)
        except np.linalg.LinAlgError:
            raise ValueError("matrix: a sample's matrix is singular; expected invertible matrices") from None
    return m


def _warp_op(name, images, matrix, size, border, inverse_map, boxes, keypoints, masks, layout, stream, backend,
             check):
    sizes = image_sizes(images, layout)
    n = len(sizes)
    border = _borders(border)
    shape = (2, 3) if name == "warp_affine" else (3, 3)
    m = _matrices(matrix, n, shape, inverse_map)
    out = sizes if size is None else np.broadcast_to(np.array(host_size(size, "size"), np.int64), sizes.shape)
    mat = per_sample(matrix, n, "matrix", shape=shape)

    def run(x, k, f, kw):
        import gpuaug

        op = getattr(gpuaug, name)
        return op(x, _rep(mat, k, 2), size, "nearest", border, _fills(f, n * k), inverse_map, **kw)

    return _finish(sizes, out, m, boxes, keypoints, masks, run, stream, backend, check)


def warp_affine(images, matrix, size=None, interpolation="bilinear", border="constant", fill=0, inverse_map=False,
                *, boxes=None, keypoints=None, masks=None, layout="NHWC", stream=None, backend=None, check=True):
    """Targets of :func:`gpuaug.warp_affine` (``matrix``: source -> destination, or the inverse
    with ``inverse_map``; a (2, 3) or (N, 2, 3) host array).

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> T.warp_affine(np.array([[8, 8]]), [[2, 0, 0], [0, 2, 0]], keypoints=np.array([[[1.0, 1.0]]])).keypoints.data[0, 0]
        array([2., 2.])
    """
    return _warp_op("warp_affine", images, matrix, size, border, inverse_map, boxes, keypoints, masks, layout,
                    stream, backend, check)


def warp_perspective(images, matrix, size=None, interpolation="bilinear", border="constant", fill=0,
                     inverse_map=False, *, boxes=None, keypoints=None, masks=None, layout="NHWC", stream=None,
                     backend=None, check=True):
    """Targets of :func:`gpuaug.warp_perspective` (a (3, 3) or (N, 3, 3) host homography).
    A box becomes the bounding box of its 4 mapped corners; a box with a corner sent to or
    beyond infinity is dropped.

    Example::

        >>> import numpy as np
        >>> from gpuaug import targets as T
        >>> T.warp_perspective(np.array([[8, 8]]), np.diag([2.0, 2.0, 1.0]),
        ...                    boxes=np.array([[[1.0, 1.0, 2.0, 2.0]]])).boxes.data[0, 0]
        array([1.5, 1.5, 3.5, 3.5])
    """
    return _warp_op("warp_perspective", images, matrix, size, border, inverse_map, boxes, keypoints, masks, layout,
                    stream, backend, check)


# ------------------------------------------------------------------------------ generic
def apply_matrices(images, matrices, out_sizes=None, *, boxes=None, keypoints=None, masks=None, border="constant",
                   layout="NHWC", stream=None, backend=None, check=True):
    """Targets of a warp by any per-sample source -> destination matrices ((N, 3, 3) or
    (3, 3), :mod:`gpuaug.geometry`'s convention), output ``out_sizes`` ((h, w) or (N, 2);
    default the input sizes). Masks go through one nearest warp (warp_affine when every
    matrix is affine, else warp_perspective) with ``border`` and their fill.

    Example::

        >>> import numpy as np
        >>> from gpuaug import geometry as G, targets as T
        >>> r = T.apply_matrices(np.array([[4, 4]]), G.translation(1, 0), keypoints=np.array([[[0.0, 0.0]]]))
        >>> r.keypoints.data[0, 0]
        array([1., 0.])
    """
    sizes = image_sizes(images, layout)
    n = len(sizes)
    border = _borders(border)
    m = np.broadcast_to(np.asarray(matrices, np.float64), (n, 3, 3)).copy()
    if not np.all(np.isfinite(m)):
        raise ValueError("matrices: has NaN or inf entries; expected finite numbers")
    out = sizes if out_sizes is None else np.broadcast_to(np.asarray(out_sizes, np.int64), (n, 2)).copy()

    def run(x, k, f, kw):
        return warp_masks(x, np.repeat(m, k, axis=0), np.repeat(out, k, axis=0), border, _fills(f, n * k), kw)

    return _finish(sizes, out, m, boxes, keypoints, masks, run, stream, backend, check)


def warp_masks(x, m, out, border, fill, kw, inverse_map=False):
    """Nearest warp of mask planes ``x`` (a batch or list of HWC uint8 planes) by ``m``
    ((P, 3, 3), source -> destination, or destination -> source with ``inverse_map``) to the
    per-plane sizes ``out`` ((P, 2)); one launch when the output sizes agree."""
    import gpuaug

    affine = np.allclose(m[:, 2, :2], 0, rtol=0, atol=0) and np.all(m[:, 2, 2] == 1)
    op, mm = (gpuaug.warp_affine, m[:, :2]) if affine else (gpuaug.warp_perspective, m)
    if _uniform(out):
        return op(x, mm, tuple(int(v) for v in out[0]), "nearest", border, fill, inverse_map, **kw)
    items = x if isinstance(x, list) else [x[i] for i in range(len(m))]
    return [op(xi, mm[i], tuple(int(v) for v in out[i]), "nearest", border, fill[i:i + 1], inverse_map, **kw)
            for i, xi in enumerate(items)]
