"""Per-op test declarations: one module per op name, ``tests/refs/<op>.py``, beside the op's own
``tests/test_<op>.py``. The central tests (test_properties, test_bad_input, test_determinism,
test_dali) build their tables from ``gpuaug.registry`` and these modules, so adding an op means
adding its module here, not editing those tests.

What a module declares (only ``case`` is required):

- ``case(draw, g) -> refs._common.Case``: the op's hypothesis property case: parameters drawn
  for the geometry ``g`` and the reference each sample is compared with.
- ``TWIN_RTOL``: the relative tolerance of the Numba CUDA and CUDA C twins against the
  reference and the CPU twin where looser than 1e-5 (float32 coordinate maths).
- ``BAD``: out-of-range rows the Param ranges cannot express, ``(overrides of the registry
  example, exception, regex)`` (the rows implied by each Param's ``low``/``high``/``nonzero``/
  ``choices`` are generated).
- ``images(g)``: the property test's input where random images will not do (equalize).
- ``FLOAT_UNITS``: parameters of the registry example (given in uint8 units) that the op
  checks against the input's range, so float inputs get them divided by 255.
- ``EXAMPLE``: overrides of the registry example for the determinism tests.
- ``SMALL``: overrides for 3x4 images (the twin comparison in the simulator).
- ``DALI_NUMBA``: True where the op stands for one kind of path in the DALI numba_function
  test (``DALI_FALLBACK``: it falls back to python_function there, with a warning).
- ``DALI_LAYOUT``: the layout DALI reports for its output (default "HWC").
- ``HOST_ONLY``: parameters that must be host values although not sizes (they decide the
  output shape: pad's padding, rot90's k on non-square images).
- ``noise_kw(rng, n, dtype, seed)``: for noise ops (those with a ``seed``), the per-sample
  parameters of the determinism tests.

Derived from the registry, not declared: the noise ops (a ``seed`` Param), the colour ops (the
colour family's packed kernels), the out-of-range rows of each bounded Param.
"""
from __future__ import annotations

import importlib


def for_op(name):
    """The declarations module of op ``name`` (``tests/refs/<name>.py``)."""
    try:
        return importlib.import_module(f"refs.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"refs.{name}":
            raise
        raise ModuleNotFoundError(f"op {name!r} has no tests/refs/{name}.py: every registered op declares its "
                                  "property case (and tolerances, bad-input rows) there") from None


def get(name, attr, default=None):
    """``attr`` of op ``name``'s module, or ``default`` (also when the op has no module: the
    tables that need only defaults still cover it; test_properties says what is missing)."""
    try:
        mod = for_op(name)
    except ModuleNotFoundError as e:
        if f"tests/refs/{name}.py" not in str(e):
            raise
        return default
    return getattr(mod, attr, default)
