"""pytest-benchmark suite of gpuaug's ops (``pytest bench/ --benchmark-only``): set-up.

Every test here takes its op list from ``gpuaug.registry`` and its inputs, checks, byte
counts and copy ceilings from :mod:`gpuaug.bench`, the module behind ``gpuaug bench``, so
the two report the same figures. Without a usable GPU every test is skipped with the reason.

Options (``pytest bench/ --benchmark-only --gpuaug-case 256x224x224 ...``):
  --gpuaug-case NxHxW      batch and image size (repeatable; default 256x224x224 and 16x1080x1920)
  --gpuaug-backends LIST   gpuaug backends (default cuda,numba)
  --gpuaug-dtype, --gpuaug-layout, --gpuaug-channels
  --gpuaug-rounds N        timed rounds per benchmark (default 50)
"""
from __future__ import annotations

import pytest
from _harness import CaseContext, gpu_reason

DEFAULT_CASES = ("256x224x224", "16x1080x1920")


def pytest_addoption(parser):
    g = parser.getgroup("gpuaug", "gpuaug benchmarks")
    g.addoption("--gpuaug-case", action="append", default=None, metavar="NxHxW",
                help=f"batch x height x width (repeatable; default {' and '.join(DEFAULT_CASES)})")
    g.addoption("--gpuaug-backends", default="cuda,numba", help="gpuaug backends, comma-separated")
    g.addoption("--gpuaug-dtype", default="uint8", choices=("uint8", "float16", "float32"))
    g.addoption("--gpuaug-layout", default="NHWC", choices=("NHWC", "NCHW"))
    g.addoption("--gpuaug-channels", type=int, default=3)
    g.addoption("--gpuaug-rounds", type=int, default=50, help="timed rounds per benchmark")


def _cases(config):
    return tuple(config.getoption("--gpuaug-case") or DEFAULT_CASES)


def pytest_generate_tests(metafunc):
    import gpuaug

    # Prefixed names, so other benchmarks in bench/ can use "case" or "backend" freely.
    if "gpuaug_case" in metafunc.fixturenames:
        metafunc.parametrize("gpuaug_case", _cases(metafunc.config), scope="session")
    if "gpuaug_op" in metafunc.fixturenames:
        metafunc.parametrize("gpuaug_op", list(gpuaug.registry))
    if "gpuaug_backend" in metafunc.fixturenames:
        bes = [b.strip() for b in metafunc.config.getoption("--gpuaug-backends").split(",") if b.strip()]
        metafunc.parametrize("gpuaug_backend", bes)


@pytest.fixture(scope="session")
def case_ctx(request, gpuaug_case):
    why = gpu_reason()
    if why:
        pytest.skip(f"needs a CUDA GPU: {why}")
    ctx = CaseContext(gpuaug_case, request.config)
    import cupy

    with cupy.cuda.Stream.null:
        yield ctx
    ctx.close()
