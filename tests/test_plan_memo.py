"""Launch plans are memoised on ``layout_key``: every batch with the same key must get the
same plan as a fresh analysis of its own descriptor tables (the key holds all the plan reads)."""
import itertools

import numpy as np

from gpuaug._batch import as_batch, descriptor_table, layout_key, memo_plan
from gpuaug.ops._colour import packed_layout, plan


def _batches(rng):
    """NHWC/NCHW views at many byte offsets and strides of one buffer."""
    buf = np.zeros(1 << 16, np.uint8)
    for dtype, (n, h, w, c), off, pad, layout in itertools.product(
            (np.uint8, np.float32), ((3, 5, 7, 3), (2, 4, 16, 1), (4, 3, 8, 4)), (0, 1, 4, 8, 16, 33),
            (0, 1, 16), ("NHWC", "NCHW")):
        es = np.dtype(dtype).itemsize
        shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
        per = int(np.prod(shape[1:])) + pad
        start = off - off % es if dtype != np.uint8 else off
        a = buf[start:start + (n * per + 8) * es].view(dtype)[:n * per].reshape(n, per)[:, :per - pad]
        yield as_batch(a.reshape(shape), layout), layout


def test_same_layout_key_same_plan():
    groups = {}
    for b, _ in _batches(np.random.default_rng(0)):
        t = descriptor_table(b)
        for mean in (None, 0, 1):
            key = (layout_key(b), mean)
            got = plan(t, t, b.dtype.name, b.channels, b.channels, b.n, mean, 132)
            groups.setdefault(key, []).append(got)
            # and the packed analysis on its own
            ok = packed_layout(t, t, b.channels, b.channels, b.dtype.itemsize)
            groups.setdefault(key + ("packed",), []).append(ok)
    assert len(groups) > 20
    for key, plans in groups.items():
        assert all(p == plans[0] for p in plans), key


def test_memo_plan_returns_the_plan_and_skips_varshape():
    b = as_batch(np.zeros((2, 4, 16, 3), np.uint8))
    t = descriptor_table(b)
    args = ("uint8", 3, 3, 2, None, 132, False)
    calls = []

    def make():
        calls.append(1)
        return plan(t, t, *args)
    first = memo_plan((layout_key(b), layout_key(b)), args, make)
    again = memo_plan((layout_key(b), layout_key(b)), args, make)
    assert first == again == plan(t, t, *args) and len(calls) == 1
    v = as_batch([np.zeros((4, 5, 3), np.uint8), np.zeros((2, 3, 3), np.uint8)])
    assert layout_key(v) is None
    memo_plan((None,), args, make)
    memo_plan((None,), args, make)
    assert len(calls) == 3  # varshape: analysed every time
