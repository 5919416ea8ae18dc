"""Bad input to gpuaug.targets (the rows of docs/errors.md's "Targets" table): each case raises
an error naming the argument before anything is computed, through the functional ops and
through Compose (whose out= stays untouched and last_params unset). The GPU variant (device
counts, checked in the same readback as the NaN check) is marked gpu."""
import numpy as np
import pytest

import gpuaug
from gpuaug import targets as T
from gpuaug.targets import Boxes, Keypoints, Masks, RandomIoUCrop, RandomSizedBBoxSafeCrop

IMG = np.zeros((2, 8, 8, 3), np.uint8)
B = np.array([[[1.0, 1.0, 4.0, 5.0]], [[0.0, 0.0, 2.0, 2.0]]])

# (id, callable building the bad call's target kwargs, exception, message regex)
CASES = [
    ("box x2 < x1", lambda: dict(boxes=np.array([[[5.0, 1.0, 2.0, 3.0]]] * 2)), ValueError,
     r"boxes: sample 0 box 0 is \[5.0, 1.0, 2.0, 3.0\] \(xyxy\), with x2 < x1 or y2 < y1; expected x1 <= x2"),
    ("negative size", lambda: dict(boxes=Boxes(np.array([[[1.0, 1.0, -2.0, 3.0]]] * 2), "xywh")), ValueError,
     r"boxes: sample 0 box 0 .* \(xywh\), with a negative width or height; expected w >= 0 and h >= 0"),
    ("NaN box", lambda: dict(boxes=np.array([[[np.nan, 1.0, 2.0, 3.0]]] * 2)), ValueError,
     r"boxes: sample 0 box 0 is \[nan, 1.0, 2.0, 3.0\], with NaN or inf coordinates; expected finite numbers"),
    ("NaN keypoint", lambda: dict(keypoints=np.array([[[np.nan, 1.0]]] * 2)), ValueError,
     r"keypoints: sample 0 point 0 is \[nan, 1.0\], with NaN or inf coordinates"),
    ("box last dim", lambda: dict(boxes=np.zeros((2, 3, 5))), ValueError,
     r"boxes: got shape \(2, 3, 5\); expected \(N, M, 4\) with a last dimension of 4"),
    ("ragged box last dim", lambda: dict(boxes=[np.zeros((1, 4)), np.zeros((2, 3))]), ValueError,
     r"boxes\[1\]: got shape \(2, 3\); expected \(M, 4\)"),
    ("keypoint last dim", lambda: dict(keypoints=np.zeros((2, 3, 3))), ValueError,
     r"keypoints: got shape \(2, 3, 3\); expected \(N, K, 2\)"),
    ("box samples", lambda: dict(boxes=np.zeros((3, 1, 4))), ValueError,
     r"boxes: holds 3 samples; the .* 2; expected one entry per image"),
    ("count beyond M", lambda: dict(boxes=Boxes(np.zeros((2, 3, 4)), counts=[1, 4])), ValueError,
     r"counts: sample 1 has count 4, outside 0..3 \(the padded length M of boxes \(2, 3, 4\)\)"),
    ("counts shape", lambda: dict(boxes=Boxes(np.zeros((2, 3, 4)), counts=[1, 2, 3])), ValueError,
     r"counts: got shape \(3,\) dtype int64; expected 2 ints"),
    ("format", lambda: dict(boxes=Boxes(B, format="ltrb")), ValueError,
     r"format: got 'ltrb'; expected one of 'xyxy', 'xywh', 'cxcywh'"),
    ("min_visibility", lambda: dict(boxes=Boxes(B, min_visibility=1.5)), ValueError,
     r"min_visibility: got 1.5; expected None or a number in \[0, 1\]"),
    ("labels shape", lambda: dict(boxes=Boxes(B, labels=np.zeros((2, 2)))), ValueError,
     r"labels: got shape \(2, 2\); expected \(2, 1\)"),
    ("visibility shape", lambda: dict(keypoints=Keypoints(np.zeros((2, 3, 2)), np.ones((2, 4), bool))), ValueError,
     r"visibility: got shape \(2, 4\); expected \(2, 3\)"),
    ("mask size", lambda: dict(masks=np.zeros((2, 8, 9), np.uint8)), ValueError,
     r"masks: sample 0 is 8x9, its image 8x8; expected each mask to have its image's height and width"),
    ("mask count", lambda: dict(masks=np.zeros((3, 8, 8), np.uint8)), ValueError,
     r"masks: holds 3 samples; the images are 2"),
    ("mask dtype", lambda: dict(masks=np.zeros((2, 8, 8), np.float32)), TypeError,
     r"masks: got dtype float32; expected uint8, int32 or bool"),
    ("mask fill", lambda: dict(masks=Masks(np.zeros((2, 8, 8), np.uint8), fill=300)), ValueError,
     r"fill: got 300; expected an int in 0..255"),
    ("not numbers", lambda: dict(boxes=np.array([[["a", "b", "c", "d"]]] * 2)), TypeError,
     r"boxes: got ndarray of dtype <U1; expected a NumPy or CUDA array of numbers"),
]


@pytest.mark.parametrize("case,kw,exc,msg", CASES, ids=[c[0] for c in CASES])
def test_targets_bad_input(case, kw, exc, msg):
    with pytest.raises(exc, match=msg):
        T.flip(IMG, **kw())
    out = np.full((2, 8, 8, 3), 7, np.uint8)
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip(), gpuaug.RandomRotation(10)])
    with pytest.raises(exc, match=msg):
        pol(IMG, seed=0, out=out, **kw())
    assert (out == 7).all() and pol.last_params is None


def test_empty_box_lists_are_valid():
    r = T.flip(IMG, boxes=np.zeros((2, 0, 4)), keypoints=np.zeros((2, 0, 2)))
    assert r.boxes.data.shape == (2, 0, 4) and r.keypoints.data.shape == (2, 0, 2)
    r = T.flip(IMG, boxes=[np.zeros((0, 4)), np.array([[1.0, 1.0, 2.0, 2.0]])])
    assert [len(a) for a in r.boxes.data] == [0, 1]


def test_box_aware_crops_and_keep_bad_input():
    with pytest.raises(ValueError, match=r"RandomIoUCrop: its crop depends on the boxes; call the policy with boxes="):
        gpuaug.Compose([RandomIoUCrop(4)])(IMG)
    with pytest.raises(ValueError, match=r"sampler_options: got \[-0.5\]; expected minimum IoUs >= 0"):
        RandomIoUCrop(4, sampler_options=[-0.5])
    with pytest.raises(ValueError, match=r"min_scale, max_scale: got 0.9, 0.5; expected 0 < min_scale <= max_scale"):
        RandomIoUCrop(4, min_scale=0.9, max_scale=0.5)
    with pytest.raises(ValueError, match=r"erosion_rate: got 1.0; expected a number in \[0, 1\)"):
        RandomSizedBBoxSafeCrop(4, erosion_rate=1.0)
    with pytest.raises(ValueError, match=r"keep: got shape \(2, 3\); expected \(2, 1\) bools"):
        T.crop(IMG, 0, 0, 4, 4, boxes=B, keep=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match=r"keys: got shape \(1,\)"):
        T.iou_crop_windows(B, [[8, 8]] * 2, keys=[1])


@pytest.mark.gpu
def test_device_counts_beyond_the_padded_length():
    import cupy as cp

    b = Boxes(cp.zeros((2, 3, 4)), counts=cp.asarray([1, 5], cp.int32))
    with pytest.raises(ValueError, match=r"counts: sample 1 has count 5, outside 0..3"):
        T.flip(cp.zeros((2, 8, 8, 3), cp.uint8), boxes=b)
