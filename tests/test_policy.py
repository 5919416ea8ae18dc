"""gpuaug.Compose: planning, sampling, replay, and the fused stage against a float64 reference.

The reference (below) knows nothing of the library's code: it takes the parameters a call drew
(``policy.last_params``), builds each sample's destination -> source map by composing the
transforms' *inverse* maps (torchvision's inverse affine formula, inverse crops and resizes, a
homography solved from the moved corners back to the source corners), samples the source once
(tests/ref_warp.remap), runs the colour transforms with tests/ref_colour / ref_intensity (uint8:
rounded to the uint8 grid after each colour transform, as Compose documents) and normalises.
The CPU twin must match it within 1 for uint8 and 1e-4 relative for floats; policies without
geometry must match the chain of gpuaug ops exactly (uint8) or to float32 rounding.

CPU tests keep images tiny: the Numba twin compiles once per process (~20 s) and dominates.
"""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import gpuaug
import ref_colour as RC
import ref_intensity as RI
import ref_warp as RW
from conftest import HAS_GPU
from helpers import SIM

from gpuaug import random as R
from gpuaug.policy import _fused as F
from gpuaug.policy.compose import plan_stages

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


# ------------------------------------------------------------------------------ reference
def _inverse_map(t, p, i, hw):
    """(3x3 destination -> source map of sample i, output (h, w)) for transform t on an hw image."""
    h, w = hw
    eye = np.eye(3)
    if isinstance(t, gpuaug.RandomHorizontalFlip):
        return (np.array([[-1.0, 0, w - 1], [0, 1, 0], [0, 0, 1]]) if p["apply"][i] else eye), hw
    if isinstance(t, gpuaug.RandomVerticalFlip):
        return (np.array([[1.0, 0, 0], [0, -1, h - 1], [0, 0, 1]]) if p["apply"][i] else eye), hw
    if isinstance(t, (gpuaug.RandomAffine, gpuaug.RandomRotation)):
        if isinstance(t, gpuaug.RandomRotation):
            angle, tx, ty, sc, shx, shy = -p["angle"][i], 0.0, 0.0, 1.0, 0.0, 0.0
        else:
            angle, tx, ty, sc = p["angle"][i], p["tx"][i], p["ty"][i], p["scale"][i]
            shx, shy = p["shear_x"][i], p["shear_y"][i]
        # torchvision's _get_inverse_affine_matrix(inverted=True), centre in pixel-centre units
        rot, sx, sy = math.radians(angle), math.radians(shx), math.radians(shy)
        cx, cy = (w - 1) / 2, (h - 1) / 2
        a = math.cos(rot - sy) / math.cos(sy)
        b = -(a * math.tan(sx) + math.sin(rot))
        c = math.sin(rot - sy) / math.cos(sy)
        d = math.cos(rot) - c * math.tan(sx)
        m = [d / sc, -b / sc, 0.0, -c / sc, a / sc, 0.0]
        m[2] += cx - m[0] * (cx + tx) - m[1] * (cy + ty)
        m[5] += cy - m[3] * (cx + tx) - m[4] * (cy + ty)
        return np.array([m[:3], m[3:], [0, 0, 1]]), hw
    if isinstance(t, (gpuaug.RandomResizedCrop, gpuaug.Resize)):
        top, left, bh, bw = p["boxes"][i] if "boxes" in p else (0, 0, h, w)
        hh, ww = t.size
        sy, sx = bh / hh, bw / ww
        return np.array([[sx, 0, left + 0.5 * sx - 0.5], [0, sy, top + 0.5 * sy - 0.5], [0, 0, 1]]), t.size
    if isinstance(t, gpuaug.RandomCrop):
        top, left = p["corner"][i]
        return np.array([[1.0, 0, left], [0, 1, top], [0, 0, 1]]), t.size
    if isinstance(t, gpuaug.CenterCrop):
        top, left = round((h - t.size[0]) / 2), round((w - t.size[1]) / 2)
        return np.array([[1.0, 0, left], [0, 1, top], [0, 0, 1]]), t.size
    if isinstance(t, gpuaug.RandomPerspective):
        if not p["apply"][i]:
            return eye, hw
        src = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]], np.float64)
        dst = p["corners"][i]
        # the map from the moved corners back to the source corners
        a = np.zeros((8, 8))
        rhs = np.zeros(8)
        for k in range(4):
            (x, y), (u, v) = dst[k], src[k]
            a[2 * k] = [x, y, 1, 0, 0, 0, -u * x, -u * y]
            a[2 * k + 1] = [0, 0, 0, x, y, 1, -v * x, -v * y]
            rhs[2 * k], rhs[2 * k + 1] = u, v
        return np.append(np.linalg.solve(a, rhs), 1.0).reshape(3, 3), hw
    raise AssertionError(f"no reference for {t!r}")


def _grid(img):
    return np.clip(np.floor(img + 0.5), 0, 255)


def _gray(img, integer):
    """The grayscale the colour ops blend with. uint8 semantics: floor(0.2989 r + 0.587 g + 0.114 b
    + 5e-5), the library's documented form (exact for integers, which ref_colour.gray uses)."""
    v = (2989 * img[..., 0] + 5870 * img[..., 1] + 1140 * img[..., 2]) / 10000
    return np.floor(v + 5e-5) if integer else v


def _jitter(img, b, c, s, h, mean, maxv, integer):
    x = RC.brightness(img, b, maxv)
    x = RC._blend(x, mean, c, maxv)
    if img.shape[-1] >= 3:
        x = RC._blend(x, _gray(x, integer)[..., None], s, maxv)
    return RC.hue(x, h, maxv)


def _colour(img, t, p, i, maxv, integer, mean):
    c = img.shape[-1]
    if isinstance(t, gpuaug.ColorJitter):
        return _jitter(img, p["brightness"][i], p["contrast"][i], p["saturation"][i], p["hue"][i], mean,
                       maxv, integer)
    if isinstance(t, gpuaug.RandomGrayscale):
        if not p["apply"][i] or c < 3:
            return img
        out = img.copy()
        g = (2989 * img[..., 0] + 5870 * img[..., 1] + 1140 * img[..., 2]) / 10000
        out[..., :3] = g[..., None]
        return out
    if isinstance(t, gpuaug.RandomChannelPermutation):
        out = img.copy()
        if c >= 3:
            out[..., :3] = img[..., list(p["permutation"][i])]
        return out
    grid_in = _grid(img) if integer else img
    if isinstance(t, gpuaug.RandomGamma):
        return RI.gamma(grid_in, p["gamma"][i], 1.0, maxv)
    if isinstance(t, gpuaug.RandomSolarize):
        return RI.solarize(grid_in, t.threshold, maxv) if p["apply"][i] else grid_in
    if isinstance(t, gpuaug.RandomPosterize):
        return RI.posterize(grid_in, t.bits, integer) if p["apply"][i] else grid_in
    if isinstance(t, gpuaug.RandomInvert):
        return maxv - grid_in if p["apply"][i] else grid_in
    raise AssertionError(f"no reference for {t!r}")


def _mean(img, colour, params, i, maxv, integer):
    """Contrast's mean: the source through the colour transforms before the contrast jitter,
    then its brightness; the mean of the (uint8: floored) gray."""
    x = img
    for t, p in colour:
        if isinstance(t, gpuaug.ColorJitter) and t.contrast:
            x = RC.brightness(x, p["brightness"][i], maxv)
            return x[..., 0].mean() if x.shape[-1] < 3 else _gray(x, integer).mean()
        x = _colour(x, t, p, i, maxv, integer, 0.0)
        if integer:
            x = _grid(x)
    return 0.0


def reference(policy, x, layout="NHWC"):
    """The fused policy per the documented semantics, float64, one sample at a time, from
    ``policy.last_params``. Returns the list of float64 HWC outputs and (dtype, layout)."""
    params = policy.last_params
    samples = list(x) if isinstance(x, list) else [np.asarray(x)[i] for i in range(len(x))]
    if layout == "NCHW" and not isinstance(x, list):
        samples = [s.transpose(1, 2, 0) for s in samples]
    dtype = samples[0].dtype.name
    outs = []
    final = None
    for i, s in enumerate(samples):
        img = s.astype(np.float64)
        cur, lay = dtype, layout
        for kind, item in plan_stages(policy.transforms, dtype):
            if kind == "op":
                raise AssertionError("reference() covers fused stages only")
            spec = item
            maxv = 255.0 if spec.sem == "uint8" else 1.0
            integer = spec.sem == "uint8"
            img = img * spec.in_scale
            colour = [(policy.transforms[k], params[k]) for k in spec.colour]
            mean = _mean(img, colour, params, i, maxv, integer) if spec.contrast else 0.0
            if spec.pre:
                src = img
                for t, p in colour:
                    src = _colour(src, t, p, i, maxv, integer, mean)
                    if integer:
                        src = _grid(src)
                img = src
            if spec.geometry:
                a, hw, fill, bilinear = np.eye(3), img.shape[:2], None, False
                for k in spec.geometry:
                    t = policy.transforms[k]
                    ak, hw = _inverse_map(t, params[k], i, hw)
                    a = a @ ak
                    bilinear |= t.interpolation == "bilinear"
                    if t.fill is not None and fill is None:
                        fill = np.resize(np.asarray(t.fill, np.float64), img.shape[-1])
                hh, ww = hw
                ys, xs = np.mgrid[0:hh, 0:ww].astype(np.float64)
                X = a[0, 0] * xs + a[0, 1] * ys + a[0, 2]
                Y = a[1, 0] * xs + a[1, 1] * ys + a[1, 2]
                W = a[2, 0] * xs + a[2, 1] * ys + a[2, 2]
                img = RW.remap(img, X / W, Y / W, "bilinear" if bilinear else "nearest",
                               "constant" if fill is not None else "replicate",
                               0.0 if fill is None else fill)
            if not spec.pre:
                for t, p in colour:
                    img = _colour(img, t, p, i, maxv, integer, mean)
                    if integer:
                        img = _grid(img)
            st = {"dtype": spec.sem, "layout": spec.layout or lay, "scale": np.ones(img.shape[-1]),
                  "bias": np.zeros(img.shape[-1])}
            for k in spec.writes:
                st = policy.transforms[k].apply(st)
            img = img * st["scale"] + st["bias"]
            if st["dtype"] == "uint8":
                img = _grid(img)
            cur, lay = st["dtype"], st["layout"]
        outs.append(img)
        final = (cur, lay)
    return outs, final


def check_against_reference(policy, x, y, layout="NHWC", atol_u8=1, rtol=1e-4):
    refs, (dtype, lay) = reference(policy, x, layout)
    ys = list(y) if isinstance(y, list) else [np.asarray(y)[i] for i in range(len(y))]
    assert len(ys) == len(refs)
    for i, (g, r) in enumerate(zip(ys, refs)):
        g = np.asarray(g)
        assert g.dtype == np.dtype(dtype), (g.dtype, dtype)
        if lay == "NCHW":
            g = g.transpose(1, 2, 0)
        assert g.shape == r.shape, (i, g.shape, r.shape)
        if dtype == "uint8":
            d = np.abs(g.astype(np.int64) - r.astype(np.int64))
            assert d.max() <= atol_u8, f"sample {i}: max |diff| {d.max()}"
        else:
            tol = 2e-3 if dtype == "float16" else rtol
            scale = max(1.0, float(np.abs(r).max()))
            np.testing.assert_allclose(g.astype(np.float64), r, rtol=tol, atol=tol * scale, err_msg=f"sample {i}")


def _images(rng, n, h, w, c, dtype):
    if np.dtype(dtype) == np.uint8:
        return rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    return rng.random((n, h, w, c)).astype(dtype)


def _bench_policy():
    return gpuaug.Compose([
        gpuaug.RandomHorizontalFlip(),
        gpuaug.RandomAffine(degrees=15, translate=(0.1, 0.1), scale=(0.9, 1.1), shear=5),
        gpuaug.ColorJitter(0.4, 0.4, 0.4, 0.1),
        gpuaug.Normalize(*IMAGENET),
    ], draws="host")


# ------------------------------------------------------------------------------ planning
def _kinds(policy, dtype="uint8"):
    return [(s.kind, len(s.launches)) for s in policy.plan(dtype=dtype)]


PLANS = {
    "bench: flip+affine+jitter+normalize": (
        lambda: _bench_policy(), [("fused", 2)]),
    "rrc+flip+jitter(no contrast)+normalize": (
        lambda: gpuaug.Compose([gpuaug.RandomResizedCrop(16), gpuaug.RandomHorizontalFlip(),
                                gpuaug.ColorJitter(0.4, 0, 0.4, 0.1), gpuaug.Normalize(*IMAGENET)], draws="host"), [("fused", 1)]),
    "every fusible transform": (
        lambda: gpuaug.Compose([gpuaug.ToDtype("float32", scale=True), gpuaug.RandomHorizontalFlip(),
                                gpuaug.RandomVerticalFlip(), gpuaug.RandomResizedCrop(16), gpuaug.RandomCrop(12),
                                gpuaug.RandomRotation(20), gpuaug.RandomAffine(5, scale=(0.9, 1.1)),
                                gpuaug.RandomPerspective(0.2), gpuaug.Resize(10), gpuaug.CenterCrop(8),
                                gpuaug.ColorJitter(0.2, 0.2, 0.2, 0.1), gpuaug.RandomGrayscale(),
                                gpuaug.RandomChannelPermutation(), gpuaug.RandomGamma(), gpuaug.RandomSolarize(0.5),
                                gpuaug.RandomPosterize(4), gpuaug.RandomInvert(), gpuaug.Normalize(*IMAGENET),
                                gpuaug.ToLayout("NHWC")], draws="host"), [("fused", 2)]),
    "colour before geometry": (
        lambda: gpuaug.Compose([gpuaug.ColorJitter(0.3, 0.3), gpuaug.RandomRotation(10)], draws="host"), [("fused", 2)]),
    "geometry, colour, geometry": (
        lambda: gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.ColorJitter(0.3),
                                gpuaug.RandomRotation(10)], draws="host"), [("fused", 1), ("fused", 1)]),
    "two contrasts": (
        lambda: gpuaug.Compose([gpuaug.ColorJitter(contrast=0.3), gpuaug.ColorJitter(contrast=0.3)], draws="host"),
        [("fused", 2), ("fused", 2)]),
    "blur splits": (
        lambda: gpuaug.Compose([gpuaug.RandomResizedCrop(16), gpuaug.ColorJitter(0.2), gpuaug.GaussianBlur(3),
                                gpuaug.Normalize(*IMAGENET)], draws="host"), [("fused", 1), ("op", 1), ("fused", 1)]),
    "erasing after normalize": (
        lambda: gpuaug.Compose([gpuaug.RandomResizedCrop(16), gpuaug.Normalize(*IMAGENET),
                                gpuaug.RandomErasing()], draws="host"), [("fused", 1), ("op", 1)]),
    "noise and equalize": (
        lambda: gpuaug.Compose([gpuaug.GaussianNoise(), gpuaug.RandomEqualize(), gpuaug.RandomHorizontalFlip()], draws="host"),
        [("op", 1), ("op", 1), ("fused", 1)]),
    "different fills": (
        lambda: gpuaug.Compose([gpuaug.RandomRotation(10, fill=0), gpuaug.RandomAffine(5, fill=255)], draws="host"),
        [("fused", 1), ("fused", 1)]),
    "geometry after a write": (
        lambda: gpuaug.Compose([gpuaug.Normalize(0.5, 0.5), gpuaug.RandomHorizontalFlip()], draws="host"),
        [("fused", 1), ("fused", 1)]),
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_plan_stage_counts(name):
    make, want = PLANS[name]
    assert _kinds(make()) == want


def test_plan_details():
    (st,) = _bench_policy().plan()
    assert st.transforms == ("RandomHorizontalFlip", "RandomAffine", "ColorJitter", "Normalize")
    assert st.launches == ("gpuaug_gray_sum", "gpuaug_fused") and (st.dtype, st.layout) == ("float32", "NCHW")
    pre = gpuaug.Compose([gpuaug.RandomGrayscale(), gpuaug.ColorJitter(contrast=0.2), gpuaug.RandomRotation(5)], draws="host")
    (st,) = pre.plan()
    assert st.pre_colour and st.launches == ("gpuaug_fused_sum", "gpuaug_fused")
    assert "colour before geometry" in str(st)
    # a float input keeps its dtype and layout without a write
    (st,) = gpuaug.Compose([gpuaug.RandomHorizontalFlip()], draws="host").plan(dtype="float16", layout="NCHW")
    assert (st.dtype, st.layout) == ("float16", "NCHW")
    x = np.zeros((2, 8, 8, 1), np.float32)
    assert gpuaug.Compose([gpuaug.ToDtype("uint8", scale=True), gpuaug.ColorJitter(0.2)], draws="host").plan(x)[0].dtype == "uint8"
    assert len(gpuaug.Compose([gpuaug.ToDtype("uint8", scale=True), gpuaug.ColorJitter(0.2)], draws="host").plan(x)) == 2


def test_run_launches_what_the_plan_says(monkeypatch):
    """The fused stages each make one fused launch (counted at the Numba launcher)."""
    calls = []
    real = F.launch_numba
    monkeypatch.setattr(F, "launch_numba", lambda *a, **k: calls.append(a[1].jidx) or real(*a, **k))
    policy = PLANS["blur splits"][0]()
    x = _images(np.random.default_rng(0), 2, 9, 11, 3, "uint8")
    policy(x, seed=0)
    assert len(calls) == sum(s.kind == "fused" for s in policy.plan())


# ------------------------------------------------------------------------------ reference checks
CASES = {
    # name: (policy factory, dtype, channels, layout)
    "bench-u8": (_bench_policy, "uint8", 3, "NHWC"),
    "rrc-gray-solarize-u8": (lambda: gpuaug.Compose([
        gpuaug.RandomResizedCrop((12, 14), scale=(0.3, 1.0)), gpuaug.RandomVerticalFlip(),
        gpuaug.RandomGrayscale(0.5), gpuaug.RandomSolarize(128, p=0.5)], draws="host"), "uint8", 3, "NCHW"),
    "perspective-rotation-tail-f32-rgba": (lambda: gpuaug.Compose([
        gpuaug.RandomPerspective(0.4, p=0.7), gpuaug.RandomRotation(25, fill=(0.1, 0.2, 0.3, 1.0)),
        gpuaug.RandomGamma(p=0.7), gpuaug.RandomPosterize(3, p=0.5), gpuaug.RandomInvert(p=0.5)], draws="host"),
        "float32", 4, "NHWC"),
    "colour-first-u8": (lambda: gpuaug.Compose([
        gpuaug.ColorJitter(0.3, 0.3, 0.3, 0.2), gpuaug.RandomAffine(20, scale=(0.8, 1.2), fill=40),
        gpuaug.ToDtype("float16", scale=True)], draws="host"), "uint8", 3, "NHWC"),
    "todtype-crop-jitter-normalize-f16": (lambda: gpuaug.Compose([
        gpuaug.ToDtype("float32", scale=True), gpuaug.RandomCrop(8, padding=2, fill=0.5),
        gpuaug.RandomChannelPermutation(), gpuaug.RandomGrayscale(0.5), gpuaug.ColorJitter(0.3, 0.3, 0.3, 0.1),
        gpuaug.Normalize(*IMAGENET, dtype="float16", layout="NHWC")], draws="host"), "uint8", 3, "NHWC"),
    "gray-u8-one-channel": (lambda: gpuaug.Compose([
        gpuaug.RandomAffine(10, translate=(0.2, 0.2)), gpuaug.ColorJitter(0.5, 0.5), gpuaug.RandomGamma(p=1.0),
        gpuaug.CenterCrop((7, 9))], draws="host"), "uint8", 1, "NHWC"),
    "nearest-f16": (lambda: gpuaug.Compose([
        gpuaug.RandomAffine(30, interpolation="nearest"), gpuaug.RandomHorizontalFlip(),
        gpuaug.ColorJitter(0.2, 0.2, 0.2)], draws="host"), "float16", 3, "NCHW"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpu_matches_reference(name):
    make, dtype, c, layout = CASES[name]
    policy = make()
    rng = np.random.default_rng(sorted(CASES).index(name))
    x = _images(rng, 3, 13, 17, c, dtype)
    xin = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    y = policy(xin, seed=5, layout=layout)
    check_against_reference(policy, xin, y, layout)


def test_varshape_batch():
    rng = np.random.default_rng(3)
    xs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((11, 14), (9, 9), (16, 7))]
    same = gpuaug.Compose([gpuaug.RandomResizedCrop(8), gpuaug.ColorJitter(0.3, 0.3), gpuaug.Normalize(*IMAGENET)], draws="host")
    y = same(xs, seed=2)
    assert isinstance(y, np.ndarray) and y.shape == (3, 3, 8, 8)
    check_against_reference(same, xs, y)
    keep = gpuaug.Compose([gpuaug.RandomRotation(15), gpuaug.RandomGrayscale(0.5)], draws="host")
    y = keep(xs, seed=2)
    assert isinstance(y, list) and [a.shape for a in y] == [a.shape for a in xs]
    check_against_reference(keep, xs, y)
    chw = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.Normalize(0.5, 0.5)], draws="host")
    y = chw(xs, seed=2)
    assert [a.shape for a in y] == [(3, h, w) for h, w, _ in (a.shape for a in xs)]
    check_against_reference(chw, xs, y)


def test_single_image_and_out():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    policy = gpuaug.Compose([gpuaug.RandomHorizontalFlip(1.0), gpuaug.Normalize(0.5, 0.5)], draws="host")
    y = policy(x, seed=0)
    assert y.shape == (3, 10, 12)
    np.testing.assert_allclose(y, (x[:, ::-1].transpose(2, 0, 1) / 255 - 0.5) / 0.5, rtol=1e-6, atol=1e-6)
    out = np.full((1, 3, 10, 12), np.nan, np.float32)
    assert policy(x[None], seed=0, out=out) is out
    np.testing.assert_array_equal(out[0], y)
    with pytest.raises(ValueError, match="out: got shape"):
        policy(x[None], seed=0, out=np.zeros((1, 10, 12, 3), np.float32))


def test_exact_maps_are_exact():
    """Flips, quarter turns and integer crops move pixels without interpolation, floats too."""
    rng = np.random.default_rng(5)
    x = rng.random((4, 9, 9, 3)).astype(np.float32)
    policy = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomVerticalFlip(),
                             gpuaug.RandomRotation((90, 90)), gpuaug.RandomCrop(7, padding=1, fill=0.25)], draws="host")
    y = policy(x, seed=11)
    p = policy.last_params
    for i in range(4):
        s = x[i]
        if p[0]["apply"][i]:
            s = s[:, ::-1]
        if p[1]["apply"][i]:
            s = s[::-1]
        s = np.rot90(s, 1)
        padded = np.pad(s, ((1, 1), (1, 1), (0, 0)), constant_values=0.25)
        top, left = p[3]["corner"][i] + 1
        np.testing.assert_array_equal(y[i], padded[top:top + 7, left:left + 7])


# ------------------------------------------------------------------------------ against the ops
def test_geometry_free_equals_op_chain():
    """No geometry: the fused stage computes what the chain of ops computes (uint8 bit for bit)."""
    rng = np.random.default_rng(6)
    x = rng.integers(0, 256, (4, 11, 13, 3), dtype=np.uint8)
    policy = gpuaug.Compose([gpuaug.ColorJitter(0.5, 0.5, 0.5, 0.2), gpuaug.RandomGrayscale(0.5),
                             gpuaug.RandomSolarize(100, p=0.5)], draws="host")
    y = policy(x, seed=7)
    p = policy.last_params
    j = p[0]
    want = gpuaug.color_jitter(x, j["brightness"], j["contrast"], j["saturation"], j["hue"])
    gray = gpuaug.grayscale(want, num_output_channels=3)
    want = np.where(p[1]["apply"][:, None, None, None], gray, want)
    sol = gpuaug.solarize(want, 100)
    want = np.where(p[2]["apply"][:, None, None, None], sol, want)
    np.testing.assert_array_equal(y, want)
    # ... and with the normalisation on the write: equal to float32 rounding
    norm = gpuaug.Compose(list(policy.transforms) + [gpuaug.Normalize(*IMAGENET)], draws="host")
    z = norm(x, params=gpuaug.policy.PolicyParams(p.n, p.sizes, p.values + ({},)))
    m, s = (np.asarray(v) * 255 for v in IMAGENET)
    np.testing.assert_allclose(z, gpuaug.normalize(want, m, s, output_layout="NCHW"), rtol=1e-6, atol=1e-6)


def test_op_stages_equal_the_ops():
    rng = np.random.default_rng(8)
    x = rng.integers(0, 256, (3, 12, 10, 3), dtype=np.uint8)
    policy = gpuaug.Compose([gpuaug.GaussianBlur(5, sigma=(0.5, 1.5), p=0.7), gpuaug.GaussianNoise(sigma=0.05),
                             gpuaug.RandomErasing(p=0.7, value=(10, 20, 30))], draws="host")
    y = policy(x, seed=9)
    p = policy.last_params
    want = gpuaug.gaussian_blur(x, p[0]["sigma"], np.where(p[0]["apply"], 5, 1))
    want = gpuaug.gaussian_noise(want, 0.0, 0.05 * 255, int(p[1]["seed"][0]))
    want = gpuaug.erase(want, p[2]["boxes"][:, None], np.array([[10.0, 20, 30]]))
    np.testing.assert_array_equal(y, want)
    eq = gpuaug.Compose([gpuaug.RandomEqualize(0.5)], draws="host")
    y = eq(x, seed=1)
    on = eq.last_params[0]["apply"]
    np.testing.assert_array_equal(y, np.where(on[:, None, None, None], gpuaug.equalize(x), x))


# ------------------------------------------------------------------------------ randomness
def test_same_seed_same_parameters_and_output():
    rng = np.random.default_rng(10)
    x = rng.integers(0, 256, (4, 10, 12, 3), dtype=np.uint8)
    a, b = _bench_policy(), _bench_policy()
    ya, yb = a(x, seed=123), b(x, seed=123)
    np.testing.assert_array_equal(ya, yb)
    for da, db in zip(a.last_params.values, b.last_params.values):
        assert da.keys() == db.keys() and all(np.array_equal(da[k], db[k]) for k in da)
    yc = a(x, seed=124)
    assert not np.array_equal(ya, yc)
    # a Generator is advanced by the call; the policy's own generator is seeded once
    g = np.random.default_rng(5)
    y1, y2 = a(x, seed=g), a(x, seed=g)
    assert not np.array_equal(y1, y2)
    np.testing.assert_array_equal(y1, a(x, seed=np.random.default_rng(5)))
    c, d = gpuaug.Compose(a.transforms, seed=42, draws="host"), gpuaug.Compose(a.transforms, seed=42, draws="host")
    np.testing.assert_array_equal(c(x), d(x))
    np.testing.assert_array_equal(c(x), d(x))


def test_last_params_replay():
    rng = np.random.default_rng(12)
    x = rng.integers(0, 256, (3, 10, 12, 3), dtype=np.uint8)
    policy = gpuaug.Compose([gpuaug.RandomResizedCrop(8), gpuaug.RandomPerspective(p=1.0), gpuaug.ColorJitter(0.4, 0.4),
                             gpuaug.GaussianNoise(sigma=0.1)], draws="host")
    y = policy(x)
    p = policy.last_params
    np.testing.assert_array_equal(policy(x, params=p), y)
    np.testing.assert_array_equal(policy.replay(x, p), y)
    assert policy.sample(x, seed=3)[0]["boxes"].tolist() == policy.sample(x, seed=3)[0]["boxes"].tolist()
    with pytest.raises(ValueError, match="params: were drawn for 3 samples; the batch has 2"):
        policy(x[:2], params=p)
    with pytest.raises(ValueError, match="params: were drawn for images of other sizes"):
        policy(x[:, :9], params=p)
    with pytest.raises(TypeError, match="params: got dict"):
        policy(x, params={})
    with pytest.raises(ValueError, match="seed: got a seed and params"):
        policy(x, seed=1, params=p)


def test_in_scheduler_on_the_cpu():
    """Compose is a plain callable: the scheduler's augment (FakeDevice: NumPy batches)."""
    from gpuaug.scheduler import FakeDevice, Scheduler

    data = np.random.default_rng(13).integers(0, 256, (12, 9, 11, 3), dtype=np.uint8)
    policy = gpuaug.Compose(_bench_policy().transforms, seed=7, draws="host")
    got = [np.array(images) for images, _ in Scheduler(data, policy, batch_size=4, device=FakeDevice())]
    ref = gpuaug.Compose(policy.transforms, seed=7, draws="host")
    for k, g in enumerate(got):
        np.testing.assert_array_equal(g, ref(data[4 * k:4 * k + 4]))


def test_pickles_and_repr():
    import pickle

    policy = gpuaug.Compose(_bench_policy().transforms, seed=3, draws="host")
    clone = pickle.loads(pickle.dumps(policy))
    x = np.random.default_rng(0).integers(0, 256, (2, 8, 9, 3), dtype=np.uint8)
    np.testing.assert_array_equal(clone(x), policy(x))  # the generator's state travels too
    assert "RandomAffine(degrees=(-15.0, 15.0)" in repr(policy) and repr(policy).startswith("Compose([")


def test_samplers():
    sizes = np.array([[240, 320], [100, 50], [7, 7], [1, 1]] * 50)
    boxes = R.resized_crop_boxes(R.generator(0), sizes)
    assert boxes.dtype == np.int64 and boxes.shape == (200, 4)
    assert np.all(boxes[:, :2] >= 0) and np.all(boxes[:, 2:] >= 1)
    assert np.all(boxes[:, 0] + boxes[:, 2] <= sizes[:, 0]) and np.all(boxes[:, 1] + boxes[:, 3] <= sizes[:, 1])
    np.testing.assert_array_equal(boxes, R.resized_crop_boxes(R.generator(0), sizes))
    er = R.erasing_boxes(R.generator(1), sizes)
    inside = (er[:, 0] + er[:, 2] <= sizes[:, 0]) & (er[:, 1] + er[:, 3] <= sizes[:, 1])
    assert np.all(inside) and np.all(er >= 0)
    assert np.all(er[3::4, 2:] == 0)  # nothing smaller than a 1x1 image fits
    corners = R.perspective_corners(R.generator(2), sizes[:8], 0.5)
    assert corners.shape == (8, 4, 2) and np.all(corners >= 0)
    aff = R.affine(R.generator(3), 200, sizes, (-10, 10), (0.1, 0.2), (0.9, 1.1), (-5, 5, -2, 2))
    assert np.all(np.abs(aff["tx"]) <= np.ceil(0.1 * sizes[:, 1])) and np.all(aff["tx"] == np.round(aff["tx"]))
    assert np.all((aff["shear_y"] >= -2) & (aff["shear_y"] <= 2))
    u = R.integers(R.generator(4), 3, np.array([4, 10, 100]), 3)
    assert np.all((u >= 3) & (u < [4, 10, 100]))
    assert sorted(R.permutations(R.generator(5), 1, 3)[0].tolist()) == [0, 1, 2]
    with pytest.raises(ValueError, match="seed: got -1"):
        R.generator(-1)
    with pytest.raises(TypeError, match="seed: got 'x'"):
        R.generator("x")


def _torchvision_rrc(rng, h, w, scale, ratio):
    """torchvision's RandomResizedCrop.get_params, one image, drawing from the same stream
    layout as gpuaug.random (areas and ratios first, then the position)."""
    area = h * w
    areas = area * rng.uniform(scale[0], scale[1], 10)
    logs = rng.uniform(math.log(ratio[0]), math.log(ratio[1]), 10)
    for t, lr in zip(areas, logs):
        ar = math.exp(lr)
        cw = int(round(math.sqrt(t * ar)))
        ch = int(round(math.sqrt(t / ar)))
        if 0 < cw <= w and 0 < ch <= h:
            return ch, cw
    return None


def test_resized_crop_sizes_follow_torchvision():
    for seed in range(20):
        box = R.resized_crop_boxes(R.generator(seed), np.array([[37, 53]]))[0]
        want = _torchvision_rrc(R.generator(seed), 37, 53, (0.08, 1.0), (3 / 4, 4 / 3))
        if want is not None:
            assert tuple(box[2:]) == want


# ------------------------------------------------------------------------------ arguments
BAD = [
    (lambda: gpuaug.RandomHorizontalFlip(p=1.5), ValueError, "p: got 1.5"),
    (lambda: gpuaug.RandomAffine(degrees=-3), ValueError, "degrees: got -3"),
    (lambda: gpuaug.RandomAffine(10, translate=(0.5, 2)), ValueError, "translate: got"),
    (lambda: gpuaug.RandomAffine(10, scale=(1.2, 0.8)), ValueError, "scale: got"),
    (lambda: gpuaug.RandomAffine(10, shear=(1, 2, 3)), ValueError, "shear: got"),
    (lambda: gpuaug.RandomAffine(10, interpolation="cubic"), ValueError, "interpolation: got 'cubic'"),
    (lambda: gpuaug.RandomRotation(10, expand=True), ValueError, "expand: got True"),
    (lambda: gpuaug.RandomResizedCrop(0), ValueError, "size: got 0"),
    (lambda: gpuaug.RandomResizedCrop(8, scale=(0.5, 0.1)), ValueError, "scale: got"),
    (lambda: gpuaug.RandomResizedCrop(8, ratio=(2, 1)), ValueError, "ratio: got"),
    (lambda: gpuaug.RandomPerspective(1.5), ValueError, "distortion_scale: got 1.5"),
    (lambda: gpuaug.ColorJitter(brightness=-0.1), ValueError, "brightness: got -0.1"),
    (lambda: gpuaug.ColorJitter(hue=0.7), ValueError, "hue: got 0.7"),
    (lambda: gpuaug.ColorJitter(saturation=(2, 1)), ValueError, "saturation: got"),
    (lambda: gpuaug.RandomGrayscale(p=-1), ValueError, "p: got -1"),
    (lambda: gpuaug.RandomSolarize("x"), TypeError, "threshold: got 'x'"),
    (lambda: gpuaug.RandomPosterize(9), ValueError, "bits: got 9"),
    (lambda: gpuaug.RandomGamma((120, 80)), ValueError, "gamma_limit: got"),
    (lambda: gpuaug.GaussianBlur(4), ValueError, "kernel_size: got 4"),
    (lambda: gpuaug.GaussianBlur((3, 5)), ValueError, "kernel_size: got"),
    (lambda: gpuaug.GaussianBlur(3, sigma=0), ValueError, "sigma: got 0"),
    (lambda: gpuaug.GaussianNoise(sigma=-1), ValueError, "sigma: got -1"),
    (lambda: gpuaug.RandomErasing(value="random"), ValueError, "value: got 'random'"),
    (lambda: gpuaug.RandomErasing(scale=(0.5, 2)), ValueError, "scale: got"),
    (lambda: gpuaug.Normalize((0.5,), (0.0,)), ValueError, "std: got"),
    (lambda: gpuaug.Normalize(0.5, 0.5, dtype="uint8"), ValueError, "dtype: got 'uint8'"),
    (lambda: gpuaug.Normalize(0.5, 0.5, layout="CHW"), ValueError, "layout: got 'CHW'"),
    (lambda: gpuaug.ToDtype("int32"), ValueError, "dtype: got 'int32'"),
    (lambda: gpuaug.ToLayout("HWC"), ValueError, "layout: got 'HWC'"),
    (lambda: gpuaug.RandomCrop(8, padding=-1), ValueError, "padding: got -1"),
    (lambda: gpuaug.RandomCrop(8, padding_mode="reflect"), ValueError, "padding_mode: got 'reflect'"),
    (lambda: gpuaug.Compose([], draws="host"), ValueError, "transforms: got an empty list"),
    (lambda: gpuaug.Compose([gpuaug.ColorJitter(0.1), "flip"], draws="host"), TypeError, r"transforms\[1\]: got str"),
    (lambda: gpuaug.Compose(gpuaug.ColorJitter(0.1), draws="host"), TypeError, "transforms: got ColorJitter"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_arguments_name_the_argument(i):
    make, exc, msg = BAD[i]
    with pytest.raises(exc, match=msg):
        make()


def test_bad_call_arguments():
    policy = gpuaug.Compose([gpuaug.Normalize((0.5, 0.5), (0.5, 0.5))], draws="host")
    x = np.zeros((2, 5, 5, 3), np.uint8)
    with pytest.raises(ValueError, match="mean: got 2 values; the images have 3 channels"):
        policy(x, seed=0)
    with pytest.raises(ValueError, match="x: got 2 channels"):
        gpuaug.Compose([gpuaug.RandomHorizontalFlip()], draws="host")(np.zeros((2, 5, 5, 2), np.uint8))
    with pytest.raises(ValueError, match="size: got"):
        gpuaug.Compose([gpuaug.RandomCrop(9)], draws="host")(x, seed=0)
    with pytest.raises(ValueError, match="backend: got 'cuda' with a NumPy input"):
        gpuaug.Compose([gpuaug.RandomHorizontalFlip()], draws="host")(x, backend="cuda")
    with pytest.raises(ValueError, match="channels: got 2"):
        gpuaug.Compose([gpuaug.RandomHorizontalFlip()], draws="host").plan(channels=2)


def test_docstring_examples():
    import doctest

    import gpuaug.policy.compose
    import gpuaug.policy.transforms

    for mod in (gpuaug.random, gpuaug.policy, gpuaug.policy.compose, gpuaug.policy.transforms):
        res = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert res.failed == 0 and res.attempted > 0, mod.__name__


def test_import_stays_light():
    code = ("import sys, gpuaug; p = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.ColorJitter(0.2)], draws='host'); "
            "p.plan(); import gpuaug.random; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('cupy', 'numba', 'torch')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cuda_c_compiles():
    """NVRTC compiles the kernels the representative policies launch (no GPU needed)."""
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    from gpuaug._batch import as_batch
    from gpuaug.kernels._cuda import check_compile

    names = set()
    x = np.zeros((2, 9, 11, 3), np.uint8)
    for make, _ in PLANS.values():
        policy = make()
        params = policy.sample(x, seed=0)
        for kind, spec in plan_stages(policy.transforms, "uint8"):
            if kind != "fused" or spec.in_dtype != "uint8":
                continue
            b = as_batch(x)
            built = F.build(spec, policy.transforms, params.values, b, "NHWC")
            for dense, planar in ((False, False), (True, True), (True, False)):
                if spec.pre and dense:
                    continue
                for nm in F.kernel_names(spec, built, "uint8", 3, dense, planar):
                    names.add(nm.format(packed="_packed"))
    names |= {"gpuaug_fused<gpuaug::half, 4, float, false, 2, 0, false, 0x7654ull>",
              "gpuaug_fused_dense<float, 1, gpuaug::half, false, 1, 1, 0x31ull, true>",
              "gpuaug_fused_sum<gpuaug::half, 3, false, 0x13ull>"}
    check_compile("fused.cu", sorted(names))


# ------------------------------------------------------------------------------ Numba CUDA twin
_PTX = r"""
import os, types as pytypes
from numba import cuda, types
import numba.cuda.dispatcher as D
D.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))  # no GPU needed
from gpuaug.kernels.numba import fused as FN
from gpuaug.kernels.numba._dual import specialize
A = lambda dt, nd: types.Array(dt, nd, "A")
for dt in (types.uint8, types.float32):
    sig = (A(dt, 4), A(types.float32, 4), A(types.float32, 2), A(types.int64, 1), A(types.float64, 1),
           types.float64, types.float64, types.boolean)
    cuda.compile_ptx(specialize(FN._fused_cuda, "cuda", "kernel").py_func, sig, cc=(9, 0))
sig = (A(types.uint8, 4), A(types.float64, 1), A(types.float32, 2), A(types.int64, 1), types.int64)
cuda.compile_ptx(specialize(FN._sum_cuda, "cuda", "kernel").py_func, sig, cc=(9, 0))
print("ok")
"""


def test_numba_cuda_twin_compiles():
    """The simulator interprets Python; this compiles the Numba CUDA twin to PTX (sm_90) as a GPU
    would, so typing errors show without one (a subprocess: conftest turned the simulator on)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    r = subprocess.run([sys.executable, "-c", _PTX], env=env, capture_output=True, text=True, timeout=600)
    if "NvvmSupportError" in r.stderr or "libNVVM" in r.stderr:
        pytest.skip(f"no NVVM here: {r.stderr.strip().splitlines()[-1][:200]}")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


@pytest.mark.skipif(not SIM, reason="the Numba CUDA twin on NumPy input needs the CUDA simulator "
                    "(NUMBA_ENABLE_CUDASIM=1, set by conftest when there is no GPU)")
@pytest.mark.parametrize("name", ["bench-u8", "colour-first-u8"])
def test_numba_cuda_twin_in_simulator(name):
    make, dtype, c, layout = CASES[name]
    policy = make()
    x = _images(np.random.default_rng(1), 2, 5, 6, c, dtype)
    y_sim = policy(x, seed=4, backend="numba")
    y_cpu = policy(x, seed=4, backend="cpu")
    if y_cpu.dtype == np.uint8:
        assert np.abs(y_sim.astype(int) - y_cpu).max() <= 1
    else:
        np.testing.assert_allclose(y_sim.astype(np.float64), y_cpu, rtol=2e-3, atol=2e-3)


# ------------------------------------------------------------------------------ GPU
gpu = pytest.mark.gpu


def _gpu_compare(got, want, what, frac=1e-3):
    """GPU (float32 maths) vs CPU twin (float64): uint8 within 1; floats within 1e-4 relative
    except at most ``frac`` of the elements, where a uint8-grid rounding or a floored gray went
    the other way (one uint8 level, scaled by the write)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if got.dtype == np.uint8:
        d = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert d.max() <= 1, f"{what}: max |diff| {d.max()}"
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    tol = 2e-3 if got.dtype == np.float16 else 1e-4
    bad = np.abs(g - w) > tol * np.maximum(1.0, np.abs(w))
    assert bad.mean() <= frac, f"{what}: {bad.sum()} of {bad.size} elements differ, e.g. {g[bad][:4]} vs {w[bad][:4]}"


@gpu
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("backend", ["cuda", "numba"])
def test_gpu_matches_cpu(name, backend):
    import cupy as cp

    make, dtype, c, layout = CASES[name]
    policy = make()
    x = _images(np.random.default_rng(sorted(CASES).index(name)), 5, 37, 53, c, dtype)
    xin = x if layout == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    want = policy(xin, seed=5, layout=layout)
    got = policy(cp.asarray(xin), seed=5, layout=layout, backend=backend)
    assert isinstance(got, cp.ndarray)
    _gpu_compare(cp.asnumpy(got), want, f"{name} {backend}")
    # the table-driven kernel (a strided view of the same batch) agrees with the dense one
    if layout == "NHWC" and backend == "cuda":
        xd = cp.asarray(np.ascontiguousarray(xin.transpose(0, 3, 1, 2))).transpose(0, 2, 3, 1)
        got2 = policy(xd, params=policy.last_params)
        _gpu_compare(cp.asnumpy(got2), cp.asnumpy(got), f"{name} strided vs dense", frac=0)


@gpu
def test_gpu_bench_policy_large_and_exact_paths():
    import cupy as cp

    policy = _bench_policy()
    x = np.random.default_rng(0).integers(0, 256, (8, 224, 224, 3), dtype=np.uint8)
    got = policy(cp.asarray(x), seed=1)
    want = policy(x, seed=1)
    _gpu_compare(cp.asnumpy(got), want, "bench policy 8x224x224")
    # geometry-free on the GPU: the fused stage equals the op chain there too
    pol = gpuaug.Compose([gpuaug.ColorJitter(0.5, 0.5, 0.5, 0.2), gpuaug.RandomGrayscale(0.5)], draws="host")
    xd = cp.asarray(x)
    y = pol(xd, seed=3)
    p = pol.last_params
    j = p[0]
    w = gpuaug.color_jitter(xd, j["brightness"], j["contrast"], j["saturation"], j["hue"])
    w = cp.where(cp.asarray(p[1]["apply"])[:, None, None, None], gpuaug.grayscale(w, num_output_channels=3), w)
    assert int(cp.abs(y.astype(cp.int32) - w.astype(cp.int32)).max()) == 0


@gpu
def test_gpu_stream_and_varshape():
    import cupy as cp

    policy = gpuaug.Compose([gpuaug.RandomResizedCrop(32), gpuaug.ColorJitter(0.4, 0.4, 0.4, 0.1),
                             gpuaug.Normalize(*IMAGENET)], draws="host")
    rng = np.random.default_rng(2)
    xs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in ((40, 60), (33, 33), (70, 41))]
    s = cp.cuda.Stream(non_blocking=True)
    y = policy([cp.asarray(a) for a in xs], seed=3, stream=s)
    s.synchronize()
    _gpu_compare(cp.asnumpy(y), policy(xs, seed=3), "varshape on a stream")


@gpu
def test_gpu_in_scheduler():
    import cupy as cp

    from gpuaug.scheduler import Scheduler

    data = np.random.default_rng(0).integers(0, 256, (16, 32, 32, 3), dtype=np.uint8)
    policy = gpuaug.Compose(_bench_policy().transforms, seed=7, draws="host")
    got = [cp.asnumpy(images) for images, _ in Scheduler(data, policy, batch_size=8)]
    ref = gpuaug.Compose(policy.transforms, seed=7, draws="host")
    for k, g in enumerate(got):
        _gpu_compare(g, ref(data[8 * k:8 * k + 8]), f"scheduler batch {k}")


@pytest.mark.skipif(HAS_GPU, reason="checks the message a CPU-only machine gives")
def test_cpu_only_machine_refuses_cuda_backend():
    with pytest.raises(ValueError, match="backend"):
        _bench_policy()(np.zeros((1, 4, 4, 3), np.uint8), backend="cuda")
