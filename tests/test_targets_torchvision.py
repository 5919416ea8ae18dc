"""gpuaug.targets against torchvision v2 itself (tv_tensors.BoundingBoxes / KeyPoints), one
sample at a time with the same parameters; skipped where torchvision is not importable (it is
on the GPU machine). Boxes within 1e-3 px (the issue's bar); torchvision clamps boxes in
crops and affine maps, gpuaug clips every output, so torchvision's results are clamped too.

Keypoints: torchvision flips them about pixel centres (``w - 1 - x``) but resizes and
rotates them in continuous coordinates (``x * r``, centre ``w / 2``); gpuaug's
``coords="pixel"`` matches the first, ``coords="continuous"`` the second.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
tv = pytest.importorskip("torchvision")
from torchvision import tv_tensors  # noqa: E402
import torchvision.transforms.v2.functional as F  # noqa: E402

from gpuaug import targets as T  # noqa: E402
from gpuaug.targets import Boxes, Keypoints  # noqa: E402

RNG = np.random.default_rng(3)
H, W, N, M = 29, 37, 4, 12


def _boxes():
    x1 = RNG.uniform(-5, W, (N, M))
    y1 = RNG.uniform(-5, H, (N, M))
    return np.stack([x1, y1, x1 + RNG.uniform(1, 20, (N, M)), y1 + RNG.uniform(1, 15, (N, M))], -1)


def _tv_boxes(b, hw, fmt="XYXY"):
    return tv_tensors.BoundingBoxes(torch.as_tensor(b, dtype=torch.float64), format=fmt, canvas_size=hw)


def _clamped(out):
    return F.clamp_bounding_boxes(out).as_subclass(torch.Tensor).numpy()


def _ours(fn, *args, fmt="xyxy", **kw):
    return fn(np.array([[H, W]] * N), *args, boxes=Boxes(_boxes_cache, format=fmt, min_visibility=None), **kw).boxes


_boxes_cache = _boxes()
SIZES = np.array([[H, W]] * N)


def _check(ours, tv_fn):
    for i in range(N):
        want = _clamped(tv_fn(i, _tv_boxes(_boxes_cache[i], (H, W))))
        np.testing.assert_allclose(ours.data[i], want, atol=1e-3)


def test_flips():
    hz = np.array([True, False, True, False])
    vt = np.array([False, True, True, False])
    ours = T.flip(SIZES, hz, vt, boxes=Boxes(_boxes_cache, min_visibility=None)).boxes

    def ref(i, b):
        if hz[i]:
            b = F.horizontal_flip(b)
        if vt[i]:
            b = F.vertical_flip(b)
        return b
    _check(ours, ref)


def test_crop_pad_resize_resized_crop():
    top, left = np.array([0, 3, 5, 1]), np.array([2, 0, 4, 7])
    _check(T.crop(SIZES, top, left, 20, 25, boxes=Boxes(_boxes_cache, min_visibility=None)).boxes,
           lambda i, b: F.crop(b, int(top[i]), int(left[i]), 20, 25))
    _check(T.pad(SIZES, (1, 2, 3, 4), boxes=Boxes(_boxes_cache, min_visibility=None)).boxes,
           lambda i, b: F.pad(b, [3, 1, 4, 2]))  # torchvision: left, top, right, bottom
    _check(T.resize(SIZES, (50, 20), boxes=Boxes(_boxes_cache, min_visibility=None)).boxes,
           lambda i, b: F.resize(b, [50, 20]))
    win = np.array([[2, 3, 20, 25], [0, 0, 29, 37], [5, 1, 10, 30], [7, 9, 15, 15]])
    _check(T.resized_crop(SIZES, win, (24, 24), boxes=Boxes(_boxes_cache, min_visibility=None)).boxes,
           lambda i, b: F.resized_crop(b, *[int(v) for v in win[i]], size=[24, 24]))


def test_rotate_affine_perspective():
    ang = np.array([10.0, -35.0, 90.0, 150.0])
    _check(T.rotate(SIZES, ang, boxes=Boxes(_boxes_cache, min_visibility=None)).boxes,
           lambda i, b: F.rotate(b, float(ang[i])))
    ctr = np.array([[3.0, 4.0]] * N)  # gpuaug's pixel-centre centre = torchvision's - 0.5
    _check(T.rotate(SIZES, ang, ctr, boxes=Boxes(_boxes_cache, min_visibility=None)).boxes,
           lambda i, b: F.rotate(b, float(ang[i]), center=[3.5, 4.5]))
    from test_targets import _pixel_from_continuous, tv_affine_forward

    params = [(12.0, [3, -2], 1.1, [5.0, 2.0]), (-40.0, [0, 4], 0.8, [0.0, -10.0]),
              (0.0, [1, 1], 1.0, [20.0, 0.0]), (75.0, [-5, 0], 1.3, [-3.0, 7.0])]
    mats = np.stack([_pixel_from_continuous(tv_affine_forward((W / 2, H / 2), a, t, s, sh)) for a, t, s, sh in params])
    _check(T.warp_affine(SIZES, mats, boxes=Boxes(_boxes_cache, min_visibility=None)).boxes,
           lambda i, b: F.affine(b, params[i][0], params[i][1], params[i][2], params[i][3]))
    start = [[0, 0], [W, 0], [W, H], [0, H]]
    ends = [[[1, 2], [W - 3, 0], [W, H - 2], [2, H]], [[0, 0], [W, 0], [W, H], [0, H]],
            [[3, 3], [W - 3, 1], [W - 1, H - 4], [0, H - 1]], [[0, 2], [W, 2], [W - 2, H], [2, H]]]
    from gpuaug.policy.transforms import homographies

    hc = homographies(np.array([start] * N, float), np.array(ends, float))
    to_c = np.array([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1.0]])
    hp = np.linalg.inv(to_c) @ hc @ to_c
    ours = T.warp_perspective(SIZES, hp, boxes=Boxes(_boxes_cache, min_visibility=None)).boxes
    for i in range(N):
        want = _clamped(F.perspective(_tv_boxes(_boxes_cache[i], (H, W)), start, ends[i]))
        np.testing.assert_allclose(ours.data[i], want, atol=1e-2)  # torchvision solves in float32


@pytest.mark.parametrize("fmt", ["XYWH", "CXCYWH"])
def test_formats(fmt):
    from test_targets import from_xyxy

    b = from_xyxy(_boxes_cache, fmt.lower())
    ours = T.rotate(SIZES, 25.0, boxes=Boxes(b, format=fmt.lower(), min_visibility=None)).boxes
    for i in range(N):
        want = F.clamp_bounding_boxes(F.rotate(_tv_boxes(b[i], (H, W), fmt), 25.0)).as_subclass(torch.Tensor).numpy()
        np.testing.assert_allclose(ours.data[i], want, atol=1e-3)


@pytest.mark.skipif(not hasattr(tv_tensors, "KeyPoints"), reason="this torchvision has no tv_tensors.KeyPoints")
def test_keypoints():
    pts = np.stack([RNG.uniform(0, W - 1, (N, 5)), RNG.uniform(0, H - 1, (N, 5))], -1)

    def tv_k(i):
        return tv_tensors.KeyPoints(torch.as_tensor(pts[i]), canvas_size=(H, W))

    def arr(k):
        return k.as_subclass(torch.Tensor).numpy()

    r = T.flip(SIZES, True, keypoints=pts).keypoints  # pixel centres, as torchvision's flips
    for i in range(N):
        np.testing.assert_allclose(r.data[i], arr(F.horizontal_flip(tv_k(i))), atol=1e-6)
    r = T.crop(SIZES, 2, 3, 20, 20, keypoints=pts).keypoints
    for i in range(N):
        np.testing.assert_allclose(r.data[i], arr(F.crop(tv_k(i), 2, 3, 20, 20)), atol=1e-6)
    kc = Keypoints(pts, coords="continuous")
    r = T.resize(SIZES, (50, 20), keypoints=kc).keypoints
    for i in range(N):
        np.testing.assert_allclose(r.data[i], arr(F.resize(tv_k(i), [50, 20])), atol=1e-3)
    r = T.rotate(SIZES, 33.0, keypoints=kc).keypoints
    for i in range(N):
        np.testing.assert_allclose(r.data[i], arr(F.rotate(tv_k(i), 33.0)), atol=1e-3)
