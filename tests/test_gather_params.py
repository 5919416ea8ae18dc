"""column_stack's device path: kernels/params.cu gathers every column (device arrays of any
numeric dtype and strides, and the block of host columns) into one float64 matrix. The kernel
runs here on the CPU emulator (tests/cuda_emu.py) with the table gather_table builds; on a GPU
the public path is compared with the NumPy one."""
import numpy as np
import pytest

from gpuaug._params import _GATHER_CODES, column_stack, gather_table

cuda_emu = pytest.importorskip("cuda_emu")


@pytest.fixture(scope="module")
def kernel():
    why = cuda_emu.available()
    if why:
        pytest.skip(why)
    emu = cuda_emu.Emulator(["params.cu"], ["gpuaug_gather_params<double>", "gpuaug_gather_params<float>"])
    return {t: emu.get_function("params.cu", f"gpuaug_gather_params<{t}>") for t in ("double", "float")}


def _columns(rng, n):
    """A mix of 'device' columns (every dtype, strided, broadcast, 2-D) and host columns."""
    cols, on_host = [], []
    for dt in sorted(_GATHER_CODES, key=str):
        base = (rng.random((n, 3)) * 100 - (0 if dt.kind in "ub" else 50))
        a = (base > 50) if dt.kind == "b" else base.astype(dt)
        cols.append(a[:, 1:2])  # strided: every third element
        on_host.append(False)
    cols.append(np.broadcast_to(np.float64(2.5), (n, 1)))  # stride 0
    on_host.append(False)
    cols.append(rng.random((n, 2)).astype(np.float32)[:, ::-1])  # negative column stride
    on_host.append(False)
    cols.append(rng.integers(0, 200, (n, 2)).astype(np.uint8)[:, 1])  # a 1-D device column, strided
    on_host.append(False)
    cols.append(rng.random((n, 3)))  # host block
    on_host.append(True)
    cols.insert(3, rng.integers(0, 9, (n, 1)).astype(np.float64))  # a host column in the middle
    on_host.insert(3, True)
    return cols, on_host


@pytest.mark.parametrize("n", [1, 7, 300])
def test_gather_kernel_matches_concatenate(kernel, n):
    rng = np.random.default_rng(n)
    cols, on_host = _columns(rng, n)
    desc, host, P = gather_table(cols, on_host, lambda c: c.__array_interface__["data"][0])
    assert host is not None and host.shape == (n, sum(c.shape[1] for c, h in zip(cols, on_host) if h))
    total = n * P
    want = np.concatenate([np.asarray(c, np.float64).reshape(n, -1) for c in cols], axis=1)
    for t, dt in (("double", np.float64), ("float", np.float32)):
        out = np.full((n, P), np.nan, dt)
        kernel[t](((total + 255) // 256,), (256,), (desc, len(cols), host, out, P, n))
        np.testing.assert_array_equal(out, want.astype(dt))
    np.testing.assert_array_equal(column_stack(cols, n), want)  # the host path agrees


def test_gather_table_without_host_columns(kernel):
    n = 5
    a = np.arange(n, dtype=np.int64)[:, None] * 3
    desc, host, P = gather_table([a], [False], lambda c: c.__array_interface__["data"][0])
    assert host is None and P == 1
    out = np.zeros((n, 1), np.float32)
    kernel["float"](((n + 255) // 256,), (256,), (desc, 1, np.uint64(0), out, P, n))
    np.testing.assert_array_equal(out[:, 0], a[:, 0])


@pytest.mark.gpu
def test_column_stack_device_matches_host():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(3)
    n = 37
    cols, on_host = _columns(rng, n)
    dev = [c if h else cp.asarray(np.ascontiguousarray(c))[:, :] if c.ndim == 2 else
           cp.asarray(np.stack([c, c], axis=1))[:, 1]  # the 1-D column: strided on the device too
           for c, h in zip(cols, on_host)]
    assert sum(c.ndim == 1 for c in dev) == 1
    dev[-1] = cp.asarray(rng.random((n, 4)).astype(np.float16))[:, 1:3]  # strided device float16
    cols[-1] = cp.asnumpy(dev[-1])
    got = column_stack(dev, n)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.float32
    np.testing.assert_array_equal(cp.asnumpy(got), column_stack(cols, n).astype(np.float32))


def test_gather_memo_key_tells_layouts_apart():
    """The memo of column_stack's device path is keyed by the stream, each device column's
    address, device, dtype, shape and strides, and each small host column's bytes; host columns
    past 4096 values give no key (they travel per call)."""
    import types

    from gpuaug._params import _gather_key

    def dev(ptr, dtype="d", shape=(4, 1), strides=(8, 8), device=0):
        return types.SimpleNamespace(data=types.SimpleNamespace(ptr=ptr, device_id=device),
                                     dtype=np.dtype(dtype), shape=shape, strides=strides)
    zeros = np.zeros((4, 1))
    base = _gather_key([dev(0x1000), zeros], 7)
    assert base == _gather_key([dev(0x1000), np.zeros((4, 1))], 7)  # another object, the same bytes
    others = [_gather_key([dev(0x1000), zeros], 8), _gather_key([dev(0x2000), zeros], 7),
              _gather_key([dev(0x1000, "f", strides=(4, 4)), zeros], 7),
              _gather_key([dev(0x1000, strides=(16, 8)), zeros], 7),
              _gather_key([dev(0x1000, device=1), zeros], 7),
              _gather_key([dev(0x1000), np.ones((4, 1))], 7), _gather_key([zeros, dev(0x1000)], 7)]
    assert len(set(others + [base])) == len(others) + 1
    assert _gather_key([dev(0x1000), np.zeros((4097, 1))], 7) is None


@pytest.mark.gpu
def test_column_stack_memo_reuses_only_constant_uploads_and_follows_new_columns():
    """Device flags beside a constant host column (flip(x, flags_on_gpu)): the second call
    reuses the first one's table (a memo entry), new arrays (at recycled or new addresses)
    and other host values give their own correct results; per-sample host columns never
    make an entry."""
    cp = pytest.importorskip("cupy")
    from gpuaug import _params

    _params._GATHER.clear()
    rng = np.random.default_rng(5)
    n = 300
    for rnd in range(4):
        flags = cp.asarray(rng.random(n) < 0.5)
        for const in (0.0, 1.0, 0.0):
            host = np.full((n, 1), const)
            got = column_stack([flags[:, None], host], n)
            want = np.concatenate([cp.asnumpy(flags)[:, None].astype(np.float64), host], axis=1)
            np.testing.assert_array_equal(cp.asnumpy(got), want.astype(np.float32))
        del flags  # the next round's flags may land at the same address
    assert 0 < len(_params._GATHER) <= 8
    before = dict(_params._GATHER)
    per_sample = rng.random((n, 1))
    d = cp.asarray(rng.random(n))
    got = column_stack([d[:, None], per_sample], n)
    np.testing.assert_array_equal(cp.asnumpy(got), np.concatenate([cp.asnumpy(d)[:, None], per_sample], 1)
                                  .astype(np.float32))
    assert _params._GATHER == before
