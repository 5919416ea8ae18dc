import math

import numpy as np
import pytest

import gpuaug
import ref_warp as R
from gpuaug import geometry as G
from helpers import random_images


def _apply(m, x, y):
    p = m @ np.array([x, y, 1.0])
    return p[:2] / p[2]


def test_shapes_scalar_and_batched():
    assert G.rotation(10).shape == (3, 3)
    assert G.rotation([10, 20]).shape == (2, 3, 3)
    assert G.rotation(10, center=[[1, 2], [3, 4], [5, 6]]).shape == (3, 3, 3)
    assert G.scale(2).shape == (3, 3)
    assert G.scale([1, 2], 3).shape == (2, 3, 3)
    assert G.shear(0.1, [0.1, 0.2, 0.3]).shape == (3, 3, 3)
    assert G.translation(1, [2, 3]).shape == (2, 3, 3)
    assert G.flip([True, False], True, size=(4, 5)).shape == (2, 3, 3)
    assert G.identity().shape == (3, 3) and G.identity(4).shape == (4, 3, 3)
    for m in (G.rotation([1, 2]), G.scale(2), G.shear(0.3), G.translation(1, 2)):
        assert m.dtype == np.float64
        np.testing.assert_array_equal(m[..., 2, :], np.broadcast_to([0, 0, 1.0], m.shape[:-2] + (3,)))


def test_rotation_composes():
    rng = np.random.default_rng(31)
    a, b = rng.uniform(-360, 360, 8), rng.uniform(-360, 360, 8)
    c = rng.uniform(-50, 50, (8, 2))
    np.testing.assert_allclose(G.rotation(a, c) @ G.rotation(b, c), G.rotation(a + b, c), atol=1e-12)
    np.testing.assert_allclose(G.rotation(30) @ G.rotation(60), G.rotation(90), atol=1e-15)
    np.testing.assert_allclose(G.rotation(a) @ G.rotation(-a), G.identity(8), atol=1e-12)
    # exact quarter turns, counter-clockwise as displayed (y down): +x goes to -y
    np.testing.assert_array_equal(G.rotation(90)[:2, :2], [[0, 1], [-1, 0]])
    np.testing.assert_array_equal(_apply(G.rotation(90), 1, 0), [0, -1])
    np.testing.assert_array_equal(G.rotation(-270), G.rotation(90))


def test_rotation_is_opencv():
    for ang, ctr in ((25.0, (3.5, 7.0)), (-140.0, (0.0, 0.0)), (90.0, (10.0, 4.0))):
        np.testing.assert_allclose(G.rotation(ang, ctr)[:2], R.rotation_matrix(ctr, ang, 1.0), atol=1e-12)
    cv2 = pytest.importorskip("cv2", reason="OpenCV is not installed (optional cross-check)")
    np.testing.assert_allclose(G.rotation(25.0, (3.5, 7.0))[:2], cv2.getRotationMatrix2D((3.5, 7.0), 25.0, 1.0),
                               atol=1e-6)
    np.testing.assert_allclose(G.compose(G.rotation(25.0, (3.5, 7.0)), G.scale(1.3, center=(3.5, 7.0)))[:2],
                               cv2.getRotationMatrix2D((3.5, 7.0), 25.0, 1.3), atol=1e-6)


def test_builders_move_points():
    np.testing.assert_allclose(_apply(G.scale(2, 3, center=(1, 1)), 2, 2), [3, 4])
    np.testing.assert_allclose(_apply(G.shear(0.5, 0.25, center=(2, 4)), 4, 6), [5, 6.5])
    np.testing.assert_allclose(_apply(G.translation(1.5, -2), 0, 0), [1.5, -2])
    f = G.flip([True, False, True], [False, True, True], size=(4, 6))
    np.testing.assert_allclose(_apply(f[0], 1, 1), [4, 1])
    np.testing.assert_allclose(_apply(f[1], 1, 1), [1, 2])
    np.testing.assert_allclose(_apply(f[2], 0, 0), [5, 3])
    np.testing.assert_allclose(_apply(G.rotation(90, center=(2, 2)), 3, 2), [2, 1])
    np.testing.assert_allclose(_apply(G.rotation(45), math.sqrt(2), 0), [1, -1])


def test_compose_order_and_broadcast():
    t, s = G.translation(2, 0), G.scale(3)
    np.testing.assert_allclose(G.compose(t, s), s @ t)  # t first
    np.testing.assert_allclose(_apply(G.compose(t, s), 1, 1), [9, 3])
    np.testing.assert_allclose(_apply(G.compose(s, t), 1, 1), [5, 3])
    r = G.rotation([10, 20, 30])
    m = G.compose(t, r, s)
    assert m.shape == (3, 3, 3)
    np.testing.assert_allclose(m[1], s @ G.rotation(20) @ t)
    # (2, 3) affine matrices are promoted
    np.testing.assert_allclose(G.compose(t[:2], s[:2]), s @ t)
    np.testing.assert_allclose(G.compose(r), r)
    with pytest.raises(ValueError, match="per-sample lengths differ"):
        G.compose(G.rotation([1, 2]), G.rotation([1, 2, 3]))
    with pytest.raises(TypeError, match="no matrices"):
        G.compose()
    with pytest.raises(ValueError, match=r"mats\[1\]: got shape"):
        G.compose(t, np.eye(4))


def test_to_affine():
    m = G.compose(G.rotation([10, 20]), G.translation(1, 2))
    a = G.to_affine(m)
    assert a.shape == (2, 2, 3)
    np.testing.assert_array_equal(a, m[:, :2])
    assert G.to_affine(G.scale(2)).shape == (2, 3)
    with pytest.raises(ValueError, match="matrix: a bottom row is not"):
        G.to_affine(np.array([[1, 0, 0], [0, 1, 0], [0.01, 0, 1]]))
    with pytest.raises(ValueError, match="matrix: got shape"):
        G.to_affine(np.eye(3)[:2])


def test_bad_arguments():
    with pytest.raises(ValueError, match="angle: got .*finite"):
        G.rotation(np.nan)
    with pytest.raises(ValueError, match="center: got shape"):
        G.rotation(1, center=(1, 2, 3))
    with pytest.raises(ValueError, match="per-sample lengths differ"):
        G.rotation([1, 2], center=[[0, 0], [1, 1], [2, 2]])
    with pytest.raises(TypeError, match="size: got None"):
        G.flip(True)
    with pytest.raises(ValueError, match="size: got"):
        G.flip(True, size=(0, 3))
    with pytest.raises(ValueError, match="sx: got .*finite"):
        G.scale(np.inf)
    with pytest.raises(TypeError, match="tx: got"):
        G.translation("left")


def test_builders_drive_the_warps():
    """A composed augmentation through warp_affine equals its reference; a flip matrix
    equals the flip op."""
    rng = np.random.default_rng(32)
    x = random_images(rng, 4, 21, 29, 3, "uint8")
    ctr = (14.0, 10.0)
    m = G.to_affine(G.compose(G.scale(rng.uniform(0.8, 1.2, 4), center=ctr), G.shear(0.1, center=ctr),
                              G.rotation(rng.uniform(-40, 40, 4), ctr), G.translation(2, -1)))
    got = gpuaug.warp_affine(x, m, border="reflect")
    ref = np.stack([R.warp_affine(x[i].astype(float), m[i], None, "bilinear", "reflect") for i in range(4)])
    assert np.abs(got.astype(int) - np.clip(np.floor(ref + 0.5), 0, 255)).max() <= 1
    fl = G.flip([True, False, True, False], [False, False, True, True], size=(21, 29))
    np.testing.assert_array_equal(gpuaug.warp_perspective(x, fl, interpolation="nearest"),
                                  gpuaug.flip(x, [True, False, True, False], [False, False, True, True]))
