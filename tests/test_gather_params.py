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
    want = np.concatenate([np.asarray(c, np.float64) for c in cols], axis=1)
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
    dev = [c if h else cp.asarray(np.ascontiguousarray(c))[:, :] for c, h in zip(cols, on_host)]
    dev[-1] = cp.asarray(rng.random((n, 4)).astype(np.float16))[:, 1:3]  # strided device float16
    cols[-1] = cp.asnumpy(dev[-1])
    got = column_stack(dev, n)
    assert isinstance(got, cp.ndarray) and got.dtype == cp.float32
    np.testing.assert_array_equal(cp.asnumpy(got), column_stack(cols, n).astype(np.float32))
