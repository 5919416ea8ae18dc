"""crop_mirror_normalize / normalize: the parameter rows written in place (_host_params) equal
the general path's (channel_param + nonzero + column_stack), and every form or value the fast
path does not take falls back to the general path and its errors."""
import numpy as np
import pytest

import gpuaug
from gpuaug._params import column_stack
from gpuaug.ops._intensity import channel_param, nonzero
from gpuaug.ops.crop_mirror_normalize import _host_params

N, C = 6, 3
RNG = np.random.default_rng(3)
POS, MIR, HW = RNG.random((N, 2)), RNG.random(N) < 0.5, np.full((N, 2), 5.0)


def general(pos, mir, mean, std):
    m = channel_param(mean, N, C, "mean", False)
    s = nonzero(channel_param(std, N, C, "std", False), "std", std)
    pos = np.zeros((N, 2)) if pos is None else pos
    mir = np.zeros(N) if mir is None else np.asarray(mir, np.float64)
    return column_stack([pos, mir, HW, m, s], N)


VALUES = [2.5, 3, -0.0, (1.0, 2, 3.5), RNG.uniform(1, 9, (N, 1)), RNG.uniform(1, 9, (N, C)),
          RNG.uniform(1, 9, (N, 1)).astype(np.float32)]


@pytest.mark.parametrize("mean", VALUES, ids=range(len(VALUES)))
@pytest.mark.parametrize("std", [v for v in VALUES if not (type(v) is float and v == 0)], ids=range(len(VALUES) - 1))
@pytest.mark.parametrize("crop", [True, False])
def test_rows_equal_the_general_path(mean, std, crop):
    pos, mir = (POS, MIR) if crop else (None, None)
    want = general(pos, mir, mean, std)
    for hw in (HW, (5, 5)):  # per-row sizes, or the kept rows of one size
        got = _host_params(N, C, pos, mir, hw, mean, std)
        assert got.shape == want.shape and got.dtype == want.dtype and got.flags.writeable
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))
        got[:] = 7  # the caller's own copy: the kept rows stay as they were
    assert np.array_equal(_host_params(N, C, pos, mir, (5, 5), mean, std), want)


OTHER = [np.nan, (1.0, np.inf, 2.0), np.full((N, 1), np.nan), np.full((N, C), -np.inf), 2 ** 60, (1.0, 2.0), np.ones((N, 2)),
         np.ones((N, 1), int), [1.0, 2.0, 3.0], np.float64(2.0), None, "1"]


@pytest.mark.parametrize("value", OTHER, ids=range(len(OTHER)))
def test_other_forms_take_the_general_path(value):
    assert _host_params(N, C, POS, MIR, HW, 1.0, value) is None
    assert _host_params(N, C, POS, MIR, HW, value, 1.0) is None


@pytest.mark.parametrize("std", [0, 0.0, -0.0, (1.0, 0.0, 2.0), np.zeros((N, 1))], ids=range(5))
def test_zero_std_takes_the_general_path(std):
    assert _host_params(N, C, POS, MIR, HW, 1.0, std) is None
    assert _host_params(N, C, POS, MIR, HW, std, 1.0) is not None  # a zero mean is fine


def test_ops_refuse_zero_and_nan_std_as_before():
    x = np.zeros((N, 4, 4, C), np.uint8)
    for std in (0, (1.0, 0.0, 2.0), np.zeros((N, 1)), np.nan):
        with pytest.raises(ValueError, match="std"):
            gpuaug.normalize(x, 0.0, std)
        with pytest.raises(ValueError, match="std"):
            gpuaug.crop_mirror_normalize(x, (2, 2), crop_pos=POS, mirror=MIR, std=std)
    # the fast path's result is what the op computes
    y = gpuaug.crop_mirror_normalize(x + 7, (2, 2), crop_pos=POS, mirror=MIR, mean=(1.0, 2, 3.5), std=2)
    assert np.array_equal(y[:, 0], np.full((N, 2, 2), 3.0, np.float32))
