"""CuPy peers: ``cupyx.scipy.ndimage`` and CuPy array expressions (GPU only)."""
from __future__ import annotations

import numpy as np

from ._common import (ONE_PER_BATCH, Unsupported, _affine_size, _forward, _import, _k, _pad_sides, _sigma_k,
                      cycle, f0, hw, i0, peer, s0)


def _ndi(batch, what="cupyx.scipy.ndimage"):
    batch.need_gpu(what)
    return _import("cupyx.scipy.ndimage", "cupy")


def _cp_slices(batch, ys, xs):
    idx = [slice(None)] * 4
    idx[batch.hax], idx[batch.wax] = ys, xs
    return tuple(idx)


@peer("flip", "cupy")
def _cp_flip(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    h, v = bool(s0(kw.get("horizontal", True))), bool(s0(kw.get("vertical", False)))
    sl = _cp_slices(batch, slice(None, None, -1) if v else slice(None),
                    slice(None, None, -1) if (h or not v) else slice(None))
    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(x[sl]), variant="ascontiguousarray(x[..., ::-1])",
                 note=f"slicing + copy; {ONE_PER_BATCH}")


@peer("rot90", "cupy")
def _cp_rot90(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    k = i0(kw.get("k", 1))
    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(cupy.rot90(x, k, axes=(batch.hax, batch.wax))),
                 variant="ascontiguousarray(rot90)", note=ONE_PER_BATCH)


@peer("transpose", "cupy")
def _cp_transpose(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(x.swapaxes(batch.hax, batch.wax)),
                 variant="ascontiguousarray(swapaxes)")


@peer("crop", "cupy")
def _cp_crop(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    t, le = i0(kw.get("top", 0)), i0(kw.get("left", 0))
    sl = _cp_slices(batch, slice(t, t + int(kw["height"])), slice(le, le + int(kw["width"])))
    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(x[sl]), variant="ascontiguousarray(x[window])",
                 note=ONE_PER_BATCH)


@peer("center_crop", "cupy")
def _cp_center_crop(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    h, w = hw(kw.get("size"), batch.h, batch.w)
    if h > batch.h or w > batch.w:
        raise Unsupported("a window larger than the image needs padding; CuPy slicing has none")
    t, le = (batch.h - h) // 2, (batch.w - w) // 2
    sl = _cp_slices(batch, slice(t, t + h), slice(le, le + w))
    return cycle(batch.arrays, lambda x: cupy.ascontiguousarray(x[sl]), variant="ascontiguousarray(x[window])")


@peer("pad", "cupy")
def _cp_pad(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    t, b, le, r = (int(v) for v in _pad_sides(kw, batch.n)[0])
    mode = kw.get("mode", "constant")
    widths = [(0, 0)] * 4
    widths[batch.hax], widths[batch.wax] = (t, b), (le, r)
    extra = {"constant_values": f0(kw.get("value", 0))} if mode == "constant" else {}
    return cycle(batch.arrays, lambda x: cupy.pad(x, widths, mode=mode, **extra), variant=f"cupy.pad({mode})",
                 note=ONE_PER_BATCH)


@peer("resize", "cupy")
def _cp_resize(batch, kw):
    ndi = _ndi(batch)
    h, w = hw(kw.get("size"), batch.h, batch.w)
    z = [1.0] * 4
    z[batch.hax], z[batch.wax] = h / batch.h, w / batch.w
    order = 0 if kw.get("interpolation", "bilinear") == "nearest" else 1
    return cycle(batch.arrays, lambda x: ndi.zoom(x, z, order=order, grid_mode=True, mode="nearest"),
                 variant=f"ndimage.zoom(order={order})")


def _ndi_matrix(batch, inv2d):
    """A (5, 5) homogeneous matrix for ndimage.affine_transform of a 4-D batch: output
    index -> input index, with ``inv2d`` mapping destination (x, y) to source (x, y)."""
    mm = np.eye(5)
    y, x = batch.hax, batch.wax
    mm[y, y], mm[y, x], mm[y, 4] = inv2d[1, 1], inv2d[1, 0], inv2d[1, 2]
    mm[x, y], mm[x, x], mm[x, 4] = inv2d[0, 1], inv2d[0, 0], inv2d[0, 2]
    return mm


@peer("warp_affine", "cupy")
def _cp_warp_affine(batch, kw):
    ndi = _ndi(batch)
    import cupy

    inv = np.linalg.inv(_forward(kw, batch.n)[0])
    mm = cupy.asarray(_ndi_matrix(batch, inv))
    h, w = _affine_size(kw, batch)
    shape = [batch.n, 0, 0, 0]
    shape[batch.cax], shape[batch.hax], shape[batch.wax] = batch.c, h, w
    order = 0 if kw.get("interpolation", "bilinear") == "nearest" else 1
    cval = f0(kw.get("fill", 0))
    return cycle(batch.arrays, lambda x: ndi.affine_transform(x, mm, output_shape=tuple(shape), order=order,
                                                               mode="constant", cval=cval),
                 variant=f"ndimage.affine_transform(order={order})", note="one matrix for the batch (sample 0's)")


@peer("rotate", "cupy")
def _cp_rotate(batch, kw):
    ndi = _ndi(batch)
    a = f0(kw.get("angle", 0))
    order = 0 if kw.get("interpolation", "bilinear") == "nearest" else 1
    return cycle(batch.arrays, lambda x: ndi.rotate(x, a, axes=(batch.wax, batch.hax), reshape=False,
                                                     order=order, mode="constant"),
                 variant=f"ndimage.rotate(order={order})", note=ONE_PER_BATCH)


@peer("invert", "cupy")
def _cp_invert(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    f = cupy.invert if batch.dtype == np.uint8 else (lambda x: 1 - x)
    return cycle(batch.arrays, f, variant="cupy.invert" if batch.dtype == np.uint8 else "1 - x")


@peer("solarize", "cupy")
def _cp_solarize(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    t = f0(kw.get("threshold", 128))
    top = batch.maxval
    return cycle(batch.arrays, lambda x: cupy.where(x >= t, top - x, x).astype(x.dtype), variant="cupy.where",
                 note=ONE_PER_BATCH)


@peer("posterize", "cupy")
def _cp_posterize(batch, kw):
    batch.need_gpu("CuPy")
    if batch.dtype != np.uint8:
        raise Unsupported("bit masking needs uint8")
    bits = i0(kw.get("bits", 4))
    mask = np.uint8((0xFF << (8 - bits)) & 0xFF)
    return cycle(batch.arrays, lambda x: x & mask, variant="x & mask", note=ONE_PER_BATCH)


@peer("channel_shuffle", "cupy")
def _cp_channel_shuffle(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    perm = cupy.asarray([int(v) for v in s0(kw["permutation"], 1)])
    return cycle(batch.arrays, lambda x: cupy.take(x, perm, axis=batch.cax), variant="cupy.take",
                 note=ONE_PER_BATCH)


@peer("gaussian_blur", "cupy")
def _cp_gaussian_blur(batch, kw):
    ndi = _ndi(batch)
    s, k = _sigma_k(kw)
    sig = [0.0] * 4
    sig[batch.hax] = sig[batch.wax] = s
    return cycle(batch.arrays, lambda x: ndi.gaussian_filter(x, sig, mode="mirror", truncate=(k // 2) / s),
                 variant=f"ndimage.gaussian_filter({k}x{k})", note=ONE_PER_BATCH)


@peer("box_blur", "cupy")
def _cp_box_blur(batch, kw):
    ndi = _ndi(batch)
    k = _k(kw)
    size = [1] * 4
    size[batch.hax] = size[batch.wax] = k
    return cycle(batch.arrays, lambda x: ndi.uniform_filter(x, size, mode="mirror"),
                 variant=f"ndimage.uniform_filter({k}x{k})")


@peer("median_blur", "cupy")
def _cp_median_blur(batch, kw):
    ndi = _ndi(batch)
    k = _k(kw)
    size = [1] * 4
    size[batch.hax] = size[batch.wax] = k
    return cycle(batch.arrays, lambda x: ndi.median_filter(x, size, mode="mirror"),
                 variant=f"ndimage.median_filter({k}x{k})")


@peer("gaussian_noise", "cupy")
def _cp_gaussian_noise(batch, kw):
    batch.need_gpu("CuPy")
    import cupy

    m, s = f0(kw.get("mean", 0.0)), f0(kw.get("std", 0.1))
    top = batch.maxval

    def run(x):
        y = x + cupy.random.normal(m, s, x.shape, dtype=np.float32)
        return cupy.clip(cupy.rint(y) if x.dtype == np.uint8 else y, 0, top).astype(x.dtype)

    return cycle(batch.arrays, run, variant="x + cupy.random.normal", note=ONE_PER_BATCH)
