"""gpuaug.kernels._replay: the compiled replay of launch plans (issue 13), run on the CPU with
the CUDA driver's three functions replaced by ctypes callbacks that record what they were given
(the kernel arguments as the driver would read them through ``kernelParams``)."""
import ctypes
import struct
import types

import numpy as np
import pytest

from gpuaug.kernels import _replay
from gpuaug.kernels._cuda import Kernel

pytest.importorskip("numba")

U32, U64, P = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, U64, U32, U32, U32, U32, U32, U32, U32, U64, U64, U64)
MEMCPY = ctypes.CFUNCTYPE(ctypes.c_int, U64, U64, ctypes.c_size_t, U64)
RECORD = ctypes.CFUNCTYPE(ctypes.c_int, U64, U64)


class Driver:
    """Stand-ins for cuLaunchKernel, cuMemcpyHtoDAsync_v2 and cuEventRecord."""

    def __init__(self, nargs, fail_launch=0):
        self.calls = []
        self.nargs = nargs  # per kernel handle: its argument count

        def launch(fn, g0, g1, g2, b0, b1, b2, smem, stream, params, extra):
            n = self.nargs[fn]
            args = [U64.from_address(U64.from_address(params + 8 * j).value).value for j in range(n)]
            self.calls.append(("launch", fn, (g0, g1, g2), (b0, b1, b2), smem, stream, args, extra))
            return fail_launch

        def memcpy(dst, src, nbytes, stream):
            self.calls.append(("memcpy", dst, ctypes.string_at(src, nbytes), stream))
            return 0

        def record(event, stream):
            self.calls.append(("record", event, stream))
            return 0

        self.cbs = (LAUNCH(launch), MEMCPY(memcpy), RECORD(record))  # kept alive
        self.fns = tuple(ctypes.cast(cb, P).value for cb in self.cbs)


def fake_kernel(handle):
    return Kernel(types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=handle)))


def plan_of(handles=(0x1000, 0x2000)):
    """Two launches: (x, y, par, float32 0.5, int 7) and (par, y, int -3) with an offset into y."""
    k1, k2 = fake_kernel(handles[0]), fake_kernel(handles[1])
    t1 = (int, int, int, np.float32, int)
    t2 = (int, int, int)
    l1, l2 = k1.packer(t1), k2.packer(t2)
    launches = [(l1[0], (5, 6, 7), (32, 8), 0, [None, None, None, np.float32(0.5), 7],
                 ((0, _replay.X, 0), (1, _replay.Y, 0), (2, _replay.PAR, 0))),
                (l2[0], 9, 256, 128, [None, None, -3], ((0, _replay.PAR, 0), (1, _replay.Y, 64)))]
    return _replay.compile_plan(launches, [l1[1], l2[1]])


def f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def test_replay_converts_copies_patches_launches_and_records():
    comp = plan_of()
    drv = Driver({0x1000: 5, 0x2000: 3})
    rng = np.random.default_rng(0)
    params = rng.uniform(-1e6, 1e6, (7, 3)).T.copy().T  # F order: the A-layout signature takes it
    params[0, 0] = 1 / 3
    host = np.zeros((7, 3), np.float32)
    r = _replay.replay(drv.fns, params, host, 0xD000, host.nbytes, comp.fn_ptrs, comp.dims, comp.starts,
                       comp.templates, comp.patches, 0xA000, 0xB000, 0, 0x77, 0xE1)
    assert r == 0
    assert np.array_equal(host, params.astype(np.float32))  # as NumPy's unsafe cast rounds
    memcpy, l1, l2, rec = drv.calls
    assert memcpy == ("memcpy", 0xD000, host.tobytes(), 0x77)
    assert l1 == ("launch", 0x1000, (5, 6, 7), (32, 8, 1), 0, 0x77, [0xA000, 0xB000, 0xD000, f32_bits(0.5), 7], 0)
    assert l2 == ("launch", 0x2000, (9, 1, 1), (256, 1, 1), 128, 0x77, [0xD000, 0xB000 + 64, 2 ** 64 - 3], 0)
    assert rec == ("record", 0xE1, 0x77)


def test_replay_with_device_parameters_copies_nothing_and_records_nothing():
    comp = plan_of()
    drv = Driver({0x1000: 5, 0x2000: 3})
    r = _replay.replay(drv.fns, np.zeros((0, 0)), np.zeros((0, 0), np.float32), 0, 0, comp.fn_ptrs, comp.dims,
                       comp.starts, comp.templates, comp.patches, 0xA000, 0xB000, 0xC000, 0, 0)
    assert r == 0
    assert [c[0] for c in drv.calls] == ["launch", "launch"]
    assert drv.calls[0][6][:3] == [0xA000, 0xB000, 0xC000] and drv.calls[1][6][0] == 0xC000


def test_replay_stops_at_the_first_driver_error():
    comp = plan_of()
    drv = Driver({0x1000: 5, 0x2000: 3}, fail_launch=700)
    host = np.zeros((2, 2), np.float32)
    r = _replay.replay(drv.fns, np.ones((2, 2)), host, 0xD000, host.nbytes, comp.fn_ptrs, comp.dims, comp.starts,
                       comp.templates, comp.patches, 1, 2, 0, 0, 0xE1)
    assert r == 700
    assert [c[0] for c in drv.calls] == ["memcpy", "launch"]  # no second launch, no event


def test_compile_plan_refuses_tables_and_scratch():
    k = fake_kernel(0x1000)
    l1 = k.packer((int,))
    for patch in ((0, 2, (0, 0, None, None)), (0, 3, (0, 16))):
        assert _replay.compile_plan([(l1[0], 1, 1, 0, [None], (patch,))], [l1[1]]) is None
    assert k.packer((object,)) is None


def test_templates_are_not_written_by_replays():
    comp = plan_of()
    before = comp.templates.copy()
    drv = Driver({0x1000: 5, 0x2000: 3})
    for x in (0xA000, 0xA100):
        _replay.replay(drv.fns, np.zeros((0, 0)), np.zeros((0, 0), np.float32), 0, 0, comp.fn_ptrs, comp.dims,
                       comp.starts, comp.templates, comp.patches, x, 0xB000, 0xC000, 0, 0)
    assert np.array_equal(comp.templates, before)
    assert drv.calls[0][6][0] == 0xA000 and drv.calls[2][6][0] == 0xA100
