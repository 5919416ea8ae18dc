"""The DALI nodes every gpuaug.dali path builds on: the backend check, the data's device, one
registry op call checked into a :class:`._steps.Step`, and the ``fn.python_function`` node that
runs a chain of steps.

:mod:`._ops` (the generated ``gpuaug.dali.<op>`` adapters), :mod:`._numba` (numba_function,
which falls back to python_function), :mod:`._compose`, :mod:`._policy` and the other
operators import these from here, so no adapter module imports another one back.
"""
from __future__ import annotations

from gpuaug._registry import BACKENDS as OP_BACKENDS

from ._steps import SAMPLE_LAYOUT, check_param_node_device, is_node, make_step, op_error

BACKENDS = (None,) + OP_BACKENDS + ("native", "python")  # the ops' own, the C++ operator, python_function


def check_backend(op, backend, device):
    """The gpuaug backend for ``device`` data ("cpu"/"gpu"), or a clear error."""
    if backend not in BACKENDS:
        raise op_error(op, f"backend: got {backend!r}; expected None, 'cuda', 'numba', 'cpu', 'native' "
                           "(the C++ DALI operator) or 'python' (python_function)")
    if backend == "native" and device != "gpu":
        raise op_error(op, "backend: got 'native' for CPU data; the native operator runs on GPU data "
                           "(images.gpu(), or decode with device='mixed')")
    if backend == "python":
        backend = None
    if device == "gpu":
        if backend == "cpu":
            raise op_error(op, "backend: got 'cpu' for GPU data; use None/'cuda' (CUDA C) or 'numba', "
                               "or give CPU data (a CPU pipeline runs the njit twins)")
        return backend or "cuda"
    if backend == "cuda":
        raise op_error(op, "backend: got 'cuda' for CPU data; move the data to the GPU first "
                           "(images.gpu(), or decode with device='mixed'), or use None/'cpu'/'numba'")
    return backend or "cpu"


def data_device(op, data):
    """``data.device`` ("cpu"/"gpu") of the images' DataNode, or a TypeError naming ``data``."""
    if not is_node(data):
        raise op_error(op, f"data: got {type(data).__name__}; expected a DALI DataNode (the images), "
                           "inside a pipeline definition", TypeError)
    return data.device


def step_for(op, data, params, layout):
    """Check the call; return ``(step, nodes)``."""
    device = data_device(op, data)
    step, nodes = make_step(op, params, layout)
    for name, node in zip(step.node_params, nodes):
        check_param_node_device(op, name, node, device)
    return step, nodes


def python_function_node(steps, data, nodes, backend):
    """One ``fn.python_function`` running ``steps`` on ``data`` (see :class:`._callback.Chain`)."""
    from nvidia.dali import fn

    from ._callback import Chain

    device = data.device
    if device == "gpu":
        nodes = [nd.gpu() for nd in nodes]  # per-sample values travel to the GPU once, on DALI's stream
    chain = Chain(steps, backend, device)
    return fn.python_function(data, *nodes, function=chain, batch_processing=True, device=device,
                              num_outputs=1, output_layouts=SAMPLE_LAYOUT[steps[-1].out_layout])
