"""Large batches: index arithmetic past 2**31 bytes, images past the per-image limit, and
running out of memory.

The GPU tests (marked gpu and slow; run on the GPU machine) put a batch of 2.2 GB
(704 x 1024 x 1024 x 3 uint8) through every registry op on the CUDA C and Numba CUDA
backends and compare it with its two halves processed separately: any 32-bit overflow in
the batch-wide index maths shows as a mismatch in the second half (or as the poison left
in an unwritten output). The noise ops key their Philox counters on the sample's index in
its batch (documented), so for them the second half is checked statistically instead.
"""
from __future__ import annotations

import numpy as np
import pytest

import gpuaug
from gpuaug._batch import MAX_IMAGE_ELEMENTS

N_BIG, H_BIG, W_BIG = 704, 1024, 1024  # 704 * 1024 * 1024 * 3 = 2.2e9 bytes > 2**31
NOISE = ("gaussian_noise", "salt_and_pepper")


def test_image_over_the_per_image_limit_is_refused():
    # a broadcast view: 2**31 + 1.5e6 elements without allocating them
    x = np.broadcast_to(np.zeros((1, 1, 1, 3), np.uint8), (1, 26800, 26800, 3))
    assert x[0].size > MAX_IMAGE_ELEMENTS
    with pytest.raises(ValueError, match=r"x: has an image of 2154720000 elements.*2\*\*31 - 1"):
        gpuaug.flip(x, horizontal=True, backend="cpu")


def test_output_over_the_per_image_limit_is_refused_before_allocating():
    x = np.zeros((2, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match=r"out: an output image would hold 2700000000 elements"):
        gpuaug.resize(x, size=(30000, 30000), backend="cpu")


def test_out_of_memory_names_the_request(monkeypatch):
    """An allocation failure becomes a MemoryError that says which output, its shape and size."""
    def refuse(shape, dtype):
        raise MemoryError("refused")

    monkeypatch.setattr(np, "empty", refuse)
    x = np.ones((3, 8, 8, 3), np.uint8)
    with pytest.raises(MemoryError, match=r"out: cannot allocate the output, shape \(3, 16, 16, 3\) uint8 "
                                          r"= 0\.00 GiB of host memory"):
        gpuaug.resize(x, size=(16, 16), backend="cpu")


def _split_kwargs(spec, kw, n, lo, hi):
    """The keyword arguments for samples lo:hi (per-sample arrays sliced, the rest as is)."""
    by_name = {p.name: p for p in spec.params}
    out = {}
    for k, v in kw.items():
        p = by_name[k]
        a = np.asarray(v) if not isinstance(v, str) else None
        if (p.per_sample and p.kind != "size" and a is not None and a.ndim == len(p.shape) + 1
                and a.shape[0] == n):
            out[k] = a[lo:hi]
        else:
            out[k] = v
    return out


@pytest.fixture(scope="module")
def big_input():
    cp = pytest.importorskip("cupy")
    x = cp.random.randint(0, 256, (N_BIG, H_BIG, W_BIG, 3), dtype=cp.uint8)
    assert x.nbytes > 2 ** 31
    yield x
    del x
    cp.get_default_memory_pool().free_all_blocks()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["cuda", "numba"])
@pytest.mark.parametrize("op", sorted(gpuaug.registry))
def test_batch_past_2_31_bytes_equals_its_halves(op, backend, big_input):
    import cupy as cp

    spec = gpuaug.registry[op]
    x = big_input
    n, h = N_BIG // 2, N_BIG
    kw = spec.example(np.random.default_rng(3), N_BIG, H_BIG, W_BIG) if spec.example else {}
    try:
        full = spec.func(x, **kw, backend=backend)
        parts = [spec.func(x[lo:hi], **_split_kwargs(spec, kw, N_BIG, lo, hi), backend=backend)
                 for lo, hi in ((0, n), (n, h))]
        cp.cuda.get_current_stream().synchronize()
        if isinstance(full, list):  # an op whose per-sample output sizes differ
            assert len(full) == N_BIG
            pairs = list(zip(full, parts[0] + parts[1]))
            bad = [i for i, (a, b) in enumerate(pairs) if not cp.array_equal(a, b)]
            assert not bad, f"{op}/{backend}: samples {bad[:5]} differ from the halves"
            return
        assert full.shape[0] == N_BIG
        assert bool(cp.array_equal(full[:n], parts[0])), f"{op}/{backend}: first half differs"
        if op in NOISE:
            # counters are keyed on the index in the batch: the second half is other noise, but
            # it must be written (no input left unchanged everywhere) and as strong as the first
            d1 = cp.abs(full[n:].astype(cp.int16) - x[n:].astype(cp.int16)).mean()
            d0 = cp.abs(full[:n].astype(cp.int16) - x[:n].astype(cp.int16)).mean()
            assert float(d1) > 0.5 * float(d0) > 0, f"{op}/{backend}: second half noise {float(d1)} vs {float(d0)}"
            last = full[-1].astype(cp.int16) - x[-1].astype(cp.int16)
            first = full[0].astype(cp.int16) - x[0].astype(cp.int16)
            assert not bool(cp.array_equal(last, first)), f"{op}/{backend}: the last sample repeats the first's noise"
        else:
            diff = cp.flatnonzero((full[n:] != parts[1]).reshape(N_BIG - n, -1).any(axis=1))
            assert diff.size == 0, f"{op}/{backend}: second-half samples {cp.asnumpy(diff[:5]) + n} differ"
    finally:
        full = parts = None
        cp.get_default_memory_pool().free_all_blocks()


@pytest.mark.gpu
def test_gpu_out_of_memory_is_a_clear_error_and_the_gpu_keeps_working():
    import cupy as cp

    x = cp.zeros((2000, 4, 4, 3), cp.uint8)
    free = cp.cuda.runtime.memGetInfo()[1]
    side = 20000  # 2000 * 20000 * 20000 * 3 bytes = 2.4 TB, more than any GPU holds
    assert 2000 * side * side * 3 > free
    with pytest.raises(MemoryError, match=r"out: cannot allocate the output, shape \(2000, 20000, 20000, 3\) "
                                          r"uint8 = 2235\.17 GiB of GPU memory \(.* GiB free on the GPU"):
        gpuaug.resize(x, size=(side, side))
    y = gpuaug.flip(cp.arange(24, dtype=cp.uint8).reshape(1, 2, 4, 3), horizontal=True)
    assert cp.asnumpy(y)[0, 0, 0].tolist() == [9, 10, 11]
