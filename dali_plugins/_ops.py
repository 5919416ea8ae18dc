"""``gpuaug.dali.<op>``: every registry op as a DALI operator, generated from the registry.

Which DALI operator runs an op (``data`` is the images' DataNode):

======================  =========================================  ==============================
data on                 backend=None / "native" / "cuda" / "cpu"   backend="numba"
======================  =========================================  ==============================
GPU (``device="gpu"``)  None: the native C++ operator where it     DALI's ``numba_function`` (GPU)
                        loads and runs the op (``gpuaug.dali.      where DALI accepts the CUDA
                        _native``), else as "cuda"; "native":      toolkit, else the Numba CUDA
                        that operator or an error; "cuda" (alias   twin in python_function (warns)
                        "python"): ``fn.python_function``, the
                        CUDA C kernels on DALI's stream
CPU                     ``fn.python_function(device="cpu")``,      DALI's ``numba_function`` (CPU)
                        the Numba njit twins (backend "cpu")       on the njit twins
======================  =========================================  ==============================
"""
from __future__ import annotations

import functools
import inspect

from gpuaug._registry import REGISTRY

from ._nodes import check_backend, python_function_node, step_for  # noqa: F401 - also imported from here
from ._numba import numba_node
from ._steps import RESERVED


def apply(op, data, params, *, backend=None, layout="HWC", input_dtype="uint8"):
    """Run registry op ``op`` on the images ``data`` (a DataNode); return the output DataNode."""
    step, nodes = step_for(op, data, params, layout)
    be = check_backend(op, backend, data.device)
    if data.device == "gpu" and backend in (None, "native"):
        from ._native import native_node

        node = native_node(step, data, nodes, forced=backend == "native")
        if node is not None:
            return node
        be = "cuda"
    if be == "numba":
        return numba_node(step, data, nodes, input_dtype)
    return python_function_node([step], data, nodes, be)


def _example_args(spec):
    """A call's arguments for the docstring: a per-sample DataNode for the first per-sample
    number (its range from the registry's example), constants for host-only ones."""
    import numpy as np

    args = []
    ex = spec.example(np.random.default_rng(0), 64, 224, 224) if spec.example else {}
    for p in spec.params:
        if p.name not in ex or p.name == "seed":
            continue
        v = ex[p.name]
        if p.per_sample and p.kind in ("float", "bool") and p.shape == () and not args:
            a = np.asarray(v, np.float64)
            node = ("fn.random.coin_flip()" if p.kind == "bool" else
                    f"fn.random.uniform(range=({a.min():.3g}, {a.max():.3g}))")
            args.append(f"{p.name}={node}")
        elif p.kind == "size" or not p.per_sample:
            args.append(f"{p.name}={tuple(np.asarray(v).tolist()) if np.ndim(v) else v!r}")
    return "".join(", " + a for a in args)


def _doc(spec):
    params = "\n".join(f"        {p.name}: {p.doc or p.kind}" + (" (constant only)" if p.kind == "size" or not p.per_sample
                                                               else " (constant or per-sample DataNode)")
                       for p in spec.params) or "        (none)"
    return f"""gpuaug.{spec.name} as a DALI operator: ``gpuaug.dali.{spec.name}(data, **params)``.

    Args:
        data: DataNode of images, one 3-D sample each (HWC, or CHW with ``layout="CHW"``);
            on the GPU (CUDA C in ``fn.python_function``) or the CPU (Numba njit twins).
{params}
        backend: None (GPU data: the native C++ DALI operator where available, else CUDA C in
            python_function; CPU data: njit twins), "native", "cuda" (python_function), "cpu" or
            "numba" (DALI's numba_function; see gpuaug.dali).
        layout: the samples' layout, "HWC" (default) or "CHW".
        input_dtype: the images' dtype, for backend="numba" only (numba_function has fixed types).

    A parameter is a constant (as for :func:`gpuaug.{spec.name}`) or a DataNode with one value per
    sample (``fn.random.uniform(...)``, ``fn.random.coin_flip()``, ...).

    Returns:
        DataNode of the results, one sample per input sample.

    Example::

        @pipeline_def(batch_size=64, num_threads=4, device_id=0)
        def pipe():
            jpegs, labels = fn.readers.file(file_root="images/")
            images = fn.decoders.image(jpegs, device="mixed")
            return gpuaug.dali.{spec.name}(images{_example_args(spec)}), labels

    The standalone op:

    {spec.doc.strip() if spec.doc else ''}
    """


@functools.lru_cache(maxsize=None)
def operator(op):
    """The generated DALI adapter function for registry op ``op``."""
    spec = REGISTRY[op]
    clash = set(spec.param_names) & set(RESERVED)
    if clash:
        raise RuntimeError(f"op {op!r} has parameters {sorted(clash)} that clash with the DALI adapter's "
                           "own arguments; give the op another parameter name")

    def adapter(data, *, backend=None, layout="HWC", input_dtype="uint8", **params):
        return apply(op, data, params, backend=backend, layout=layout, input_dtype=input_dtype)

    P = inspect.Parameter
    sig = [P("data", P.POSITIONAL_OR_KEYWORD)]
    sig += [P(p.name, P.KEYWORD_ONLY, default=p.default) for p in spec.params]
    sig += [P("backend", P.KEYWORD_ONLY, default=None), P("layout", P.KEYWORD_ONLY, default="HWC"),
            P("input_dtype", P.KEYWORD_ONLY, default="uint8")]
    adapter.__signature__ = inspect.Signature(sig)
    adapter.__name__ = adapter.__qualname__ = op
    adapter.__module__ = "gpuaug.dali"
    adapter.__doc__ = _doc(spec)
    adapter.__gpuaug_op__ = op
    return adapter
