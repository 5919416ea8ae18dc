"""gpuaug.targets: hypothesis over shapes, formats, affine parameters and min_visibility,
against the NumPy reference of torchvision's affine rule and Albumentations' drop rule."""
import numpy as np
import pytest

pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402
from test_targets import _pixel_from_continuous, from_xyxy, rand_boxes, ref_affine_boxes, sizes, to_xyxy, tv_affine_forward  # noqa: E402

from gpuaug import targets as T  # noqa: E402
from gpuaug.targets import Boxes  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3), m=st.integers(0, 40), h=st.integers(1, 40), w=st.integers(1, 40),
       fmt=st.sampled_from(["xyxy", "xywh", "cxcywh"]), angle=st.floats(-180, 180),
       tx=st.floats(-10, 10), ty=st.floats(-10, 10), scale=st.floats(0.3, 3.0), shx=st.floats(-40, 40),
       shy=st.floats(-40, 40), seed=st.integers(0, 2 ** 31), mv=st.sampled_from([None, 0.0, 0.5]))
def test_affine_boxes_property(n, m, h, w, fmt, angle, tx, ty, scale, shx, shy, seed, mv):
    """Random shapes, formats and affine parameters against torchvision's affine rule."""
    rng = np.random.default_rng(seed)
    xyxy = rand_boxes(n, m, h, w, rng, np.float64)
    mc = tv_affine_forward((w / 2, h / 2), angle, (tx, ty), scale, (shx, shy))
    r = T.warp_affine(sizes(n, h, w), _pixel_from_continuous(mc),
                      boxes=Boxes(from_xyxy(xyxy, fmt), format=fmt, min_visibility=mv)).boxes
    for i in range(n):
        want = ref_affine_boxes(xyxy[i], mc, (h, w))
        c = int(r.counts[i])
        kept = r.index[i, :c]
        if mv is None:
            assert kept.tolist() == list(range(m))
        else:  # Albumentations' rule on the unclipped mapped box
            pts = xyxy[i][:, [[0, 1], [2, 1], [2, 3], [0, 3]]] @ mc[:, :2].T + mc[:, 2]
            full = np.prod(pts.max(1) - pts.min(1), axis=1)
            clip_area = np.prod(want[:, 2:] - want[:, :2], axis=1)
            keep = (clip_area > 0) & (clip_area >= mv * full)
            assert kept.tolist() == np.nonzero(keep)[0].tolist()
        np.testing.assert_allclose(to_xyxy(r.data[i, :c], fmt), want[kept], atol=1e-6)
