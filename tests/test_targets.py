"""gpuaug.targets on the CPU: boxes and keypoints against an independent NumPy reference of
torchvision v2's tv_tensors rules, masks against the ops' own nearest-neighbour results on
label images, round trips, varshape, formats, Compose, bad input.

The reference below never builds a 3x3 matrix for the ops torchvision handles with formulas
(flip, crop, pad, resize, resized_crop, rot90, transpose): it writes each rule out as
torchvision's *_bounding_boxes / *_keypoints kernels do. Rotations and affine maps follow
torchvision's ``_get_inverse_affine_matrix(..., inverted=False)`` applied to box corners in
continuous coordinates (centre = gpuaug's pixel-centre centre + 0.5).
"""
import math

import numpy as np
import pytest

import gpuaug
from gpuaug import targets as T
from gpuaug.targets import Boxes, Keypoints, Masks

RNG = np.random.default_rng(7)


# ------------------------------------------------------------------------------ reference
def to_xyxy(b, fmt):
    b = np.asarray(b, np.float64)
    if fmt == "xyxy":
        return b.copy()
    if fmt == "xywh":
        return np.stack([b[..., 0], b[..., 1], b[..., 0] + b[..., 2], b[..., 1] + b[..., 3]], -1)
    return np.stack([b[..., 0] - b[..., 2] / 2, b[..., 1] - b[..., 3] / 2, b[..., 0] + b[..., 2] / 2,
                     b[..., 1] + b[..., 3] / 2], -1)


def from_xyxy(b, fmt):
    if fmt == "xyxy":
        return b
    w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    if fmt == "xywh":
        return np.stack([b[..., 0], b[..., 1], w, h], -1)
    return np.stack([(b[..., 0] + b[..., 2]) / 2, (b[..., 1] + b[..., 3]) / 2, w, h], -1)


def clamp(b, hw):
    out = b.copy()
    out[..., 0::2] = np.clip(out[..., 0::2], 0, hw[1])
    out[..., 1::2] = np.clip(out[..., 1::2], 0, hw[0])
    return out


def tv_affine_forward(center, angle, translate, scale, shear):
    """torchvision's _get_inverse_affine_matrix(..., inverted=False), written out."""
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -(a * math.tan(sx) + math.sin(rot))
    c = math.sin(rot - sy) / math.cos(sy)
    d = math.cos(rot) - c * math.tan(sx)
    m = [a * scale, b * scale, 0.0, c * scale, d * scale, 0.0]
    m[2] += cx + tx - m[0] * cx - m[1] * cy
    m[5] += cy + ty - m[3] * cx - m[4] * cy
    return np.array(m).reshape(2, 3)


def ref_affine_boxes(b, m23, hw):
    """bbox of the 4 corners through m23 (continuous coordinates), clamped (torchvision)."""
    pts = b[:, [[0, 1], [2, 1], [2, 3], [0, 3]]]
    mapped = pts @ m23[:, :2].T + m23[:, 2]
    out = np.concatenate([mapped.min(1), mapped.max(1)], axis=1)
    return clamp(out, hw)


def ref_boxes(op, b, hw, **p):
    """One sample's xyxy boxes (M, 4) through ``op`` as torchvision v2 computes them; returns
    (boxes, output size)."""
    h, w = hw
    if op == "hflip":
        return np.stack([w - b[:, 2], b[:, 1], w - b[:, 0], b[:, 3]], 1), hw
    if op == "vflip":
        return np.stack([b[:, 0], h - b[:, 3], b[:, 2], h - b[:, 1]], 1), hw
    if op == "crop":
        o = (p["height"], p["width"])
        return clamp(b - [p["left"], p["top"], p["left"], p["top"]], o), o
    if op == "pad":
        t, bo, le, r = p["padding"]
        return b + [le, t, le, t], (h + t + bo, w + le + r)
    if op == "resize":
        oh, ow = p["size"]
        return b * [ow / w, oh / h, ow / w, oh / h], (oh, ow)
    if op == "resized_crop":
        t, le, bh, bw = p["box"]
        c, _ = ref_boxes("crop", b, hw, top=t, left=le, height=bh, width=bw)
        return ref_boxes("resize", c, (bh, bw), size=p["size"])
    if op == "transpose":
        return b[:, [1, 0, 3, 2]], (w, h)
    if op == "rot90":  # numpy.rot90 counter-clockwise: (x, y) -> (y, w - x)
        q = p["k"] % 4
        out, cur = b, (h, w)
        for _ in range(q):
            ch, cw = cur
            out = np.stack([out[:, 1], cw - out[:, 2], out[:, 3], cw - out[:, 0]], 1)
            cur = (cw, ch)
        return out, cur
    if op == "rotate":  # torchvision rotate = affine(-angle) about the centre
        c = ((w - 1) / 2 + 0.5, (h - 1) / 2 + 0.5) if p.get("center") is None else \
            (p["center"][0] + 0.5, p["center"][1] + 0.5)
        m = tv_affine_forward(c, -p["angle"], (0, 0), p.get("scale", 1.0), (0, 0))
        return ref_affine_boxes(b, m, hw), hw
    raise AssertionError(op)


def ref_keypoints(op, k, hw, **p):
    """Pixel-centre keypoints (K, 2): torchvision's flips (w - 1 - x), crops, pads; resize at
    OpenCV's pixel centres."""
    h, w = hw
    if op == "hflip":
        return np.stack([w - 1 - k[:, 0], k[:, 1]], 1)
    if op == "vflip":
        return np.stack([k[:, 0], h - 1 - k[:, 1]], 1)
    if op == "crop":
        return k - [p["left"], p["top"]]
    if op == "pad":
        return k + [p["padding"][2], p["padding"][0]]
    if op == "resize":
        oh, ow = p["size"]
        return np.stack([(k[:, 0] + 0.5) * ow / w - 0.5, (k[:, 1] + 0.5) * oh / h - 0.5], 1)
    if op == "transpose":
        return k[:, ::-1].copy()
    raise AssertionError(op)


def rand_boxes(n, m, h, w, rng=RNG, dtype=np.float32):
    x1 = rng.uniform(-0.2 * w, w, (n, m))
    y1 = rng.uniform(-0.2 * h, h, (n, m))
    bw = rng.uniform(0.5, 0.6 * w, (n, m))
    bh = rng.uniform(0.5, 0.6 * h, (n, m))
    return np.stack([x1, y1, x1 + bw, y1 + bh], -1).astype(dtype)


def sizes(n, h, w):
    return np.tile([[h, w]], (n, 1))


# ------------------------------------------------------------------------------ boxes vs reference
CASES = [
    ("flip", dict(horizontal=[True, False, True], vertical=[False, True, True])),
    ("crop", dict(top=[1, 0, 3], left=[2, 5, 0], height=9, width=11)),
    ("pad", dict(padding=np.array([[1, 2, 3, 4], [0, 3, 2, 5], [3, 0, 7, 0]]))),
    ("resize", dict(size=(7, 23))),
    ("resized_crop", dict(boxes_=np.array([[1, 2, 8, 9], [0, 0, 13, 17], [4, 3, 5, 7]], float), size=(10, 6))),
    ("rot90", dict(k=[1, 1, -1])),
    ("transpose", dict()),
    ("rotate", dict(angle=[30.0, -45.0, 90.0], scale=[1.0, 0.8, 1.1])),
]


def _ref_case(name, p, i, b, hw):
    if name == "flip":
        out, o = b, hw
        if p["horizontal"][i]:
            out, o = ref_boxes("hflip", out, o)
        if p["vertical"][i]:
            out, o = ref_boxes("vflip", out, o)
        return out, o
    if name == "crop":
        return ref_boxes("crop", b, hw, top=p["top"][i], left=p["left"][i], height=p["height"], width=p["width"])
    if name == "pad":
        return ref_boxes("pad", b, hw, padding=p["padding"][i])
    if name == "resize":
        return ref_boxes("resize", b, hw, size=p["size"])
    if name == "resized_crop":
        return ref_boxes("resized_crop", b, hw, box=p["boxes_"][i].astype(int), size=p["size"])
    if name == "rot90":
        return ref_boxes("rot90", b, hw, k=p["k"][i])
    if name == "transpose":
        return ref_boxes("transpose", b, hw)
    return ref_boxes("rotate", b, hw, angle=p["angle"][i], scale=p["scale"][i])


@pytest.mark.parametrize("name,p", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("fmt", ["xyxy", "xywh", "cxcywh"])
def test_boxes_match_reference(name, p, fmt):
    n, h, w, m = 3, 13, 17, 6
    xyxy = rand_boxes(n, m, h, w).astype(np.float64)
    b = Boxes(from_xyxy(xyxy, fmt), format=fmt, min_visibility=None)
    r = getattr(T, name)(sizes(n, h, w), **p, boxes=b).boxes
    assert r.format == fmt and r.data.shape == (n, m, 4)
    for i in range(n):
        want, o = _ref_case(name, p, i, xyxy[i], (h, w))
        # torchvision clamps in crops and affine maps; gpuaug clips every output to its image
        np.testing.assert_allclose(to_xyxy(r.data[i], fmt), clamp(want, o), atol=1e-5)
        assert r.index[i].tolist() == list(range(m))


@pytest.mark.parametrize("name,p", [c for c in CASES if c[0] in ("flip", "crop", "pad", "resize", "transpose")],
                         ids=lambda c: c if isinstance(c, str) else "")
def test_keypoints_match_reference(name, p):
    n, h, w, k = 3, 13, 17, 5
    pts = np.stack([RNG.uniform(0, w - 1, (n, k)), RNG.uniform(0, h - 1, (n, k))], -1)
    r = getattr(T, name)(sizes(n, h, w), **p, keypoints=pts).keypoints
    for i in range(n):
        if name == "flip":
            want = pts[i]
            if p["horizontal"][i]:
                want = ref_keypoints("hflip", want, (h, w))
            if p["vertical"][i]:
                want = ref_keypoints("vflip", want, (h, w))
        elif name == "crop":
            want = ref_keypoints("crop", pts[i], (h, w), top=p["top"][i], left=p["left"][i])
        elif name == "pad":
            want = ref_keypoints("pad", pts[i], (h, w), padding=p["padding"][i])
        else:
            want = ref_keypoints(name, pts[i], (h, w), **p)
        np.testing.assert_allclose(r.data[i], want, atol=1e-9)


def test_keypoint_visibility_follows_the_output_image():
    pts = np.array([[[0.0, 0.0], [5.0, 1.0], [2.0, 2.0]]])
    vis = np.array([[True, True, False]])
    r = T.crop(np.array([[4, 8]]), 0, 1, 4, 4, keypoints=Keypoints(pts, vis)).keypoints
    np.testing.assert_array_equal(r.data[0], [[-1, 0], [4, 1], [1, 2]])
    assert r.visibility[0].tolist() == [False, False, False]  # left, right of the crop; was hidden
    r = T.crop(np.array([[4, 8]]), 0, 0, 4, 6, keypoints=Keypoints(pts, vis)).keypoints
    assert r.visibility[0].tolist() == [True, True, False]


def test_continuous_keypoints_scale_like_torchvision_resize():
    pts = RNG.uniform(0, 10, (2, 4, 2))
    r = T.resize(np.array([[10, 20]] * 2), (30, 10), keypoints=Keypoints(pts, coords="continuous")).keypoints
    np.testing.assert_allclose(r.data, pts * [10 / 20, 30 / 10])


def test_normalized_boxes_equal_pixel_boxes_scaled():
    n, h, w = 2, 10, 16
    xyxy = rand_boxes(n, 4, h, w).astype(np.float64)
    pix = T.resize(sizes(n, h, w), (20, 8), boxes=Boxes(xyxy, min_visibility=None)).boxes.data
    nrm = T.resize(sizes(n, h, w), (20, 8), boxes=Boxes(xyxy / [w, h, w, h], normalized=True,
                                                        min_visibility=None)).boxes
    assert nrm.normalized
    np.testing.assert_allclose(nrm.data * [8, 20, 8, 20], pix, atol=1e-9)


# ------------------------------------------------------------------------------ dropping
def test_min_visibility_drops_as_albumentations_and_packs_the_rest():
    # 10x10 image cropped to its left half (width 5): boxes keep 100%, 50%, 20%, 0% of their area.
    b = np.array([[[0, 0, 4, 4], [3, 0, 7, 2], [4, 0, 9, 1], [6, 6, 9, 9]]], np.float32)
    for mv, kept in ((0.0, [0, 1, 2]), (0.3, [0, 1]), (0.6, [0]), (None, [0, 1, 2, 3])):
        r = T.crop(np.array([[10, 10]]), 0, 0, 10, 5, boxes=Boxes(b, min_visibility=mv)).boxes
        c = int(r.counts[0])
        assert r.index[0, :c].tolist() == kept
        assert (r.index[0, c:] == -1).all() and (r.data[0, c:] == 0).all()
        np.testing.assert_allclose(r.data[0, :c], np.clip(b[0, kept], 0, [5, 10, 5, 10]))


def test_counts_limit_the_valid_rows():
    b = rand_boxes(2, 5, 10, 10)
    b[0, 2:] = np.nan  # padding past the count may hold anything
    r = T.flip(np.array([[10, 10]] * 2), boxes=Boxes(b, counts=[2, 5], min_visibility=None)).boxes
    assert r.counts.tolist() == [2, 5]
    assert np.isfinite(r.data).all() and (r.index[0, 2:] == -1).all()


def test_ragged_lists_and_empty_boxes():
    h, w = 12, 9
    lst = [rand_boxes(1, 3, h, w)[0], np.zeros((0, 4), np.float32), rand_boxes(1, 1, h, w)[0]]
    r = T.rot90(sizes(3, h, w), 1, boxes=Boxes(lst, min_visibility=None)).boxes
    assert isinstance(r.data, list) and [len(a) for a in r.data] == [3, 0, 1]
    for a, src in zip(r.data, lst):
        want, _ = ref_boxes("rot90", clamp(src.astype(np.float64), (h, w)), (h, w), k=1)
        np.testing.assert_allclose(a, want, atol=1e-5)
    empty = T.flip(sizes(2, h, w), boxes=np.zeros((2, 0, 4), np.float32)).boxes
    assert empty.data.shape == (2, 0, 4) and empty.counts.tolist() == [0, 0]


# ------------------------------------------------------------------------------ round trips
def test_round_trips_are_exact():
    n, h, w = 4, 11, 15
    # on a quarter-pixel grid: every step is then exact in floating point
    b = np.round(4 * np.clip(rand_boxes(n, 5, h, w).astype(np.float64), 0, [w, h, w, h])) / 4
    pts = np.round(4 * np.stack([RNG.uniform(0, w - 1, (n, 3)), RNG.uniform(0, h - 1, (n, 3))], -1)) / 4
    hz = [True, False, True, True]
    r = T.flip(sizes(n, h, w), hz, boxes=Boxes(b, min_visibility=None), keypoints=pts)
    r = T.flip(sizes(n, h, w), hz, boxes=r.boxes, keypoints=r.keypoints)
    np.testing.assert_array_equal(r.boxes.data, b)
    np.testing.assert_array_equal(r.keypoints.data, pts)
    cur, bx, kp = sizes(n, h, w), Boxes(b, min_visibility=None), Keypoints(pts)
    for _ in range(4):
        r = T.rot90(cur, 1, boxes=bx, keypoints=kp)
        bx, kp, cur = r.boxes, r.keypoints, cur[:, ::-1].copy()
    np.testing.assert_array_equal(bx.data, b)
    np.testing.assert_array_equal(kp.data, pts)
    assert kp.visibility.all()


# ------------------------------------------------------------------------------ masks
def _label_image(n, h, w, rng=RNG):
    lab = rng.integers(0, 200, (n, h, w)).astype(np.uint8)
    return lab, np.ascontiguousarray(lab[..., None])


MASK_CASES = [
    ("flip", dict(horizontal=[True, False, True], vertical=[True, True, False]), {}),
    ("crop", dict(top=[1, 0, 3], left=[2, 5, 0], height=9, width=11), {}),
    ("center_crop", dict(size=(9, 20)), {}),
    ("pad", dict(padding=(1, 2, 3, 4), mode="constant"), dict(value=255)),
    ("pad", dict(padding=(1, 2, 3, 4), mode="reflect"), {}),
    ("resize", dict(size=(7, 23)), dict(interpolation="nearest")),
    ("resized_crop", dict(boxes_=np.array([[1.5, 2, 8, 9.25], [0, 0, 13, 17], [4, 3, 5, 7]]), size=(10, 6)),
     dict(interpolation="nearest")),
    ("rot90", dict(k=[1, -1, 1]), {}),
    ("transpose", dict(), {}),
    ("rotate", dict(angle=[30.0, -45.0, 12.0], scale=[1.0, 0.8, 1.3]), dict(interpolation="nearest", fill=255)),
    ("warp_affine", dict(matrix=np.array([[[1.1, 0.2, -2], [0.1, 0.9, 1]]] * 3)),
     dict(interpolation="nearest", fill=255)),
    ("warp_perspective", dict(matrix=np.array([[1.0, 0.1, 1], [0.05, 1.1, -1], [0.002, 0.001, 1]]), size=(15, 12)),
     dict(interpolation="nearest", fill=255)),
]


def _op_call(name, img, p, extra):
    kw = dict(p)
    if name == "resized_crop":
        kw["boxes"] = kw.pop("boxes_")
    if name == "center_crop":
        # the image pads with 0 where the crop is larger; masks with their fill: compare inside
        pass
    return getattr(gpuaug, name)(img, **kw, **extra)


@pytest.mark.parametrize("name,p,extra", MASK_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(MASK_CASES)])
def test_masks_equal_the_ops_nearest_result(name, p, extra):
    n, h, w = 3, 13, 17
    lab, img = _label_image(n, h, w)
    want = _op_call(name, img, p, extra)[..., 0]
    got = getattr(T, name)(img, **p, masks=lab).masks.data
    if name == "center_crop":
        col = (20 - w) // 2  # torchvision pads (crop - size) // 2 columns before the image
        inside = np.zeros_like(want, bool)
        inside[:, :, col:col + w] = True
        np.testing.assert_array_equal(got[inside], want[inside])
        assert (got[~inside] == 255).all()
        return
    np.testing.assert_array_equal(got, want)


def test_int32_and_onehot_masks_follow_the_uint8_result():
    n, h, w = 2, 9, 12
    lab, img = _label_image(n, h, w)
    kw = dict(angle=[25.0, -60.0])
    want = T.rotate(img, **kw, masks=Masks(lab, fill=7)).masks.data
    big = T.rotate(img, **kw, masks=Masks(lab.astype(np.int32) * 65537, fill=7 * 65537)).masks.data
    assert big.dtype == np.int32
    np.testing.assert_array_equal(big, want.astype(np.int32) * 65537)
    onehot = np.stack([lab == c for c in range(3)], axis=1)  # (N, 3, H, W) bool
    oh = T.rotate(img, **kw, masks=Masks(onehot)).masks
    assert oh.onehot and oh.data.dtype == np.bool_ and oh.data.shape == (n, 3, h, w)
    for c in range(3):
        np.testing.assert_array_equal(oh.data[:, c], want == c)
    # int32 labels padded with a constant take a per-byte fill (through warp_affine)
    p32 = T.pad(img, (1, 0, 2, 1), masks=Masks(lab.astype(np.int32) * 65537, fill=-1)).masks.data
    assert (p32[:, 0] == -1).all() and (p32[:, :, :2] == -1).all()
    np.testing.assert_array_equal(p32[:, 1:, 2:-1], lab.astype(np.int32) * 65537)


def test_varshape_targets():
    shapes = [(9, 12), (14, 7), (5, 5)]
    imgs = [RNG.integers(0, 200, (h, w, 1)).astype(np.uint8) for h, w in shapes]
    labs = [np.ascontiguousarray(i[..., 0]) for i in imgs]
    bx = [rand_boxes(1, 2, h, w)[0] for h, w in shapes]
    pts = np.stack([np.array([[1.0, 2.0], [3.0, 4.0]])] * 3)
    r = T.rotate(imgs, [10.0, 20.0, -30.0], boxes=Boxes(bx, min_visibility=None), keypoints=pts, masks=labs)
    want = gpuaug.rotate(imgs, [10.0, 20.0, -30.0], interpolation="nearest", fill=255)
    for i, (h, w) in enumerate(shapes):
        np.testing.assert_array_equal(r.masks.data[i], want[i][..., 0])
        ref, _ = ref_boxes("rotate", bx[i].astype(np.float64), (h, w), angle=[10.0, 20.0, -30.0][i])
        np.testing.assert_allclose(r.boxes.data[i], ref, atol=1e-4)
    r = T.rot90(imgs, [1, 0, 3], masks=labs)
    for o, im in zip(r.masks.data, gpuaug.rot90(imgs, [1, 0, 3])):
        np.testing.assert_array_equal(o, im[..., 0])


def test_determinism():
    n, h, w = 3, 13, 17
    lab, img = _label_image(n, h, w)
    b = rand_boxes(n, 4, h, w)
    a1 = T.warp_perspective(img, MASK_CASES[-1][1]["matrix"], boxes=b, masks=lab)
    a2 = T.warp_perspective(img, MASK_CASES[-1][1]["matrix"], boxes=b, masks=lab)
    np.testing.assert_array_equal(a1.boxes.data, a2.boxes.data)
    np.testing.assert_array_equal(a1.masks.data, a2.masks.data)


# ------------------------------------------------------------------------------ Compose
def _policy(fill=255):
    return gpuaug.Compose([
        gpuaug.RandomHorizontalFlip(),
        gpuaug.RandomAffine(20, translate=(0.1, 0.1), scale=(0.8, 1.2), interpolation="nearest", fill=fill),
        gpuaug.ColorJitter(0.3, 0.3),
        gpuaug.RandomResizedCrop((10, 9), interpolation="nearest"),
    ])


def test_compose_masks_equal_the_images_and_replay():
    n, h, w = 4, 12, 14
    lab, img = _label_image(n, h, w)
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(),
                          gpuaug.RandomAffine(20, translate=(0.1, 0.1), interpolation="nearest", fill=255),
                          gpuaug.RandomResizedCrop((10, 9), interpolation="nearest")])
    b = rand_boxes(n, 5, h, w)
    y, bb, mm = pol(img, seed=3, boxes=b, masks=lab)
    np.testing.assert_array_equal(mm.data, y[..., 0])  # the label image's own nearest warp
    y2, bb2, mm2 = pol(img, params=pol.last_params, boxes=b, masks=lab)
    np.testing.assert_array_equal(bb2.data, bb.data)
    np.testing.assert_array_equal(mm2.data, mm.data)


def test_compose_boxes_equal_the_ops_in_sequence():
    """Flip then RandomResizedCrop: the flip clips nothing, so mapping op by op with the drawn
    parameters gives the fused stage's boxes."""
    n, h, w = 5, 16, 20
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.ColorJitter(0.2),
                          gpuaug.RandomResizedCrop((8, 12), scale=(0.3, 1.0))])
    img = RNG.integers(0, 255, (n, h, w, 3)).astype(np.uint8)
    b = Boxes(rand_boxes(n, 6, h, w), format="xyxy", min_visibility=0.2)
    pts = np.stack([RNG.uniform(0, w - 1, (n, 4)), RNG.uniform(0, h - 1, (n, 4))], -1)
    _, bb, kk = pol(img, seed=11, boxes=b, keypoints=pts)
    p = pol.last_params
    r = T.flip(img, p[0]["apply"], boxes=Boxes(b.data, min_visibility=None), keypoints=pts)
    r = T.resized_crop(img, p[2]["boxes"], (8, 12), boxes=Boxes(r.boxes.data, min_visibility=0.2),
                       keypoints=r.keypoints)
    np.testing.assert_allclose(bb.data, r.boxes.data, atol=1e-4)
    np.testing.assert_array_equal(bb.counts, r.boxes.counts)
    np.testing.assert_allclose(kk.data, r.keypoints.data, atol=1e-9)
    np.testing.assert_array_equal(kk.visibility, r.keypoints.visibility)


def test_compose_colour_only_leaves_targets_alone():
    pol = gpuaug.Compose([gpuaug.ColorJitter(0.4, 0.4), gpuaug.Normalize(0.5, 0.25)])
    img = RNG.integers(0, 255, (2, 8, 8, 3)).astype(np.uint8)
    b = rand_boxes(2, 3, 8, 8)
    lab = RNG.integers(0, 5, (2, 8, 8)).astype(np.uint8)
    _, bb, mm = pol(img, seed=0, boxes=Boxes(b, min_visibility=None), masks=lab)
    np.testing.assert_array_equal(bb.data, b)
    np.testing.assert_array_equal(mm.data, lab)


# ------------------------------------------------------------------------------ bad input
BAD = [
    ("x2 < x1", dict(boxes=np.array([[[5.0, 1.0, 2.0, 3.0]]] * 2)), "boxes"),
    ("NaN", dict(boxes=np.array([[[np.nan, 1.0, 2.0, 3.0]]] * 2)), "boxes"),
    ("NaN keypoint", dict(keypoints=np.array([[[np.nan, 1.0]]] * 2)), "keypoints"),
    ("last dim", dict(boxes=np.zeros((2, 3, 5))), "boxes"),
    ("keypoint last dim", dict(keypoints=np.zeros((2, 3, 3))), "keypoints"),
    ("mask size", dict(masks=np.zeros((2, 8, 9), np.uint8)), "masks"),
    ("mask count", dict(masks=np.zeros((3, 8, 8), np.uint8)), "masks"),
    ("box count", dict(boxes=np.zeros((3, 1, 4))), "boxes"),
    ("mask dtype", dict(masks=np.zeros((2, 8, 8), np.float32)), "masks"),
]


@pytest.mark.parametrize("case,kw,arg", BAD, ids=[c[0] for c in BAD])
def test_bad_input_names_the_argument_and_writes_nothing(case, kw, arg):
    img = np.zeros((2, 8, 8, 3), np.uint8)
    with pytest.raises((ValueError, TypeError), match=arg):
        T.flip(img, **kw)
    out = np.full((2, 3, 8, 8), 7.0, np.float32)
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.Normalize(0.5, 0.5)])
    with pytest.raises((ValueError, TypeError), match=arg):
        pol(img, seed=0, out=out, **kw)
    assert (out == 7.0).all()
    assert pol.last_params is None


def test_counts_beyond_the_padded_length_and_other_container_errors():
    with pytest.raises(ValueError, match="counts: sample 1 has count 4"):
        Boxes(np.zeros((2, 3, 4)), counts=[1, 4])
    with pytest.raises(ValueError, match="format"):
        Boxes(np.zeros((2, 3, 4)), format="yxyx")
    with pytest.raises(ValueError, match="min_visibility"):
        Boxes(np.zeros((2, 3, 4)), min_visibility=1.5)
    with pytest.raises(ValueError, match="visibility"):
        Keypoints(np.zeros((2, 3, 2)), np.ones((2, 4), bool))
    with pytest.raises(ValueError, match="boxes\\[1\\]"):
        Boxes([np.zeros((1, 4)), np.zeros((2, 3))])
    with pytest.raises(ValueError, match="xywh"):
        T.flip(np.array([[8, 8]]), boxes=Boxes(np.array([[[1.0, 1.0, -2.0, 3.0]]]), format="xywh"))
    # invalid rows past the count are not checked
    b = np.array([[[0.0, 0.0, 1.0, 1.0], [5.0, 0.0, 1.0, 1.0]]])
    T.flip(np.array([[8, 8]]), boxes=Boxes(b, counts=[1]))


# ------------------------------------------------------------------------------ the Numba twin
def test_masks_through_the_numba_twin_equal_the_cpu_twin():
    """backend="numba": the ops' Numba CUDA kernels (the simulator without a GPU; the GPU
    itself with one, on CuPy copies)."""
    from gpuaug._util import simulator

    lab, img = _label_image(2, 5, 6)
    kw = dict(angle=[20.0, -70.0])
    cpu = T.rotate(img, **kw, masks=lab, backend="cpu").masks.data
    if simulator():
        nb = T.rotate(img, **kw, masks=lab, backend="numba").masks.data
    else:
        cp = pytest.importorskip("cupy")
        nb = cp.asnumpy(T.rotate(cp.asarray(img), **kw, masks=cp.asarray(lab), backend="numba").masks.data)
    np.testing.assert_array_equal(np.asarray(nb), cpu)


def _pixel_from_continuous(mc):
    """A continuous-coordinate map (2, 3) as gpuaug's pixel-centre (2, 3) matrix."""
    m = np.vstack([mc, [0, 0, 1]])
    to_c = np.array([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1.0]])
    return (np.linalg.inv(to_c) @ m @ to_c)[:2]


def test_normalized_keypoints_and_bool_masks():
    k = Keypoints(np.array([[[0.25, 0.5], [0.99, 0.1]]]), coords="continuous", normalized=True)
    r = T.flip(np.array([[4, 10]]), keypoints=k).keypoints
    np.testing.assert_allclose(r.data[0], [[0.75, 0.5], [0.01, 0.1]])
    r = T.crop(np.array([[4, 10]]), 0, 0, 4, 5, keypoints=k).keypoints  # x in [0, 1) of the 5-wide crop
    np.testing.assert_allclose(r.data[0], [[0.5, 0.5], [1.98, 0.1]])
    assert r.visibility[0].tolist() == [True, False]
    m = Masks(np.ones((1, 4, 4), bool))
    assert m.fill == 0
    out = T.pad(np.array([[4, 4]]), 1, masks=m).masks.data
    assert out.dtype == np.bool_ and out[0, 1:-1, 1:-1].all() and not out[0, 0].any()
    with pytest.raises(ValueError, match="fill"):
        Masks(np.ones((1, 4, 4), bool), fill=2)


def test_compose_varshape_int32_masks():
    shapes = [(9, 12), (14, 7)]
    imgs = [RNG.integers(0, 200, (h, w, 1)).astype(np.uint8) for h, w in shapes]
    labs = [np.ascontiguousarray(i[..., 0]).astype(np.int32) * 65537 for i in imgs]
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(p=1.0),
                          gpuaug.RandomRotation(30, interpolation="nearest", fill=7)])
    y, m = pol(imgs, seed=0, masks=Masks(labs, fill=7 * 65537))
    for a, b in zip(y, m.data):
        np.testing.assert_array_equal(a[..., 0].astype(np.int32) * 65537, b)


def test_crop_window_outside_the_image_is_refused_as_by_the_op():
    with pytest.raises(ValueError, match="left, width: sample 1"):
        T.crop(np.array([[8, 8]] * 2), 0, [0, 5], 4, 4, boxes=np.zeros((2, 0, 4)))
    with pytest.raises(ValueError, match="left, width"):
        gpuaug.crop(np.zeros((2, 8, 8, 1), np.uint8), 0, [0, 5], 4, 4)


def test_varshape_int32_pad():
    labs = [RNG.integers(0, 9, (h, w)).astype(np.int32) * 65537 for h, w in [(3, 4), (5, 2)]]
    imgs = [np.zeros(a.shape + (3,), np.uint8) for a in labs]
    out = T.pad(imgs, (1, 0, 0, 2), masks=Masks(labs, fill=-5)).masks.data
    for o, a in zip(out, labs):
        assert o.shape == (a.shape[0] + 1, a.shape[1] + 2)
        np.testing.assert_array_equal(o[1:, :-2], a)
        assert (o[0] == -5).all() and (o[:, -2:] == -5).all()
