"""DALI peers: built-in operators in GPU or CPU pipelines, timed as their marginal cost
(see :func:`dali_peer`)."""
from __future__ import annotations

import itertools
import math

import numpy as np

from ._common import (CPU_THREADS, Marginal, ONE_PER_BATCH, Unsupported, _affine_size, _boxes, _cmn_window,
                      _erase_boxes, _forward, _import, _k, _mean_std, _pad_sides, _sigma_k, f0, hw, i0, peer,
                      per_sample, s0)


def _const(value):
    def source():
        return value

    return source


def _dali_arg(x):
    """One sample's argument value as DALI wants it: an array (0-d for a number), 32-bit."""
    a = np.array(x)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    elif a.dtype in (np.int64, np.bool_):
        a = a.astype(np.int32)
    return a


def dali_peer(batch, body, args=None, *, variant="", note="", gpu_only=False):
    """Two DALI pipelines fed the batch's buffers by ``external_source`` (GPU memory on a
    GPU): one returns ``body(fn, types, data, **arg_nodes)``, the other ``data``.

    ``args``: name -> per-sample host values (a list of N arrays), given to the op as
    argument inputs (one value per sample, like gpuaug's). Synchronous executor, queue
    depth 1; each run is followed by a device synchronisation so the wall time covers it.
    """
    _import("nvidia.dali", "dali")
    from nvidia.dali import fn, pipeline_def, types

    if batch.layout != "NHWC":
        note = "; ".join(x for x in ("HWC input (converted outside the timing)", note) if x)
    if gpu_only:
        batch.need_gpu(variant or "this DALI operator")
    device = "gpu" if batch.gpu else "cpu"
    arrays = batch.nhwc()
    args = {k: [_dali_arg(x) for x in v] for k, v in (args or {}).items()}
    if batch.gpu:
        import cupy

        dev_id = int(cupy.cuda.runtime.getDevice())

        def sync():
            cupy.cuda.runtime.deviceSynchronize()
    else:
        dev_id = None

        def sync():
            pass

    def build(with_op):
        cnt = itertools.count()

        @pipeline_def(batch_size=batch.n, num_threads=4 if batch.gpu else CPU_THREADS, device_id=dev_id,
                      prefetch_queue_depth=1,
                      exec_async=False, exec_pipelined=False, seed=1234)
        def pipe():
            data = fn.external_source(source=lambda: arrays[next(cnt) % len(arrays)], batch=True,
                                      layout="HWC", device=device)
            if not with_op:
                return data
            # A source callable must take no arguments (DALI passes one to those that do).
            nodes = {k: fn.external_source(source=_const(v), batch=True) for k, v in args.items()}
            return body(fn, types, data, **nodes)

        p = pipe()
        p.build()
        return p

    p_with, p_without = build(True), build(False)

    def with_op():
        out = p_with.run()
        sync()
        return out

    def without_op():
        out = p_without.run()
        sync()
        return out

    return Marginal(with_op, without_op, variant=variant,
                    note="; ".join(x for x in ("marginal cost in a pipeline", note) if x))


@peer("flip", "dali")
def _dali_flip(batch, kw):
    n = batch.n
    args = {"h": list(per_sample(kw.get("horizontal", True), n, dtype=np.int32)),
            "v": list(per_sample(kw.get("vertical", False), n, dtype=np.int32))}
    return dali_peer(batch, lambda fn, types, d, h, v: fn.flip(d, horizontal=h, vertical=v), args,
                     variant="fn.flip", note="per sample")


@peer("rot90", "dali")
def _dali_rot90(batch, kw):
    ang = [np.float32(90.0 * k) for k in per_sample(kw.get("k", 1), batch.n, dtype=np.int64)]
    return dali_peer(batch, lambda fn, types, d, a: fn.rotate(d, angle=a, keep_size=False,
                                                              interp_type=types.INTERP_NN),
                     {"a": ang}, variant="fn.rotate(90k, NN)", note="per sample")


@peer("transpose", "dali")
def _dali_transpose(batch, kw):
    return dali_peer(batch, lambda fn, types, d: fn.transpose(d, perm=[1, 0, 2]), variant="fn.transpose")


@peer("crop", "dali")
def _dali_crop(batch, kw):
    n = batch.n
    h, w = int(kw["height"]), int(kw["width"])
    t = per_sample(kw.get("top", 0), n, dtype=np.float64)
    le = per_sample(kw.get("left", 0), n, dtype=np.float64)
    py = [np.float32(v / (batch.h - h)) if batch.h > h else np.float32(0.5) for v in t]
    px = [np.float32(v / (batch.w - w)) if batch.w > w else np.float32(0.5) for v in le]
    return dali_peer(batch, lambda fn, types, d, py, px: fn.crop(d, crop_h=h, crop_w=w, crop_pos_x=px,
                                                                 crop_pos_y=py),
                     {"py": py, "px": px}, variant="fn.crop", note="per-sample windows")


@peer("center_crop", "dali")
def _dali_center_crop(batch, kw):
    h, w = hw(kw.get("size"), batch.h, batch.w)
    return dali_peer(batch, lambda fn, types, d: fn.crop(d, crop=(h, w), out_of_bounds_policy="pad"),
                     variant="fn.crop(crop=(h, w))")


@peer("pad", "dali")
def _dali_pad(batch, kw):
    mode = kw.get("mode", "constant")
    if mode != "constant":
        raise Unsupported(f"DALI pads with a constant only (mode {mode!r} asked)")
    sides = _pad_sides(kw, batch.n)
    ch = batch.h + int(sides[0, 0] + sides[0, 1])
    cw = batch.w + int(sides[0, 2] + sides[0, 3])
    # crop_pos p puts the window's corner at p * (in - crop) = -p * (sum of sides).
    py = [np.float32(s[0] / (s[0] + s[1])) if s[0] + s[1] else np.float32(0.5) for s in sides]
    px = [np.float32(s[2] / (s[2] + s[3])) if s[2] + s[3] else np.float32(0.5) for s in sides]
    fill = f0(kw.get("value", 0))
    return dali_peer(batch, lambda fn, types, d, py, px: fn.crop(
        d, crop_h=ch, crop_w=cw, crop_pos_x=px, crop_pos_y=py, out_of_bounds_policy="pad", fill_values=fill),
        {"py": py, "px": px}, variant="fn.crop(out_of_bounds_policy='pad')", note=f"fill: {ONE_PER_BATCH}")


@peer("resize", "dali")
def _dali_resize(batch, kw):
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")

    def body(fn, types, d):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.resize(d, resize_x=w, resize_y=h, interp_type=it, antialias=interp == "area")

    return dali_peer(batch, body, variant=f"fn.resize({interp})")


@peer("resized_crop", "dali")
def _dali_resized_crop(batch, kw):
    b = _boxes(kw, batch.n)
    h, w = hw(kw.get("size"), batch.h, batch.w)
    interp = kw.get("interpolation", "bilinear")
    start = [np.array([r[0], r[1]], np.float32) for r in b]
    end = [np.array([r[0] + r[2], r[1] + r[3]], np.float32) for r in b]

    def body(fn, types, d, rs, re):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.resize(d, roi_start=rs, roi_end=re, roi_relative=False, resize_x=w, resize_y=h,
                         interp_type=it, antialias=interp == "area")

    return dali_peer(batch, body, {"rs": start, "re": end}, variant="fn.resize(roi_start, roi_end)",
                     note="per-sample boxes")


@peer("warp_affine", "dali")
def _dali_warp_affine(batch, kw):
    m = _forward(kw, batch.n)
    mats = [np.ascontiguousarray(x[:2, :], np.float32) for x in m]
    h, w = _affine_size(kw, batch)
    interp = kw.get("interpolation", "bilinear")
    fill = f0(kw.get("fill", 0))

    def body(fn, types, d, mt):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.warp_affine(d, matrix=mt, size=(h, w), inverse_map=False, fill_value=fill, interp_type=it)

    return dali_peer(batch, body, {"mt": mats}, variant="fn.warp_affine", note="per-sample matrices")


@peer("warp_perspective", "dali")
def _dali_warp_perspective(batch, kw):
    m = _forward(kw, batch.n, dims=3)
    mats = [np.ascontiguousarray(x, np.float32) for x in m]
    h, w = _affine_size(kw, batch)
    interp = kw.get("interpolation", "bilinear")

    def body(fn, types, d, mt):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.experimental.warp_perspective(d, matrix=mt, size=(h, w), inverse_map=False, interp_type=it)

    return dali_peer(batch, body, {"mt": mats}, variant="fn.experimental.warp_perspective",
                     note="per-sample matrices")


@peer("rotate", "dali")
def _dali_rotate(batch, kw):
    ang = list(per_sample(kw.get("angle", 0), batch.n))
    interp = kw.get("interpolation", "bilinear")

    def body(fn, types, d, a):
        it = types.INTERP_NN if interp == "nearest" else types.INTERP_LINEAR
        return fn.rotate(d, angle=a, keep_size=True, interp_type=it, fill_value=0)

    return dali_peer(batch, body, {"a": ang}, variant="fn.rotate", note="per-sample angles")


def _dali_per_sample(name, op, param, arg, default=1.0, transform=None, gpu_only=False):
    @peer(name, "dali")
    def make(batch, kw):
        vals = per_sample(kw.get(param, default), batch.n, dtype=np.float64)
        vals = transform(vals) if transform else vals
        args = {"v": [np.float32(v) for v in vals]}

        def body(fn, types, d, v):
            f = fn
            for part in op.split("."):
                f = getattr(f, part)
            return f(d, **{arg: v})

        return dali_peer(batch, body, args, variant=f"fn.{op}", note="per-sample values", gpu_only=gpu_only)

    return make
_dali_per_sample("brightness", "brightness", "factor", "brightness")
_dali_per_sample("contrast", "contrast", "factor", "contrast")
_dali_per_sample("saturation", "saturation", "factor", "saturation")
_dali_per_sample("hue", "hue", "shift", "hue", default=0.0, transform=lambda v: v * 360.0)


@peer("color_jitter", "dali")
def _dali_color_jitter(batch, kw):
    n = batch.n
    args = {k: [np.float32(v) for v in per_sample(kw.get(k, d), n) * m]
            for k, d, m in (("brightness", 1.0, 1), ("contrast", 1.0, 1), ("saturation", 1.0, 1), ("hue", 0.0, 360))}
    return dali_peer(batch, lambda fn, types, d, brightness, contrast, saturation, hue: fn.color_twist(
        d, brightness=brightness, contrast=contrast, saturation=saturation, hue=hue), args,
        variant="fn.color_twist", note="per-sample values")


@peer("gamma", "dali")
def _dali_gamma(batch, kw):
    if batch.dtype != np.uint8:
        raise Unsupported("DALI has no gamma operator; the lookup-table stand-in needs uint8")
    g, gain = f0(kw.get("gamma", 1.0)), f0(kw.get("gain", 1.0))
    vals = [float(min(255.0, max(0.0, math.floor(255.0 * gain * (i / 255.0) ** g + 0.5)))) for i in range(256)]
    return dali_peer(batch, lambda fn, types, d: fn.lookup_table(d, keys=list(range(256)), values=vals,
                                                                 dtype=types.UINT8),
                     variant="fn.lookup_table", note=f"a 256-entry table; {ONE_PER_BATCH}")


@peer("grayscale", "dali")
def _dali_grayscale(batch, kw):
    return dali_peer(batch, lambda fn, types, d: fn.color_space_conversion(d, image_type=types.RGB,
                                                                           output_type=types.GRAY),
                     variant="fn.color_space_conversion(GRAY)")


@peer("invert", "dali")
def _dali_invert(batch, kw):
    if batch.dtype != np.uint8:
        raise Unsupported("the DALI expression is written for uint8")
    return dali_peer(batch, lambda fn, types, d: types.Constant(255, dtype=types.UINT8) - d,
                     variant="255 - data (arithmetic op)")


@peer("equalize", "dali")
def _dali_equalize(batch, kw):
    def body(fn, types, d):
        eq = getattr(fn, "equalize", None) or fn.experimental.equalize  # moved out of experimental in 2.x
        return eq(d)

    return dali_peer(batch, body, variant="fn.equalize")


@peer("normalize", "dali")
def _dali_normalize(batch, kw):
    mean, std = _mean_std(kw, batch.c)
    lay = kw.get("output_layout") or "NHWC"
    out_layout = "CHW" if lay == "NCHW" else "HWC"
    return dali_peer(batch, lambda fn, types, d: fn.crop_mirror_normalize(
        d, mean=mean, std=std, dtype=types.FLOAT, output_layout=out_layout),
        variant="fn.crop_mirror_normalize (no crop)")


@peer("crop_mirror_normalize", "dali")
def _dali_cmn(batch, kw):
    h, w, py, px = _cmn_window(kw, batch)
    mirror = per_sample(kw.get("mirror", False), batch.n, dtype=np.int32)
    mean, std = _mean_std(kw, batch.c)
    lay = kw.get("output_layout", "NCHW") or "NCHW"
    args = {"py": [np.float32(v) for v in py], "px": [np.float32(v) for v in px], "mi": list(mirror)}
    return dali_peer(batch, lambda fn, types, d, py, px, mi: fn.crop_mirror_normalize(
        d, crop=(h, w), crop_pos_x=px, crop_pos_y=py, mirror=mi, mean=mean, std=std, dtype=types.FLOAT,
        output_layout="CHW" if lay == "NCHW" else "HWC"), args,
        variant="fn.crop_mirror_normalize", note="per-sample windows and mirror")


@peer("gaussian_blur", "dali")
def _dali_gaussian_blur(batch, kw):
    s, k = _sigma_k(kw)
    sig = [np.float32(v) for v in per_sample(kw.get("sigma", 1.0), batch.n)]
    return dali_peer(batch, lambda fn, types, d, sg: fn.gaussian_blur(d, sigma=sg, window_size=k), {"sg": sig},
                     variant=f"fn.gaussian_blur({k}x{k})", note="per-sample sigma")


@peer("box_blur", "dali")
def _dali_box_blur(batch, kw):
    k = _k(kw)
    kern = np.full((k, k), 1.0 / (k * k), np.float32)
    return dali_peer(batch, lambda fn, types, d: fn.filter(d, kern, border="reflect_101"),
                     variant=f"fn.filter(box {k}x{k})")


@peer("median_blur", "dali")
def _dali_median_blur(batch, kw):
    k = _k(kw)
    return dali_peer(batch, lambda fn, types, d: fn.experimental.median_blur(d, window_size=k),
                     variant=f"fn.experimental.median_blur({k}x{k})", gpu_only=True)


@peer("gaussian_noise", "dali")
def _dali_gaussian_noise(batch, kw):
    args = {"m": [np.float32(v) for v in per_sample(kw.get("mean", 0.0), batch.n)],
            "s": [np.float32(v) for v in per_sample(kw.get("std", 0.1), batch.n)]}
    return dali_peer(batch, lambda fn, types, d, m, s: fn.noise.gaussian(d, mean=m, stddev=s), args,
                     variant="fn.noise.gaussian", note="per-sample values")


@peer("salt_and_pepper", "dali")
def _dali_salt_and_pepper(batch, kw):
    args = {"p": [np.float32(v) for v in per_sample(kw.get("prob", 0.05), batch.n)],
            "sv": [np.float32(v) for v in per_sample(kw.get("salt_vs_pepper", 0.5), batch.n)]}
    return dali_peer(batch, lambda fn, types, d, p, sv: fn.noise.salt_and_pepper(d, prob=p, salt_vs_pepper=sv),
                     args, variant="fn.noise.salt_and_pepper", note="per-sample values")


@peer("erase", "dali")
def _dali_erase(batch, kw):
    b = _erase_boxes(kw, batch.n)
    anchor = [np.ascontiguousarray(s[:, :2].reshape(-1), np.float32) for s in b]
    shape = [np.ascontiguousarray(s[:, 2:].reshape(-1), np.float32) for s in b]
    fill = f0(kw.get("value", 0))
    return dali_peer(batch, lambda fn, types, d, a, s: fn.erase(d, anchor=a, shape=s, axis_names="HW",
                                                                fill_value=fill),
                     {"a": anchor, "s": shape}, variant="fn.erase", note="per-sample boxes")


@peer("grid_mask", "dali")
def _dali_grid_mask(batch, kw):
    tile = i0(kw.get("tile", 32))
    ratio, angle = f0(kw.get("ratio", 0.5)), f0(kw.get("angle", 0.0))
    shift = np.asarray(s0(kw.get("shift", (0, 0)), 1) if np.ndim(kw.get("shift", (0, 0))) > 1
                       else kw.get("shift", (0, 0)), np.float64).reshape(-1)
    sx, sy = float(shift[0]), float(shift[-1])
    return dali_peer(batch, lambda fn, types, d: fn.grid_mask(d, tile=tile, ratio=ratio, angle=angle,
                                                              shift_x=sx, shift_y=sy),
                     variant="fn.grid_mask", note=ONE_PER_BATCH)
