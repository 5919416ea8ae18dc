"""The targets' per-call host work through Compose (issue 15): the maps taken from the images'
own stages equal the ones composed again, bit for bit; the memos of shape-only rows give fresh
rows for a new shape, count or convention and the same results as without them; the dense
masks' size check still names the sample."""
import numpy as np
import pytest

import gpuaug
from gpuaug.targets import Boxes, Keypoints, Masks
from gpuaug.targets import _apply as A
from gpuaug.targets import _policy as P


def _policies():
    return {
        "kprof": [gpuaug.RandomHorizontalFlip(), gpuaug.RandomAffine(15, translate=(0.1, 0.1), scale=(0.9, 1.1)),
                  gpuaug.RandomResizedCrop(24)],
        "perspective_fill": [gpuaug.RandomPerspective(0.4, p=1.0, fill=7), gpuaug.RandomRotation(20, fill=7)],
        "two_stages": [gpuaug.RandomRotation(10), gpuaug.GaussianBlur(3), gpuaug.RandomResizedCrop((20, 26)),
                       gpuaug.RandomVerticalFlip()],
        "crop_pad": [gpuaug.RandomCrop(28, padding=4), gpuaug.Resize((17, 23))],
    }


def _targets(rng, n, h, w):
    x1, y1 = rng.uniform(-3, w, (n, 12)), rng.uniform(-3, h, (n, 12))
    boxes = Boxes(np.stack([x1, y1, x1 + rng.uniform(0, 9, (n, 12)), y1 + rng.uniform(0, 9, (n, 12))], -1)
                  .astype(np.float32), counts=rng.integers(0, 13, n), min_visibility=0.3)
    kp = Keypoints(np.stack([rng.uniform(0, w, (n, 5)), rng.uniform(0, h, (n, 5))], -1), rng.random((n, 5)) < 0.8)
    masks = Masks(rng.integers(0, 9, (n, h, w)).astype(np.uint8))
    return boxes, kp, masks


def _same(a, b):
    if isinstance(a, Boxes):
        for f in ("data", "counts", "index"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    elif isinstance(a, Keypoints):
        np.testing.assert_array_equal(a.data, b.data)
        np.testing.assert_array_equal(a.visibility, b.visibility)
    else:
        np.testing.assert_array_equal(a.data, b.data)


@pytest.mark.parametrize("name", list(_policies()))
def test_maps_from_the_images_stages_equal_the_composed_ones(name):
    """Compose hands the targets its stages' maps and inverses (no second composition): the
    same bits as composing them again (_stages and the masks' inverse), and the same targets."""
    from gpuaug._batch import as_batch
    from gpuaug.policy.compose import batch_sizes

    rng = np.random.default_rng(3)
    n, h, w = 6, 30, 32
    pol = gpuaug.Compose(_policies()[name], seed=1)
    x = rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    boxes, kp, masks = _targets(rng, n, h, w)
    b = as_batch(x, "NHWC")
    sizes = batch_sizes(b)
    params = pol._sample(n, sizes, 5)
    built = []
    pol._run(x, b, params, None, "cpu", built)
    again, given = list(P._stages(pol, params, "uint8", sizes)), list(P._built_stages(built, n))
    assert len(again) == len(given) >= 1
    for (g1, m1, o1, c1, _), (g2, m2, o2, c2, inv2) in zip(again, given):
        assert list(g1) == list(g2) and c1 == c2
        np.testing.assert_array_equal(o1, o2)
        assert m1.tobytes() == m2.tobytes()
        assert P._stage_inverse(m1).tobytes() == np.ascontiguousarray(inv2).tobytes()
    pt = P.PolicyTargets(b, sizes, boxes, kp, masks)
    for got, want in zip(pt.run(pol, params, "uint8", None, "cpu", built), pt.run(pol, params, "uint8", None, "cpu")):
        _same(got, want)
    y, *got = pol(x, params=params, boxes=boxes, keypoints=kp, masks=masks)  # the call takes the first path
    for g, w_ in zip(got, pt.run(pol, params, "uint8", None, "cpu")):
        _same(g, w_)


def test_shape_memos_give_fresh_rows_for_a_new_shape():
    """The limits and row tables kept per shape: a new n, output size or convention gets its
    own rows, each equal to the rows built without the memo, and read-only."""
    out = np.broadcast_to(np.array([20, 30], np.int64), (4, 2))
    b1 = A._box_setup(np.zeros((4, 3, 4)), np.eye(3), out, out, False)
    assert b1[-1] == (20, 30)
    np.testing.assert_array_equal(b1[2], A._box_lims(np.asarray(out, np.float64), False))
    assert not b1[2].flags.writeable
    b2 = A._box_setup(np.zeros((4, 3, 4)), np.eye(3), out, np.array([[20, 31]] * 4), False)
    np.testing.assert_array_equal(b2[2], np.array([[31, 20]] * 4))
    b3 = A._box_setup(Boxes(np.zeros((5, 3, 4)), normalized=True), np.eye(3), out[:1].repeat(5, 0),
                      np.array([[20, 30]] * 5), False)
    np.testing.assert_array_equal(b3[2], np.ones((5, 2)))
    varied = np.array([[20, 30], [21, 30], [20, 30], [20, 30]])
    b4 = A._box_setup(np.zeros((4, 3, 4)), np.eye(3), out, varied, False)
    assert b4[-1] is None and b4[2].flags.writeable
    np.testing.assert_array_equal(b4[2], varied[:, ::-1])
    for coords, norm in (("pixel", False), ("continuous", False), ("continuous", True)):
        k = A._point_setup(Keypoints(np.zeros((4, 2, 2)), coords=coords, normalized=norm), np.eye(3), out, out,
                           False)
        np.testing.assert_array_equal(k[2], A._point_lims(np.asarray(out, np.float64), coords == "continuous",
                                                          norm))
    k1 = A._point_setup(np.zeros((4, 2, 2)), np.eye(3), out, out, False)[2]
    k2 = A._point_setup(np.zeros((4, 2, 2)), np.eye(3), out, np.array([[7, 9]] * 4), False)[2]
    np.testing.assert_array_equal(k1[0], [-0.5, 29.5, -0.5, 19.5])
    np.testing.assert_array_equal(k2[0], [-0.5, 8.5, -0.5, 6.5])


def test_memo_starts_over_past_its_limit(monkeypatch):
    monkeypatch.setattr(A, "_MEMO", {})
    monkeypatch.setattr(A, "_MEMO_LIMIT", 3)
    for i in range(5):
        got = A._memo(("t", i), lambda i=i: np.full(2, i))
        np.testing.assert_array_equal(got, [i, i])
        assert len(A._MEMO) <= 3


def test_uniform_hw():
    assert A._uniform_hw(np.broadcast_to(np.array([5, 6]), (3, 2)), 3) == (5, 6)
    assert A._uniform_hw(np.array([[5, 6], [5, 6]]), 2) == (5, 6)
    assert A._uniform_hw(np.array([[5, 6], [5, 7]]), 2) is None
    assert A._uniform_hw(np.array([5, 6]), 4) == (5, 6)


def test_dense_masks_of_another_size_are_still_named():
    pol = gpuaug.Compose([gpuaug.RandomHorizontalFlip()], seed=0)
    x = np.zeros((3, 8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match=r"masks: sample 0 is 8x9, its image 8x8; expected each mask"):
        pol(x, masks=np.zeros((3, 8, 9), np.uint8))
    with pytest.raises(ValueError, match="masks: holds 2 samples; the images are 3"):
        pol(x, masks=np.zeros((2, 8, 8), np.uint8))


def test_host_bench_runs_and_counts_one_allocation_for_boxes_and_keypoints():
    """bench/host_targets.py on its stand-ins (in a process of its own: it replaces cupy):
    a call with boxes, keypoints and masks allocates three device arrays (the images, the
    boxes' and keypoints' outputs together, the masks) and makes two staged uploads."""
    import os
    import subprocess
    import sys

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    out = subprocess.run([sys.executable, os.path.join(root, "bench", "host_targets.py"), "--n", "16", "--number", "2",
                          "--repeat", "1", "--only", "images", "all", "boxes_kp"], capture_output=True, text=True,
                         env=env, timeout=300, check=True).stdout
    rows = {line.split()[0]: line for line in out.splitlines() if "allocs" in line}
    assert "allocs 1, uploads 1" in rows["images"]
    assert "allocs 3, uploads 2" in rows["all"]
    assert "allocs 2, uploads 2" in rows["boxes_kp"]
