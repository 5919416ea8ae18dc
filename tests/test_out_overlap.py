"""out= checks against the input for varshape batches: every output image is checked against
every input image (by memory extent), in one sorted sweep."""
import numpy as np
import pytest

import gpuaug


def _images(buf, n, h=4, w=5, c=3):
    step = h * w * c
    return [buf[i * step:(i + 1) * step].reshape(h, w, c) for i in range(n)]


@pytest.mark.parametrize("bad", [0, 3, 7])
def test_varshape_out_overlapping_any_input_is_refused(bad):
    rng = np.random.default_rng(0)
    src = rng.integers(0, 256, 8 * 60, np.uint8)
    xs = _images(src, 8)
    outs = _images(np.zeros(8 * 60, np.uint8), 8)
    outs[bad] = xs[(bad + 5) % 8]  # the output image is one of the inputs
    before = [o.copy() for o in outs]
    with pytest.raises(ValueError, match=rf"out\[{bad}\]: overlaps the input"):
        gpuaug.flip(xs, out=outs)
    for o, b in zip(outs, before):
        np.testing.assert_array_equal(o, b)  # nothing written


def test_varshape_out_partially_overlapping_input_is_refused():
    buf = np.zeros(10 * 60, np.uint8)
    xs = _images(buf, 8)
    outs = _images(np.zeros(8 * 60, np.uint8), 8)
    outs[2] = buf[8 * 60 - 30:8 * 60 + 30].reshape(4, 5, 3)[:, :, :]  # straddles the last input's end
    with pytest.raises(ValueError, match=r"out\[2\]: overlaps the input"):
        gpuaug.flip(xs, out=outs)


def test_varshape_into_rows_of_one_dense_array_between_inputs():
    """Outputs interleaved with inputs in one buffer, touching none: accepted, and correct."""
    rng = np.random.default_rng(1)
    buf = rng.integers(0, 256, 16 * 60, np.uint8)
    views = _images(buf, 16)
    xs, outs = views[0::2], views[1::2]
    want = [x[:, ::-1].copy() for x in xs]
    gpuaug.flip(xs, out=outs)
    for o, w_ in zip(outs, want):
        np.testing.assert_array_equal(o, w_)


def test_varshape_into_one_dense_out_array():
    """Outputs of one size from a varshape batch may go into one (N, h, w, C) array."""
    rng = np.random.default_rng(2)
    xs = [rng.integers(0, 256, (h, w, 3), np.uint8) for h, w in ((9, 7), (5, 12), (8, 8))]
    boxes = np.array([[1, 1, 6, 5], [0, 2, 5, 9], [2, 0, 6, 8]], np.float32)
    want = gpuaug.resized_crop(xs, boxes, (4, 6))
    dense = np.zeros((3, 4, 6, 3), np.uint8)
    got = gpuaug.resized_crop(xs, boxes, (4, 6), out=dense)
    assert got is dense
    for i in range(3):
        np.testing.assert_array_equal(dense[i], want[i])
    flipped = gpuaug.flip([x[:4, :6] for x in xs], out=np.zeros((3, 4, 6, 3), np.uint8))
    np.testing.assert_array_equal(flipped, np.stack([x[:4, :6][:, ::-1] for x in xs]))


def test_varshape_dense_out_checked():
    xs = [np.zeros((4, 5, 3), np.uint8), np.zeros((6, 5, 3), np.uint8)]
    with pytest.raises(ValueError, match="a varshape batch needs a list"):  # sizes differ
        gpuaug.flip(xs, out=np.zeros((2, 4, 5, 3), np.uint8))
    same = [np.zeros((4, 5, 3), np.uint8)] * 2
    with pytest.raises(ValueError, match=r"out: got shape \(2, 5, 4, 3\)"):
        gpuaug.flip(same, out=np.zeros((2, 5, 4, 3), np.uint8))
    buf = np.zeros((2, 4, 5, 3), np.uint8)
    with pytest.raises(ValueError, match="out: overlaps the input"):
        gpuaug.flip([buf[0], buf[1]], out=buf)
