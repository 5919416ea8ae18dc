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
