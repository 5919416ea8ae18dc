"""Shared test machinery: random batches, poisoned outputs, tolerant comparison, and one
runner that checks an op on every backend this machine has against a NumPy reference.

References (tests/reference.py) take and return float64 NHWC arrays per sample; the
runner converts layouts and dtypes around them and applies the library's rounding
(floor(v + 0.5), saturated) for uint8.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from conftest import HAS_GPU

DTYPES = ("uint8", "float16", "float32")
LAYOUTS = ("NHWC", "NCHW")
SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def random_images(rng, n, h, w, c, dtype):
    """uint8 in [0, 255]; floats in [0, 1) (and as float16)."""
    if np.dtype(dtype) == np.uint8:
        return rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    return rng.random((n, h, w, c)).astype(dtype)


def to_layout(x_nhwc, layout):
    return x_nhwc if layout == "NHWC" else np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))


def from_layout(x, layout):
    return x if layout == "NHWC" else x.transpose(0, 2, 3, 1)


def quantize(ref, dtype):
    """The library's store rule applied to a float64 reference."""
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return np.clip(np.floor(ref + 0.5), 0, 255).astype(np.uint8)
    return ref.astype(dtype)


def assert_close(got, ref, dtype, *, atol_u8=1, rtol=1e-5, what=""):
    """uint8 within ``atol_u8``; floats within ``rtol`` relative (float16: its epsilon)."""
    got = np.asarray(got)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != reference {ref.shape}"
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        diff = np.abs(got.astype(np.int32) - quantize(ref, dtype).astype(np.int32))
        assert diff.max(initial=0) <= atol_u8, f"{what}: max |diff| {diff.max()} > {atol_u8}"
    else:
        tol = 2e-3 if dtype == np.float16 else rtol
        assert not np.isnan(got).any() or np.isnan(ref).any(), f"{what}: NaN in output (unwritten?)"
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=tol, atol=tol, err_msg=what)


def poison_values(dtype):
    return (13, 211) if np.dtype(dtype) == np.uint8 else (np.nan,)


def backends(device_input=False):
    """Backends to exercise here: cpu always; numba in the simulator (tiny inputs) or on a GPU."""
    out = ["cpu"]
    if SIM:
        out.append("numba-sim")
    return out


def run_op(fn, x, backend, **kw):
    """Call ``fn`` on ``backend`` ('cpu', 'numba-sim', 'cuda', 'numba') and return NumPy."""
    if backend in ("cpu", "numba-sim"):
        return fn(x, backend="cpu" if backend == "cpu" else "numba", **kw)
    import cupy

    xd = [cupy.asarray(a) for a in x] if isinstance(x, list) else cupy.asarray(x)
    kw = {k: (cupy.asarray(v) if isinstance(v, np.ndarray) and k != "out" else v) for k, v in kw.items()}
    y = fn(xd, backend=backend, **kw)
    return [cupy.asnumpy(a) for a in y] if isinstance(y, list) else cupy.asnumpy(y)


def check_op(fn, ref_fn, x_nhwc, params, *, layout="NHWC", backend="cpu", out_shape=None,
             varshape=False, atol_u8=1, rtol=1e-5, out_dtype=None):
    """Run ``fn(x, **params)`` on ``backend`` with poisoned ``out=`` and compare with the reference.

    ``ref_fn(sample_hwc_float64, i) -> float64 HWC`` computes sample i's expected output.
    ``x_nhwc``: a 4-D NHWC array, or a list of HWC arrays when ``varshape``.
    """
    dtype = np.dtype(out_dtype or (x_nhwc[0].dtype if varshape else x_nhwc.dtype))
    samples = list(x_nhwc) if varshape else [x_nhwc[i] for i in range(x_nhwc.shape[0])]
    refs = [ref_fn(s.astype(np.float64), i) for i, s in enumerate(samples)]
    for poison in poison_values(dtype):
        if varshape:
            out = [np.full(r.shape, poison, dtype) for r in refs]
            xin = list(x_nhwc)
        else:
            out = to_layout(np.full((len(refs),) + refs[0].shape, poison, dtype), layout)
            xin = to_layout(x_nhwc, layout)
        if backend in ("cuda", "numba"):
            import cupy

            out = [cupy.asarray(o) for o in out] if varshape else cupy.asarray(out)
            xin = [cupy.asarray(a) for a in xin] if varshape else cupy.asarray(xin)
            got = fn(xin, out=out, layout=layout, backend=backend, **params)
            assert got is out or varshape
            got = [cupy.asnumpy(a) for a in got] if varshape else cupy.asnumpy(got)
        else:
            got = fn(xin, out=out, layout=layout, backend="cpu" if backend == "cpu" else "numba", **params)
            assert got is out or varshape
        if varshape:
            for i, (g, r) in enumerate(zip(got, refs)):
                assert_close(g, r, dtype, atol_u8=atol_u8, rtol=rtol, what=f"{backend} sample {i} poison {poison}")
        else:
            g = from_layout(np.asarray(got), layout)
            assert_close(g, np.stack(refs), dtype, atol_u8=atol_u8, rtol=rtol,
                         what=f"{backend} {layout} poison {poison}")


gpu = pytest.mark.gpu
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
